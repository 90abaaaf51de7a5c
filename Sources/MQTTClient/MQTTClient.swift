import CMosquitto
import Foundation
import Locking
import Logging

/// An MQTT client over libmosquitto.
///
/// ## Threading
/// One dedicated network thread owns the socket: it connects, runs `mosquitto_loop`, reconnects with
/// capped exponential backoff, and is the only thread on which libmosquitto calls back into Swift
/// (`MQTTClient+Callbacks.swift`). That is the one place where C and Swift concurrency meet: callbacks
/// copy what they need, then resume continuations, push into the ``messages`` buffer or yield
/// ``events``. Public methods may be called from any task; they only queue packets (the handle is in
/// threaded mode, so libmosquitto's own mutexes guard its queues) and wait for the network thread's answer.
///
/// ## Reconnection
/// The client is the one owner of reconnection, from the very first attempt on (a broker started after
/// the client is fine). After each CONNACK it subscribes again to every filter it remembers.
public final class MQTTClient: @unchecked Sendable {
    // Safe because: `handle` is used only through libmosquitto calls that are thread-safe in threaded mode,
    // `configuration`, `logger`, `buffer` and the stream continuation are immutable or Sendable, and all
    // mutable Swift state lives in `state`, behind a lock.
    let handle: OpaquePointer
    public let configuration: MQTTConfiguration
    let logger: Logger
    let buffer: MessageBuffer
    let eventContinuation: AsyncStream<MQTTConnectionEvent>.Continuation

    /// Incoming messages from every subscription. Iterate from one task.
    public let messages: MQTTMessageSequence
    /// Connection changes. Iterate from one task; the newest 256 are kept if nobody reads.
    public let events: AsyncStream<MQTTConnectionEvent>

    struct State {
        var subscriptions: [String: (qos: MQTTQoS, options: MQTTSubscribeOptions)] = [:]
        /// SUBSCRIBE and UNSUBSCRIBE packets awaiting their acknowledgement, by mid: libmosquitto drops them
        /// when the connection does, so their waiters are answered at the drop (the subscription itself is
        /// restored, or the unsubscribe sent again, at the next CONNACK).
        var pendingSubscriptions: [Int32: String] = [:]
        var pendingUnsubscribes: [Int32: String] = [:]
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
        var stopping = false
        var stopped = false
        var refusal: MQTTError?
        var lastError = "not connected yet"
        var reconnects = 0
        var connects = 0
        var threadExit: [CheckedContinuation<Void, Never>] = []
    }
    let state = Locked(State())

