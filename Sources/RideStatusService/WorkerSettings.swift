public import Foundation
public import Logging
public import MQTTClient
public import RideAccess
public import RideDomain
public import SettingsLayers

public import struct RideStatusKit.RideTopics

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
    public internal(set) var warnings: [String] = []
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
    /// A GeoJSON file of streets the map draws under the rides, for a map with no reachable tiles (`make run`'s
    /// extract from `scripts/roads.sh`); empty draws none. Read once at start-up, at most 16 MiB.
    public var streets = ""
    public var streetsAttribution = "© OpenStreetMap contributors, ODbL"
    /// Whether the HTTP server serves the live map and the read API `/v1` beside `/metrics` and the probes.
    public var readAPI = true
    /// Share links: a JSON Web Key Set of the Ed25519 public keys share tokens are signed with; empty
    /// turns share links off.
    public var shareKeys = ""
    /// A file holding the operator token: with it in `Authorization: Bearer`, the read API shows everything
    /// when the server listens beyond loopback (where it shows nothing without a token). Empty: none.
    public var operatorTokenFile = ""
    /// A4: the host names the HTTP server answers (`http.allowedHosts`); empty: the loopback names and addresses
    /// at `metrics.port` (``AllowedHosts/loopback(port:boundHost:)``). Other hosts get 421.
    public var allowedHosts: [String] = []
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
    /// G5: what the worker's lease keeps from the broker's deadline (1.5 x keepAlive in whole seconds).
    public var leaseMargin: Duration = .seconds(1)
    /// G5: false drops the lease (the behaviour before it), so that the pause suite can measure what it prevents.
    /// Never in production: a paused worker then publishes stale statuses when it resumes.
    public var lease = true
    /// G1, G6: who grants bucket ownership: the broker's retained presences (one broker), or etcd (a cluster).
    public var authority: GroupAuthority = .broker
    /// G6: etcd's client URLs (`http://host:2379`), when ``authority`` is etcd.
    public var etcdEndpoints: [String] = []
    /// G6: the prefix of the group's keys in etcd (members, buckets, the epoch base).
    public var etcdPrefix = "/ridestatus/"
    /// G6: the TTL of each worker's etcd lease, in seconds: a dead worker's buckets move after at most this.
    public var etcdLeaseTTL = 10
    /// G5, G6: the longest a bucket granted by etcd waits for its last holder to be offline or to send its release
    /// notice, in seconds; nil: twice ``keepAlive`` (the broker closes a silent connection after 1.5 times it,
    /// checking every few seconds).
    public var etcdReleaseWait: Int?
    /// The release wait in force (``etcdReleaseWait``, or twice the keepalive).
    public var releaseWait: Double { Double(etcdReleaseWait ?? 2 * keepAlive) }
    public var topics = RideTopics()
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
    public typealias Problem = SettingsProblem

    /// Applies `key = value`; unknown keys are an error naming them.
    public mutating func apply(_ key: String, _ value: String) throws {
        try Self.layers.apply(key, value, to: &self)
    }

    /// The keys of the table that a configuration file's text does not document (none, for `config/worker.yaml`).
    public static func undocumentedKeys(in text: String) -> [String] { layers.undocumentedKeys(in: text) }

    /// Loads the layers (``SettingsLayers``): the YAML file, then environment, then explicit overrides (flags).
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
        settings.configurationFile = try layers.load(
            into: &settings, file: file, environment: environment, overrides: overrides, executable: executable,
            workingDirectory: workingDirectory
        ) { settings, folder in
            // The catalog that sits beside the configuration, unless the file names another.
            settings.rideOptionsCatalogPath = folder.appendingPathComponent("ride-options.yaml").path
        }
        try settings.readSecrets(overrides: overrides)
        let deadline = BrokerLease(keepAlive: settings.keepAlive, margin: .zero).brokerDeadline
        if settings.leaseMargin >= deadline {
            throw Problem(
                key: "broker.leaseMargin",
                message:
                    "must be below the broker's deadline, 1.5 x broker.keepAlive in whole seconds (\(deadline)) (G5)")
        }
        try settings.checkAuthority()
        if let problem = settings.ride.problems().first {
            throw Problem(key: "rides.\(problem.key)", message: problem.message)
        }
        try settings.loadCatalog()
        return settings
    }

    static let layers = SettingsLayers<WorkerSettings>(
        keys: keys, pathKeys: pathKeys, environmentPrefix: "RIDESTATUS_", defaultFile: defaultConfigPath)

    public static let defaultConfigPath = "config/worker.yaml"
    public static let defaultCatalogPath = "config/ride-options.yaml"
}

extension WorkerSettings {
    /// A4: the hosts the HTTP server answers: `http.allowedHosts`, else the loopback names at `metrics.port` and
    /// the address of `metrics.host` when it is one. The list was checked when it was read.
    public var httpHosts: AllowedHosts {
        AllowedHosts.configured(allowedHosts, port: metricsPort, boundHost: metricsHost)
    }
}

/// G1, G6: the source of bucket ownership of a group of workers.
public enum GroupAuthority: String, Sendable, CaseIterable {
    /// The retained presences on one broker, whose retained messages are consistent (G1 to G5).
    case broker
    /// etcd, linearizable: required on a clustered broker, whose retained copies lag (G6).
    case etcd
}

extension WorkerSettings {
    /// G1, G6: a clustered broker (several URLs) needs etcd as its authority, and etcd needs its endpoints.
    func checkAuthority() throws {
        switch authority {
        case .broker where Self.urls(brokerURL).count > 1:
            throw Problem(
                key: "group.authority",
                message:
                    "a clustered broker (\(Self.urls(brokerURL).count) URLs in broker.url) needs group.authority etcd "
                    + "with group.etcdEndpoints: its retained copies lag, so ownership cannot be read from them (G6)")
        case .etcd where etcdEndpoints.isEmpty:
            throw Problem(key: "group.etcdEndpoints", message: "group.authority etcd needs at least one endpoint (G6)")
        default:
            break
        }
    }
}
