import Locking
public import MQTTClient
public import RideStatusService

/// One client of an ``InMemoryBroker``: the worker's transport in unit tests, or a test's own observer.
/// ``drop()`` and ``reconnect()`` stand in for a lost and regained connection: the session stays, and
/// what the client publishes while away is sent when it comes back, as libmosquitto does.
///
/// Subscriptions behave as ``MQTTClient``'s do (L8): remembered, subscribed again after every connect with
/// `subscriptionsRestored` once that is acknowledged, and a `subscribe` returns only at an acknowledgement.
/// ``holdAcknowledgements()`` keeps SUBSCRIBE packets in flight (the broker has not taken them yet) until
/// ``releaseAcknowledgements()``; a drop loses those in flight, as a real connection does.
public final class InMemoryTransport: WorkerTransport {
    public let messages: AsyncStream<MQTTMessage>
    public let events: AsyncStream<MQTTConnectionEvent>
    private let messageSink: AsyncStream<MQTTMessage>.Continuation
    private let eventSink: AsyncStream<MQTTConnectionEvent>.Continuation
    private let broker: InMemoryBroker
    private let id: Int
    private let state = Locked(State())

    typealias Waiter = CheckedContinuation<Void, any Error>

    private struct State {
        var connected = false
        var everConnected = false
        var reconnects = 0
        var incarnation: UInt64 = 0
        var outbox: [MQTTMessage] = []
        /// G6: the gate token of each message in `outbox` (0: ungated).
        var outboxGates: [UInt64] = []
        /// G6: the open gate's token, nil while none is open (the in-memory gate has no clock: it closes when told).
        var openGate: UInt64?
        var gateDrops = 0
        var room = Int.max
        /// Every filter subscribed, restored on each connect.
        var subscriptions: [String: MQTTSubscribeOptions] = [:]
        var holding = false
        /// SUBSCRIBE packets the broker has not taken yet (``holdAcknowledgements()``); `waiter` nil for a
        /// restoration's.
        var inFlight: [(filters: [String], options: MQTTSubscribeOptions, waiter: Waiter?)] = []
        /// This connection's restoration: how many of its packets are still in flight.
        var restoring = 0
        var restoreRefused: [String] = []
        var awaitingRestore: [(filters: [String], waiter: Waiter)] = []
        /// Filters the broker refuses (``refuseSubscriptions(to:)``).
        var refused: Set<String> = []
        /// How many subscriptions the broker refused so far.
        var refusals = 0
        /// G5: the lease lapsed and the worker has not confirmed since: publishes but to these topics are dropped.
        var fencedPassing: Set<String>?
        /// Publishes dropped while fenced.
        var fencedDrops = 0
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

    /// No libmosquitto here.
    public var ioInterposition: MQTTIOInterposition { .unavailable(reason: "an in-memory transport") }

    /// Stands in for a broker that falls behind: the room ``publishRoom`` reports while connected (publishes
    /// beyond it still go through, as the real client holds them).
    public func setPublishRoom(_ room: Int) { state.withLock { $0.room = room } }

    public func start() { connect() }

    /// The connection is lost: the worker sees `disconnected`; the broker keeps the session. SUBSCRIBE packets
    /// in flight are lost; their callers wait for the next connection's restoration.
    public func drop() {
        state.withLock { state in
            state.connected = false
            for packet in state.inFlight {
                if let waiter = packet.waiter { state.awaitingRestore.append((packet.filters, waiter)) }
            }
            state.inFlight = []
            state.restoring = 0
        }
        broker.disconnect(id)
        eventSink.yield(.disconnected(reason: "dropped by the test"))
    }

    /// The connection comes back: held publishes go out, then the worker sees `connected`. With
    /// `cleanSession` the broker forgot the session first (its subscriptions and what waited for it), as a
    /// broker restarted without persistence does.
    public func reconnect(cleanSession: Bool = false) {
        if cleanSession { broker.forgetSession(id) }
        connect(sessionPresent: !cleanSession)
    }

    /// While `hold` is true, SUBSCRIBE packets wait in flight, unanswered, until ``releaseAcknowledgements()``.
    public func holdAcknowledgements(_ hold: Bool = true) { state.withLock { $0.holding = hold } }