    private static let libraryInitialised: Bool = {
        mosquitto_lib_init()
        return true
    }()

    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "mqtt")) throws(MQTTError) {
        _ = Self.libraryInitialised
        self.configuration = configuration
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

    private func configure() throws(MQTTError) {
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

    /// Whether a CONNACK success has been received and the connection has not dropped since.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// How many times the client connected after the first connection.
    public var reconnectCount: Int { state.withLock { $0.reconnects } }

    /// Messages dropped by the incoming buffer's policy (always 0 with `suspendNetwork`).
    public var droppedMessages: Int { buffer.dropped }

    /// QoS 1 messages sent and not yet acknowledged, plus messages held back until a reconnect's resends
    /// are acknowledged.
    public var unacknowledgedCount: Int { state.withLock { $0.inFlightQoS1.count + $0.resend.heldCount } }

    /// Publishes held back while disconnected; a retained publish replaced by a newer one to the same topic
    /// before it left counts once (``OrderedResend``).
    public var heldCount: Int { state.withLock { $0.resend.heldCount } }

    /// Retained publishes that a newer one to the same topic replaced while both were held back.
    public var coalescedCount: Int { state.withLock { $0.resend.coalesced } }

    /// Non-retained publishes dropped because too many were held back while disconnected.
    public var droppedWhileHeld: Int { state.withLock { $0.resend.dropped } }

    /// Waits until every QoS 1 publish is acknowledged, or `timeout` passes. Returns whether all were.
    @discardableResult
    public func flush(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while ContinuousClock.now < deadline {
            if state.withLock({ $0.inFlightQoS1.isEmpty && $0.resend.heldCount == 0 }) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return state.withLock { $0.inFlightQoS1.isEmpty && $0.resend.heldCount == 0 }
    }

    /// Flushes QoS 1 traffic (up to `flushTimeout`), sends DISCONNECT (so no will is published), stops the
    /// network thread and ends ``messages`` and ``events``.
    public func disconnect(flushTimeout: Duration = .seconds(2)) async {
        let started = state.withLock { $0.started }
        if started && isConnected { await flush(timeout: flushTimeout) }
        let alreadyStopped = state.withLock { state in
            defer { state.stopping = true }
            return state.stopped
        }
        if started && !alreadyStopped {
            _ = mosquitto_disconnect_v5(handle, 0, nil)
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
        // Held publishes that never left: their waiters learn it (publishes from now on fail at once).
        for message in state.withLock({ $0.resend.drain() }) { message.waiter?.resume(throwing: MQTTError.shutDown) }
        buffer.finish()
        eventContinuation.finish()
    }

    // MARK: Publish

    /// Publishes a message. With QoS 1 it returns once the broker acknowledged it (PUBACK); while the
    /// connection is down the message waits in libmosquitto's queue and is sent after reconnecting.
    public func publish(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) async throws {
        if qos == .atMostOnce {
            try publishWithoutWaiting(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
            return
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            do {
                _ = try send(
                    topic: topic, payload: payload, qos: qos, retain: retain, properties: properties,
                    waiter: continuation)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Publishes without waiting for the acknowledgement. A QoS 1 message is still tracked by
    /// ``flush(timeout:)`` and redelivered by libmosquitto after a reconnect.
    public func publishWithoutWaiting(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties()
    ) throws(MQTTError) {
        _ = try send(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties, waiter: nil)
    }

    private func send(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties,
        waiter: CheckedContinuation<Void, any Error>?
    ) throws(MQTTError) -> Int32 {
        let message = OrderedResend.Publish(
            topic: topic, payload: payload, qos: qos, retain: retain, properties: properties, waiter: waiter)
        // The lock is held across the C call so that the PUBACK callback (network thread) cannot look for
        // the waiter before it is registered. The callback takes no libmosquitto mutex that this call needs.
        let result: Result<Int32, MQTTError> = state.withLock { state in
            // C5: while the connection is down, or a reconnect's resends are not yet acknowledged, a new publish
            // waits its turn here; libmosquitto would otherwise send it ahead of the older messages it resends.
            if state.stopped { return .failure(state.refusal ?? .shutDown) }
            if state.resend.isHolding {
                state.resend.hold(message)
                return .success(0)
            }
            do throws(MQTTError) {
                return .success(try publishNow(message, state: &state))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Hands one message to libmosquitto and tracks it until its acknowledgement. Call with `state` locked.
    func publishNow(_ message: OrderedResend.Publish, state: inout State) throws(MQTTError) -> Int32 {
        var list: OpaquePointer? = nil
        defer { mosquitto_property_free_all(&list) }
        if configuration.protocolVersion == .v5 { try Self.encode(message.properties, into: &list) }
        var mid: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish_v5(
                handle, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos.rawValue,
                message.retain, list)
        }
        // With QoS 1 a message that could not be written now stays queued (NO_CONN) and is sent on reconnect.
        let queued = rc == MOSQ_ERR_SUCCESS.rawValue || (message.qos == .atLeastOnce && rc == MOSQ_ERR_NO_CONN.rawValue)
        if queued && message.qos == .atLeastOnce {
            state.inFlightQoS1.insert(mid)
            if let waiter = message.waiter { state.waiters[mid] = waiter }
        }
        try check(queued ? MOSQ_ERR_SUCCESS.rawValue : rc, "publish to \(message.topic)")
        return mid
    }

    /// Sends every held-back message in the order it was published, once ``OrderedResend`` allows. Call with
    /// `state` locked, on the network thread.
    func releaseHeld(state: inout State) {
        for message in state.resend.release() {
            do {
                _ = try publishNow(message, state: &state)
            } catch {
                logger.error("held publish failed", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
                message.waiter?.resume(throwing: error)
            }
        }
    }

    static func encode(_ properties: MQTTProperties, into list: inout OpaquePointer?) throws(MQTTError) {
        if let responseTopic = properties.responseTopic {
            try check(
                mosquitto_property_add_string(&list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), responseTopic),
                "response topic")
        }
        if let data = properties.correlationData {
            let rc = data.withUnsafeBytes { bytes in
                mosquitto_property_add_binary(
                    &list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), bytes.baseAddress, UInt16(clamping: bytes.count))
            }
            try check(rc, "correlation data")
        }
        if let expiry = properties.messageExpiry {
            try check(
                mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry),
                "message expiry")
        }
        if let contentType = properties.contentType {
            try check(
                mosquitto_property_add_string(&list, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), contentType),
                "content type")
        }
        for (name, value) in properties.userProperties {
            try check(
                mosquitto_property_add_string_pair(&list, Int32(MQTT_PROP_USER_PROPERTY.rawValue), name, value),
                "user property")
        }
    }

    // MARK: Subscriptions

    /// Subscribes and waits for SUBACK. The filter is remembered and subscribed again after every reconnect;
    /// while disconnected it returns at once and the subscription is made on the next CONNACK.
    public func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) async throws {
        guard mosquitto_sub_topic_check(filter) == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError.invalidConfiguration("'\(filter)' is not a valid topic filter")
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let rc: Int32 = state.withLock { state in
                let previous = state.subscriptions[filter]
                state.subscriptions[filter] = (qos, options)
                guard state.connected else { return MOSQ_ERR_NO_CONN.rawValue }
                // mosquitto 2.0 keeps the options of a subscription made again (measured: a no-local
                // subscription over an earlier one still sent the client its own publishes), so a filter whose
                // options change is unsubscribed first; the two packets leave in order.
                if let previous, previous.options != options { _ = mosquitto_unsubscribe_v5(handle, nil, filter, nil) }
                var mid: Int32 = 0
                let rc = mosquitto_subscribe_v5(handle, &mid, filter, qos.rawValue, optionBits(options), nil)
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    state.waiters[mid] = continuation
                    state.pendingSubscriptions[mid] = filter
                }
                return rc
            }
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                continuation.resume()
            } else if rc != MOSQ_ERR_SUCCESS.rawValue {
                continuation.resume(throwing: Self.libraryError("subscribe \(filter)", rc))
            }
        }
    }

    /// Unsubscribes, forgets the filter and waits for UNSUBACK (returns at once while disconnected).
    public func unsubscribe(_ filter: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let rc: Int32 = state.withLock { state in
                state.subscriptions[filter] = nil
                guard state.connected else {
                    // A persistent session keeps the subscription on the broker: unsubscribe on the next CONNACK.
                    state.unsubscribeOnConnect.insert(filter)
                    return MOSQ_ERR_NO_CONN.rawValue
                }
                var mid: Int32 = 0
                let rc = mosquitto_unsubscribe_v5(handle, &mid, filter, nil)
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    state.waiters[mid] = continuation
                    state.pendingUnsubscribes[mid] = filter
                }
                return rc
            }
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                continuation.resume()
            } else if rc != MOSQ_ERR_SUCCESS.rawValue {
                continuation.resume(throwing: Self.libraryError("unsubscribe \(filter)", rc))
            }
        }
    }

    /// The filters the client restores after a reconnect.
    public var subscriptions: [String: MQTTQoS] { state.withLock { $0.subscriptions.mapValues(\.qos) } }

    /// libmosquitto's option bits for `options`; none with MQTT 3.1.1, where SUBSCRIBE has no options.
    func optionBits(_ options: MQTTSubscribeOptions) -> Int32 {
        guard configuration.protocolVersion == .v5 else { return 0 }
        var bits: UInt32 = options.noLocal ? MQTT_SUB_OPT_NO_LOCAL.rawValue : 0
        switch options.retainHandling {
        case .sendOnSubscribe: bits |= MQTT_SUB_OPT_SEND_RETAIN_ALWAYS.rawValue
        case .sendIfNew: bits |= MQTT_SUB_OPT_SEND_RETAIN_NEW.rawValue
        case .never: bits |= MQTT_SUB_OPT_SEND_RETAIN_NEVER.rawValue
        }
        return Int32(bitPattern: bits)
    }

    // MARK: Helpers

    static func libraryError(_ operation: String, _ rc: Int32) -> MQTTError {
        .library(operation: operation, code: rc, message: String(cString: mosquitto_strerror(rc)))
    }

    static func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw libraryError(operation, rc) }
    }

    private func check(_ rc: Int32, _ operation: String) throws(MQTTError) {
        try Self.check(rc, operation)
    }

    func failAllWaiters(with error: MQTTError) {
        let (waiters, connectWaiters) = state.withLock { state in
            defer {
                state.waiters.removeAll()
                state.connectWaiters.removeAll()
            }
            return (Array(state.waiters.values), state.connectWaiters.map(\.continuation))
        }
        for waiter in waiters { waiter.resume(throwing: error) }
        for waiter in connectWaiters { waiter.resume(throwing: error) }
    }
}

// MARK: - Failure drills

extension MQTTClient {
    /// Shuts the socket down under libmosquitto without sending DISCONNECT, as a dead network would.
    /// The broker publishes the will; the client reconnects as after any connection loss.
    /// Meant for tests and failure drills.
    public func simulateNetworkFailure() {
        let fd = mosquitto_socket(handle)
        if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }
}
