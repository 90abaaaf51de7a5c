import CMosquitto
import Foundation
import Locking
public import Logging

/// An MQTT client over libmosquitto.
///
/// ## Threading
/// One dedicated network thread owns the socket: it connects, runs libmosquitto's loop, reconnects with
/// capped exponential backoff, and is the only thread on which libmosquitto calls back into Swift
/// (`MQTTClient+Callbacks.swift`). That is the one place where C and Swift concurrency meet: callbacks
/// copy what they need, then resume continuations, push into the ``messages`` buffer or yield
/// ``events``. Public methods may be called from any task. A publish goes into the client's ``Outbox``, which
/// the network thread hands to libmosquitto in batches; after a reconnect, ``OrderedResend`` holds new
/// publishes back until libmosquitto's resends are acknowledged (C5: in order across reconnects).
/// Subscription changes are queued with libmosquitto (threaded mode: its mutexes guard its queues) and
/// answered at their SUBACK.
///
/// ## Logs and events
/// The client logs at debug and trace only; what an application should see comes as ``events``: the
/// connection's changes, and ``MQTTConnectionEvent/trouble(_:)`` for what it worked around.
///
/// ## Reconnection
/// The client is the one owner of reconnection, from the very first attempt on (a broker started after
/// the client is fine). After each CONNACK it subscribes again to every filter it remembers, and reports
/// ``MQTTConnectionEvent/subscriptionsRestored(incarnation:refused:)`` once the broker answered every one of
/// those SUBSCRIBEs. A ``subscribe(_:qos:options:)`` returns only at a SUBACK: one made while disconnected,
/// or whose packet died with a connection, returns when a later connection's restoration is acknowledged.
public final class MQTTClient: @unchecked Sendable {
    // Safe because: `handle` is used only through libmosquitto calls that are thread-safe in threaded mode,
    // `configuration`, `logger`, `buffer` and the stream continuation are immutable or Sendable, and all
    // mutable Swift state lives behind a lock: `state`, `outbox` and `acknowledgements`.
    let handle: OpaquePointer
    public let configuration: MQTTConfiguration
    let logger: Logger
    let buffer: MessageBuffer
    /// Wakes the network thread when another thread queues a packet.
    let wake = NetworkWake()
    /// Buffers the network thread's reads of the connection under libmosquitto.
    let readBuffer: SocketReadBuffer

    /// Whether this client's reads and wake-ups go through `CMosquittoIO`'s patch of libmosquitto: worth 7.4 to
    /// 1.1 system calls per received message (docs/performance.md). Applications log and export it.
    public var ioInterposition: MQTTIOInterposition { readBuffer.interposition }
    /// Publish acknowledgements noted by libmosquitto's callback, not yet handled (network thread only; the
    /// lock is never contended): ``flushAcknowledgements()``.
    let acknowledgements = Locked<[(mid: Int32, reasonCode: Int32)]>([])
    /// Publishes from other threads, waiting for the network thread to hand them to libmosquitto. Taken on its
    /// own, or inside `state`'s lock, never the other way round.
    let outbox = Locked(Outbox())
    let eventContinuation: AsyncStream<MQTTConnectionEvent>.Continuation

    /// Incoming messages from every subscription. Iterate from one task.
    public let messages: MQTTMessageSequence
    /// Connection changes. Iterate from one task; the newest 256 are kept if nobody reads.
    public let events: AsyncStream<MQTTConnectionEvent>

