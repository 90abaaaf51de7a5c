import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain
import RideJSON
import WorkerGroup

import struct RideStatusKit.DeadLetter

// MARK: - Handover (G3, G4): the service carries out what the pure `Handover` machine decides

extension RideStatusService {
    typealias HandoverAction = Handover<StateVersion>.Action

    /// The handover's part of the worker's state, under the service's lock: the machine, and the payloads its
    /// actions keep (a plain store: it follows ``Handover/Action``, it decides nothing).
    struct HandoverState {
        var machine: Handover<StateVersion>
        /// Durable states read for buckets on their way here (or read again), by ride.
        var staged: [String: Ride] = [:]
        /// G4: the newest state seen of each ride fenced off here, by ride.
        var fenced: [String: Ride] = [:]
        /// C5, G4: the highest number this worker had reserved for each ride fenced off here (kept as ``fenced``
        /// is): served again, the ride continues above it. The fencing worker's copy is above it as a rule, but
        /// not after a lift (``Handover/Action/lift(_:)``): a notice that comes before the state that fences a
        /// ride may lift it past the fencing worker's own numbers for it.
        var fencedCeilings: [String: SequenceFloor] = [:]
        /// G3, V5: retained statuses read at a takeover, by ride.
        var statuses: [String: RetainedStatus] = [:]
        /// Control messages for rides not served here, replayed when their bucket is served (G3).
        var recent = RecentControls<MQTTMessage>()
        var counts = Counts()
        var reported = Counts()

        struct Counts {
            var released = 0
            var gained = 0
            var fenced = 0
            /// C5: rides lifted above another worker's numbers (its release notice's floor, or its write of the ride
            /// under the same epoch: views split).
            var lifted = 0
        }

        init(selfID: String, settings: WorkerSettings) {
            machine = Handover(
                selfID: selfID, releaseTimeout: settings.ride.updateInterval,
                releaseMemory: Handover<StateVersion>.releaseMemory(interval: settings.ride.updateInterval),
                markerNonce: Self.newMarkerNonce(), ownEchoes: settings.protocolVersion == .v311,
                // Not in MQTT 3.1.1 mode (NATS): a NATS node loads each subscription's retained messages in the
                // connection's read loop, and after a node's loss each such load can wait out JetStream's API
                // timeout (5 s, docs/research/nats-cluster.md), stalling the connection for a ride each. There
                // the rides start from their states (at most a block of statuses old).
                readsStatuses: settings.protocolVersion == .v5 && settings.takeoverReadsStatuses,
                authority: settings.authority == .etcd)
        }

        /// Tells this worker's load markers from those of its life before a rejoin, whose generations start
        /// again at 0 (a marker still in flight must not complete a new load of the same number).
        static func newMarkerNonce() -> String { String(UInt32.random(in: 0...UInt32.max), radix: 36) }
    }

    /// What an event brings besides its topic: the payload and what it decoded to, for the store and for a
    /// refusal (A2).
    struct Incoming {
        var message: MQTTMessage
        var ride: Ride?
        var status: RetainedStatus?
        var error: Rejection?
        var consequence: Logger.Message
    }

    /// The topic of the marker that closes one load of buckets (G3).
    var loadMarker: String { settings.topics.loadMarker(worker: identity.id) }

    // MARK: Events to the machine

    /// G1, G3: the members changed in this worker's view; once the first view is formed, the buckets follow.
    func membersChanged(now: Date, core: inout Core) {
        let actions = core.handover.machine.membersChanged(core.group.members, now: now.timeIntervalSince1970)
        carryOut(actions, now: now, core: &core)
    }

    /// L5, G1: the recovery's read is complete: the first view of the group decides which of the states read
    /// this worker serves at once, which wait for a live owner's release, and which are another's.
    func formFirstView(now: Date, core: inout Core) {
        let actions = core.handover.machine.formFirstView(members: core.group.members, now: now.timeIntervalSince1970)
        carryOut(actions, now: now, core: &core)
    }