    /// The broker takes every SUBSCRIBE in flight now, in order, and answers them. Whether later ones wait
    /// too is ``holdAcknowledgements(_:)``'s.
    public func releaseAcknowledgements() {
        let packets = state.withLock { state in
            defer { state.inFlight = [] }
            return state.inFlight
        }
        for packet in packets { acknowledge(packet.filters, options: packet.options, waiter: packet.waiter) }
    }

    /// The filters of the SUBSCRIBE packets in flight.
    public var filtersInFlight: [String] { state.withLock { $0.inFlight.flatMap(\.filters) } }

    /// The broker refuses these filters from now on (a SUBACK failure code, as an ACL or a NATS node that
    /// cannot create its consumer gives).
    public func refuseSubscriptions(to filters: Set<String>) { state.withLock { $0.refused = filters } }

    /// How many SUBSCRIBE packets the broker refused a filter of so far (a retry is one more).
    public var refusedSubscribeCount: Int { state.withLock { $0.refusals } }

    /// G1: connects again under an incarnation above `floor`.
    public func reconnect(incarnationAbove floor: UInt64) {
        drop()
        state.withLock { $0.incarnation = max($0.incarnation, floor) }
        connect()
    }

    private func connect(sessionPresent keptSession: Bool = true) {
        let (outbox, sessionPresent, restoration, holding) = state.withLock { state in
            defer {
                state.outbox = []
                state.outboxGates = []
                state.connected = true
                state.incarnation += 1
                if state.everConnected { state.reconnects += 1 }
                state.everConnected = true
            }
            let restoration = Dictionary(grouping: state.subscriptions, by: \.value).map { options, filters in
                (filters: filters.map(\.key).sorted(), options: options)
            }
            state.restoring = state.holding ? restoration.count : 0
            if state.holding {
                state.inFlight += restoration.map { ($0.filters, $0.options, nil) }
            }
            // G6: what waited under a gate that closed meanwhile is dropped, as ``MQTTClient`` drops it.
            var kept: [MQTTMessage] = []
            for (message, gate) in zip(state.outbox, state.outboxGates) {
                if gate == 0 || gate == state.openGate { kept.append(message) } else { state.gateDrops += 1 }
            }
            return (kept, state.everConnected && keptSession, restoration, state.holding)
        }
        broker.connect(id)
        for message in outbox { broker.route(message, from: id) }
        eventSink.yield(.connected(sessionPresent: sessionPresent))
        guard !holding else {
            if restoration.isEmpty { finishRestoration(refused: []) }
            return
        }
        var refused: [String] = []
        for packet in restoration {
            refused += subscribeAtBroker(packet.filters, options: packet.options)
        }
        finishRestoration(refused: refused)
    }

    /// Takes `filters` at the broker; returns those it refused.
    private func subscribeAtBroker(_ filters: [String], options: MQTTSubscribeOptions) -> [String] {
        let refusing = state.withLock { $0.refused }
        var refused: [String] = []
        for filter in filters {
            if refusing.contains(filter) {
                refused.append(filter)
            } else {
                broker.subscribe(id, filter: filter, options: options)
            }
        }
        if !refused.isEmpty { state.withLock { $0.refusals += 1 } }
        return refused
    }

    /// A SUBSCRIBE the broker takes now: a caller's is answered, a restoration's counted.
    private func acknowledge(
        _ filters: [String], options: MQTTSubscribeOptions, waiter: CheckedContinuation<Void, any Error>?
    ) {
        let refused = subscribeAtBroker(filters, options: options)
        if let waiter {
            if refused.isEmpty {
                waiter.resume()
            } else {
                waiter.resume(
                    throwing: MQTTError.rejected(operation: "subscribe", reasonCode: 0x87, reason: "Not authorized"))
            }
            return
        }
        let (done, soFar) = state.withLock { state -> (Bool, [String]) in
            state.restoring -= 1
            state.restoreRefused += refused
            return (state.restoring == 0, state.restoreRefused)
        }
        if done { finishRestoration(refused: soFar) }
    }

