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

    func send(
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
            if !state.resend.isHolding, state.inFlightQoS1.count >= configuration.maxInFlight {
                // The window is full (a slow or frozen broker): wait here, coalesced, rather than in libmosquitto.
                state.resend.holdForWindow()
            }
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
        let list =
            configuration.protocolVersion == .v5 ? try state.encodedProperties.list(for: message.properties) : nil
        var mid: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            SocketReadBuffer.queueing {
                mosquitto_publish_v5(
                    handle, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos.rawValue,
                    message.retain, list)
            }
        }
        wake.signal()
        // With QoS 1 a message that could not be written now stays queued (NO_CONN) and is sent on reconnect.
        let queued = rc == MOSQ_ERR_SUCCESS.rawValue || (message.qos == .atLeastOnce && rc == MOSQ_ERR_NO_CONN.rawValue)
        if queued && message.qos == .atLeastOnce {
            state.inFlightQoS1.insert(mid)
            if let waiter = message.waiter { state.waiters[mid] = waiter }
        }
        try check(queued ? MOSQ_ERR_SUCCESS.rawValue : rc, "publish to \(message.topic)")
        return mid
    }

    /// Sends held-back messages in the order they were published, once ``OrderedResend`` allows, as many as
    /// the window of unacknowledged messages has room for; acknowledgements release the rest. Call with
    /// `state` locked, on the network thread.
    func releaseHeld(state: inout State) {
        let room = max(0, configuration.maxInFlight - state.inFlightQoS1.count)
        for message in state.resend.release(room: room) {
            do {
                _ = try publishNow(message, state: &state)
            } catch {
                logger.error("held publish failed", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
                message.waiter?.resume(throwing: error)
            }
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

    /// Subscribes and waits for SUBACK. The filter is remembered and subscribed again after every reconnect;
    /// while disconnected it returns at once and the subscription is made on the next CONNACK.
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
    /// 100,000 rides a SUBSCRIBE and a wait per vehicle in turn took most of a minute (issue 12).
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

    /// One SUBSCRIBE packet with several filters; returns at its SUBACK (at once while disconnected).
    private func subscribePacket(_ filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let rc: Int32 = state.withLock { state in
                var changed: [String] = []
                for filter in filters {
                    if let previous = state.subscriptions[filter], previous.options != options {
                        changed.append(filter)
                    }
                    state.subscriptions[filter] = (qos, options)
                }
                guard state.connected else { return MOSQ_ERR_NO_CONN.rawValue }
                // mosquitto 2.0 keeps the options of a subscription made again (measured: a no-local
                // subscription over an earlier one still sent the client its own publishes), so a filter whose
                // options change is unsubscribed first; the packets leave in order.
                for filter in changed { _ = mosquitto_unsubscribe_v5(handle, nil, filter, nil) }
                var mid: Int32 = 0
                let rc = sendSubscribe(filters, qos: qos, options: options, mid: &mid)
                wake.signal()
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    state.waiters[mid] = continuation
                    state.pendingSubscriptions[mid] = filters.first ?? ""
                }
                return rc
            }
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                continuation.resume()
            } else if rc != MOSQ_ERR_SUCCESS.rawValue {
                let what = filters.count == 1 ? filters[0] : "\(filters.count) filters"
                continuation.resume(throwing: Self.libraryError("subscribe \(what)", rc))
            }
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