    /// G3, G4: this worker's own will, of an earlier connection, came back: while it was cut off the others
    /// declared it dead and took its rides over. It rejoins as a newcomer (``Handover/rejoin(members:nonce:now:)``).
    func rejoin(after incarnation: UInt64, now: Date, core: inout Core) {
        let dropped = core.engine.activeRideCount
        let actions = core.handover.machine.rejoin(
            members: core.group.members, nonce: HandoverState.newMarkerNonce(), now: now.timeIntervalSince1970)
        guard !actions.isEmpty else { return }
        logger.warning(
            "this worker was declared dead while cut off (its will was published); rejoining as a newcomer (G3, G4)",
            metadata: [
                "rides.dropped": "\(dropped)", "incarnation.will": "\(incarnation)",
                "incarnation.now": "\(transport.incarnation)",
            ])
        carryOut(actions, now: now, core: &core)
    }

    /// Time passes: a live previous owner that never releases is waited for no more (G4: one interval at most).
    func handoverTick(now: Date, core: inout Core) {
        carryOut(core.handover.machine.tick(now: now.timeIntervalSince1970), now: now, core: &core)
    }

    /// L5: one ride state read by the recovery: the newer copy is kept; what fails A2 is refused.
    func stageRecovered(_ message: MQTTMessage, ride: String, legacy: Bool, now: Date, core: inout Core) {
        let (seen, incoming) = decodeState(message, ride: ride, now: now)
        carryOut(
            core.handover.machine.stateRecovered(ride: ride, legacy: legacy, seen), seen: incoming, now: now,
            core: &core)
    }

    /// G3, G4, A2, C5: another client wrote a ride state (no local): of a ride held here, a new owner's (fenced),
    /// another taker's under the same epoch (the ride lifted above it) or one to undo (written over); of one not
    /// held, kept if its bucket is on its way here or it was fenced off.
    func stateSeen(_ message: MQTTMessage, ride: String, legacy: Bool, now: Date, core: inout Core) {
        let held = legacy ? nil : core.engine.ride(ride)?.version
        // Another worker's state of a ride this worker neither holds, reads nor fenced: not even decoded.
        guard held != nil || core.handover.machine.watches(ride: ride) else { return }
        let (seen, incoming) = decodeState(message, ride: ride, now: now)
        let actions = core.handover.machine.stateSeen(
            ride: ride, legacy: legacy, seen, held: held, now: now.timeIntervalSince1970)
        carryOut(actions, seen: incoming, now: now, core: &core)
    }

