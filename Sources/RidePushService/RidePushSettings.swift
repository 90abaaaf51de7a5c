public import Foundation
public import Logging
public import RideAccess
import RidePush
import RideStatusKit
public import SettingsLayers

/// Everything `ride-push` is configured with, read the way the worker reads its own (``SettingsLayers``):
/// built-in defaults, `config/ride-push.yaml`, `RIDEPUSH_*` environment variables, then flags. Every key is
/// documented in `config/ride-push.yaml`; a value out of range stops start-up with a sentence naming the key.
public struct RidePushSettings: Sendable {
    public typealias Problem = SettingsProblem

    public var brokerURL = "mqtt://127.0.0.1:1883"
    public var username: String?
    /// A file whose first line is the broker password: never a flag or a value here (`ps` and logs show those).
    public var passwordFile: String?
    /// The CA that signed an `mqtts://` broker's certificate.
    public var caFile: String?
    /// This process's id among those sharing the rides; nil: `ride-push-<host>-<http port>`.
    public var memberID: String?
    public var logLevel: Logger.Level = .info
    /// The registration API, `/metrics` and `/healthz`.
    public var httpHost = "127.0.0.1"
    /// 0 picks a free port (printed at start).
    public var httpPort = 8090
    /// The JSON Web Key Set of the share keys (the workers' `http.shareKeys`): a registration proves its ride
    /// with a share token. Required.
    public var shareKeys = ""
    /// A4: the host names the HTTP server answers (`http.allowedHosts`); empty: the loopback names and addresses
    /// at `http.port`. Other hosts get 421.
    public var allowedHosts: [String] = []
    /// APNs: on when ``APNsSettings/keyFile`` is set.
    public var apns = APNsSettings()
    /// FCM: on when ``FCMSettings/accountFile`` is set.
    public var fcm = FCMSettings()
    /// The planner's budget and cadence, the group's timings, the topics.
    public var service = RidePushService.Settings()
    /// The configuration file that was read, as an absolute path; nil when none was found.
    public var configurationFile: String?

    public struct APNsSettings: Sendable {
        public var url = "https://\(APNs.productionHost)"
        /// The signing key (`.p8`) for token authentication; empty turns APNs off.
        public var keyFile = ""
        public var keyID = ""
        public var teamID = ""
        public var bundleID = ""
        /// Certificates to trust instead of the system's (a stand-in's); empty: the system's.
        public var caFile = ""
        /// Seconds a provider token is used before a new one is made (APNs: 20 to 60 minutes).
        public var tokenRenewal: TimeInterval = 40 * 60
    }

    public struct FCMSettings: Sendable {
        public var url = "https://\(FCM.host)"
        /// A service account's JSON key; empty turns FCM off.
        public var accountFile = ""
        /// The Firebase project; empty: the key's `project_id`.
        public var project = ""
        public var caFile = ""
    }

    public init() {}

    /// Applies `key = value`; unknown keys are an error naming them.
    public mutating func apply(_ key: String, _ value: String) throws {
        try Self.layers.apply(key, value, to: &self)
    }

