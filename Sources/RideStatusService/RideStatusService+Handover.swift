import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain
import RideStatusKit
import WorkerGroup

// MARK: - Handover (G3, G4): the service carries out what the pure `Handover` machine decides

extension RideStatusService {
    /// Carries out the machine's actions, in order. `seen`: the message of the event, for the actions that keep
    /// or refuse it.
    func carryOut(_ actions: [HandoverAction], seen: Incoming? = nil, now: Date, core: inout Core) {
        // The numbers reserved for the ride just fenced, kept with its fenced copy (``HandoverState/fencedCeilings``);
        // and those of the rides unfenced in this batch, for a serve that follows (a resume unfences its rides
        // just before it serves them; any other unfence forgets them).
        var fencedCeiling: (ride: String, floor: SequenceFloor)?
        var unfencedCeilings: [String: SequenceFloor] = [:]
        /// A2: this worker's own state of a held ride, written over another client's write of it.
        func rewrite(_ ride: String) {
            if let current = core.engine.ride(ride) {
                executor.rewriteState(of: current, payloadBytes: seen?.message.payload.count ?? 0)
            }
        }
        for action in actions {
            switch action {
            case .release(let buckets):
                release(buckets, now: now, core: &core)
            case .notice(let buckets):
                publishReleaseNotice(buckets)
            case .fence(let ride):
                let epoch = core.engine.epoch(of: ride)
                if let held = core.engine.ride(ride)?.version {
                    fencedCeiling = (ride, RideNumbering.reservation(of: held))
                }
                if let (_, actions) = core.engine.handOver(ride) {
                    executor.execute(actions, engine: &core.engine, now: now)
                }
                core.handover.counts.fenced += 1
                logger.warning(
                    "ride taken over under a newer epoch; no longer publishing it (G4)",
                    metadata: [
                        "ride.id": "\(ride)", "epoch": "\(epoch.map(String.init) ?? "-")",
                        "epoch.seen": "\(seen?.ride.map { String($0.epoch) } ?? "-")",
                    ])
            case .rewrite(let ride):
                rewrite(ride)
            case .liftRide(let ride, let ceiling):
                let lift = RideNumbering.takerLift(core.engine.sequence(of: ride) ?? .max, to: ceiling)
                if lift == .rewrite { rewrite(ride) }
                guard case .to(let sequence) = lift else { continue }
                _ = core.engine.liftSequence(of: ride, above: sequence)
                // Debug: while two workers' views split, each reservation of one lifts the other (a state write and
                // a lift per status of each shared ride, until one releases it).
                logger.debug(
                    "another worker wrote a ride held here under its epoch, above this worker's numbers (it took the ride over too: views split); the ride continues above its ceiling (C5, G3)",
                    metadata: ["ride.id": "\(ride)", "ceiling.seen": "\(ceiling)"])
                core.handover.counts.lifted += 1
            case .lift(let floors):
                let lifted = core.engine.liftSequences(above: floors)
                for ride in lifted { executor.writeState(of: ride, purpose: "write at a lift (C5)") }
                core.handover.counts.lifted += lifted.count
                if !lifted.isEmpty {
                    logger.warning(
                        "another worker's release notice bounds buckets served here above the numbers of rides held in them (it served them too: views split, or a late release); those rides continue above it (C5, G3)",
                        metadata: ["rides": "\(lifted.count)", "buckets": "\(floors.count)"])
                }
            case .dropAll:
                core.handover.counts.fenced += core.engine.activeRideCount
                for id in core.engine.rideIdentifiers {
                    if let (_, actions) = core.engine.handOver(id) {
                        executor.execute(actions, engine: &core.engine, now: now)
                    }
                }
            case .load(let buckets, let marker):
                for filter in loadFilters(buckets) {
                    subscriptions.subscribe(
                        filter, qos: settings.manySubscriptionsQoS, options: MQTTSubscribeOptions(noLocal: true))
                }
                subscriptions.publish(loadMarker, Array(marker.utf8))
            case .endLoad(let buckets):
                for filter in loadFilters(buckets) { subscriptions.unsubscribe(filter) }
            case .readStatuses(let rides, let marker):
                // No local: this worker's own statuses of these rides (once served) never come back on them.
                for ride in rides {
                    subscriptions.subscribe(
                        settings.topics.status(ride: ride), qos: settings.manySubscriptionsQoS,
                        options: MQTTSubscribeOptions(noLocal: true))
                }
                subscriptions.publish(loadMarker, Array(marker.utf8))
            case .endStatusReads(let rides):
                for ride in rides {
                    core.handover.statuses[ride] = nil
                    subscriptions.unsubscribe(settings.topics.status(ride: ride))
                }
            case .waitedOut(let buckets):
                logger.warning(
                    "a previous owner did not release its buckets within one interval; loading anyway (G4)",
                    metadata: ["buckets": "\(buckets.count)", "members": "\(core.group.members)"])
            case .stage(let ride):
                core.handover.staged[ride] = seen?.ride
            case .keepFenced(let ride):
                core.handover.fenced[ride] = seen?.ride
                if let fencedCeiling, fencedCeiling.ride == ride {
                    core.handover.fencedCeilings[ride] = fencedCeiling.floor
                }
            case .keepStatus(let ride):
                core.handover.statuses[ride] = seen?.status
            case .refuse:
                if let seen, let error = seen.error { refuseReadBack(seen, error, now: now, core: &core) }
            case .unstage(let rides):
                for ride in rides { core.handover.staged[ride] = nil }
            case .unfence(let rides):
                for ride in rides {
                    core.handover.fenced[ride] = nil
                    unfencedCeilings[ride] = core.handover.fencedCeilings.removeValue(forKey: ride)
                }
            case .promote(let ride):
                if let newer = core.handover.fenced[ride] { core.handover.staged[ride] = newer }
            case .mergeStatuses(let rides):
                for ride in rides {
                    if let retained = core.handover.statuses.removeValue(forKey: ride) {
                        core.handover.staged[ride]?.merge(retained)
                    }
                }
            case .serve(let serve):
                self.serve(serve, reserved: unfencedCeilings, now: now, core: &core)
            }
        }
    }

