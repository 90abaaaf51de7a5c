public import Foundation
public import Logging
public import MQTTClient
public import RideDomain
import Yams

/// Everything the worker is configured with. Sources, later ones winning: built-in defaults (the
/// contract's, from ``RideConfiguration``), `config/worker.yaml`, `RIDESTATUS_*` environment variables,
/// command-line flags. Every key is documented in `config/worker.yaml`.
public struct WorkerSettings: Sendable {
    public var brokerURL = "mqtt://127.0.0.1:1883"
    public var username: String?
    public var password: String?
    /// A file holding the broker password (its first line): keeps it off command lines and out of the
    /// configuration file. Read when the settings are loaded.
    public var passwordFile: String?
    /// What the settings found unsafe but allowed (a password in a URL or a flag); the worker logs each at start.
    public private(set) var warnings: [String] = []
    public var caFile: String?
    public var certificateFile: String?
    public var keyFile: String?
    public var workerID: String?
    public var stateDirectory = "var/worker"
    public var logLevel: Logger.Level = .info
    public var metricsHost = "127.0.0.1"
    /// 0 turns the HTTP endpoint off.
    public var metricsPort = 9466
    /// The live map's files (`web/` of the checkout); relative ones resolve against the configuration's folder.
    public var webRoot = "web"
    /// Where Debian's `libjs-leaflet` puts the map library; served at `/leaflet/`.
    public var leafletDirectory = "/usr/share/javascript/leaflet"
    /// The basemap's tile URL template (`{z}/{x}/{y}`); empty draws no basemap (the areas, rides and a scale
    /// still show, so the map works offline).
    public var tileURL = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    public var tileAttribution = "© OpenStreetMap contributors"
    /// Whether the HTTP server serves the live map and the read API `/v1` beside `/metrics` and the probes.
    public var readAPI = true
    /// G3, V5: a new owner reads the retained statuses of the rides it loads before it serves them (MQTT 5 only),
    /// so its first status shows what the old owner last published; false starts them from their states.
    public var takeoverReadsStatuses = true
    /// Whether the MQTT client buffers its reads under libmosquitto and skips its wake-up bytes (it patches
    /// libmosquitto's imports of `read` and `write`; Linux with glibc only): 7.4 system calls per received
    /// message without, 1.1 with. The worker logs at start and exports (`ridestatus_mqtt_io_interposed`) what
    /// it got.
    public var interposeIO = true
    public var sessionExpiry: UInt32 = 86_400
    /// MQTT 5 (default), or 3.1.1 for brokers that speak nothing newer (a NATS cluster): no user properties
    /// (G2), no no-local, no request/response (L7, 3.4) there.
    public var protocolVersion: MQTTConfiguration.ProtocolVersion = .v5
    /// Seconds between keepalive pings: the broker sends the will after 1.5 times this without a word from a
    /// worker that vanished without closing its socket (G3's failure detection time).
    public var keepAlive = 5
    public var topics = Topics()
    public var ride = RideConfiguration()
    /// The ride-option catalog file (3.4); empty turns quotes off.
    public var rideOptionsCatalogPath = WorkerSettings.defaultCatalogPath
    /// The catalog read from ``rideOptionsCatalogPath``; nil when quotes are off or the default file is absent.
    public var catalog: RideOptionCatalog?
    /// The configuration file that was read, as an absolute path; nil when none was found.
    public var configurationFile: String?
    /// Whether `rideOptions.catalog` was set (file, environment or flag): then a missing file stops start-up.
    var catalogChosen = false

    public init() {}

