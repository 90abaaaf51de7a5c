import Locking
public import MQTTClient
public import RideStatusService

/// One client of an ``InMemoryBroker``: the worker's transport in unit tests, or a test's own observer.
/// ``drop()`` and ``reconnect()`` stand in for a lost and regained connection: the session stays, and
/// what the client publishes while away is sent when it comes back, as libmosquitto does.
public final class InMemoryTransport: WorkerTransport {
    public let messages: AsyncStream<MQTTMessage>
    public let events: AsyncStream<MQTTConnectionEvent>
    private let messageSink: AsyncStream<MQTTMessage>.Continuation
    private let eventSink: AsyncStream<MQTTConnectionEvent>.Continuation
    private let broker: InMemoryBroker
    private let id: Int
    private let state = Locked(State())

    private struct State {
        var connected = false
        var everConnected = false
        var reconnects = 0
        var incarnation: UInt64 = 0
        var outbox: [MQTTMessage] = []
        var room = Int.max
    }

    init(broker: InMemoryBroker) {
        self.broker = broker
        (messages, messageSink) = AsyncStream<MQTTMessage>.makeStream()
        (events, eventSink) = AsyncStream<MQTTConnectionEvent>.makeStream()
        id = broker.register(messageSink)
    }

    public var reconnectCount: Int { state.withLock { $0.reconnects } }
    public var incarnation: UInt64 { state.withLock { $0.incarnation } }
    public var droppedMessages: Int { 0 }
    public var isConnected: Bool { state.withLock { $0.connected } }
    public var publishRoom: Int { state.withLock { $0.connected ? $0.room : 0 } }

    /// Stands in for a broker that falls behind: the room ``publishRoom`` reports while connected (publishes
    /// beyond it still go through, as the real client holds them).
    public func setPublishRoom(_ room: Int) { state.withLock { $0.room = room } }

    public func start() { connect() }

    /// The connection is lost: the worker sees `disconnected`; the broker keeps the session.
    public func drop() {
        state.withLock { $0.connected = false }
        broker.disconnect(id)
        eventSink.yield(.disconnected(reason: "dropped by the test"))
    }

    /// The connection comes back: held publishes go out, then the worker sees `connected`.
    public func reconnect() { connect() }

    /// G1: connects again under an incarnation above `floor`.
    public func reconnect(incarnationAbove floor: UInt64) {
        drop()
        state.withLock { $0.incarnation = max($0.incarnation, floor) }
        connect()
    }

    private func connect() {
        let (outbox, sessionPresent) = state.withLock { state in
            defer {
                state.outbox = []
                state.connected = true
                state.incarnation += 1
                if state.everConnected { state.reconnects += 1 }
                state.everConnected = true
            }
            return (state.outbox, state.everConnected)
        }
        broker.connect(id)
        for message in outbox { broker.route(message, from: id) }
        eventSink.yield(.connected(sessionPresent: sessionPresent))
    }

    public func publishWithoutWaiting(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties
    ) throws {
        let message = MQTTMessage(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        let connected = state.withLock { state in
            if !state.connected { state.outbox.append(message) }
            return state.connected
        }
        if connected { broker.route(message, from: id) }
    }

    public func subscribe(_ filter: String, qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        broker.subscribe(id, filter: filter, options: options)
    }

    public func subscribe(_ filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        for filter in filters { broker.subscribe(id, filter: filter, options: options) }
    }

    /// Subscribes with the default options (for a test's observer).
    public func subscribe(_ filter: String) async throws {
        try await subscribe(filter, qos: .atLeastOnce, options: MQTTSubscribeOptions())
    }

    public func unsubscribe(_ filter: String) async throws { broker.unsubscribe(id, filter: filter) }

    public func unsubscribe(_ filters: [String]) async throws {
        for filter in filters { broker.unsubscribe(id, filter: filter) }
    }

    public func flush(timeout: Duration) async -> Bool { state.withLock { $0.outbox.isEmpty } }

    public func disconnect(flushTimeout: Duration) async {
        state.withLock { $0.connected = false }
        broker.disconnect(id)
        eventSink.yield(.closed)
        eventSink.finish()
        messageSink.finish()
    }
}