    /// Loads the layers: the YAML file, then the environment, then `overrides` (flags).
    ///
    /// - Parameter file: the `--config` file, which must exist; nil looks for `config/ride-push.yaml` in the
    ///   working directory, then in the checkout the executable was built in, and runs on the defaults and the
    ///   other layers if neither exists.
    public static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
        overrides: [(String, String)] = [], executable: String = CommandLine.arguments.first ?? "",
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) throws -> RidePushSettings {
        var settings = RidePushSettings()
        settings.configurationFile = try layers.load(
            into: &settings, file: file, environment: environment, overrides: overrides, executable: executable,
            workingDirectory: workingDirectory)
        if let problem = settings.problems().first { throw problem }
        return settings
    }

    /// What stops start-up although each key is valid alone.
    public func problems() -> [Problem] {
        var problems: [Problem] = []
        if shareKeys.isEmpty {
            problems.append(
                Problem(
                    key: "http.shareKeys", message: "is required: registrations prove their ride with a share token"))
        }
        if !apns.keyFile.isEmpty {
            for (key, value) in [
                ("apns.keyId", apns.keyID), ("apns.teamId", apns.teamID), ("apns.bundleId", apns.bundleID),
            ]
            where value.isEmpty {
                problems.append(Problem(key: key, message: "is required with apns.keyFile"))
            }
        }
        if apns.keyFile.isEmpty, fcm.accountFile.isEmpty {
            problems.append(
                Problem(
                    key: "apns.keyFile", message: "set apns.keyFile, fcm.accountFile or both: there is nowhere to push")
            )
        }
        let planner = service.group.planner
        if planner.refreshInterval < planner.minimumInterval {
            problems.append(
                Problem(
                    key: "push.refreshInterval",
                    message: "\(planner.refreshInterval) is below push.minimumInterval (\(planner.minimumInterval))"))
        }
        return problems
    }

    /// This process's member id: ``memberID``, else `ride-push-<host>-<http port>` (stable across restarts,
    /// unique per host).
    public var member: String { memberID ?? "ride-push-\(ProcessInfo.processInfo.hostName)-\(httpPort)" }

    public static let defaultConfigPath = "config/ride-push.yaml"

    /// The keys of the table that a configuration file's text does not document (none, for the shipped file).
    public static func undocumentedKeys(in text: String) -> [String] { layers.undocumentedKeys(in: text) }

    /// The key table: each key in the file's spelling, how its text is read, and its range.
    static let layers = SettingsLayers<RidePushSettings>(
        keys: [
            "broker.url": { $0.brokerURL = $1 },
            "broker.username": { $0.username = $1.isEmpty ? nil : $1 },
            "broker.passwordFile": { $0.passwordFile = $1.isEmpty ? nil : $1 },
            "broker.caFile": { $0.caFile = $1.isEmpty ? nil : $1 },
            "push.memberId": { $0.memberID = $1.isEmpty ? nil : $1 },
            "push.logLevel": { $0.logLevel = try SettingValue.choice($1, "push.logLevel") },
            "push.maximumDevices": {
                $0.service.group.planner.maximumDevicesPerRide = Int(
                    try SettingValue.number($1, "push.maximumDevices", 1...100))
            },
            "push.urgentPerHour": {
                $0.service.group.planner.urgentPushesPerHour = Int(
                    try SettingValue.number($1, "push.urgentPerHour", 0...3600))
            },
            "push.urgentArrivalChange": {
                $0.service.group.planner.urgentArrivalChange = try SettingValue.number(
                    $1, "push.urgentArrivalChange", 1...3600, .seconds)
            },
            "push.minimumInterval": {
                $0.service.group.planner.minimumInterval = try SettingValue.number(
                    $1, "push.minimumInterval", 1...3600, .seconds)
            },
            "push.refreshInterval": {
                $0.service.group.planner.refreshInterval = try SettingValue.number(
                    $1, "push.refreshInterval", 1...3600, .seconds)
            },
            "push.dismissalDelay": {
                // ActivityKit removes an ended activity after four hours whatever the dismissal date says.
                $0.service.group.planner.dismissalDelay = try SettingValue.number(
                    $1, "push.dismissalDelay", 0...14_400, .seconds)
            },
            "push.retryLimit": {
                $0.service.group.planner.retryLimit = try SettingValue.number($1, "push.retryLimit", 1...3600, .seconds)
            },
            "push.missingStatusLimit": {
                // Above C1's 20 s with room: a live ride's statuses never leave a gap this long.
                $0.service.group.planner.missingStatusLimit = try SettingValue.number(
                    $1, "push.missingStatusLimit", 30...3600, .seconds)
            },
            "push.concurrentPushes": {
                $0.service.concurrentPushes = Int(try SettingValue.number($1, "push.concurrentPushes", 1...1000))
            },
            "http.host": { $0.httpHost = $1 },
            "http.port": { $0.httpPort = Int(try SettingValue.number($1, "http.port", 0...65_535)) },
            "http.shareKeys": { $0.shareKeys = $1 },
            "http.allowedHosts": { settings, value in
                do {
                    settings.allowedHosts = try AllowedHosts.settingList(value)
                } catch { throw SettingsProblem(key: "http.allowedHosts", message: "\(error)") }
            },
            "apns.url": { $0.apns.url = $1 },
            "apns.keyFile": { $0.apns.keyFile = $1 },
            "apns.keyId": { $0.apns.keyID = $1 },
            "apns.teamId": { $0.apns.teamID = $1 },
            "apns.bundleId": { $0.apns.bundleID = $1 },
            "apns.caFile": { $0.apns.caFile = $1 },
            "apns.tokenRenewal": {
                // ProviderTokenPolicy keeps 5 minutes from each end of APNs's 20 to 60 minutes.
                $0.apns.tokenRenewal = try SettingValue.number($1, "apns.tokenRenewal", 1500...3300, .seconds)
            },
            "fcm.url": { $0.fcm.url = $1 },
            "fcm.accountFile": { $0.fcm.accountFile = $1 },
            "fcm.project": { $0.fcm.project = $1 },
            "fcm.caFile": { $0.fcm.caFile = $1 },
            "topics.ridesPrefix": { $0.service.topics.ridesPrefix = $1 },
            "topics.serviceName": { $0.service.topics.serviceName = $1 },
        ],
        pathKeys: [
            "broker.passwordFile", "broker.caFile", "http.shareKeys", "apns.keyFile", "apns.caFile", "fcm.accountFile",
            "fcm.caFile",
        ],
        environmentPrefix: "RIDEPUSH_", defaultFile: defaultConfigPath)
}

extension RidePushSettings {
    /// A4: `http.allowedHosts`, else the loopback names at `http.port` and the address of `http.host` when it is
    /// one. The list was checked when it was read.
    public var httpHosts: AllowedHosts {
        AllowedHosts.configured(allowedHosts, port: httpPort, boundHost: httpHost)
    }
}
