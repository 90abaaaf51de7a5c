public import MQTTClient

/// What the worker needs of an MQTT connection. ``MQTTClient`` is the real one (libmosquitto); the
/// `RideStatusTesting` module has an in-memory one for the service's own unit tests, as NIOEmbedded is for
/// swift-nio. End-to-end tests always use a real mosquitto.
public protocol WorkerTransport: AnyObject, Sendable {
    associatedtype Messages: AsyncSequence<MQTTMessage, Never> & Sendable

    /// Messages for the worker's subscriptions, in arrival order.
    var messages: Messages { get }
    /// Connections, drops and refusals.
    var events: AsyncStream<MQTTConnectionEvent> { get }
    /// How many times the connection came back.
    var reconnectCount: Int { get }
    /// Whether a CONNACK was received and the connection has not dropped since (ahead of the event stream).
    var isConnected: Bool { get }
    /// The current connection's incarnation: grows with every connection (G1, L8).
    var incarnation: UInt64 { get }
    /// G1: leaves cleanly (no will) and connects again under an incarnation above `floor`: this worker's clock
    /// is behind the incarnation it announced before, so the group would take its births for stale ones.
    func reconnect(incarnationAbove floor: UInt64)
    /// Messages dropped because the worker fell behind.
    var droppedMessages: Int { get }
    /// How many more publishes the connection takes now without holding them back (0 while disconnected
    /// or while the broker falls behind): the cadence publishes only into this room.
    var publishRoom: Int { get }
    /// Whether the connection's reads go through `CMosquittoIO`'s patch of libmosquitto (logged at start and
    /// exported as `ridestatus_mqtt_io_interposed`).
    var ioInterposition: MQTTIOInterposition { get }

    /// Connects in the background and keeps reconnecting.
    func start()
    /// Queues a publish; never waits on the network. G6: one made under a `gate` token (0: none) leaves only while
    /// that gate is open (``setPublishGate(token:validFor:)``).
    func publishWithoutWaiting(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties, gate: UInt64) throws
    /// G6: opens the gate of `token` for `validFor` from now, or closes it (nil): what was published under it and
    /// has not left is dropped then, never sent after the grant it was made under.
    func setPublishGate(token: UInt64, validFor: Duration?)
    /// Subscribes and waits for the acknowledgement.
    func subscribe(_ filter: String, qos: MQTTQoS, options: MQTTSubscribeOptions) async throws
    /// Subscribes to many filters with the same options, in as few packets as it can, and waits for every
    /// acknowledgement.
    func subscribe(_ filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions) async throws
    /// Unsubscribes and waits for the acknowledgement.
    func unsubscribe(_ filter: String) async throws
    /// Many filters at once, in as few packets as the transport can.
    func unsubscribe(_ filters: [String]) async throws
    /// Waits until every QoS 1 publish is acknowledged; false when the timeout came first.
    func flush(timeout: Duration) async -> Bool
    /// Leaves cleanly: the broker does not send the will.
    func disconnect(flushTimeout: Duration) async
    /// G5: the worker confirmed, on the connection of `incarnation`, that it still holds its rides: the client
    /// publishes again (from the lapse until now it dropped every publish but its own markers'). A confirmation
    /// of an earlier connection changes nothing.
    func confirmLease(incarnation: UInt64)
    /// G5: whether the client's lease lapsed since the worker last confirmed it.
    var isFenced: Bool { get }
}

extension WorkerTransport {
    func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool = false, properties: MQTTProperties = .init(),
        gate: UInt64 = 0
    ) throws {
        try publishWithoutWaiting(
            topic: topic, payload: payload, qos: .atLeastOnce, retain: retain, properties: properties, gate: gate)
    }
}

/// The real transport: every requirement is `MQTTClient`'s own API (its typed throws satisfy `throws`).
extension MQTTClient: WorkerTransport {}
