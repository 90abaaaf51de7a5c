import CMosquitto
import Foundation
import Locking
import Logging

// MARK: - libmosquitto callbacks (network thread only)
//
// libmosquitto frees the message and properties when a callback returns, so everything is copied here.

extension MQTTClient {
    func installCallbacks() {
        mosquitto_connect_v5_callback_set(handle, onConnect)
        mosquitto_disconnect_v5_callback_set(handle, onDisconnect)
        mosquitto_publish_v5_callback_set(handle, onPublish)
        mosquitto_subscribe_v5_callback_set(handle, onSubscribe)
        mosquitto_unsubscribe_v5_callback_set(handle, onUnsubscribe)
        mosquitto_message_v5_callback_set(handle, onMessage)
    }

    static func client(_ object: UnsafeMutableRawPointer?) -> MQTTClient? {
        guard let object else { return nil }
        return Unmanaged<MQTTClient>.fromOpaque(object).takeUnretainedValue()
    }

    /// CONNACK reason codes after which retrying cannot help (MQTT 5 and 3.1.1 values).
    static func isPermanentRefusal(_ code: Int32, version: MQTTConfiguration.ProtocolVersion) -> Bool {
        switch version {
        case .v5: return [0x84, 0x85, 0x86, 0x87, 0x8A, 0x8C].contains(code)
        case .v311: return [1, 2, 4, 5].contains(code)
        }
    }

    func reasonText(_ code: Int32) -> String {
        configuration.protocolVersion == .v5
            ? String(cString: mosquitto_reason_string(code)) : String(cString: mosquitto_connack_string(code))
    }

