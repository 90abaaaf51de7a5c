import CoreMetrics
import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain
import WorkerGroup

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideTopics

// MARK: - Connection events: recovery (L5) and republish after reconnect (C4)

extension RideStatusService {
    func consumeEvents() async {
        for await event in transport.events {
            switch event {
            case .connected(let sessionPresent):
                metrics.connects.increment()
                // G5: the nonce names the connection, so that a confirmation never unfences a later one.
                let incarnation = transport.incarnation
                let fenced = transport.isFenced
                switch core.withLock({
                    $0.lifecycle.connected(nonce: "\(incarnation)/\(UUID().uuidString)", fenced: fenced)
                }) {
                case .startRecovery(let nonce):
                    // G5: a recovery holds nothing yet and reads everything anew: its markers may go out.
                    transport.confirmLease(incarnation: incarnation)
                    core.withLock { core in stepGrants(&core) { $0.resume(now: $1) } }
                    await startRecovery(nonce: nonce, sessionPresent: sessionPresent)
                case .confirmLease(let nonce):
                    // G5: after what the session queued while this worker was away (its own will among it, which
                    // makes it rejoin), the marker comes back; until then nothing goes out for the rides.
                    logger.notice(
                        "reconnected after the lease lapsed: confirming before publishing for any ride (G5)",
                        metadata: ["rides.held": "\(core.withLock { $0.engine.activeRideCount })"])
                    core.withLock { $0.confirmingSince = time.now }
                    do {
                        try transport.publish(identity.leaseMarker, Array(nonce.utf8))
                    } catch {
                        logger.error("the lease marker was refused (G5)", metadata: ["error": "\(error)"])
                    }
                case .republishAll:
                    let count = core.withLock { core in
                        core.engine.makeAllDue(now: time.now)
                        planWake(&core)
                        return core.engine.activeRideCount
                    }
                    logger.info(
                        "reconnected: every active ride publishes now, as fast as the broker takes them (C4)",
                        metadata: ["rides": "\(count)"])
                case .none, .restore, .finishRecovery, .handle, .formView, .leaseConfirmed:
                    break
                }
            case .leaseLapsed(let silence):
                metrics.leaseLapses.increment()
                // G5, G6: a worker cut off from the broker gives its grants back, so that they move now.
                core.withLock { core in
                    stepGrants(&core) { $0.suspend(reason: "the broker lease lapsed (G5)", now: $1) }
                }
                logger.warning(
                    "the lease with the broker lapsed: nothing written before goes out, and nothing for the rides until this worker has confirmed it still holds them (G5)",
                    metadata: ["silence": "\(silence)"])
            case .subscriptionsRestored(let incarnation, let refused):
                let quoting = core.withLock { $0.quoter != nil }
                let controls = Set(controlFilters(quoting: quoting))
                let refusedControls = refused.filter(controls.contains)
                if !refused.isEmpty {
                    logger.error(
                        "the broker refused subscriptions the worker restored on reconnecting",
                        metadata: [
                            "filters": "\(refused)", "controls.refused": "\(refusedControls.count)",
                            "incarnation": "\(incarnation)",
                        ])
                }
                core.withLock { core in
                    if let announcing = core.lifecycle.subscriptionsRestored(
                        incarnation: incarnation, controlsRefused: !refusedControls.isEmpty)
                    {
                        announce(incarnation: announcing, core: &core)
                    }
                }
                if !refusedControls.isEmpty {
                    controlSubscriptions.continuation.yield(.restoration(refusedControls, incarnation: incarnation))
                }
            case .disconnected(let reason):
                disconnected()
                logger.warning("broker connection lost; reconnecting", metadata: ["reason": "\(reason)"])
            case .closed:
                disconnected()
                logger.info("disconnected from the broker")
            case .connectFailed(let reason, let retryIn):
                logger.notice("broker not reachable yet", metadata: ["reason": "\(reason)", "retry.in": "\(retryIn)"])
            case .refused(let error):
                logger.critical("broker refused the worker; not retrying", metadata: ["error": "\(error)"])
            case .trouble(let trouble):
                logger.warning("MQTT client: \(trouble)")
            }
        }
    }

    /// The connection ended: not ready, and nothing announced, in one take of the lock that announces (L8).
    private func disconnected() {
        core.withLock { core in
            core.lifecycle.disconnected()
            announced.withLock { $0 = false }
        }
    }

