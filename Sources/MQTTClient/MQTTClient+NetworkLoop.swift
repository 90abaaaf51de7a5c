import CMosquitto
import Foundation
import Locking
import Logging

// MARK: - The network thread

extension MQTTClient {
    /// Runs on the client's own thread: connect, loop over bursts, reconnect with capped exponential backoff.
    func runNetworkLoop() {
        var delay = configuration.initialReconnectDelay
        var socketOpen = false
        var disconnectSent: ContinuousClock.Instant?
        while true {
            let turn = beginTurn()
            if turn.refused || (turn.stopping && !socketOpen) { break }
            if turn.stopping { endConnection(sentAt: &disconnectSent) }
            if turn.connected { delay = configuration.initialReconnectDelay }
            if !socketOpen {
                let rc = connectOnce()
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    let reason = Self.describe(rc)
                    state.withLock {
                        $0.lastError = reason
                        $0.endpointIndex += 1
                    }
                    logger.debug("MQTT connect failed", metadata: ["reason": "\(reason)", "retry.in": "\(delay)"])
                    eventContinuation.yield(.connectFailed(reason: reason, retryIn: delay))
                    sleep(for: delay)
                    delay = min(delay * 2, configuration.maximumReconnectDelay)
                    continue
                }
                socketOpen = true
                // Bytes a closed connection left unread must never reach the new one (its socket may have the
                // same number); with TLS, OpenSSL reads the socket and nothing is buffered.
                readBuffer.reset(socket: configuration.tls == nil ? mosquitto_socket(handle) : -1)
            }
            let rc = loopOverBurst()
            if rc == MOSQ_ERR_SUCCESS.rawValue { continue }
            socketOpen = false
            let (wasConnected, lost) = state.withLock { state in
                defer {
                    state.connected = false
                    state.lostConnection = false
                    state.endpointIndex += 1
                    state.resend.disconnected()
                    state.lastError = Self.describe(rc)
                    noteRoom(state)
                }
                return (state.connected, state.lostConnection)
            }
            answerLostSubscriptionChanges()
            if (wasConnected || lost) && !state.withLock({ $0.stopping }) {
                logger.debug("MQTT connection lost", metadata: ["reason": "\(Self.describe(rc))"])
                // G5: the broker may have seen the connection end and fired the will: a lost connection is a
                // lapse, and nothing held under it goes out on the next one. (libmosquitto's callback already
                // told the application when it saw the loss; otherwise the fence does.)
                // G6: the same for a client that gates publishes: libmosquitto would resend gated ones.
                if configuration.lease != nil || state.withLock({ $0.gate != nil }) {
                    fence(now: .now, announce: wasConnected)
                }
            }
            if state.withLock({ $0.stopping || $0.refusal != nil }) { break }
            sleep(for: delay)
            delay = min(delay * 2, configuration.maximumReconnectDelay)
        }
        let exits = state.withLock { state in
            state.stopped = true
            state.connected = false
            defer { state.threadExit.removeAll() }
            return state.threadExit
        }
        let error = state.withLock { $0.refusal } ?? .shutDown
        failConnectWaiters(with: error)
        // No connection will restore the subscriptions these wait for.
        let unrestored = state.withLock { state in
            defer { state.awaitingRestore = [] }
            return state.awaitingRestore
        }
        for entry in unrestored { entry.continuation.resume(throwing: error) }
        closeOutbox(with: error)
        // Nothing will be sent any more (refused, or shut down): held publishes fail with the reason.
        for message in state.withLock({ $0.resend.drain() }) { message.waiter?.resume(throwing: error) }
        for exit in exits { exit.resume() }
    }

    /// A stop with the connection open: DISCONNECT is sent from this thread, the one that opens connections,
    /// so a stop that comes while a connect is under way is not missed. (`disconnect()` used to send it from the
    /// caller's thread: when that found no socket yet, the connect then under way opened one and the thread
    /// looped on it for good; a clean-clone CI run hung that way in an end-to-end test.) libmosquitto closes the
    /// socket once DISCONNECT is written; a broker that takes no bytes gets its socket shut down after
    /// ``disconnectGrace``.
    private func endConnection(sentAt: inout ContinuousClock.Instant?) {
        guard let sent = sentAt else {
            sentAt = .now
            _ = mosquitto_disconnect_v5(handle, 0, nil)
            return
        }
        let socket = mosquitto_socket(handle)
        if socket >= 0 && ContinuousClock.now - sent > Self.disconnectGrace { _ = shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// How long a stop waits for DISCONNECT to be written before it shuts the socket down.
    static let disconnectGrace: Duration = .seconds(2)

    /// One blocking TCP (and TLS) connect that sends CONNECT with the session expiry property, and a will made
    /// for this connection's incarnation when the configuration asks for one.
    private func connectOnce() -> Int32 {
        let endpoints = configuration.endpoints
        let (incarnation, endpoint, beforeConnect) = state.withLock { state in
            let now = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
            state.attemptIncarnation = max(state.attemptIncarnation + 1, now)
            return (state.attemptIncarnation, endpoints[state.endpointIndex % endpoints.count], state.beforeConnect)
        }
        beforeConnect?()
        if endpoints.count > 1 {
            logger.debug("MQTT connecting", metadata: ["host": "\(endpoint.host)", "port": "\(endpoint.port)"])
        }
        if let will = configuration.will, let makePayload = will.payloadForIncarnation {
            let payload = makePayload(incarnation)
            let rc = payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    handle, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue, will.retain, nil)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                logger.debug("will not set for this connection", metadata: ["reason": "\(Self.describe(rc))"])
                eventContinuation.yield(.trouble(.willNotSet(reason: Self.describe(rc))))
            }
        }
        var properties: OpaquePointer? = nil
        defer { mosquitto_property_free_all(&properties) }
        if configuration.protocolVersion == .v5 && !configuration.cleanStart {
            _ = mosquitto_property_add_int32(
                &properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), configuration.sessionExpiry)
        }
        if configuration.protocolVersion == .v5 && configuration.receiveMaximum > 0 {
            _ = mosquitto_property_add_int16(
                &properties, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), configuration.receiveMaximum)
        }
        let rc = mosquitto_connect_bind_v5(
            handle, endpoint.host, Int32(endpoint.port), Int32(configuration.keepAlive), nil, properties)
        // G5: CONNECT is queued now, after the TCP connect and the TLS handshake: the lease runs from here (a
        // lower bound of when the broker received it), not from before a slow handshake.
        if rc == MOSQ_ERR_SUCCESS.rawValue { state.withLock { $0.lease?.connecting(at: .now) } }
        return rc
    }

    /// What the start of a turn needs from the client's state, read under one take of its lock: at the
    /// 100,000-ride cadence of `make bench-scale`, when the publishing thread still took that lock for every
    /// status, the four takes a turn used to make were a fifth of the worker's context switches (`perf record -e
    /// sched:sched_switch`). In the same take it hands the outbox to libmosquitto, fails connect waiters past
    /// their deadline, and releases held publishes when a reconnect's resends stay unacknowledged for
    /// `orderedResendTimeout` (the order is then at risk, but holding every later publish for ever would stop
    /// the worker).
    private func beginTurn() -> (stopping: Bool, refused: Bool, connected: Bool) {
        let now = ContinuousClock.now
        var expired: [CheckedContinuation<Void, any Error>] = []
        var lastError = ""
        var outstanding: Int?
        let flags = state.withLock { state in
            if state.connectWaiters.contains(where: { $0.deadline <= now }) {
                expired = state.connectWaiters.filter { $0.deadline <= now }.map(\.continuation)
                state.connectWaiters.removeAll { $0.deadline <= now }
                lastError = state.lastError
            }
            // Only a reconnect's resends (the barrier) have a deadline: holding for a full send window, with the
            // barrier long empty, is the normal course and reported nothing. (It reported "0 resends not
            // acknowledged" on every network turn while the window was full: 3,648 warnings in one worker's log
            // over two joins of `ride-bench group`.)
            if state.connected, state.resend.isHolding, state.resend.outstandingResends > 0,
                let deadline = state.resendDeadline, now >= deadline
            {
                outstanding = state.resend.outstandingResends
                releaseHeld(state: &state)
            }
            drainOutbox(state: &state, onNetworkThread: true)
            return (state.stopping, state.refusal != nil, state.connected)
        }
        for waiter in expired { waiter.resume(throwing: MQTTError.connectTimeout(lastError: lastError)) }
        if let outstanding {
            logger.debug(
                "resends after reconnecting not acknowledged in time; held publishes sent anyway",
                metadata: ["unacknowledged": "\(outstanding)", "timeout": "\(configuration.orderedResendTimeout)"])
            eventContinuation.yield(
                .trouble(.resendsUnacknowledged(count: outstanding, timeout: configuration.orderedResendTimeout)))
        }
        return flags
    }

    /// One turn of the network thread: waits (at most ``pollMilliseconds``) until the connection has bytes to
    /// read, can take bytes that wait to be written, or another thread queued a packet (``NetworkWake``); then
    /// reads while the socket has unread bytes (at most ``burstLoops`` times), writes what is queued and checks
    /// the keepalive. This is libmosquitto's documented external loop (`mosquitto_loop_read`, `_write`, `_misc`
    /// on the client's socket) in place of `mosquitto_loop`, whose internal wake-up kept it looping once per
    /// packet (see ``NetworkWake``).
    ///
    /// The socket is corked meanwhile: libmosquitto writes each acknowledgement with a system call of its own,
    /// and with `TCP_NODELAY` (C2) each became a TCP segment of its own. Corked, one burst's acknowledgements and
    /// publishes leave in one segment when the burst ends, and the consumer is woken once for the burst.
    /// Measured on the drain of `make bench-scale`: the network thread spent 29 % of its time sending 4-byte
    /// PUBACKs one segment each.
    private func loopOverBurst() -> Int32 {
        let socket = mosquitto_socket(handle)
        guard socket >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        // Reading `want_write` outside libmosquitto's lock can miss a packet another thread queues meanwhile;
        // that thread then signals the wake-up, which the poll watches too.
        var events = [
            pollfd(fd: socket, events: Int16(POLLIN) | (mosquitto_want_write(handle) ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0),
        ]
        // Bytes already read into the buffer are not in the socket any more: then the poll does not wait.
        let buffered = readBuffer.pendingBytes > 0
        let ready = poll(&events, wake.readEnd >= 0 ? 2 : 1, buffered ? 0 : Self.pollMilliseconds)
        if ready < 0 && errno != EINTR { return MOSQ_ERR_ERRNO.rawValue }
        // G5: a pause (or a stall) may have outlasted the lease while this thread waited: before anything is read
        // or written, and so before libmosquitto writes what it queued.
        // One take of the lock a turn: the expiry read here only grows with acknowledgements, so the checks below
        // compare the clock with it unlocked (the cadence at 100,000 rides counts every take: see beginTurn).
        guard var leaseExpiry = checkLease() else { return MOSQ_ERR_NO_CONN.rawValue }
        func leaseHolds() -> Bool {
            if ContinuousClock.now < leaseExpiry { return true }
            // The lease, or a publish gate (G6), ends: checked again, which fences the connection if it must.
            guard let next = checkLease() else { return false }
            leaseExpiry = next
            return true
        }
        // Only this thread closes the socket, so an invalid one means libmosquitto lost it: connect again.
        if events[0].revents & Int16(POLLNVAL) != 0 { return MOSQ_ERR_NO_CONN.rawValue }
        if events[1].revents != 0 {
            wake.consume()
            // After the wake-up is consumed: a publish queued from now on signals again.
            if outbox.withLock({ $0.count > 0 }) { state.withLock { drainOutbox(state: &$0, onNetworkThread: true) } }
        }
        // Linux: the burst's packets leave in as few segments as fit (TCP_CORK); elsewhere as they are written.
        #if os(Linux)
            var on: Int32 = 1
            var off: Int32 = 0
            setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &on, socklen_t(MemoryLayout<Int32>.size))
        #endif
        defer {
            #if os(Linux)
                // A failed loop closes the socket (its number may already be another file's): uncork only the same.
                if mosquitto_socket(handle) == socket {
                    setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &off, socklen_t(MemoryLayout<Int32>.size))
                }
            #endif
            flushAcknowledgements()
            buffer.endOfBurst()
        }
        // libmosquitto closes the socket on an error or after DISCONNECT: from then on, nothing more this turn.
        func goesOn(_ rc: Int32) -> Bool { rc == MOSQ_ERR_SUCCESS.rawValue && mosquitto_socket(handle) == socket }
        var rc = MOSQ_ERR_SUCCESS.rawValue
        if buffered || events[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            var loops = 0
            repeat {
                rc = readBuffer.reading { mosquitto_loop_read(handle, 1) }
                flushAcknowledgements()
                loops += 1
                // Acknowledgements leave as they are made, so the broker's window (Receive Maximum) stays open.
                if goesOn(rc) { rc = leaseHolds() ? mosquitto_loop_write(handle, 1) : MOSQ_ERR_NO_CONN.rawValue }
            } while goesOn(rc) && loops < Self.burstLoops && socketHasPendingBytes()
        }
        // What other threads queued, and what a full socket held back; nothing queued costs no system call.
        if goesOn(rc) { rc = leaseHolds() ? mosquitto_loop_write(handle, 1) : MOSQ_ERR_NO_CONN.rawValue }
        if goesOn(rc) { rc = mosquitto_loop_misc(handle) }
        return rc
    }

    // MARK: - The lease (G5)

    /// G5, once a turn, before anything is read or written: when the lease ran out while connected, fences the
    /// connection (``fence(now:announce:)``) and returns nil; else sends an empty QoS 1 publish to the lease topic
    /// when no acknowledged packet went out for half a keepalive, and returns when the lease ends (far ahead
    /// without a lease, or while not connected). The window that remains: a pause after a check and before the
    /// `write` it guards.
    ///
    /// G6: the same check, once after a publish gate's time is up or the gate changed (``PublishGate``), resets
    /// the connection if a gated publish in flight is no longer admitted (the broker may not have read it yet).
    /// The expiry returned is then the gate's end, if sooner.
    private func checkLease() -> ContinuousClock.Instant? {
        let unbounded = ContinuousClock.now.advanced(by: .seconds(86_400))
        let lease = configuration.lease
        let now = ContinuousClock.now
        var gateReset = false
        let expiry = state.withLock { state -> ContinuousClock.Instant? in
            var until = unbounded
            if var gate = state.gate {
                let closed = now >= gate.until
                if closed ? !gate.closeChecked : !gate.checked {
                    // Once a change: the in-flight publishes are scanned only when the gate was set or closed.
                    gate.checked = true
                    gate.closeChecked = closed
                    state.gate = gate
                    if state.gatedInFlight.values.contains(where: { !PublishGate.admits($0, gate: gate, now: now) }) {
                        gateReset = true
                        return nil
                    }
                }
                if !closed { until = gate.until }
            }
            guard let lease, state.connected, let held = state.lease else { return until }
            if held.hasLapsed(at: now) { return nil }
            if held.pingDue(at: now), !state.resend.isHolding {
                try? publishNow(
                    topic: lease.topic, payload: UnsafeRawBufferPointer(start: nil, count: 0), qos: .atLeastOnce,
                    retain: false, properties: MQTTProperties(), waiter: nil, state: &state)
            }
            return min(until, held.expiry ?? unbounded)
        }
        if expiry == nil { fence(now: now, announce: true, abort: gateReset) }
        return expiry
    }

    /// G5: the lease lapsed, or the connection was lost. The connection closes without another byte written
    /// (`mosquitto_reinitialise` closes the socket and forgets libmosquitto's queued and in-flight messages, so
    /// no reconnect resends them), every publish the client held is dropped and its waiter told
    /// ``MQTTError/leaseLapsed``, and until ``confirmLease()`` publishes but to the lease's passing topics are
    /// dropped. Network thread only (libmosquitto's state is rebuilt under the client's lock, which every other
    /// caller of libmosquitto takes).
    /// - Parameters:
    ///   - announce: whether to report the connection's end too (libmosquitto's callback did not).
    ///   - abort: G6: a publish gate closed with a gated publish unacknowledged: the socket is reset (`SO_LINGER`
    ///     0), so the kernel discards what it has not delivered, rather than sending it after the gate.
    func fence(now: ContinuousClock.Instant, announce: Bool, abort: Bool = false) {
        // Once per connection: fenced, the lease has no base until the next CONNACK.
        if state.withLock({ $0.fenced && $0.lease?.base == nil && !$0.connected }) { return }
        var dropped: [CheckedContinuation<Void, any Error>] = []
        var batch = Outbox.Batch()
        outbox.withLock { $0.take(swappingWith: &batch) }
        let (silence, unusable) = state.withLock { state -> (Duration, MQTTError?) in
            let silence = state.lease?.base.map { now - $0 } ?? .zero
            var unusable: MQTTError?
            let socket = mosquitto_socket(handle)
            if abort, socket >= 0 {
                var reset = linger(l_onoff: 1, l_linger: 0)
                setsockopt(socket, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
            }
            let rc = mosquitto_reinitialise(
                handle, configuration.clientID, configuration.cleanStart, Unmanaged.passUnretained(self).toOpaque())
            do throws(MQTTError) {
                try check(rc, "mosquitto_reinitialise")
                try configure()
            } catch {
                // Never reconnect half configured (without TLS, say): the client stops, as on a refusal.
                unusable = error
                state.refusal = error
            }
            installCallbacks()
            for mid in state.inFlightQoS1 {
                if let waiter = state.waiters.removeValue(forKey: mid) { dropped.append(waiter) }
            }
            let held = state.resend.drain()
            dropped += held.compactMap(\.waiter)
            dropped += batch.entries.compactMap(\.waiter)
            state.fencedDrops += state.inFlightQoS1.count + held.count + batch.entries.count
            state.inFlightQoS1 = []
            state.gatedInFlight = [:]
            state.connected = false
            state.fenced = true
            state.lease?.fenced()
            noteRoom(state)
            return (silence, unusable)
        }
        readBuffer.reset(socket: -1)
        for waiter in dropped { waiter.resume(throwing: MQTTError.leaseLapsed) }
        logger.debug(
            "MQTT lease lapsed: connection closed, held publishes dropped",
            metadata: ["silence": "\(silence)", "reset": "\(abort)"])
        eventContinuation.yield(.leaseLapsed(silence: silence))
        if announce {
            eventContinuation.yield(
                .disconnected(
                    reason: abort
                        ? "a publish gate closed with publishes under it unacknowledged: connection reset (G6)"
                        : "the lease with the broker lapsed (G5)"))
        }
        if let unusable { eventContinuation.yield(.refused(unusable)) }
    }

    /// Loops of one burst, at most: about two messages each, below the broker's window (Receive Maximum).
    static let burstLoops = 16

    /// The longest the network thread waits for the connection or a wake-up: the keepalive is checked, and a
    /// shutdown or a held publish's deadline noticed, at least this often.
    static let pollMilliseconds: Int32 = 100

    /// Whether bytes wait unread in the read buffer or on the socket (TLS may hold more inside OpenSSL: then
    /// this says no, and the consumer is woken early, never late).
    private func socketHasPendingBytes() -> Bool {
        if readBuffer.pendingBytes > 0 { return true }
        let socket = mosquitto_socket(handle)
        guard socket >= 0 else { return false }
        var pending: Int32 = 0
        return ioctl(socket, UInt(FIONREAD), &pending) == 0 && pending > 0
    }

    /// Sleeps in short slices so that a shutdown is not held up by a long backoff.
    private func sleep(for duration: Duration) {
        let deadline = ContinuousClock.now.advanced(by: duration)
        while ContinuousClock.now < deadline {
            if beginTurn().stopping { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    func failConnectWaiters(with error: MQTTError) {
        let waiters = state.withLock { state in
            defer { state.connectWaiters.removeAll() }
            return state.connectWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// libmosquitto's text for a return code; for `MOSQ_ERR_ERRNO` the system's text for `errno`.
    static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue {
            return String(cString: strerror(errno))
        }
        return String(cString: mosquitto_strerror(rc))
    }
}
