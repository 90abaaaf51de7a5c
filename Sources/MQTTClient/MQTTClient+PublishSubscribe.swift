import CMosquitto
import Foundation
import Locking
import Logging

extension MQTTClient {
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
                try send(
                    topic: topic, payload: payload, qos: qos, retain: retain, properties: properties,
                    waiter: continuation)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Publishes without waiting for the acknowledgement. A QoS 1 message is still tracked by
    /// ``flush(timeout:)`` and redelivered by libmosquitto after a reconnect.
    /// - Parameter gate: G6: the token of the gate it is made under (``setPublishGate(token:validFor:)``); it is
    ///   dropped unsent if that gate closes before it leaves. 0, the default: ungated.
    public func publishWithoutWaiting(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTProperties = MQTTProperties(), gate: UInt64 = 0
    ) throws(MQTTError) {
        try send(
            topic: topic, payload: payload, qos: qos, retain: retain, properties: properties, waiter: nil, gate: gate)
    }

    /// Hands a publish to the network thread (``Outbox``). A topic libmosquitto would refuse, a payload above
    /// MQTT's limit, a packet above the broker's Maximum Packet Size and a QoS above its Maximum QoS throw at
    /// once, as they did when this thread called libmosquitto; a refusal found only later (properties
    /// libmosquitto will not encode, a limit lowered by a reconnect) fails the waiter, or is logged when there is
    /// none.
    func send(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties,
        waiter: CheckedContinuation<Void, any Error>?, gate: UInt64 = 0
    ) throws(MQTTError) {
        // The operation's text only on failure: built for every publish it was an allocation per status.
        let topicCheck = Self.checkPublishTopic(topic)
        if topicCheck != MOSQ_ERR_SUCCESS.rawValue { throw Self.libraryError("publish to \(topic)", topicCheck) }
        if payload.count > Self.maximumPayload {
            throw Self.libraryError("publish to \(topic)", MOSQ_ERR_PAYLOAD_SIZE.rawValue)
        }
        let v5 = configuration.protocolVersion == .v5
        let (refusal, wasEmpty, waiting) = outbox.withLock { outbox -> (MQTTError?, Bool, Int) in
            if let closed = outbox.closed { return (closed, false, 0) }
            if Int(qos.rawValue) > outbox.maximumQoS {
                return (Self.libraryError("publish to \(topic)", MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue), false, 0)
            }
            if outbox.maximumPacketSize > 0,
                Outbox.packetSize(
                    topicBytes: topic.utf8.count, payloadBytes: payload.count, qos: qos,
                    properties: v5 ? properties : nil)
                    > outbox.maximumPacketSize
            {
                return (Self.libraryError("publish to \(topic)", MOSQ_ERR_OVERSIZE_PACKET.rawValue), false, 0)
            }
            let wasEmpty = outbox.append(
                topic: topic, payload: payload, qos: qos, retain: retain, properties: properties, waiter: waiter,
                gate: gate)
            return (nil, wasEmpty, outbox.count)
        }
        if let refusal { throw refusal }
        if wasEmpty { wake.signal() }
        // The network thread is held up (a blocking connect to a host that does not answer): this thread hands
        // the batch on itself, so the outbox stays small and what must wait is held, coalesced (OrderedResend).
        if waiting >= Self.outboxLimit { state.withLock { drainOutbox(state: &$0, onNetworkThread: false) } }
    }