    /// L5, G1: first every retained presence (and release notices from then on), closed by a view marker: the
    /// broker sends retained messages before anything published later. Then ``chooseRead(nonce:core:)``.
    private func startRecovery(nonce: String, sessionPresent: Bool) async {
        logger.info("recovering rides from retained state", metadata: ["session.present": "\(sessionPresent)"])
        do {
            try await transport.subscribe(identity.recoveryMarker, qos: .atLeastOnce, options: .init())
            try await transport.subscribe(settings.topics.presenceFilter, qos: .atLeastOnce, options: .init())
            // E1: the group's priors, before any ride is read, so that new rides start from them.
            try await transport.subscribe(settings.topics.priorsFilter, qos: .atLeastOnce, options: .init())
            // G3: release notices, before this worker's birth makes any owner release buckets to it (they wait
            // in the stash until the first view is formed).
            try await transport.subscribe(settings.topics.releasedFilter, qos: .atLeastOnce, options: .init())
            try transport.publish(
                identity.recoveryMarker, Array(WorkerLifecycle<MQTTMessage>.viewMarker(nonce: nonce).utf8))
        } catch {
            logger.error("recovery subscription failed; retrying on next connection", metadata: ["error": "\(error)"])
        }
    }

    /// L5, G3: the first view is in. Alone, the worker reads every retained ride state and status (it will own
    /// every ride): the recovery of L5, which also brings each ride's location since its last state write. In a
    /// group it reads only the states of earlier releases' layout here; its buckets come by the handover, so a
    /// worker joining does not replay the state of every ride in the fleet. Then the marker with `nonce`.
    /// No local on the statuses: this worker's own statuses after the recovery do not come back before the
    /// unsubscribe takes effect.
    private func chooseRead(nonce: String, core: inout Core) {
        let topics = settings.topics
        let read = core.handover.machine.chooseRead(members: core.group.members)
        if read == .everything {
            subscriptions.subscribe(topics.stateFilter)
            subscriptions.subscribe(topics.statusFilter, options: MQTTSubscribeOptions(noLocal: true))
        } else {
            subscriptions.subscribe(topics.legacyStateFilter)
        }
        subscriptions.publish(identity.recoveryMarker, Array(nonce.utf8))
        logger.info(
            "first view of the group formed (G1)",
            metadata: [
                "members": "\(core.group.members)",
                "reading": "\(read == .everything ? "every ride state (alone)" : "by bucket (in a group)")",
            ])
    }

    private func finishRecovery(stashed stash: [MQTTMessage], core: inout Core) {
        let topics = settings.topics
        // A2: from now on only other clients' writes to ride states arrive (no local, no retained replay): a
        // state deleted or overwritten behind this worker's back is written again at once (C5: unless another
        // worker serving the ride too wrote it under its epoch, at or above this worker's copy: ``Handover``).
        subscriptions.subscribe(
            topics.stateFilter, options: MQTTSubscribeOptions(noLocal: true, retainHandling: .never))
        subscriptions.unsubscribe(identity.recoveryMarker)
        if core.handover.machine.fullRead {
            subscriptions.unsubscribe(topics.statusFilter)
        } else {
            subscriptions.unsubscribe(topics.legacyStateFilter)
        }
        // G3: this worker's own load markers, in order with the loads' subscriptions.
        subscriptions.subscribe(loadMarker)
        // G5: the lease marker, which closes a confirmation after a lapse (the client restores it on reconnecting,
        // ahead of the marker).
        subscriptions.subscribe(identity.leaseMarker)
        // L8: `online` and `/readyz` wait for these SUBACKs: a booking published after `online` is never lost.
        controlSubscriptions.continuation.yield(.recovery(controlFilters(quoting: core.quoter != nil)))
        let now = time.now
        // G1, G3: the first view decides which of the states read are this worker's to serve now.
        let read = core.handover.staged.count
        formFirstView(now: now, core: &core)
        let merged = core.engine.mergeRetainedStatuses()
        core.engine.makeAllDue(now: now)
        logger.info(
            "recovered; rides resumed (L5)",
            metadata: [
                "rides": "\(core.engine.activeRideCount)", "states.read": "\(read)",
                "rides.waiting": "\(core.handover.staged.count)", "members": "\(core.group.members)",
                "statuses.read": "\(merged)",
                "queued.messages": "\(stash.count)",
                "fixes.skipped": "\(core.lifecycle.fixesSkipped)",
            ])
        if core.lifecycle.stashOverflow > 0 {
            logger.error(
                "control messages beyond the recovery stash were dropped (L6)",
                metadata: ["dropped": "\(core.lifecycle.stashOverflow)", "limit": "\(core.lifecycle.stashLimit)"])
        }
        for message in stash { handle(message, parsed: settings.topics.parse(message.topic), now: now, core: &core) }
        planWake(&core)
    }

