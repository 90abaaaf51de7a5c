/// Every failure of the client, with libmosquitto's return code or the MQTT reason code and its text.
public enum MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A libmosquitto call failed: its return code and `mosquitto_strerror` text.
    case library(operation: String, code: Int32, message: String)
    /// The broker refused the connection (CONNACK reason code and `mosquitto_reason_string` text).
    case connectionRefused(reasonCode: Int32, reason: String)
    /// A publish, subscribe or unsubscribe was answered with a failure reason code.
    case rejected(operation: String, reasonCode: Int32, reason: String)
    /// No connection was made within the time allowed; carries the last error seen.
    case connectTimeout(lastError: String)
    /// The configuration cannot be used.
    case invalidConfiguration(String)
    /// The client was shut down while the operation waited.
    case shutDown
    /// G5: the lease with the broker lapsed; what was held was dropped, unsent (``MQTTConfiguration/Lease``).
    case leaseLapsed
    /// G6: the gate the publish was made under closed before it left; dropped, unsent (``PublishGate``).
    case gateClosed

    public var description: String {
        switch self {
        case .library(let operation, let code, let message):
            return "\(operation) failed: \(message) (libmosquitto rc \(code))"
        case .connectionRefused(let code, let reason):
            return "broker refused the connection: \(reason) (reason code \(code))"
        case .rejected(let operation, let code, let reason):
            return "\(operation) rejected by broker: \(reason) (reason code \(code))"
        case .connectTimeout(let lastError):
            return "no connection to the broker in time; last error: \(lastError)"
        case .invalidConfiguration(let message):
            return "invalid MQTT configuration: \(message)"
        case .shutDown:
            return "MQTT client was shut down"
        case .leaseLapsed:
            return "the lease with the broker lapsed: dropped unsent (G5)"
        case .gateClosed:
            return "the grant it was published under ended: dropped unsent (G6)"
        }
    }
}