    struct State {
        var subscriptions: [String: (qos: MQTTQoS, options: MQTTSubscribeOptions)] = [:]
        /// SUBSCRIBE and UNSUBSCRIBE packets awaiting their acknowledgement, by mid. libmosquitto drops them
        /// when the connection does: a subscribe's waiter then waits for the next connection's restoration
        /// (``awaitingRestore``); an unsubscribe's is answered at the drop and sent again at the next CONNACK.
        var pendingSubscriptions: [Int32: [String]] = [:]
        var pendingUnsubscribes: [Int32: [String]] = [:]
        /// The current connection's resubscriptions awaiting their SUBACK, by mid, and the filters refused so
        /// far: when the last answer comes the client reports ``MQTTConnectionEvent/subscriptionsRestored(incarnation:refused:)``.
        var restoring: [Int32: [String]] = [:]
        var restoreRefused: [(filter: String, code: Int32)] = []
        /// A resubscription could not be queued: this connection's restoration never completes.
        var restorationAbandoned = false
        /// Subscribes that no SUBACK answered yet (made while disconnected, or lost with a connection): each is
        /// answered when a later connection's restoration, which subscribes its filters again, is acknowledged.
        var awaitingRestore: [(filters: [String], continuation: CheckedContinuation<Void, any Error>)] = []
        /// Filters to unsubscribe at the next CONNACK: their UNSUBSCRIBE was lost with a connection.
        var unsubscribeOnConnect: Set<String> = []
        var waiters: [Int32: CheckedContinuation<Void, any Error>] = [:]
        var inFlightQoS1: Set<Int32> = []
        /// Publishes held back while the connection is down or resends are outstanding (``OrderedResend``).
        var resend = OrderedResend()
        var resendDeadline: ContinuousClock.Instant?
        var connectWaiters:
            [(id: Int, deadline: ContinuousClock.Instant, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextWaiterID = 0
        var connected = false
        var started = false
        /// The incarnation of the last connection attempt: larger for every attempt, across restarts too.
        var attemptIncarnation: UInt64 = 0
        /// Which of the configuration's endpoints the next connect tries (failover across a cluster's nodes).
        var endpointIndex = 0
        /// The incarnation of the connection the broker last accepted (CONNACK): its will carries it.
        var incarnation: UInt64 = 0
        var stopping = false
        var stopped = false
        var refusal: MQTTError?
        var lastError = "not connected yet"
        var reconnects = 0
        var connects = 0
        var threadExit: [CheckedContinuation<Void, Never>] = []
        /// Used under this lock only (``MQTTClient/publishNow(topic:payload:qos:retain:properties:waiter:state:)``).
        let encodedProperties = EncodedProperties()
        /// The outbox's other buffer, emptied, for the next swap (``MQTTClient/drainOutbox(state:onNetworkThread:)``).
        var spareBatch = Outbox.Batch()
        /// Runs on the network thread before each connect (``setBeforeConnect(_:)``).
        var beforeConnect: (@Sendable () -> Void)?
        /// G5: the lease with the broker, when the configuration asks for one.
        var lease: BrokerLease?
        /// G5: from a lapse until ``MQTTClient/confirmLease()``: publishes but to the passing topics are dropped.
        var fenced = false
        /// G5: publishes dropped while fenced, and at the lapses.
        var fencedDrops = 0
        /// G5: libmosquitto reported the connection lost; the network thread fences it (``fence(now:)``).
        var lostConnection = false
        /// G6: the grant publishes are gated on (``MQTTClient/setPublishGate(token:validFor:)``), nil before one.
        var gate: PublishGate?
        /// G6: gated publishes handed to libmosquitto and not yet acknowledged, with their gate tokens.
        var gatedInFlight: [Int32: UInt64] = [:]
        /// G6: gated publishes dropped because their gate had closed.
        var gateDrops = 0
    }
    let state = Locked(State())

    private static let libraryInitialised: Bool = {
        mosquitto_lib_init()
        return true
    }()

    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "mqtt")) throws(MQTTError) {
        _ = Self.libraryInitialised
        self.configuration = configuration
        readBuffer = SocketReadBuffer(enabled: configuration.interposeIO)
        var logger = logger
        logger[metadataKey: "mqtt.client"] = .string(configuration.clientID)
        self.logger = logger
        self.buffer = MessageBuffer(capacity: configuration.bufferCapacity, policy: configuration.bufferPolicy)
        self.messages = MQTTMessageSequence(buffer: buffer)
        (self.events, self.eventContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        guard let handle = mosquitto_new(configuration.clientID, configuration.cleanStart, nil) else {
            throw .library(operation: "mosquitto_new", code: MOSQ_ERR_NOMEM.rawValue, message: "cannot create client")
        }
        self.handle = handle
        if configuration.lease != nil {
            state.withLock {
                $0.lease = BrokerLease(keepAlive: configuration.keepAlive, margin: configuration.lease?.margin ?? .zero)
            }
        }
        do {
            try configure()
        } catch {
            mosquitto_destroy(handle)
            throw error
        }
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        installCallbacks()
    }

    deinit {
        mosquitto_destroy(handle)
        buffer.finish()
        eventContinuation.finish()
    }

    func configure() throws(MQTTError) {
        let version = configuration.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, Int32(version)), "protocol version")
        try check(mosquitto_threaded_set(handle, true), "mosquitto_threaded_set")
        try check(
            mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, configuration.tcpNoDelay ? 1 : 0), "tcp nodelay")
        if let username = configuration.username {
            try check(mosquitto_username_pw_set(handle, username, configuration.password), "mosquitto_username_pw_set")
        }
        if let tls = configuration.tls {
            try check(
                mosquitto_tls_set(handle, tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile, nil),
                "mosquitto_tls_set")
        }
        if let will = configuration.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    handle, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue, will.retain, nil)
            }
            try check(rc, "mosquitto_will_set")
        }
    }

    // MARK: Connection

    /// Starts the network thread; it connects and keeps reconnecting until ``disconnect(flushTimeout:)``.
    public func start() {
        let alreadyStarted = state.withLock { state in
            defer { state.started = true }
            return state.started
        }
        guard !alreadyStarted else { return }
        let thread = Thread { [self] in runNetworkLoop() }
        thread.name = "mqtt-\(configuration.clientID)"
        thread.start()
    }

    /// Starts the client and waits for the first successful CONNACK.
    /// - Throws: ``MQTTError/connectionRefused(reasonCode:reason:)`` when the broker refuses (for example
    ///   wrong credentials), ``MQTTError/connectTimeout(lastError:)`` when `timeout` passes first.
    public func connect(timeout: Duration = .seconds(10)) async throws {
        start()
        let deadline = ContinuousClock.now.advanced(by: timeout)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let immediate: Result<Void, MQTTError>? = state.withLock { state in
                if state.connected { return .success(()) }
                if let refusal = state.refusal { return .failure(refusal) }
                if state.stopping { return .failure(.shutDown) }
                state.nextWaiterID += 1
                state.connectWaiters.append((state.nextWaiterID, deadline, continuation))
                return nil
            }
            if let immediate { continuation.resume(with: immediate) }
        }
    }

    /// G5: the application confirmed, on the connection of `incarnation`, that what it publishes is still its
    /// own: the client publishes again (``MQTTConfiguration/Lease``). A confirmation of an earlier connection
    /// (a lapse came since) changes nothing.
    public func confirmLease(incarnation: UInt64) {
        state.withLock { state in
            guard state.connected, state.incarnation == incarnation else { return }
            state.fenced = false
            noteRoom(state)
        }
    }

    /// G5: whether the client drops publishes after a lapse, until ``confirmLease()``.
    public var isFenced: Bool { state.withLock { $0.fenced } }

    /// G5: publishes dropped at lapses and while fenced.
    public var fencedDrops: Int { state.withLock { $0.fencedDrops } }

    /// G6: gated publishes dropped because their gate had closed before they could leave.
    public var gateDrops: Int { state.withLock { $0.gateDrops } }

    /// G6: opens the gate of `token` for `validFor` from now (this process's `ContinuousClock`), or closes it
    /// (nil). A publish made with ``publishWithoutWaiting(topic:payload:qos:retain:properties:gate:)``'s `gate`
    /// leaves only while its token's gate is open (``PublishGate``). A new token closes the previous one's for good.
    public func setPublishGate(token: UInt64, validFor: Duration?) {
        let now = ContinuousClock.now
        let closing = validFor.map { $0 <= .zero } ?? true
        let until = closing ? now : now.advanced(by: validFor!)
        let recheck = state.withLock { state -> Bool in
            if var open = state.gate, open.token == token {
                // A renewal moves the end; closing a gate already closed changes nothing.
                if closing && open.until <= now { return false }
                open.until = until
                open.closeChecked = false
                state.gate = open
                return closing
            }
            // Another token's gate: what is in flight under the previous one is checked against it.
            state.gate = PublishGate(token: token, until: until)
            return true
        }
        // The network thread checks on its next turn (resets the connection if a gated publish in flight is no
        // longer admitted); woken now rather than within its poll.
        if recheck { wake.signal() }
    }

    /// Whether a CONNACK success has been received and the connection has not dropped since.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// How many times the client connected after the first connection.
    public var reconnectCount: Int { state.withLock { $0.reconnects } }

    /// The incarnation of the connection the broker last accepted: milliseconds since 1970 when it was
    /// attempted, or one more than the one before if the clock went back. A presence birth carries it, as the will made for
    /// that connection does (``MQTTConfiguration/Will/payloadForIncarnation``), so a late will of an earlier
    /// connection is recognised as stale (G1).
    public var incarnation: UInt64 { state.withLock { $0.incarnation } }

    /// Messages dropped by the incoming buffer's policy (always 0 with `suspendNetwork`).
    public var droppedMessages: Int { buffer.dropped }

    /// How many more messages may be published now without waiting in the client: 0 while disconnected,
    /// while a reconnect's resends are outstanding, or while the window of unacknowledged messages
    /// (`MQTTConfiguration.maxInFlight`) is full. A producer that can wait (the worker's cadence) asks first.
    /// Read without the client's lock (the cadence asks before every status): from the room the network thread
    /// last counted, less the publishes waiting in the outbox.
    public var publishRoom: Int { outbox.withLock { max(0, $0.room - $0.count) } }

    /// QoS 1 messages sent and not yet acknowledged, plus messages held back until a reconnect's resends
    /// are acknowledged or the window has room, plus those not handed to libmosquitto yet (``Outbox``).
    package var unacknowledgedCount: Int {
        state.withLock { state in
            state.inFlightQoS1.count + state.resend.heldCount + outbox.withLock { $0.count }
        }
    }

    /// Publishes the network thread has not taken from the outbox yet.
    package var outboxCount: Int { outbox.withLock { $0.count } }

    /// Publishes held back while disconnected; a retained publish replaced by a newer one to the same topic
    /// before it left counts once (``OrderedResend``).
    var heldCount: Int { state.withLock { $0.resend.heldCount } }

    /// Retained publishes that a newer one to the same topic replaced while both were held back.
    package var coalescedCount: Int { state.withLock { $0.resend.coalesced } }

    /// Non-retained publishes dropped because too many were held back while disconnected.
    package var droppedWhileHeld: Int { state.withLock { $0.resend.dropped } }

    /// Waits until every QoS 1 publish is acknowledged, or `timeout` passes. Returns whether all were.
    @discardableResult
    public func flush(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while ContinuousClock.now < deadline && !Task.isCancelled {
            if allAcknowledged { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return allAcknowledged
    }

    /// Nothing in the outbox, held back or unacknowledged.
    private var allAcknowledged: Bool {
        state.withLock { state in
            state.inFlightQoS1.isEmpty && state.resend.heldCount == 0 && outbox.withLock { $0.count == 0 }
        }
    }

    /// Flushes QoS 1 traffic (up to `flushTimeout`), sends DISCONNECT (so no will is published), stops the
    /// network thread and ends ``messages`` and ``events``. A broker that takes no bytes for
    /// ``disconnectGrace`` has the connection shut down without DISCONNECT instead: it then publishes the will.
    public func disconnect(flushTimeout: Duration = .seconds(2)) async {
        let started = state.withLock { $0.started }
        if started && isConnected { await flush(timeout: flushTimeout) }
        let alreadyStopped = state.withLock { state in
            // Publishes from now on fail at once; what was published before goes to libmosquitto ahead of the
            // DISCONNECT (or is held, and fails below).
            outbox.withLock { $0.closed = $0.closed ?? .shutDown }
            if !state.stopping { drainOutbox(state: &state, onNetworkThread: false) }
            state.stopping = true
            return state.stopped
        }
        if started && !alreadyStopped {
            // The network thread sends DISCONNECT at its next turn (`endConnection`), and exits.
            wake.signal()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    if state.stopped { return true }
                    state.threadExit.append(continuation)
                    return false
                }
                if done { continuation.resume() }
            }
        }
        failAllWaiters(with: .shutDown)
        // Held publishes that never left: their waiters learn it. (The outbox was closed and handed on above, in
        // the same take of the lock as `stopping`.)
        for message in state.withLock({ $0.resend.drain() }) { message.waiter?.resume(throwing: MQTTError.shutDown) }
        buffer.finish()
        eventContinuation.finish()
    }

    // MARK: Helpers

    static func libraryError(_ operation: String, _ rc: Int32) -> MQTTError {
        .library(operation: operation, code: rc, message: String(cString: mosquitto_strerror(rc)))
    }

    static func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw libraryError(operation, rc) }
    }

    func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
        try Self.check(rc, operation)
    }

    /// From now on publishes fail at once with `error`; those still in the outbox fail now.
    func closeOutbox(with error: MQTTError) {
        outbox.withLock { outbox in
            if outbox.closed == nil { outbox.closed = error }
        }
        // Called once the client is stopping or stopped: the drain fails what it finds, and wakes nobody.
        state.withLock { drainOutbox(state: &$0, onNetworkThread: true) }
    }

    func failAllWaiters(with error: MQTTError) {
        let (waiters, connectWaiters) = state.withLock { state in
            defer {
                state.waiters.removeAll()
                state.connectWaiters.removeAll()
                state.awaitingRestore.removeAll()
            }
            return (
                Array(state.waiters.values) + state.awaitingRestore.map(\.continuation),
                state.connectWaiters.map(\.continuation)
            )
        }
        for waiter in waiters { waiter.resume(throwing: error) }
        for waiter in connectWaiters { waiter.resume(throwing: error) }
    }
}

// MARK: - Incarnations

extension MQTTClient {
    /// G1: connects again, under an incarnation above `floor`: the clock of this host is behind an incarnation
    /// announced before (a restart after the clock went back), and the group would take every birth for a
    /// stale one. The DISCONNECT is clean, so the broker does not publish the will of the current connection.
    public func reconnect(incarnationAbove floor: UInt64) {
        state.withLock { state in
            state.attemptIncarnation = max(state.attemptIncarnation, floor)
            if state.connected {
                _ = mosquitto_disconnect_v5(handle, 0, nil)
                wake.signal()
            }
        }
    }
}

// MARK: - Failure drills

extension MQTTClient {
    /// Runs `hook` on the network thread before each connect from now on, as long as a slow connect would take:
    /// for tests of what happens meanwhile.
    package func setBeforeConnect(_ hook: (@Sendable () -> Void)?) {
        state.withLock { $0.beforeConnect = hook }
    }

    /// Shuts the socket down under libmosquitto without sending DISCONNECT, as a dead network would.
    /// The broker publishes the will; the client reconnects as after any connection loss.
    /// Meant for tests and failure drills.
    package func simulateNetworkFailure() {
        let fd = mosquitto_socket(handle)
        if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }
}