    /// G3, G4: stops serving these buckets' rides: each one's last state is written (retained, under its epoch,
    /// in order before the notice), then the release notice tells the new owner it may load them.
    private func release(_ buckets: [Int], now: Date, core: inout Core) {
        let lost = Set(buckets)
        let floors = core.engine.sequenceFloors(in: lost)
        var count = 0
        for id in core.engine.rideIdentifiers where lost.contains(Ownership.bucket(of: id)) {
            guard let (ride, actions) = core.engine.handOver(id) else { continue }
            executor.execute(actions, engine: &core.engine, now: now)
            executor.writeState(of: ride)
            count += 1
        }
        core.handover.counts.released += count
        if settings.authority == .broker { publishReleaseNotice(buckets, floors: floors) }
        logger.info(
            "rides released to their new owner (G3)",
            metadata: [
                "buckets": "\(buckets.count)", "rides": "\(count)", "rides.held": "\(core.engine.activeRideCount)",
            ])
    }

    /// G3: the subscriptions that read these buckets' states: one per bucket, or, past
    /// ``WorkerSettings/bucketFiltersPerLoad``, one for every bucket's states, of which only the arriving
    /// buckets' are kept (the machine stages those alone).
    private func loadFilters(_ buckets: [Int]) -> [String] {
        guard buckets.count <= settings.bucketFiltersPerLoad else { return [settings.topics.bucketedStateFilter] }
        return buckets.map { settings.topics.stateFilter(bucket: $0) }
    }