    /// libmosquitto's checks of a publish topic (`mosquitto_pub_topic_check`, `mosquitto_validate_utf8`), on
    /// its bytes in place: handing the Swift string to C made a NUL-terminated copy for every status
    /// (`perf record` at the 100,000-ride cadence). A NUL is refused too: C would end the topic there.
    static func checkPublishTopic(_ topic: String) -> Int32 {
        var topic = topic
        return topic.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty, bytes.count <= 65_535,
                !bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 })
            else { return MOSQ_ERR_INVAL.rawValue }
            return mosquitto_validate_utf8(
                UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(bytes.count))
        }
    }

    /// MQTT's largest payload (a remaining length of 268,435,455 bytes, less the headers, which libmosquitto
    /// checks again).
    static var maximumPayload: Int { 268_435_455 }

    /// Publishes waiting in the outbox beyond which the publishing thread hands them on itself: at 20,000
    /// statuses a second the network thread takes about a hundred per turn.
    static var outboxLimit: Int { 4096 }

    /// Gives libmosquitto everything in the outbox, in order: each publish leaves now, or is held back while
    /// the connection is down, a reconnect's resends are outstanding or the window of unacknowledged messages
    /// is full (``OrderedResend``, C5); once the client is stopping they fail (``disconnect(flushTimeout:)``
    /// hands on what was published before it began). Call with `state` locked: the batch is taken and placed
    /// under the same take of the lock, so nothing overtakes it. Off the network thread the network thread is
    /// woken to write what was queued.
    func drainOutbox(state: inout State, onNetworkThread: Bool) {
        var batch = state.spareBatch
        state.spareBatch = Outbox.Batch()
        outbox.withLock { $0.take(swappingWith: &batch) }
        defer {
            batch.removeAll()
            state.spareBatch = batch
            noteRoom(state)
        }
        guard !batch.entries.isEmpty else { return }
        if state.stopping || state.stopped {
            let error = state.refusal ?? .shutDown
            for entry in batch.entries { entry.waiter?.resume(throwing: error) }
            logger.debug(
                "publishes made while the client stopped were not sent",
                metadata: ["publishes": "\(batch.entries.count)", "reason": "\(error)"])
            eventContinuation.yield(.trouble(.publishesNotSent(count: batch.entries.count, reason: "\(error)")))
            return
        }
        var published = false
        var refused = Refusals()
        let passing = state.fenced ? configuration.lease?.passing : nil
        // G6: one reading of the clock a batch, taken after the batch was: a gate that closed before this turn
        // drops what was made under it.
        let now = state.gate == nil ? nil : Optional(ContinuousClock.now)
        batch.bytes.withUnsafeBufferPointer { bytes in
            for entry in batch.entries {
                if let passing, !passing.contains(batch.topic(of: entry)) {
                    // G5: fenced after a lapse: nothing goes out for what the client held until it is confirmed.
                    state.fencedDrops += 1
                    entry.waiter?.resume(throwing: MQTTError.leaseLapsed)
                    continue
                }
                if entry.gate != 0, !PublishGate.admits(entry.gate, gate: state.gate, now: now ?? .now) {
                    state.gateDrops += 1
                    entry.waiter?.resume(throwing: MQTTError.gateClosed)
                    continue
                }
                if !state.resend.isHolding, state.inFlightQoS1.count >= configuration.maxInFlight {
                    // The window is full (a slow or frozen broker): wait here, coalesced, rather than in libmosquitto.
                    state.resend.holdForWindow()
                }
                if state.resend.isHolding {
                    state.resend.hold(
                        OrderedResend.Publish(
                            topic: batch.topic(of: entry), payload: Array(bytes[entry.payload]), qos: entry.qos,
                            retain: entry.retain, properties: entry.properties, waiter: entry.waiter, gate: entry.gate))
                    continue
                }
                do throws(MQTTError) {
                    try publishNow(
                        topic: UnsafeRawPointer(bytes.baseAddress! + entry.topic.lowerBound)
                            .assumingMemoryBound(to: CChar.self),
                        payload: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[entry.payload])),
                        qos: entry.qos,
                        retain: entry.retain, properties: entry.properties, waiter: entry.waiter, gate: entry.gate,
                        state: &state)
                    published = true
                } catch {
                    refused.note(error, waiter: entry.waiter, topic: batch.topic(of: entry))
                }
            }
        }
        refused.report(to: logger, events: eventContinuation, "publishes refused by libmosquitto")
        if published && !onNetworkThread { wake.signal() }
    }

    /// Records the room ``publishRoom`` reports, from `state`. Call with `state` locked.
    func noteRoom(_ state: State) {
        let room =
            state.connected && !state.resend.isHolding && !state.fenced
            ? max(0, configuration.maxInFlight - state.inFlightQoS1.count) : 0
        outbox.withLock { $0.room = room }
    }

    /// Hands one message to libmosquitto and tracks it until its acknowledgement. Call with `state` locked.
    func publishNow(
        topic: UnsafePointer<CChar>, payload: UnsafeRawBufferPointer, qos: MQTTQoS, retain: Bool,
        properties: MQTTProperties, waiter: CheckedContinuation<Void, any Error>?, gate: UInt64 = 0,
        state: inout State
    ) throws(MQTTError) {
        let list = configuration.protocolVersion == .v5 ? try state.encodedProperties.list(for: properties) : nil
        var mid: Int32 = 0
        let rc = readBuffer.queueing {
            mosquitto_publish_v5(
                handle, &mid, topic, Int32(payload.count), payload.baseAddress, qos.rawValue, retain, list)
        }
        // With QoS 1 a message that could not be written now stays queued (NO_CONN) and is sent on reconnect.
        let queued = rc == MOSQ_ERR_SUCCESS.rawValue || (qos == .atLeastOnce && rc == MOSQ_ERR_NO_CONN.rawValue)
        if queued && qos == .atLeastOnce {
            state.lease?.sent(mid, at: .now)
            state.inFlightQoS1.insert(mid)
            if gate != 0 { state.gatedInFlight[mid] = gate }
            if let waiter { state.waiters[mid] = waiter }
        }
        if !queued { throw Self.libraryError("publish to \(String(cString: topic))", rc) }
    }

    /// Sends held-back messages in the order they were published, once ``OrderedResend`` allows, as many as
    /// the window of unacknowledged messages has room for; acknowledgements release the rest. Call with
    /// `state` locked, on the network thread.
    func releaseHeld(state: inout State) {
        let room = max(0, configuration.maxInFlight - state.inFlightQoS1.count)
        var refused = Refusals()
        let now = state.gate == nil ? nil : Optional(ContinuousClock.now)
        for message in state.resend.release(room: room) {
            if message.gate != 0, !PublishGate.admits(message.gate, gate: state.gate, now: now ?? .now) {
                // G6: held past its gate's close: dropped, never handed on.
                state.gateDrops += 1
                message.waiter?.resume(throwing: MQTTError.gateClosed)
                continue
            }
            let result = message.payload.withUnsafeBytes { payload in
                Result { () throws(MQTTError) in
                    try publishNow(
                        topic: message.topic, payload: payload, qos: message.qos, retain: message.retain,
                        properties: message.properties, waiter: message.waiter, gate: message.gate, state: &state)
                }
            }
            if case .failure(let error) = result { refused.note(error, waiter: message.waiter, topic: message.topic) }
        }
        refused.report(to: logger, events: eventContinuation, "held publishes refused by libmosquitto")
    }

    /// Publishes libmosquitto refused while a batch was handed on: one with a waiter learns its error at once;
    /// the others are counted for one line of log per batch, not one per publish (this runs under the client's
    /// lock).
    struct Refusals {
        private var count = 0
        private var first: (topic: String, error: MQTTError)?

        mutating func note(
            _ error: MQTTError, waiter: CheckedContinuation<Void, any Error>?, topic: @autoclosure () -> String
        ) {
            if let waiter {
                waiter.resume(throwing: error)
                return
            }
            count += 1
            if first == nil { first = (topic(), error) }
        }

        func report(
            to logger: Logger, events: AsyncStream<MQTTConnectionEvent>.Continuation, _ message: Logger.Message
        ) {
            guard let first else { return }
            logger.debug(
                message,
                metadata: ["publishes": "\(count)", "first.topic": "\(first.topic)", "error": "\(first.error)"])
            events.yield(
                .trouble(.publishesRefused(count: count, firstTopic: first.topic, error: "\(first.error)")))
        }
    }

    /// The last properties published, encoded for libmosquitto, which copies them into each message it keeps:
    /// statuses carry the same two G2 user properties (worker, epoch) one after another, and building the list
    /// anew cost six allocations and two UTF-8 checks per status at the 100,000-ride cadence.
    final class EncodedProperties {
        private var properties = MQTTProperties()
        private var encoded: OpaquePointer?

        deinit { mosquitto_property_free_all(&encoded) }

        /// The list for `properties` (nil when they are empty), valid until the next call.
        func list(for properties: MQTTProperties) throws(MQTTError) -> OpaquePointer? {
            if properties.sameBytes(as: self.properties) { return encoded }
            mosquitto_property_free_all(&encoded)
            self.properties = MQTTProperties()
            var list: OpaquePointer? = nil
            do throws(MQTTError) {
                try MQTTClient.encode(properties, into: &list)
            } catch {
                mosquitto_property_free_all(&list)
                throw error
            }
            (self.properties, encoded) = (properties, list)
            return list
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

    /// Subscribes and waits for SUBACK. The filter is remembered and subscribed again after every reconnect.
    /// While disconnected, or when the connection drops before the SUBACK, it waits for the next connection's
    /// restoration of every subscription, and returns when the broker has acknowledged it (L8: a caller that
    /// returned from here is subscribed). It throws ``MQTTError/rejected(operation:reasonCode:reason:)`` when
    /// the broker refuses the filter, and ``MQTTError/shutDown`` when the client stops first.
    public func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) async throws {
        guard mosquitto_sub_topic_check(filter) == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError.invalidConfiguration("'\(filter)' is not a valid topic filter")
        }
        try await subscribePacket([filter], qos: qos, options: options)
    }

    /// The most filters one SUBSCRIBE packet carries in ``subscribe(_:qos:options:)-(String...)``.
    static var filtersPerPacket: Int { 256 }

    /// Subscribes to many filters with one QoS and one set of options: SUBSCRIBE packets of up to 256 filters,
    /// all sent at once (libmosquitto's `mosquitto_subscribe_multiple`), then waits for every SUBACK. With
    /// 100,000 rides a SUBSCRIBE and a wait per vehicle in turn took most of a minute.
    public func subscribe(
        _ filters: [String], qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) async throws {
        for filter in filters where mosquitto_sub_topic_check(filter) != MOSQ_ERR_SUCCESS.rawValue {
            throw MQTTError.invalidConfiguration("'\(filter)' is not a valid topic filter")
        }
        let packets = stride(from: 0, to: filters.count, by: Self.filtersPerPacket).map {
            Array(filters[$0..<min($0 + Self.filtersPerPacket, filters.count)])
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for packet in packets {
                group.addTask { try await self.subscribePacket(packet, qos: qos, options: options) }
            }
            try await group.waitForAll()
        }
    }

    /// One SUBSCRIBE packet with several filters; returns at its SUBACK, or at the restoration that subscribes
    /// its filters again on a later connection.
    private func subscribePacket(_ filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let refusal: MQTTError? = state.withLock { state in
                if state.stopping || state.stopped { return .shutDown }
                var changed: [String] = []
                for filter in filters {
                    if let previous = state.subscriptions[filter], previous.options != options {
                        changed.append(filter)
                    }
                    state.subscriptions[filter] = (qos, options)
                }
                guard state.connected else {
                    // The next CONNACK subscribes these filters again with the rest; its restoration answers.
                    state.awaitingRestore.append((filters, continuation))
                    return nil
                }
                // mosquitto 2.0 keeps the options of a subscription made again (measured: a no-local
                // subscription over an earlier one still sent the client its own publishes), so a filter whose
                // options change is unsubscribed first; the packets leave in order.
                for filter in changed { _ = mosquitto_unsubscribe_v5(handle, nil, filter, nil) }
                var mid: Int32 = 0
                let rc = sendSubscribe(filters, qos: qos, options: options, mid: &mid)
                wake.signal()
                switch rc {
                case MOSQ_ERR_SUCCESS.rawValue:
                    state.waiters[mid] = continuation
                    state.pendingSubscriptions[mid] = filters
                    state.lease?.sent(mid, at: .now)
                    return nil
                case MOSQ_ERR_NO_CONN.rawValue:
                    // The connection is going down under libmosquitto: as when disconnected.
                    state.awaitingRestore.append((filters, continuation))
                    return nil
                default:
                    let what = filters.count == 1 ? filters[0] : "\(filters.count) filters"
                    return Self.libraryError("subscribe \(what)", rc)
                }
            }
            if let refusal { continuation.resume(throwing: refusal) }
        }
    }

    /// One SUBSCRIBE packet for `filters` (libmosquitto's `mosquitto_subscribe_multiple`); its return code.
    func sendSubscribe(
        _ filters: some Collection<String>, qos: MQTTQoS, options: MQTTSubscribeOptions,
        mid: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        let names = filters.map { strdup($0) }
        defer { names.forEach { free($0) } }
        return names.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafeMutablePointer<CChar>?.self, capacity: names.count) {
                mosquitto_subscribe_multiple(
                    handle, mid, Int32(names.count), $0, qos.rawValue, optionBits(options), nil)
            }
        }
    }

    /// Unsubscribes, forgets the filter and waits for UNSUBACK (returns at once while disconnected).
    public func unsubscribe(_ filter: String) async throws {
        try await unsubscribePacket([filter])
    }

    /// Unsubscribes from many filters: UNSUBSCRIBE packets of up to 256 filters, all sent at once, then waits
    /// for every UNSUBACK. A group's bucket loads end with a few thousand unsubscribes; one round trip each
    /// held later subscription changes back for seconds (`make bench-group`).
    public func unsubscribe(_ filters: [String]) async throws {
        let packets = stride(from: 0, to: filters.count, by: Self.filtersPerPacket).map {
            Array(filters[$0..<min($0 + Self.filtersPerPacket, filters.count)])
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for packet in packets { group.addTask { try await self.unsubscribePacket(packet) } }
            try await group.waitForAll()
        }
    }

    /// One UNSUBSCRIBE packet; returns at its UNSUBACK (at once while disconnected).
    private func unsubscribePacket(_ filters: [String]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let rc: Int32 = state.withLock { state in
                for filter in filters { state.subscriptions[filter] = nil }
                guard state.connected else {
                    // A persistent session keeps the subscription on the broker: unsubscribe on the next CONNACK.
                    state.unsubscribeOnConnect.formUnion(filters)
                    return MOSQ_ERR_NO_CONN.rawValue
                }
                var mid: Int32 = 0
                let names = filters.map { strdup($0) }
                defer { names.forEach { free($0) } }
                let rc = names.withUnsafeBufferPointer { buffer in
                    buffer.baseAddress!.withMemoryRebound(
                        to: UnsafeMutablePointer<CChar>?.self, capacity: names.count
                    ) {
                        mosquitto_unsubscribe_multiple(handle, &mid, Int32(names.count), $0, nil)
                    }
                }
                wake.signal()
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    state.waiters[mid] = continuation
                    state.pendingUnsubscribes[mid] = filters
                }
                return rc
            }
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                continuation.resume()
            } else if rc != MOSQ_ERR_SUCCESS.rawValue {
                let what = filters.count == 1 ? filters[0] : "\(filters.count) filters"
                continuation.resume(throwing: Self.libraryError("unsubscribe \(what)", rc))
            }
        }
    }

    /// The filters the client restores after a reconnect.
    package var subscriptions: [String: MQTTQoS] { state.withLock { $0.subscriptions.mapValues(\.qos) } }

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
}