    /// G3: another worker's release notice, `{serviceName}/workers/{workerId}/released`:
    /// `{"buckets":[...],"incarnation":N,"floors":[[bucket,epoch,ceiling],...]}`. What does not read is
    /// dead-lettered (A2).
    func receiveRelease(_ message: MQTTMessage, worker: String, now: Date, core: inout Core) {
        // G6: under an authority a bucket moves by its grant, and the grant's epoch is above every floor.
        guard settings.authority == .broker else { return }
        guard core.handover.machine.hearsReleases(from: worker) else { return }
        guard let (buckets, floors) = Self.releaseNotice(message.payload) else {
            executor.execute(
                core.engine.reject(
                    Rejection(.invalidField, "release notice: buckets is not a list of bucket numbers (G3)"),
                    topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
            return
        }
        carryOut(
            core.handover.machine.releaseNoticed(
                buckets, floors: floors, by: worker, now: now.timeIntervalSince1970), now: now, core: &core)
    }

    /// G3: a load's marker came back (``Handover/markerReturned(_:now:held:)``).
    func loadFinished(_ message: MQTTMessage, now: Date, core: inout Core) {
        let actions: [HandoverAction]
        do {
            // A copy of the engine (its storage shared, not copied) keeps the machine's mutation and the
            // question apart.
            let engine = core.engine
            actions = core.handover.machine.markerReturned(
                String(decoding: message.payload, as: UTF8.self), now: now.timeIntervalSince1970
            ) { engine.ride($0) != nil }
        }
        carryOut(actions, now: now, core: &core)
    }

    /// G3, V5, A2: a retained status of a ride whose takeover reads statuses, checked as fresh input is.
    func takeOverStatus(_ message: MQTTMessage, ride: String, now: Date, core: inout Core) {
        guard core.handover.machine.readsStatus(ofRide: ride) else { return }
        var incoming = Incoming(
            message: message,
            consequence: "retained ride status refused at a takeover (A2); the ride is served from its state alone")
        let seen: Seen<Int>
        if message.payload.isEmpty {
            seen = .deleted
        } else {
            do throws(Rejection) {
                let status = try RetainedStatus.read(
                    topicRide: ride, payload: message.payload, now: now, configuration: settings.ride)
                incoming.status = status
                seen = .read(status.sequence)
            } catch {
                incoming.error = error
                seen = .unreadable
            }
        }
        carryOut(core.handover.machine.statusSeen(ride: ride, seen), seen: incoming, now: now, core: &core)
    }

    /// A2: a state read back, decoded once for the machine (its version) and the store (the ride).
    private func decodeState(
        _ message: MQTTMessage, ride: String, now: Date
    ) -> (Seen<StateVersion>, Incoming) {
        var incoming = Incoming(
            message: message, consequence: "ride state refused (A2); it stays retained and the ride is not resumed")
        guard !message.payload.isEmpty else { return (.deleted, incoming) }
        do throws(Rejection) {
            let restored = try Ride.restored(
                topicRide: ride, payload: message.payload, now: now, configuration: settings.ride)
            incoming.ride = restored
            return (.read(restored.version), incoming)
        } catch {
            incoming.error = error
            return (.unreadable, incoming)
        }
    }

    // MARK: Carrying the actions out

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
                let epoch = core.engine.ride(ride)?.epoch
                if let held = core.engine.ride(ride)?.version {
                    fencedCeiling = (ride, SequenceFloor(epoch: 0, ceiling: held.ceiling))
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
                // A2: no taker reserves past half the numbers (``Ride/clockCeiling(at:)`` stops there); a forged
                // copy that does would leave the ride no number to go on with. Written over instead.
                guard ceiling <= Ride.maxSequence / 2 else {
                    rewrite(ride)
                    continue
                }
                if core.engine.liftSequence(of: ride, above: ceiling) != nil {
                    // Debug: while two workers' views split, each reservation of one lifts the other (a state write
                    // and a lift per status of each shared ride, until one releases it).
                    logger.debug(
                        "another worker wrote a ride held here under its epoch, above this worker's numbers (it took the ride over too: views split); the ride continues above its ceiling (C5, G3)",
                        metadata: ["ride.id": "\(ride)", "ceiling.seen": "\(ceiling)"])
                    core.handover.counts.lifted += 1
                }
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

    /// G3: the notice, after the last states (QoS 1, in order), that these buckets are free to load, with the
    /// floors of the rides this worker held in them (C5: ``SequenceFloor``).
    private func publishReleaseNotice(_ buckets: [Int], floors: [Int: SequenceFloor] = [:]) {
        try? transport.publish(
            settings.topics.released(worker: identity.id),
            Self.releaseNotice(buckets: buckets, incarnation: transport.incarnation, floors: floors))
    }

    /// G3, C5 on SIGTERM in a group: before its `offline` presence, a leaving worker publishes the floors of
    /// every bucket it holds rides in, releasing no bucket (it writes no last states: the new owners read the
    /// last state written, and continue above the floor too when the broker's copy lags).
    func announceLeavingFloors(core: inout Core) {
        let floors = core.engine.sequenceFloors()
        guard !floors.isEmpty else { return }
        publishReleaseNotice([], floors: floors)
    }

    /// G3: the subscriptions that read these buckets' states: one per bucket, or, past
    /// ``WorkerSettings/bucketFiltersPerLoad``, one for every bucket's states, of which only the arriving
    /// buckets' are kept (the machine stages those alone).
    private func loadFilters(_ buckets: [Int]) -> [String] {
        guard buckets.count <= settings.bucketFiltersPerLoad else { return [settings.topics.bucketedStateFilter] }
        return buckets.map { settings.topics.stateFilter(bucket: $0) }
    }

    /// G3: serves the staged rides, each under a new epoch and above its last sequence (C5), at once (C4); then
    /// replays the control messages kept for their buckets, in order. A recovery (a worker alone in its first
    /// view, L5) continues just above each ceiling: the retained status read with it brings the last sequence
    /// the broker kept. Rides taken over from a live group, or served again, continue a block above, and at least at
    /// the ride's age times ten (``Ride/clockCeiling(at:)``). (A worker
    /// that starts alone after its peers died takes their rides the first way: a status of theirs that a
    /// clustered broker still holds can then arrive with a number it reuses. On one broker it cannot: the broker
    /// delivered it before the worker's recovery read.)
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
            if let grants = core.authority {
                // G6: numbered under the bucket's grant, above everything before it, or not served at all.
                guard let epoch = grants.served[Ownership.bucket(of: id)] else { continue }
                if case .next = ride.grant(epoch: epoch) {
                    executor.execute(core.engine.restore(ride, now: now), engine: &core.engine, now: now)
                    count += 1
                } else {
                    logger.error(
                        "ride not served: its last sequence is beyond its bucket's grant (G6, C5)",
                        metadata: [
                            "ride.id": "\(id)", "epoch": "\(epoch)",
                            "sequence": "\(max(ride.sequence, ride.sequenceCeiling))",
                            "outcome": "\(ride.grant(epoch: epoch))",
                        ])
                }
                continue
            }
            var floor = serve.floors[Ownership.bucket(of: id)]
            if let floor, floor.ceiling > ride.version.ceiling { belowFloor += 1 }
            // G4, C5: a ride fenced off here continues above what this worker had reserved for it, too.
            if let own = reserved[id] {
                floor = floor.map { $0.merged(with: own) } ?? own
            }
            if serve.kind != .recovery {
                // C5 when two workers take the ride over from the same read (views split): the later numbers higher.
                let clock = SequenceFloor(epoch: 0, ceiling: ride.clockCeiling(at: now))
                floor = floor.map { $0.merged(with: clock) } ?? clock
            }
            ride.takeOver(sequenceBlock: serve.kind == .recovery ? 0 : settings.ride.sequenceBlock, floor: floor)
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

    // MARK: Release notices

    /// The largest release notice read: every bucket listed, and a floor for each, with room to spare.
    static var maximumReleaseNotice: Int { 512 * 1024 }

    /// G3: `{serviceName}/workers/{workerId}/released`:
    /// `{"buckets":[...],"incarnation":N,"floors":[[bucket,epoch,ceiling],...]}` (floors omitted when none).
    static func releaseNotice(buckets: [Int], incarnation: UInt64, floors: [Int: SequenceFloor] = [:]) -> [UInt8] {
        var writer = JSONWriter(capacity: 32 + 6 * buckets.count + 24 * floors.count)
        writer.beginObject()
        writer.key("buckets")
        writer.beginArray()
        for bucket in buckets { writer.integer(bucket) }
        writer.endArray()
        writer.key("incarnation")
        writer.integer(Int(clamping: incarnation))
        if !floors.isEmpty {
            writer.key("floors")
            writer.beginArray()
            for (bucket, floor) in floors.sorted(by: { $0.key < $1.key }) {
                writer.beginArray()
                writer.integer(bucket)
                writer.integer(Int(clamping: min(floor.epoch, UInt64(Ride.maxSequence))))
                writer.integer(floor.ceiling)
                writer.endArray()
            }
            writer.endArray()
        }
        writer.endObject()
        return writer.bytes
    }

    /// G3: the buckets a release notice lists and its floors (entries outside the buckets, epochs or sequences
    /// skipped); nil for one that does not read. Not the input decoder: a notice lists up to 8,192 buckets and as
    /// many floors (about 250 KB), above the input size limit.
    static func releaseNotice(_ payload: [UInt8]) -> (buckets: [Int], floors: [Int: SequenceFloor])? {
        guard payload.count <= maximumReleaseNotice, let notice = try? JSONParser.parse(payload),
            case .array(let items)? = notice["buckets"]
        else { return nil }
        let buckets = items.compactMap(bucketNumber)
        var floors: [Int: SequenceFloor] = [:]
        if case .array(let entries)? = notice["floors"] {
            for entry in entries {
                guard case .array(let parts) = entry, parts.count == 3, let bucket = bucketNumber(parts[0]),
                    // A2: at most 2^53 - 1, as every epoch read back (a larger one would never serialise again).
                    let epoch = parts[1].doubleValue.flatMap({ UInt64(exactly: $0) }),
                    epoch <= UInt64(Ride.maxSequence),
                    let ceiling = parts[2].doubleValue.flatMap({ Int(exactly: $0) }),
                    (0...Ride.maxSequence).contains(ceiling)
                else { continue }
                let floor = SequenceFloor(epoch: epoch, ceiling: ceiling)
                floors[bucket] = floors[bucket].map { floor.merged(with: $0) } ?? floor
            }
        }
        return (buckets, floors)
    }

    private static func bucketNumber(_ item: JSONValue) -> Int? {
        guard let number = item.doubleValue, let bucket = Int(exactly: number),
            (0..<Ownership.bucketCount).contains(bucket)
        else { return nil }
        return bucket
    }
}