    /// G5: the lease marker came back after a lapse: everything the session queued while this worker was away has
    /// been read (a will of its own made it rejoin). What it still holds is its own: the client publishes again
    /// (on the connection the marker was sent on, else nothing changes), the rides ended lately are cleared again
    /// (a clear in flight at the lapse was dropped), every ride publishes at once (C4), and `online` goes out if
    /// due (L8).
    func confirmLease(nonce: String, announcing: UInt64?, now: Date, core: inout Core) {
        core.confirmingSince = nil
        guard let incarnation = UInt64(nonce.prefix { $0 != "/" }) else { return }
        transport.confirmLease(incarnation: incarnation)
        guard !transport.isFenced else { return }
        stepGrants(&core) { $0.resume(now: $1) }
        var cleared = 0
        for (ride, epoch) in executor.recentClears.withLock({ $0.since(now) }) where core.engine.ride(ride) == nil {
            executor.clear(ride, epoch: epoch)
            cleared += 1
        }
        core.engine.makeAllDue(now: now)
        planWake(&core)
        logger.notice(
            "lease confirmed: every held ride publishes now (G5, C4)",
            metadata: ["rides": "\(core.engine.activeRideCount)", "rides.cleared.again": "\(cleared)"])
        if let announcing { announce(incarnation: announcing, core: &core) }
    }

    /// G5: a lease marker that never comes back (the broker refuses this worker its lease topic: an ACL of an
    /// earlier release) would keep the worker fenced for good. Past ``leaseConfirmationTimeout`` it rejoins as a
    /// newcomer, holding nothing another worker may have taken, and goes on, with an error naming the cause.
    func leaseTick(now: Date, core: inout Core) {
        guard core.lifecycle.state == .confirming, let since = core.confirmingSince,
            now.timeIntervalSince(since) > Self.leaseConfirmationTimeout
        else { return }
        logger.error(
            "the lease marker did not come back: rejoining as a newcomer (G5); does the broker grant this worker ridestatus/workers/+/lease? (scripts/broker_roles.py)",
            metadata: ["topic": "\(identity.leaseMarker)", "waited": "\(Int(now.timeIntervalSince(since))) s"])
        rejoin(after: 0, now: now, core: &core)
        switch core.lifecycle.confirmationTimedOut() {
        case .leaseConfirmed(let nonce, let announcing):
            confirmLease(nonce: nonce, announcing: announcing, now: now, core: &core)
        default:
            break
        }
    }

    /// G5: how long a confirmation may wait for its marker.
    static var leaseConfirmationTimeout: TimeInterval { 15 }

    /// L8, G1: the birth of the connection of `incarnation`, once the lifecycle says every control and request
    /// subscription is acknowledged on it; ``heartbeat(now:core:)`` repeats it. The payload is built now, with
    /// that connection's incarnation.
    func announce(incarnation: UInt64, core: inout Core) {
        // A drop the event stream has not brought yet: the client would hold this birth and send it at the next
        // CONNACK, before that connection's subscriptions are back. The next restoration announces instead.
        guard transport.isConnected, transport.incarnation == incarnation else { return }
        let now = time.now
        core.onlineSince = now
        core.lastHeartbeat = now
        do {
            try transport.publish(
                identity.presenceTopic, identity.presence(online: true, incarnation: incarnation, now: now),
                retain: true)
        } catch {
            logger.error("the presence was refused; not online (L8)", metadata: ["error": "\(error)"])
            return
        }
        announced.withLock { $0 = true }
        // G5, G6: the grants that ended since the last birth, announced again on this connection.
        if let ended = core.authority?.endedSinceBirth, !ended.isEmpty {
            core.authority?.endedSinceBirth = [:]
            try? transport.publish(
                settings.topics.released(worker: identity.id),
                Self.releaseNotice(buckets: [], incarnation: incarnation, grants: ended))
        }
        logger.info(
            "online: the broker acknowledged every control and request subscription (L8)",
            metadata: ["incarnation": "\(incarnation)", "rides": "\(core.engine.activeRideCount)"])
    }

    // MARK: - Messages

