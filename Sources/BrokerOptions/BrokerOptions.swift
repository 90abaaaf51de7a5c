public import ArgumentParser
public import MQTTClient

/// How a command-line tool of the project reaches the broker: its URL and, for a secured deployment
///, the account, the file holding its password and the deployment's CA. The same flags in
/// `fleet-sim` and `ride-watch`.
public struct BrokerOptions: ParsableArguments, Sendable {
    /// The broker as given; nil when the flag is absent (``brokerURL`` is then the default), so that a tool
    /// with a configuration file of its own can tell a flag from the default.
    @Option(help: "Broker URL (mqtts:// for TLS; default \(Self.defaultBroker)).") public var broker: String?
    @Option(help: "Account on the broker (config/security/accounts.yaml).") public var username: String?
    @Option(help: "File whose first line is the account's password (never a flag: `ps` shows flags).")
    public var passwordFile: String?
    @Option(help: "CA certificate that signed the broker's (an mqtts:// broker with the deployment's own CA).")
    public var caFile: String?
    /// MQTT 3.1.1 for a broker without MQTT 5 (NATS's MQTT listener: `make run-cluster`).
    @Option(name: .customLong("protocol"), help: "MQTT version: 5 (default) or 3.1.1.")
    public var protocolVersion: String = "5"

    public init() {}

    public static let defaultBroker = "mqtt://127.0.0.1:1883"

    /// The broker to use: the flag, else the default.
    public var brokerURL: String { broker ?? Self.defaultBroker }

    /// The client's configuration, with the credentials above: under the account's name as its client id when an
    /// account is given (A4: the broker binds each account to its name, so no account can take another's session),
    /// else under `clientID`.
    public func configuration(clientID: String) throws -> MQTTConfiguration {
        var configuration = try MQTTConfiguration(url: brokerURL, clientID: username ?? clientID)
        try configuration.useCredentials(username: username, passwordFile: passwordFile, caFile: caFile)
        guard let version = MQTTConfiguration.ProtocolVersion(setting: protocolVersion) else {
            throw ValidationError("--protocol takes 5 or 3.1.1, not '\(protocolVersion)'")
        }
        configuration.protocolVersion = version
        return configuration
    }
}