    /// A value that cannot be used, naming the key and the allowed range.
    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var key: String
        public var message: String
        public var description: String { "configuration key '\(key)': \(message)" }
    }

    /// The keys, in the file's spelling, with how to apply a string value.
    static let keys: [String: @Sendable (inout WorkerSettings, String) throws -> Void] = [
        "broker.url": { $0.brokerURL = $1 },
        "broker.username": { $0.username = $1 },
        "broker.password": { $0.password = $1 },
        "broker.passwordFile": { $0.passwordFile = $1 },
        "broker.caFile": { $0.caFile = $1 },
        "broker.certificateFile": { $0.certificateFile = $1 },
        "broker.keyFile": { $0.keyFile = $1 },
        "broker.sessionExpiry": {
            $0.sessionExpiry = UInt32(try number($1, "broker.sessionExpiry", 0...4_294_967_295))
        },
        "broker.protocol": { settings, value in
            switch value {
            case "5", "5.0": settings.protocolVersion = .v5
            case "3.1.1", "311": settings.protocolVersion = .v311
            default: throw Problem(key: "broker.protocol", message: "'\(value)' is not 5 or 3.1.1")
            }
        },
        "broker.keepAlive": { $0.keepAlive = Int(try number($1, "broker.keepAlive", 2...600)) },
        "broker.dotsInTopics": { settings, value in
            switch value.lowercased() {
            case "true", "yes": settings.ride.dotsInTopics = true
            case "false", "no": settings.ride.dotsInTopics = false
            default: throw Problem(key: "broker.dotsInTopics", message: "'\(value)' is not true or false")
            }
        },
        "broker.interposeIO": { settings, value in
            switch value.lowercased() {
            case "true", "yes": settings.interposeIO = true
            case "false", "no": settings.interposeIO = false
            default: throw Problem(key: "broker.interposeIO", message: "'\(value)' is not true or false")
            }
        },
        "worker.takeoverReadsStatuses": { settings, value in
            switch value.lowercased() {
            case "true", "yes": settings.takeoverReadsStatuses = true
            case "false", "no": settings.takeoverReadsStatuses = false
            default: throw Problem(key: "worker.takeoverReadsStatuses", message: "'\(value)' is not true or false")
            }
        },
        "worker.id": { $0.workerID = $1 },
        "worker.stateDir": { $0.stateDirectory = $1 },
        "worker.logLevel": { settings, value in
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                throw Problem(
                    key: "worker.logLevel",
                    message: "'\(value)' is not trace, debug, info, notice, warning, error or critical")
            }
            settings.logLevel = level
        },
        "metrics.host": { $0.metricsHost = $1 },
        "metrics.port": { $0.metricsPort = Int(try number($1, "metrics.port", 0...65_535)) },
        "http.webRoot": { $0.webRoot = $1 },
        "http.leaflet": { $0.leafletDirectory = $1 },
        "http.tileURL": { $0.tileURL = $1 },
        "http.tileAttribution": { $0.tileAttribution = $1 },
        "http.readAPI": { settings, value in
            switch value.lowercased() {
            case "true", "yes", "on", "1": settings.readAPI = true
            case "false", "no", "off", "0": settings.readAPI = false
            default: throw Problem(key: "http.readAPI", message: "'\(value)' is not true or false")
            }
        },
        "topics.fleetPrefix": { $0.topics.fleetPrefix = $1 },
        "topics.ridesPrefix": { $0.topics.ridesPrefix = $1 },
        "topics.serviceName": { $0.topics.serviceName = $1 },
        "topics.rideOptionsPrefix": { $0.topics.rideOptionsPrefix = $1 },
        "topics.replyPrefix": { $0.topics.replyPrefix = $1 },
        "rideOptions.catalog": { settings, value in
            settings.rideOptionsCatalogPath = value
            settings.catalogChosen = true
        },
        "rides.updateInterval": { $0.ride.updateInterval = try number($1, "rides.updateInterval", 0.1...20) },
        "rides.staleAfter": { $0.ride.staleAfter = try number($1, "rides.staleAfter", 1...3600) },
        "rides.maxPayloadBytes": {
            $0.ride.maxPayloadBytes = Int(try number($1, "rides.maxPayloadBytes", 256...1_048_576))
        },
        "rides.futureTolerance": { $0.ride.futureTolerance = try number($1, "rides.futureTolerance", 0...3600) },
        "rides.maxFixAge": { $0.ride.maxFixAge = try number($1, "rides.maxFixAge", 1...86_400) },
        "rides.maxSpeed": { $0.ride.maxSpeed = try number($1, "rides.maxSpeed", 1...400) },
        "rides.maxAccuracy": { $0.ride.maxAccuracy = try number($1, "rides.maxAccuracy", 1...10_000) },
        "rides.approachingWithin": { $0.ride.approachingWithin = try number($1, "rides.approachingWithin", 0...3600) },
        "rides.approachingDistance": {
            $0.ride.approachingDistance = try number($1, "rides.approachingDistance", 0...100_000)
        },
        "rides.arrivalRadius": { $0.ride.arrivalRadius = try number($1, "rides.arrivalRadius", 1...1000) },
        "rides.maxPickupWait": { $0.ride.maxPickupWait = try number($1, "rides.maxPickupWait", 1...7200) },
        "rides.detourFactor": { $0.ride.detourFactor = try number($1, "rides.detourFactor", 1...5) },
        "rides.detourFactorMinimum": {
            $0.ride.detourFactorMinimum = try number($1, "rides.detourFactorMinimum", 1...5)
        },
        "rides.detourFactorMaximum": {
            $0.ride.detourFactorMaximum = try number($1, "rides.detourFactorMaximum", 1...5)
        },
        "rides.detourLearningRate": {
            $0.ride.detourLearningRate = try number($1, "rides.detourLearningRate", 0...1)
        },
        "rides.speedFloor": { $0.ride.speedFloor = try number($1, "rides.speedFloor", 0.1...100) },
        "rides.speedTimeConstant": {
            $0.ride.speedTimeConstant = try number($1, "rides.speedTimeConstant", 1...3600)
        },
        "rides.typicalSpeed": { $0.ride.typicalSpeed = try number($1, "rides.typicalSpeed", 0.1...100) },
        "rides.estimateDelayLimit": {
            $0.ride.estimateDelayLimit = try number($1, "rides.estimateDelayLimit", 0...3600)
        },
        "rides.completedLinger": { $0.ride.completedLinger = try number($1, "rides.completedLinger", 0...86_400) },
        "rides.maxRideDuration": { $0.ride.maxRideDuration = try number($1, "rides.maxRideDuration", 60...604_800) },
        "rides.deadLettersPerSecond": {
            $0.ride.deadLettersPerSecond = try number($1, "rides.deadLettersPerSecond", 1...10_000)
        },
        "rides.trackLength": { $0.ride.trackLength = Int(try number($1, "rides.trackLength", 0...1000)) },
        "rides.sequenceBlock": {
            $0.ride.sequenceBlock = Int(try number($1, "rides.sequenceBlock", 1...1_000_000))
        },
        "rides.feedbackTypes": { settings, value in
            let types = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            guard types.allSatisfy({ $0 == "rate" || $0 == "tip" }) else {
                throw Problem(key: "rides.feedbackTypes", message: "'\(value)' may only list rate and tip")
            }
            settings.ride.feedbackTypes = types
        },
    ]

    static func number(_ text: String, _ key: String, _ range: ClosedRange<Double>) throws(Problem) -> Double {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw Problem(key: key, message: "'\(text)' is not a number")
        }
        guard range.contains(value) else {
            let unit =
                key.hasPrefix("rides.") && !key.contains("Bytes") && !key.contains("Speed") && !key.contains("Radius")
                    && !key.contains("Distance") && !key.contains("Accuracy") && !key.contains("Factor")
                    && !key.contains("PerSecond") && !key.contains("Block") ? " seconds" : ""
            throw Problem(
                key: key,
                message:
                    "\(text) is outside the allowed range \(Self.format(range.lowerBound))...\(Self.format(range.upperBound))\(unit)"
            )
        }
        return value
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// Applies `key = value`; unknown keys are an error naming them.
    public mutating func apply(_ key: String, _ value: String) throws {
        guard let setter = Self.keys[key] else { throw Problem(key: key, message: "unknown key") }
        try setter(&self, value)
    }

    /// Loads the layers: the YAML file, then environment, then explicit overrides (flags).
    ///
    /// - Parameter file: the `--config` file, which must exist; nil looks for `config/worker.yaml` in the
    ///   working directory, then in the checkout the executable was built in (`.build/<mode>/../../config`),
    ///   and runs on built-in defaults if neither exists. Relative paths inside the file (the catalog, TLS
    ///   files) resolve against the file's folder, so the worker behaves the same from any working directory;
    ///   paths from the environment or flags resolve against the working directory.
    public static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
        overrides: [(String, String)] = [], executable: String = CommandLine.arguments.first ?? "",
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) throws -> WorkerSettings {
        var settings = WorkerSettings()
        if let file, !FileManager.default.fileExists(atPath: file) {
            throw Problem(key: "--config", message: "file \(file) does not exist")
        }
        if let path = file ?? defaultConfigurationFile(executable: executable, workingDirectory: workingDirectory) {
            let url = URL(fileURLWithPath: path).standardizedFileURL
            let folder = url.deletingLastPathComponent()
            let text = try String(contentsOf: url, encoding: .utf8)
            guard let root = try Yams.load(yaml: text) as? [String: Any] else {
                throw Problem(key: path, message: "is not a YAML mapping")
            }
            settings.configurationFile = url.path
            // The catalog that sits beside the configuration, unless the file names another.
            settings.rideOptionsCatalogPath = folder.appendingPathComponent("ride-options.yaml").path
            for (key, value) in flatten(root) {
                try settings.apply(key, pathKeys.contains(key) ? resolve(value, against: folder) : value)
            }
        }
        for key in keys.keys.sorted() {
            if let value = environment[environmentName(key)] { try settings.apply(key, value) }
        }
        for (key, value) in overrides { try settings.apply(key, value) }
        try settings.readSecrets(overrides: overrides)
        if let problem = settings.ride.problems().first {
            throw Problem(key: "rides.\(problem.key)", message: problem.message)
        }
        try settings.loadCatalog()
        return settings
    }

    /// The broker password from ``passwordFile``, and a warning for a password where `ps`, shell histories and
    /// logs see it: in a URL, or given as a flag.
    mutating func readSecrets(overrides: [(String, String)]) throws {
        if let passwordFile, !passwordFile.isEmpty {
            do {
                password = try MQTTConfiguration.password(fromFile: passwordFile)
            } catch {
                throw Problem(key: "broker.passwordFile", message: "cannot read \(passwordFile)")
            }
        }
        let advice = "put it in broker.passwordFile (a file only the worker can read) or RIDESTATUS_BROKER_PASSWORD"
        if Self.urls(brokerURL).contains(where: { URLComponents(string: $0)?.password != nil }) {
            warnings.append("the broker password is in broker.url, where logs and `ps` may show it: \(advice)")
        }
        if overrides.contains(where: { $0.0 == "broker.password" }) {
            warnings.append("the broker password was given as a flag, which `ps` shows to every user: \(advice)")
        }
    }

    /// The broker URL(s) with any password replaced by `***`: what logs may print.
    public var redactedBrokerURL: String {
        Self.urls(brokerURL).map { url -> String in
            guard var components = URLComponents(string: url), components.password != nil else { return url }
            components.password = "***"
            return components.string ?? "***"
        }.joined(separator: ",")
    }

    /// The comma-separated URLs of ``brokerURL`` (a cluster's nodes).
    static func urls(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Reads the catalog: a missing default file turns quotes off; a missing chosen file or an invalid
    /// catalog stops start-up, naming the entry.
    mutating func loadCatalog() throws {
        let path = rideOptionsCatalogPath
        guard !path.isEmpty, path != "none" else { return }
        guard FileManager.default.fileExists(atPath: path) else {
            if !catalogChosen { return }
            throw Problem(
                key: "rideOptions.catalog",
                message: "file \(path) does not exist (relative paths in a configuration file are read from its folder)"
            )
        }
        catalog = try RideOptionCatalog.load(path: path)
    }

    public static let defaultConfigPath = "config/worker.yaml"
    public static let defaultCatalogPath = "config/ride-options.yaml"

    /// Keys naming files that belong with the configuration: relative ones in the file resolve against its
    /// folder. `worker.stateDir` is data, not configuration: it stays relative to the working directory.
    static let pathKeys: Set<String> = [
        "rideOptions.catalog", "broker.caFile", "broker.certificateFile", "broker.keyFile", "broker.passwordFile",
        "http.webRoot",
    ]

    static func resolve(_ value: String, against folder: URL) -> String {
        guard !value.isEmpty, value != "none", !value.hasPrefix("/") else { return value }
        return folder.appendingPathComponent(value).standardizedFileURL.path
    }

    /// `config/worker.yaml` in the working directory, else in the checkout that built `executable`.
    static func defaultConfigurationFile(executable: String, workingDirectory: String) -> String? {
        let here = URL(fileURLWithPath: workingDirectory).appendingPathComponent(defaultConfigPath).standardizedFileURL
            .path
        if FileManager.default.fileExists(atPath: here) { return here }
        guard !executable.isEmpty else { return nil }
        // `.build/release` is a link to `.build/<triple>/release`: walk up from both the path as given and
        // the resolved one, a few levels, to the checkout's `config/worker.yaml`.
        let given = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let resolved = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        for start in [given, resolved] {
            var folder = start.standardizedFileURL
            for _ in 0..<4 {
                folder = folder.deletingLastPathComponent()
                let candidate = folder.appendingPathComponent(defaultConfigPath).path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    /// `rides.updateInterval` -> `RIDESTATUS_RIDES_UPDATE_INTERVAL`.
    public static func environmentName(_ key: String) -> String {
        var name = "RIDESTATUS_"
        for character in key {
            if character == "." {
                name += "_"
            } else if character.isUppercase {
                name += "_" + String(character)
            } else {
                name += String(character).uppercased()
            }
        }
        return name
    }

    static func flatten(_ node: [String: Any], prefix: String = "") -> [(String, String)] {
        var result: [(String, String)] = []
        for (key, value) in node.sorted(by: { $0.key < $1.key }) {
            let path = prefix.isEmpty ? key : "\(prefix).\(key)"
            switch value {
            case let nested as [String: Any]: result += flatten(nested, prefix: path)
            case let list as [Any]: result.append((path, list.map { "\($0)" }.joined(separator: ",")))
            case is NSNull: continue
            default: result.append((path, "\(value)"))
            }
        }
        return result
    }

    /// The QoS of the subscriptions a worker makes by the thousand (one per vehicle, L3; one per bucket while
    /// loading, G3). QoS 1 with MQTT 5; QoS 0 with 3.1.1, since NATS turns each QoS 1 subscription into a
    /// replicated JetStream consumer and allows a session about 63 of them. A fix lost at QoS 0 is superseded
    /// by the next within seconds. A load's retained states come at QoS 0 too: a connection lost in the middle
    /// of a load can lose one of them (the ride then waits for the next handover of its bucket).
    public var manySubscriptionsQoS: MQTTQoS { protocolVersion == .v5 ? .atLeastOnce : .atMostOnce }

    /// G3: the most buckets a load reads with one subscription each; a larger load reads every ride's state
    /// through one subscription and keeps its own buckets'. mosquitto makes a subscription in microseconds, so
    /// with MQTT 5 every load goes by bucket. On a NATS cluster (3.1.1) each subscription with retained messages
    /// took about 7 to 10 ms (`GroupNATSClusterTests`: 1,378 buckets after a death took 14 s to load), so
    /// there a load of more than 32 buckets reads the whole set instead.
    public var bucketFiltersPerLoad: Int { protocolVersion == .v5 ? Int.max : 32 }

    /// The MQTT client configuration: persistent session (L6), will `offline` (L8).
    public func mqttConfiguration(
        workerID: String, version: String, time: WorkerTime = .system
    ) throws -> MQTTConfiguration {
        // A clustered broker: several URLs, comma-separated; the first gives the scheme, credentials and TLS.
        let urls = Self.urls(brokerURL)
        var configuration = try MQTTConfiguration(
            url: urls.first ?? brokerURL, clientID: "ride-status-worker-\(workerID)")
        for url in urls.dropFirst() {
            let node = try MQTTConfiguration(url: url, clientID: configuration.clientID)
            configuration.failover.append(.init(host: node.host, port: node.port))
        }
        configuration.protocolVersion = protocolVersion
        if let username { configuration.username = username }
        if let password { configuration.password = password }
        if let caFile {
            configuration.tls = .init(caFile: caFile, certificateFile: certificateFile, keyFile: keyFile)
        }
        configuration.cleanStart = false
        configuration.sessionExpiry = sessionExpiry
        configuration.keepAlive = keepAlive
        configuration.interposeIO = interposeIO
        configuration.maximumReconnectDelay = .seconds(5)
        // G1, L8: each connection's will carries that connection's incarnation, as its birth does.
        configuration.will = .init(
            topic: topics.presence(worker: workerID),
            payload: Presence(state: "offline", since: time.now, version: version, incarnation: nil).encoded(),
            qos: .atLeastOnce, retain: true,
            payloadForIncarnation: { incarnation in
                Presence(state: "offline", since: time.now, version: version, incarnation: incarnation).encoded()
            })
        return configuration
    }
}

/// `ridestatus/workers/{workerId}` (L8).
struct Presence {
    var state: String
    var since: Date
    var version: String
    /// G1: the connection's incarnation (absent only in a will made before any connection).
    var incarnation: UInt64?
    /// G1: when this presence was published (a heartbeat repeats the birth every few seconds); absent in wills.
    var at: Date? = nil

    func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        writer.key("state")
        writer.string(state)
        writer.date("since", since)
        writer.key("version")
        writer.string(version)
        if let incarnation {
            writer.key("incarnation")
            writer.integer(Int(clamping: incarnation))
        }
        if let at { writer.date("at", at) }
        writer.endObject()
        return writer.bytes
    }
}