    /// G3: serves the staged rides at once (C4), each numbered as ``RideNumbering`` decides (C5, G6); then replays
    /// the control messages kept for their buckets, in order.
    /// - Parameter reserved: for rides fenced off here and served again, the numbers this worker had reserved
    ///   for them (``HandoverState/fencedCeilings``).
    private func serve(
        _ serve: Handover<StateVersion>.Serve, reserved: [String: SequenceFloor] = [:], now: Date, core: inout Core
    ) {
        let legacy = Set(serve.legacy)
        var count = 0
        var belowFloor = 0
        for id in serve.rides {
            // A ride held here stays as it is (a bucket's rides are never held before it is served).
            guard var ride = core.handover.staged.removeValue(forKey: id), core.engine.ride(id) == nil else { continue }
            let bucket = Ownership.bucket(of: id)
            let basis: RideNumbering.Basis
            if let grants = core.authority {
                // G6: numbered under the bucket's grant, above everything before it, or not served at all.
                guard let epoch = grants.served[bucket] else { continue }
                basis = .grant(epoch)
            } else {
                if let floor = serve.floors[bucket], floor.ceiling > ride.version.ceiling { belowFloor += 1 }
                basis =
                    serve.kind == .recovery
                    ? .recovery : .takeover(block: settings.ride.sequenceBlock, age: ride.age(at: now))
            }
            let start = RideNumbering.start(
                ride.version, basis: basis, floor: serve.floors[bucket], reserved: reserved[id])
            guard ride.start(start) else {
                logger.error(
                    "ride not served: its last sequence is beyond its bucket's grant (G6, C5)",
                    metadata: [
                        "ride.id": "\(id)", "numbers": "\(ride.version)", "basis": "\(basis)", "outcome": "\(start)",
                    ])
                continue
            }
            executor.execute(core.engine.restore(ride, now: now), engine: &core.engine, now: now)
            count += 1
            if legacy.contains(id), let current = core.engine.ride(id) {
                // Upgrades keep rides: the state moves under its bucket before the old topic is cleared.
                executor.writeState(of: current)
                try? transport.publish(settings.topics.legacyState(ride: id), [], retain: true)
            }
        }
        core.handover.counts.gained += count
        if belowFloor > 0 {
            // Debug: a bucket's floor is the highest of its rides', so a ride with lower numbers than another of its
            // bucket is below it without any lag. Only one alone in its bucket says the broker's copy lagged.
            logger.debug(
                "ride states read below their bucket's floor; numbering continues above the floor (C5, G3)",
                metadata: ["rides": "\(belowFloor)", "buckets": "\(serve.floors.count)"])
        }
        let replay = core.handover.recent.take(buckets: Set(serve.buckets), now: now.timeIntervalSince1970)
        for message in replay { handle(message, parsed: settings.topics.parse(message.topic), now: now, core: &core) }
        if let wait = serve.waited { metrics.handoverDuration.recordNanoseconds(Int64(wait * 1e9)) }
        let metadata: Logger.Metadata = [
            "buckets": "\(serve.buckets.count)", "rides": "\(count)", "controls.replayed": "\(replay.count)",
            "rides.held": "\(core.engine.activeRideCount)",
        ]
        switch serve.kind {
        case .resume where count + replay.count > 0:
            logger.warning(
                "rides fenced off here served again: the worker that took them released their buckets (G3, G4)",
                metadata: metadata)
        case .recovery, .takeover:
            if core.lifecycle.recovered, count + replay.count > 0 || serve.buckets.count < Ownership.bucketCount {
                logger.info("rides taken over (G3)", metadata: metadata)
            }
        case .resume:
            break
        }
        planWake(&core)
    }

    /// A2: something read back from the broker failed the checks of fresh input: logged with the rule and
    /// dead-lettered; it stays retained for a person to look at.
    private func refuseReadBack(_ seen: Incoming, _ error: Rejection, now: Date, core: inout Core) {
        logger.error(
            seen.consequence,
            metadata: [
                "topic": "\(seen.message.topic)", "reason": "\(error.reason.rawValue)", "detail": "\(error.detail)",
            ])
        executor.execute(
            core.engine.reject(error, topic: seen.message.topic, payload: seen.message.payload, now: now),
            engine: &core.engine, now: now)
    }
}