    /// - Parameter limits: the Maximum Packet Size and Maximum QoS this CONNACK carries (MQTT 5), each nil when
    ///   absent: libmosquitto (`handle__connack`) then keeps the one it had, refused or not, and so does the outbox.
    func handleConnect(reasonCode: Int32, flags: Int32, limits: (packetSize: UInt32?, qos: UInt8?) = (nil, nil)) {
        flushAcknowledgements()
        // Before anything is published on this connection: publishes above them throw at once (``Outbox``).
        outbox.withLock { outbox in
            if let size = limits.packetSize { outbox.maximumPacketSize = Int(size) }
            if let qos = limits.qos { outbox.maximumQoS = Int(qos) }
        }
        guard reasonCode == 0 else {
            let error = MQTTError.connectionRefused(reasonCode: reasonCode, reason: reasonText(reasonCode))
            let permanent = Self.isPermanentRefusal(reasonCode, version: configuration.protocolVersion)
            state.withLock { state in
                state.lastError = error.description
                if permanent { state.refusal = error }
            }
            logger.debug("MQTT connection refused", metadata: ["reason": "\(error)"])
            if permanent {
                failConnectWaiters(with: error)
                eventContinuation.yield(.refused(error))
            } else {
                eventContinuation.yield(.trouble(.connectionRefused(error)))
            }
            return
        }
        let (subscriptions, waiters, isReconnect) = state.withLock { state in
            state.connected = true
            state.lease?.connected()
            state.lostConnection = false
            // The will this broker holds is the one made for this attempt (G1): births now carry its incarnation.
            state.incarnation = state.attemptIncarnation
            state.connects += 1
            if state.connects > 1 { state.reconnects += 1 }
            defer { state.connectWaiters.removeAll() }
            return (state.subscriptions, state.connectWaiters.map(\.continuation), state.connects > 1)
        }
        let lostUnsubscribes = state.withLock { state in
            defer { state.unsubscribeOnConnect = [] }
            return state.unsubscribeOnConnect
        }
        for filter in lostUnsubscribes where subscriptions[filter] == nil {
            _ = mosquitto_unsubscribe_v5(handle, nil, filter, nil)
        }
        // The same filters again, in packets of many filters with the same QoS and options (100,000 vehicle
        // subscriptions are a few hundred packets, not 100,000).
        let groups = Dictionary(grouping: subscriptions) {
            "\($0.value.qos.rawValue) \($0.value.options.noLocal) \($0.value.options.retainHandling)"
        }
        // Each packet's mid is noted before this callback returns, so no SUBACK (handled on this thread) comes
        // before it: the last answer reports the restoration.
        var restoring: [Int32: [String]] = [:]
        var unsent: [(filter: String, code: Int32)] = []
        // A packet libmosquitto could not queue for want of a connection: this connection is going, and the next
        // one restores everything again.
        var abandoned = false
        for group in groups.values {
            let subscription = group[0].value
            let filters = group.map(\.key).sorted()
            for start in stride(from: 0, to: filters.count, by: Self.filtersPerPacket) {
                let packet = Array(filters[start..<min(start + Self.filtersPerPacket, filters.count)])
                // A broker that kept the session keeps a repeated subscription's old options (mosquitto 2.0): a
                // filter with options of its own is unsubscribed first, so that they apply.
                if subscription.options != MQTTSubscribeOptions() {
                    for filter in packet { _ = mosquitto_unsubscribe_v5(handle, nil, filter, nil) }
                }
                var mid: Int32 = 0
                let rc = sendSubscribe(packet, qos: subscription.qos, options: subscription.options, mid: &mid)
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    restoring[mid] = packet
                } else if rc == MOSQ_ERR_NO_CONN.rawValue {
                    abandoned = true
                } else {
                    // Not sent, and never will be on this connection: reported as refused by the restoration.
                    logger.debug("MQTT resubscribe not sent", metadata: ["filters": "\(packet.count)", "rc": "\(rc)"])
                    unsent += packet.map { ($0, rc) }
                }
            }
        }
        let restoredNow = state.withLock { state -> Bool in
            // G5: a SUBACK extends the lease as a PUBACK does (a large restoration delays the pings behind it).
            let sent = ContinuousClock.now
            for mid in restoring.keys { state.lease?.sent(mid, at: sent) }
            state.restoring = restoring
            state.restoreRefused = unsent
            state.restorationAbandoned = abandoned
            return restoring.isEmpty && state.connected && !abandoned
        }
        // C5: held publishes leave once libmosquitto's resends of older messages are acknowledged (now, when
        // there are none), never ahead of them.
        state.withLock { state in
            state.resendDeadline = ContinuousClock.now.advanced(by: configuration.orderedResendTimeout)
            if state.resend.connected(inFlight: state.inFlightQoS1) { releaseHeld(state: &state) }
            noteRoom(state)
        }
        logger.debug(
            isReconnect ? "MQTT reconnected" : "MQTT connected", metadata: ["session.present": "\(flags & 1 == 1)"])
        for waiter in waiters { waiter.resume() }
        eventContinuation.yield(.connected(sessionPresent: flags & 1 == 1))
        if restoredNow { finishRestoration() }
    }

    /// The current connection's resubscriptions are all answered: subscribes waiting for them are answered
    /// (refused when one of their filters was), and ``MQTTConnectionEvent/subscriptionsRestored(incarnation:refused:)``
    /// reports it. Network thread only.
    func finishRestoration() {
        let (waiting, refused, incarnation) = state.withLock { state in
            defer {
                state.awaitingRestore = []
                state.restoreRefused = []
            }
            return (state.awaitingRestore, state.restoreRefused, state.incarnation)
        }
        let codes = Dictionary(refused, uniquingKeysWith: { first, _ in first })
        for entry in waiting {
            if let code = entry.filters.lazy.compactMap({ codes[$0] }).first {
                entry.continuation.resume(throwing: refusalError(code, operation: "subscribe"))
            } else {
                entry.continuation.resume()
            }
        }
        if !refused.isEmpty {
            logger.debug("subscriptions refused on reconnect", metadata: ["filters": "\(refused.map(\.filter))"])
        }
        eventContinuation.yield(.subscriptionsRestored(incarnation: incarnation, refused: refused.map(\.filter)))
    }

    func handleDisconnect(code: Int32) {
        flushAcknowledgements()
        let stopping = state.withLock { state in
            // G5: a connection lost (not ended on request) is fenced by the network thread once this callback has
            // returned (libmosquitto holds its callback lock here, which `mosquitto_reinitialise` destroys).
            if code != 0 && !state.stopping && state.connected { state.lostConnection = true }
            state.connected = false
            state.resend.disconnected()
            noteRoom(state)
            return state.stopping
        }
        answerLostSubscriptionChanges()
        // A connection that ends while the client stops was ended on request, whatever libmosquitto says (a
        // loss before the network thread queued DISCONNECT, a keepalive while it waited to be written).
        guard code != 0 && !stopping else {
            eventContinuation.yield(.closed)
            return
        }
        eventContinuation.yield(.disconnected(reason: code < 0x80 ? Self.describe(code) : reasonText(code)))
    }

    /// SUBSCRIBE and UNSUBSCRIBE packets die with the connection (libmosquitto keeps only publishes). An
    /// unsubscribe's waiter is answered now, as a call made while disconnected is, and the next CONNACK sends
    /// it again; a subscribe's waits for the next connection's restoration, which subscribes it again: until
    /// the broker answered, nothing is subscribed (L8). A restoration under way is abandoned.
    func answerLostSubscriptionChanges() {
        let waiters = state.withLock { state in
            var waiters: [CheckedContinuation<Void, any Error>] = []
            for (mid, filters) in state.pendingSubscriptions {
                if let waiter = state.waiters.removeValue(forKey: mid) {
                    state.awaitingRestore.append((filters, waiter))
                }
            }
            for mid in state.pendingUnsubscribes.keys {
                if let waiter = state.waiters.removeValue(forKey: mid) { waiters.append(waiter) }
            }
            state.unsubscribeOnConnect.formUnion(state.pendingUnsubscribes.values.joined())
            state.pendingSubscriptions = [:]
            state.pendingUnsubscribes = [:]
            state.restoring = [:]
            state.restoreRefused = []
            state.restorationAbandoned = false
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// A PUBACK (or, for QoS 0, libmosquitto's note that the PUBLISH was written) is only noted here; the
    /// network thread handles every one noted during a read or a write at once (``flushAcknowledgements()``),
    /// under one take of the client's lock. One take per acknowledgement kept the publishing thread and the
    /// network thread handing that lock back and forth 20,000 times a second at the 100,000-ride cadence of
    /// `make bench-scale`: 0.70 context switches per status, measured with `perf stat`.
    func notePublishAcknowledgement(mid: Int32, reasonCode: Int32) {
        acknowledgements.withLock { $0.append((mid, reasonCode)) }
    }

    /// Handles the acknowledgements noted since the last call, in the order they came. Network thread only:
    /// after every read and write of the connection, and before the connect, disconnect and subscription
    /// callbacks do their work, so the client's state sees every acknowledgement where it came in the stream
    /// (before a disconnect, say); a received message flushes them only when it must wait for room.
    func flushAcknowledgements() {
        let noted = acknowledgements.withLock { noted -> [(mid: Int32, reasonCode: Int32)] in
            guard !noted.isEmpty else { return [] }
            defer { noted.removeAll(keepingCapacity: true) }
            return noted
        }
        guard !noted.isEmpty else { return }
        let answers = state.withLock { state in
            defer { noteRoom(state) }
            return noted.compactMap { ack in acknowledge(ack.mid, state: &state).map { ($0, ack.reasonCode) } }
        }
        for (waiter, reasonCode) in answers { answer(waiter, reasonCode: reasonCode, operation: "publish") }
    }

    /// A SUBACK or UNSUBACK: handled at once, after the acknowledgements noted before it. `codes` has one
    /// reason code per filter of the packet (one for an UNSUBACK): a SUBACK that refuses any filter fails the
    /// whole subscribe.
    func handleAcknowledgement(mid: Int32, codes: [Int32], operation: String) {
        flushAcknowledgements()
        let (waiter, restored) = state.withLock { state -> (CheckedContinuation<Void, any Error>?, Bool) in
            if let filters = state.restoring.removeValue(forKey: mid) {
                state.lease?.acknowledged(mid)
                for (index, code) in codes.enumerated() where code >= 0x80 {
                    // A broker that answers fewer codes than filters refused the packet: every filter.
                    let refused = codes.count == filters.count ? [filters[index]] : filters
                    state.restoreRefused += refused.map { ($0, code) }
                }
                return (nil, state.restoring.isEmpty && state.connected && !state.restorationAbandoned)
            }
            return (acknowledge(mid, state: &state), false)
        }
        if restored { finishRestoration() }
        guard let waiter else { return }
        let code = codes.first { $0 >= 0x80 } ?? codes.first ?? 0
        answer(waiter, reasonCode: code, operation: operation)
    }

    /// Forgets `mid` and releases what its acknowledgement lets leave; returns its waiter, if any.
    private func acknowledge(_ mid: Int32, state: inout State) -> CheckedContinuation<Void, any Error>? {
        state.lease?.acknowledged(mid)
        state.inFlightQoS1.remove(mid)
        state.gatedInFlight[mid] = nil
        state.pendingSubscriptions[mid] = nil
        state.pendingUnsubscribes[mid] = nil
        if state.resend.acknowledged(mid, connected: state.connected) {
            releaseHeld(state: &state)
        } else if state.connected, state.resend.mayReleaseIntoWindow,
            state.inFlightQoS1.count <= configuration.maxInFlight / 2
        {
            // Half the window is free again: the next held messages leave, in order.
            releaseHeld(state: &state)
        }
        return state.waiters.removeValue(forKey: mid)
    }

    private func answer(_ waiter: CheckedContinuation<Void, any Error>, reasonCode: Int32, operation: String) {
        if reasonCode >= 0x80 {
            waiter.resume(throwing: refusalError(reasonCode, operation: operation))
        } else {
            waiter.resume()
        }
    }

    func refusalError(_ reasonCode: Int32, operation: String) -> MQTTError {
        .rejected(
            operation: operation, reasonCode: reasonCode, reason: String(cString: mosquitto_reason_string(reasonCode)))
    }

    func handleMessage(_ message: UnsafePointer<mosquitto_message>, properties: OpaquePointer?) {
        let raw = message.pointee
        let topic = String(cString: raw.topic)
        let payload: [UInt8]
        if let bytes = raw.payload, raw.payloadlen > 0 {
            payload = Array(UnsafeRawBufferPointer(start: bytes, count: Int(raw.payloadlen)))
        } else {
            payload = []
        }
        let decoded = properties.map(Self.decodeProperties) ?? MQTTProperties()
        // A full buffer holds this thread until the consumer reads (``MQTTConfiguration/BufferPolicy/suspendNetwork``):
        // acknowledgements read before this message are handled first, so a consumer that waits for one of them
        // while it drains the messages is not held up by it.
        buffer.push(
            MQTTMessage(
                topic: topic, payload: payload, qos: raw.qos >= 1 ? .atLeastOnce : .atMostOnce, retain: raw.retain,
                properties: decoded),
            beforeWaiting: flushAcknowledgements)
    }

    static func decodeProperties(_ list: OpaquePointer) -> MQTTProperties {
        var result = MQTTProperties()
        var text: UnsafeMutablePointer<CChar>? = nil
        if mosquitto_property_read_string(list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), &text, false) != nil,
            let text
        {
            result.responseTopic = String(cString: text)
            free(text)
        }
        text = nil
        if mosquitto_property_read_string(list, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), &text, false) != nil,
            let text
        {
            result.contentType = String(cString: text)
            free(text)
        }
        var binary: UnsafeMutableRawPointer? = nil
        var length: UInt16 = 0
        if mosquitto_property_read_binary(list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &binary, &length, false)
            != nil
        {
            result.correlationData = binary.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
            free(binary)
        }
        var expiry: UInt32 = 0
        if mosquitto_property_read_int32(list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false)
            != nil
        {
            result.messageExpiry = expiry
        }
        var cursor: OpaquePointer? = list
        var skipFirst = false
        while let current = cursor {
            var name: UnsafeMutablePointer<CChar>? = nil
            var value: UnsafeMutablePointer<CChar>? = nil
            guard
                let found = mosquitto_property_read_string_pair(
                    current, Int32(MQTT_PROP_USER_PROPERTY.rawValue), &name, &value, skipFirst)
            else { break }
            if let name, let value { result.userProperties.append((String(cString: name), String(cString: value))) }
            free(name)
            free(value)
            cursor = found
            skipFirst = true
        }
        return result
    }
}