    func consumeMessages() async {
        for await message in transport.messages {
            let received = time.instant
            let now = time.now
            if message.topic == settings.topics.rideOptionsRequest,
                case .some(let quoter) = core.withLock({ $0.lifecycle.recovered ? Optional($0.quoter) : nil })
            {
                // 3.4: priced outside the lock, so a burst of quotes never holds back a fix or a phase change (C2).
                let refusals = responder.answer(message, quoter: quoter, now: now)
                if !refusals.isEmpty { core.withLock { reject(refusals, message, now: now, core: &$0) } }
                continue
            }
            let parsed = settings.topics.parse(message.topic)
            if case .priors(let key) = parsed {
                // E1: learning, not a ride's input: read in every state of the lifecycle, recovery included.
                core.withLock { receivePriors(message, key: key, now: now, core: &$0) }
                continue
            }
            let kind: WorkerLifecycle<MQTTMessage>.Kind
            switch parsed {
            case .state: kind = .rideState
            case .status: kind = .rideStatus
            case .presence: kind = .presence
            case .position: kind = .fix
            case .unknown where message.topic == identity.recoveryMarker:
                kind = .recoveryMarker(String(decoding: message.payload, as: UTF8.self))
            case .unknown where message.topic == identity.leaseMarker:
                kind = .leaseMarker(String(decoding: message.payload, as: UTF8.self))
            default: kind = .other
            }
            let published = core.withLock { core -> Bool in
                // G3: a worker leaving a group acts on nothing more: the members staying keep every control
                // message for rides they do not serve and replay it when the ride's bucket reaches them. (A
                // worker alone still handles what comes until it disconnects: nobody else would, L6.)
                if core.lifecycle.state == .draining, core.group.members.count > 1 { return false }
                switch core.lifecycle.received(kind, message) {
                case .handle(let message):
                    let published = handle(message, parsed: parsed, now: now, core: &core)
                    planWake(&core)
                    return published
                case .restore(let message):
                    switch parsed {
                    case .state(let ride, let legacy):
                        stageRecovered(message, ride: ride, legacy: legacy, now: now, core: &core)
                    case .status(let ride): readBack(message, ride: ride, now: now, core: &core)
                    case .presence(let worker): receivePresence(message, worker: worker, now: now, core: &core)
                    default: break
                    }
                case .finishRecovery(let stashed):
                    finishRecovery(stashed: stashed, core: &core)
                case .formView(let nonce):
                    chooseRead(nonce: nonce, core: &core)
                case .leaseConfirmed(let nonce, let announcing):
                    confirmLease(nonce: nonce, announcing: announcing, now: now, core: &core)
                case .none, .startRecovery, .republishAll, .confirmLease:
                    break
                }
                return false
            }
            if published { metrics.inputToStatus.record(time.instant - received) }
        }
    }

    /// L5, A2: one retained ride status, kept until every state is in; what fails the checks is logged (naming
    /// A2), dead-lettered and left retained.
    private func readBack(_ message: MQTTMessage, ride: String, now: Date, core: inout Core) {
        let actions = core.engine.noteRetainedStatus(
            topic: message.topic, ride: ride, payload: message.payload, now: now)
        for case .deadLetter(let letter) in actions {
            logger.error(
                "retained ride status refused (A2); the ride resumes from its state alone",
                metadata: [
                    "topic": "\(message.topic)", "reason": "\(letter.reason.rawValue)", "detail": "\(letter.detail)",
                ])
        }
        executor.execute(actions, engine: &core.engine, now: now)
    }

    /// G3: keeps a control message for a ride not served here, in case its bucket comes here; one dropped early
    /// because the keep is full is counted and said (the first, then every thousandth), never silently.
    func keepForHandover(_ message: MQTTMessage, bucket: Int, now: Date, core: inout Core) {
        let before = core.handover.recent.evictedEarly
        core.handover.recent.append(
            message, bucket: bucket, now: now.timeIntervalSince1970, bytes: message.payload.count,
            mayArrive: mayArrive(bucket, core: core))
        let evicted = core.handover.recent.evictedEarly
        guard evicted > before else { return }
        metrics.controlsEvicted.increment(by: evicted - before)
        if before == 0 || evicted / 1000 > before / 1000 {
            logger.warning(
                "control messages for rides not served here dropped before their time: the handover's keep is full (G3); lost unless another worker served them",
                metadata: [
                    "dropped": "\(evicted)", "kept": "\(core.handover.recent.capacity)",
                    "window": "\(core.handover.recent.window) s",
                    "kept.arriving": "\(core.handover.recent.arrivingCapacity)",
                    "kept.arriving.bytes": "\(core.handover.recent.arrivingByteLimit)",
                ])
        }
    }

