/// A message received from the broker, copied out of libmosquitto's callback.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool
    public var properties: MQTTProperties

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }
}

/// The MQTT 5 PUBLISH properties the client reads and writes (ignored with MQTT 3.1.1).
public struct MQTTProperties: Sendable, Equatable {
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    /// Message expiry interval in seconds.
    public var messageExpiry: UInt32?
    public var contentType: String?
    public var userProperties: [(String, String)]

    public init(
        responseTopic: String? = nil, correlationData: [UInt8]? = nil, messageExpiry: UInt32? = nil,
        contentType: String? = nil, userProperties: [(String, String)] = []
    ) {
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiry = messageExpiry
        self.contentType = contentType
        self.userProperties = userProperties
    }

    public var isEmpty: Bool {
        responseTopic == nil && correlationData == nil && messageExpiry == nil && contentType == nil
            && userProperties.isEmpty
    }

    public static func == (lhs: MQTTProperties, rhs: MQTTProperties) -> Bool { lhs.equals(rhs, by: ==) }

    /// Equal byte for byte, not only as Swift strings (which equate canonically equivalent ones, a precomposed
    /// "é" and "e" with a combining accent): the broker matches a response topic by its bytes.
    func sameBytes(as other: MQTTProperties) -> Bool { equals(other) { $0.utf8.elementsEqual($1.utf8) } }

    private func equals(_ other: MQTTProperties, by same: (String, String) -> Bool) -> Bool {
        func optional(_ one: String?, _ other: String?) -> Bool {
            guard let one, let other else { return one == nil && other == nil }
            return same(one, other)
        }
        return optional(responseTopic, other.responseTopic) && correlationData == other.correlationData
            && messageExpiry == other.messageExpiry && optional(contentType, other.contentType)
            && userProperties.elementsEqual(other.userProperties) { same($0.0, $1.0) && same($0.1, $1.1) }
    }
}

/// A change of the connection, in the order the network thread saw it.
public enum MQTTConnectionEvent: Sendable, Equatable {
    /// CONNACK success; `sessionPresent` tells whether the broker kept the session. The subscriptions are not
    /// restored yet: ``subscriptionsRestored(incarnation:refused:)`` follows once the broker acknowledged them.
    case connected(sessionPresent: Bool)
    /// Every filter the client remembers was subscribed again on the connection of `incarnation`, and the broker
    /// answered each SUBSCRIBE: a message published from now on reaches every filter not in `refused`. Comes
    /// after each `connected`, at once when there was nothing to restore; never for a connection that dropped
    /// before every answer came (the next connection restores them all again).
    case subscriptionsRestored(incarnation: UInt64, refused: [String])
    /// The connection ended; `reason` is libmosquitto's or the broker's text. The client reconnects.
    case disconnected(reason: String)
    /// The client disconnected on request (`disconnect()`); it does not reconnect.
    case closed
    /// A connection attempt failed; the client retries after `retryIn`.
    case connectFailed(reason: String, retryIn: Duration)
    /// The broker refused the credentials or the client; the client stops retrying.
    case refused(MQTTError)
    /// Something went wrong that the client works around: the application logs it (the client itself logs at
    /// debug and trace only).
    case trouble(MQTTClientTrouble)
    /// G5: the lease with the broker lapsed (``MQTTConfiguration/Lease``), `silence` after the send of the last
    /// acknowledged packet: the connection is closed, what the client held is dropped, and publishes but to the
    /// lease's passing topics are dropped until ``MQTTClient/confirmLease()``. A `disconnected` follows.
    case leaseLapsed(silence: Duration)
}

/// What the client worked around, for the application to log (``MQTTConnectionEvent/trouble(_:)``).
public enum MQTTClientTrouble: Sendable, Equatable, CustomStringConvertible {
    /// The broker refused a connection for a reason that may pass (server busy, for one); the client retries.
    case connectionRefused(MQTTError)
    /// libmosquitto took no will for this connection: a death goes unannounced until the next one.
    case willNotSet(reason: String)
    /// Resends after a reconnect were not acknowledged within `timeout`; publishes held behind them went anyway.
    case resendsUnacknowledged(count: Int, timeout: Duration)
    /// Publishes made while the client stopped were not sent.
    case publishesNotSent(count: Int, reason: String)
    /// libmosquitto refused publishes (none of them had a waiter to tell): how many, the first's topic and error.
    case publishesRefused(count: Int, firstTopic: String, error: String)

    public var description: String {
        switch self {
        case .connectionRefused(let error): "the broker refused the connection for now: \(error)"
        case .willNotSet(let reason): "no will set for this connection: \(reason)"
        case .resendsUnacknowledged(let count, let timeout):
            "\(count) resends not acknowledged within \(timeout); held publishes sent anyway"
        case .publishesNotSent(let count, let reason): "\(count) publishes made while stopping not sent: \(reason)"
        case .publishesRefused(let count, let topic, let error):
            "libmosquitto refused \(count) publishes (the first to \(topic)): \(error)"
        }
    }
}

/// MQTT 5 subscription options (ignored with MQTT 3.1.1, which has none).
public struct MQTTSubscribeOptions: Sendable, Hashable {
    /// Which retained messages the broker sends when the subscription is made.
    public enum RetainHandling: Sendable, Hashable {
        case sendOnSubscribe, sendIfNew, never
    }

    /// The broker does not send this client its own publishes on this subscription.
    public var noLocal: Bool
    public var retainHandling: RetainHandling

    public init(noLocal: Bool = false, retainHandling: RetainHandling = .sendOnSubscribe) {
        self.noLocal = noLocal
        self.retainHandling = retainHandling
    }
}