// C function pointers cannot capture context: the client comes back through libmosquitto's `obj` pointer.

private func onConnect(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ rc: Int32, _ flags: Int32, _ props: OpaquePointer?
) {
    var packetSize: UInt32 = 0
    var qos: UInt8 = 0
    let hasSize =
        props.map {
            mosquitto_property_read_int32($0, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), &packetSize, false) != nil
        } ?? false
    let hasQoS =
        props.map { mosquitto_property_read_byte($0, Int32(MQTT_PROP_MAXIMUM_QOS.rawValue), &qos, false) != nil }
        ?? false
    MQTTClient.client(object)?.handleConnect(
        reasonCode: rc, flags: flags, limits: (hasSize ? packetSize : nil, hasQoS ? qos : nil))
}

private func onDisconnect(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ rc: Int32, _ props: OpaquePointer?
) {
    MQTTClient.client(object)?.handleDisconnect(code: rc)
}

private func onPublish(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ mid: Int32, _ reason: Int32, _ props: OpaquePointer?
) {
    MQTTClient.client(object)?.notePublishAcknowledgement(mid: mid, reasonCode: reason)
}

private func onSubscribe(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ mid: Int32, _ count: Int32,
    _ granted: UnsafePointer<Int32>?, _ props: OpaquePointer?
) {
    // One code per filter of the packet (a batch carries up to 256).
    let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
    MQTTClient.client(object)?.handleAcknowledgement(mid: mid, codes: codes, operation: "subscribe")
}

private func onUnsubscribe(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ mid: Int32, _ props: OpaquePointer?
) {
    MQTTClient.client(object)?.handleAcknowledgement(mid: mid, codes: [0], operation: "unsubscribe")
}

private func onMessage(
    _ mosq: OpaquePointer?, _ object: UnsafeMutableRawPointer?, _ message: UnsafePointer<mosquitto_message>?,
    _ props: OpaquePointer?
) {
    guard let message else { return }
    MQTTClient.client(object)?.handleMessage(message, properties: props)
}