    /// G3, G6: whether a bucket not served here may yet be: its load or (with an authority) its grant is under way,
    /// or the worker does not know the group yet. Its control messages are then kept until it is served.
    func mayArrive(_ bucket: Int, core: borrowing Core) -> Bool {
        mayArrive(bucket, machine: core.handover.machine, grants: core.authority?.grants)
    }

    func mayArrive(_ bucket: Int, machine: borrowing Handover<StateVersion>, grants: BucketGrants?) -> Bool {
        if machine.buckets.isArriving(bucket) { return true }
        // A ride fenced off in a bucket served here: its bucket is not coming, it is here.
        if machine.buckets.serving.contains(bucket) { return false }
        guard settings.authority == .etcd else { return !machine.viewFormed }
        // Before the members were first read any bucket may come here; after a lapse (members forgotten, nothing
        // wanted) the others serve them.
        guard let grants, grants.hasReadMembers else { return true }
        return grants.wanted.contains(bucket)
    }

    /// Handles one message, its topic parsed once by the caller; returns whether it caused a status publish.
    @discardableResult
    func handle(_ message: MQTTMessage, parsed: RideTopics.Parsed, now: Date, core: inout Core) -> Bool {
        switch parsed {
        case .control(_, let ride) where !servesNow(ride, core: core):
            // G1: another worker's ride, or one on its way here (or fenced off here, its bucket maybe coming
            // back): kept a while in case its bucket arrives (G3).
            keepForHandover(message, bucket: Ownership.bucket(of: ride), now: now, core: &core)
        case .vehicleEvent(let vehicle):
            // A3: the topic names the vehicle, the payload the ride: routed by the ride as its controls are. One
            // whose ride does not read is refused once in a group, by the worker serving the vehicle id's bucket.
            let ride = try? decoder.vehicleEventRide(message.payload)
            guard ride.map({ servesNow($0, core: core) }) ?? core.handover.machine.serves(ride: vehicle) else {
                keepForHandover(message, bucket: Ownership.bucket(of: ride ?? vehicle), now: now, core: &core)
                return false
            }
            return executor.execute(
                core.engine.receive(parsed, topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
        case .statusRequest(let ride) where !core.handover.machine.serves(ride: ride):
            break  // G1: its owner answers (L7).
        case .statusRequest(let ride):
            if let refused = responder.reply(to: message, payload: core.engine.statusReply(for: ride)) {
                reject([refused], message, now: now, core: &core)
            }
        case .rideOptionsRequest:
            // Only messages stashed during recovery come here; later ones are answered outside the lock.
            reject(responder.answer(message, quoter: core.quoter, now: now), message, now: now, core: &core)
        case .availability(let vehicle):
            guard core.quoter != nil else { return false }
            do throws(Rejection) {
                try core.quoter!.receiveAvailability(
                    vehicleId: vehicle, payload: message.payload, decoder: decoder, now: now)
            } catch {
                reject([error], message, now: now, core: &core)
            }
        case .presence(let worker):
            receivePresence(message, worker: worker, now: now, core: &core)
        case .released(let worker):
            receiveRelease(message, worker: worker, now: now, core: &core)
        case .unknown where message.topic == loadMarker:
            loadFinished(message, now: now, core: &core)
        case .status(let ride):
            takeOverStatus(message, ride: ride, now: now, core: &core)
        case .state(let ride, let legacy):
            // Another client's write (no local): of a ride held here, a new owner's (G4), another taker's under its
            // epoch (C5) or one to undo (A2), once the worker watches its rides' states.
            if !legacy, core.engine.ride(ride) != nil, !core.watchingStates { return false }
            stateSeen(message, ride: ride, legacy: legacy, now: now, core: &core)
        default:
            return executor.execute(
                core.engine.receive(parsed, topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
        }
        return false
    }

    /// G1, G3: whether this worker acts on `ride`'s control messages now: it serves the ride's bucket, and the
    /// ride is not fenced off here (unless held again).
    private func servesNow(_ ride: String, core: borrowing Core) -> Bool {
        core.handover.machine.serves(ride: ride)
            && !(core.handover.machine.isFencedAway(ride: ride) && core.engine.ride(ride) == nil)
    }

    /// 3.5: each refusal becomes a dead letter naming its rule.
    private func reject(_ refusals: [Rejection], _ message: MQTTMessage, now: Date, core: inout Core) {
        for refused in refusals {
            executor.execute(
                core.engine.reject(refused, topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
        }
    }
}