    private func finishRestoration(refused: [String]) {
        let (waiting, incarnation) = state.withLock { state in
            defer {
                state.awaitingRestore = []
                state.restoreRefused = []
            }
            return (state.awaitingRestore, state.incarnation)
        }
        for entry in waiting {
            if entry.filters.contains(where: refused.contains) {
                entry.waiter.resume(
                    throwing: MQTTError.rejected(operation: "subscribe", reasonCode: 0x87, reason: "Not authorized"))
            } else {
                entry.waiter.resume()
            }
        }
        eventSink.yield(.subscriptionsRestored(incarnation: incarnation, refused: refused))
    }

    public func publishWithoutWaiting(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties, gate: UInt64
    ) throws {
        let message = MQTTMessage(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        let connected = state.withLock { state -> Bool? in
            if let passing = state.fencedPassing, !passing.contains(topic) {
                state.fencedDrops += 1
                return nil
            }
            if gate != 0, gate != state.openGate {
                state.gateDrops += 1
                return nil
            }
            if !state.connected {
                state.outbox.append(message)
                state.outboxGates.append(gate)
            }
            return state.connected
        }
        if connected == true { broker.route(message, from: id) }
    }

    /// G5: the lease lapses as ``MQTTClient``'s does: what was held back is dropped, the connection ends, and
    /// until ``confirmLease()`` every publish but to `passing` is dropped. The test reconnects with ``reconnect(cleanSession:)``.
    public func lapseLease(passing: Set<String>) {
        state.withLock { state in
            state.outbox = []
            state.outboxGates = []
            state.fencedPassing = passing
        }
        eventSink.yield(.leaseLapsed(silence: .seconds(7)))
        drop()
    }

    public func confirmLease(incarnation: UInt64) {
        state.withLock { state in
            guard state.connected, state.incarnation == incarnation else { return }
            state.fencedPassing = nil
        }
    }

    public var isFenced: Bool { state.withLock { $0.fencedPassing != nil } }

    /// G5: publishes dropped while the lease had lapsed.
    public var fencedDrops: Int { state.withLock { $0.fencedDrops } }

    /// G6: gated publishes dropped because their gate was closed (``MQTTClient/gateDrops``).
    public var gateDrops: Int { state.withLock { $0.gateDrops } }

    /// The open gate's token, nil while none is open.
    public var openGate: UInt64? { state.withLock { $0.openGate } }

    public func setPublishGate(token: UInt64, validFor: Duration?) {
        state.withLock { $0.openGate = (validFor ?? .zero) <= .zero ? nil : token }
    }

    public func subscribe(_ filter: String, qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        try await subscribe([filter], qos: qos, options: options)
    }

    public func subscribe(_ filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            let now = state.withLock { state -> Bool in
                for filter in filters { state.subscriptions[filter] = options }
                if !state.connected {
                    state.awaitingRestore.append((filters, waiter))
                    return false
                }
                if state.holding {
                    state.inFlight.append((filters, options, waiter))
                    return false
                }
                return true
            }
            if now { acknowledge(filters, options: options, waiter: waiter) }
        }
    }

    /// Subscribes with the default options (for a test's observer).
    public func subscribe(_ filter: String) async throws {
        try await subscribe(filter, qos: .atLeastOnce, options: MQTTSubscribeOptions())
    }

    public func unsubscribe(_ filter: String) async throws { try await unsubscribe([filter]) }

    public func unsubscribe(_ filters: [String]) async throws {
        state.withLock { state in
            for filter in filters { state.subscriptions[filter] = nil }
        }
        for filter in filters { broker.unsubscribe(id, filter: filter) }
    }

    public func flush(timeout: Duration) async -> Bool { state.withLock { $0.outbox.isEmpty } }

    public func disconnect(flushTimeout: Duration) async {
        let waiting = state.withLock { state in
            state.connected = false
            defer {
                state.inFlight = []
                state.awaitingRestore = []
            }
            return state.inFlight.compactMap(\.waiter) + state.awaitingRestore.map(\.waiter)
        }
        for waiter in waiting { waiter.resume(throwing: MQTTError.shutDown) }
        broker.disconnect(id)
        eventSink.yield(.closed)
        eventSink.finish()
        messageSink.finish()
    }
}
