import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain
import RideJSON
import WorkerGroup

// MARK: - Handover (G3, G4): the buckets of rides this worker serves follow the group

extension RideStatusService {
    /// The handover's part of the worker's state, under the service's lock.
    struct HandoverState {
        var machine: Handover
        /// False until the first view of the group is formed at the end of the recovery (L5, G1).
        var viewFormed = false
        /// Whether the recovery read every ride state (the worker was alone in its first view): then the first
        /// view's loads are complete at once.
        var fullRead = false
        /// Durable states of the buckets on their way here (read at the recovery or by a load), by ride.
        var staged: [String: Ride] = [:]
        /// Rides whose state was read on the topic of releases before groups: moved under their bucket once served.
        var legacy: Set<String> = []
        /// Tells this worker's load markers from those of its life before a rejoin, whose generations start
        /// again at 0 (a marker still in flight must not complete a new load of the same number).
        var markerNonce = Self.newMarkerNonce()

        static func newMarkerNonce() -> String { String(UInt32.random(in: 0...UInt32.max), radix: 36) }
        /// Loads waiting for their marker: generation to buckets.
        var loads: [Int: [Int]] = [:]
        /// Control messages for rides not served here, replayed when their bucket is served (G3).
        var recent = RecentControls<MQTTMessage>()
        var counts = Counts()
        var reported = Counts()
        /// G4: rides fenced off here in buckets this worker still serves (another worker wrote them under a
        /// newer epoch), with the newest state seen of each, by bucket: read again once that worker releases
        /// the bucket (``Handover/reclaim(_:now:)``), and served again from the newer of what the read finds and
        /// this (a clustered broker's retained copy can lag behind what was delivered live).
        var fenced: [Int: [String: Ride]] = [:]
        /// Which worker last released a bucket this worker serves, and when, for a fence that comes after the
        /// notice (they travel on different subscriptions), within ``RideStatusService/releaseMemory(_:)``.
        var releasedHere: [Int: (worker: String, at: Double)] = [:]

        /// The rides a read again of their bucket is for: those fenced off before it began.
        var reclaimed: [Int: Set<String>] = [:]

        /// G3, V5: loads whose states are in and whose rides' retained statuses are being read, by generation,
        /// and the statuses read so far: merged into the staged states before the rides are served, so that a
        /// new owner's first status carries what the old owner last published (its location may be newer than
        /// the state's by up to a block of statuses).
        var statusReads: [Int: (buckets: [Int], rides: [String])] = [:]
        var readingStatus: Set<String> = []
        var retainedStatuses: [String: RetainedStatus] = [:]

        /// Whether `ride` was fenced off here and its bucket may come back (its controls are kept meanwhile).
        func isFencedAway(ride: String) -> Bool { fenced[Ownership.bucket(of: ride)]?[ride] != nil }

        /// Forgets a ride fenced off here; returns the state kept of it.
        @discardableResult
        mutating func forgetFenced(_ ride: String, bucket: Int) -> Ride? {
            let kept = fenced[bucket]?.removeValue(forKey: ride)
            if fenced[bucket]?.isEmpty == true { fenced[bucket] = nil }
            return kept
        }

        /// Forgets the states read of these buckets.
        mutating func dropStaged(of buckets: [Int]) {
            guard !staged.isEmpty else { return }
            let lost = Set(buckets)
            staged = staged.filter { !lost.contains(Ownership.bucket(of: $0.key)) }
        }

        struct Counts {
            var released = 0
            var gained = 0
            var fenced = 0
        }

        init(selfID: String, releaseTimeout: Double) {
            machine = Handover(selfID: selfID, releaseTimeout: releaseTimeout)
        }

        func serves(ride: String) -> Bool { machine.serving.contains(Ownership.bucket(of: ride)) }
        func isArriving(ride: String) -> Bool { machine.isArriving(Ownership.bucket(of: ride)) }
        /// Whether this ride's state, read now, is kept for serving: its bucket arrives, or is read again.
        func reads(ride: String) -> Bool {
            let bucket = Ownership.bucket(of: ride)
            return machine.isArriving(bucket) || machine.isReclaiming(bucket)
        }
    }

    /// The topic of the marker that closes one load of buckets (G3).
    var loadMarker: String { "\(settings.topics.serviceName)/workers/\(identity.id)/load" }

    /// G1, G3: the members changed in this worker's view; once the first view is formed, the buckets follow.
    func membersChanged(now: Date, core: inout Core) {
        guard core.handover.viewFormed else { return }
        let actions = core.handover.machine.membersChanged(core.group.members, now: now.timeIntervalSince1970)
        carryOut(actions, now: now, core: &core)
    }

    /// L5, G1: the recovery's read is complete: the first view of the group decides which of the states read
    /// this worker serves at once, which wait for a live owner's release, and which are another's.
    func formFirstView(now: Date, core: inout Core) {
        core.handover.viewFormed = true
        let actions = core.handover.machine.membersChanged(core.group.members, now: now.timeIntervalSince1970)
        carryOut(actions, now: now, core: &core, recovering: core.handover.fullRead)
        // What belongs to no bucket on its way here is another worker's: forgotten.
        let machine = core.handover.machine
        core.handover.staged = core.handover.staged.filter { machine.isArriving(Ownership.bucket(of: $0.key)) }
    }

    /// G3, G4: this worker's own will, of an earlier connection, came back: while it was cut off the others
    /// declared it dead and took its rides over (under higher epochs). It stops serving every ride without
    /// writing anything and starts again as a newcomer: its buckets come back by the handover, each above the
    /// sequence the others reached. (Without this it would keep serving stale copies, and the rides it was
    /// fenced off would belong to nobody once the others released the buckets back to it.)
    func rejoin(after incarnation: UInt64, now: Date, core: inout Core) {
        // Alone in its view, nobody took anything over.
        guard core.handover.viewFormed, core.group.members.count > 1 else { return }
        let dropped = core.engine.activeRideCount
        for id in core.engine.rideIdentifiers {
            if let (_, actions) = core.engine.handOver(id) { executor.execute(actions, engine: &core.engine, now: now) }
        }
        core.handover.counts.fenced += dropped
        core.handover.machine = Handover(selfID: identity.id, releaseTimeout: settings.ride.updateInterval)
        core.handover.staged = [:]
        core.handover.loads = [:]
        core.handover.fenced = [:]
        core.handover.releasedHere = [:]
        core.handover.reclaimed = [:]
        for (_, read) in core.handover.statusReads { forgetStatusReads(of: read.rides, core: &core) }
        core.handover.statusReads = [:]
        core.handover.markerNonce = HandoverState.newMarkerNonce()
        logger.warning(
            "this worker was declared dead while cut off (its will was published); rejoining as a newcomer (G3, G4)",
            metadata: [
                "rides.dropped": "\(dropped)", "incarnation.will": "\(incarnation)",
                "incarnation.now": "\(transport.incarnation)",
            ])
        carryOut(
            core.handover.machine.membersChanged(core.group.members, now: now.timeIntervalSince1970), now: now,
            core: &core)
    }

    /// Time passes: a live previous owner that never releases is waited for no more (G4: one interval at most).
    func handoverTick(now: Date, core: inout Core) {
        guard core.handover.viewFormed else { return }
        let actions = core.handover.machine.tick(now: now.timeIntervalSince1970)
        // (A load of served buckets is a read again asked for anew: ``Handover/reclaim(_:now:)``.)
        for case .load(let buckets, _) in actions where buckets.first.map(core.handover.machine.isArriving) == true {
            logger.warning(
                "a previous owner did not release its buckets within one interval; loading anyway (G4)",
                metadata: ["buckets": "\(buckets.count)", "members": "\(core.group.members)"])
        }
        carryOut(actions, now: now, core: &core)
    }

    /// Carries out the handover's actions. `recovering`: the recovery has read every state already, so a load
    /// is complete at once.
    func carryOut(_ actions: [Handover.Action], now: Date, core: inout Core, recovering: Bool = false) {
        for action in actions {
            switch action {
            case .release(let buckets):
                release(buckets, now: now, core: &core)
                forgetReclaims(of: buckets, core: &core)
            case .resume(let buckets):
                resume(buckets, now: now, core: &core)
            case .load(let buckets, let generation):
                if recovering {
                    carryOut(
                        core.handover.machine.loaded(buckets, generation: generation, now: now.timeIntervalSince1970),
                        now: now, core: &core, recovering: true)
                } else {
                    load(buckets, generation: generation, core: &core)
                }
            case .drop(let buckets):
                core.handover.dropStaged(of: buckets)
                // The bucket's new owner may count on this worker as its previous owner (their views of the group
                // differ by a join in between): it served none of them, so they are released at once.
                publishReleaseNotice(buckets)
            case .serve(let buckets):
                serve(buckets, now: now, core: &core, recovering: recovering)
                if !recovering, let wait = core.handover.machine.lastServeWait, wait >= 0, wait < 86_400 {
                    metrics.handoverDuration.recordNanoseconds(Int64(wait * 1e9))
                }
            }
        }
    }

    /// G3, G4: stops serving these buckets' rides: each one's last state is written (retained, under its epoch,
    /// in order before the notice), then the release notice tells the new owner it may load them.
    private func release(_ buckets: [Int], now: Date, core: inout Core) {
        let lost = Set(buckets)
        var count = 0
        for id in core.engine.rideIdentifiers where lost.contains(Ownership.bucket(of: id)) {
            guard let (ride, actions) = core.engine.handOver(id) else { continue }
            executor.execute(actions, engine: &core.engine, now: now)
            executor.writeState(of: ride)
            count += 1
        }
        core.handover.counts.released += count
        publishReleaseNotice(buckets)
        logger.info(
            "rides released to their new owner (G3)",
            metadata: [
                "buckets": "\(buckets.count)", "rides": "\(count)", "rides.held": "\(core.engine.activeRideCount)",
            ])
    }

    /// G3: the notice, after the last states (QoS 1, in order), that these buckets are free to load.
    private func publishReleaseNotice(_ buckets: [Int]) {
        try? transport.publish(
            settings.topics.released(worker: identity.id),
            Self.releaseNotice(buckets: buckets, incarnation: transport.incarnation))
    }

    /// G3: reads these buckets' durable states: a subscription per bucket (no local: this worker's own writes
    /// never come back), then a marker that the broker sends after their retained states.
    private func load(_ buckets: [Int], generation: Int, core: inout Core) {
        let loading = Set(buckets)
        // What was read of them before is stale: a ride the previous owner stopped since has no state any more.
        // (A state of the earlier layout stays: no load reads that layout, L5 upgrades keep rides.)
        let legacy = core.handover.legacy
        core.handover.staged = core.handover.staged.filter {
            !loading.contains(Ownership.bucket(of: $0.key)) || legacy.contains($0.key)
        }
        // A load asked for anew replaces the one before for its buckets (that one's marker may never come, and
        // the machine takes a report of it for the buckets still its own only), and a read of their statuses.
        core.handover.loads = core.handover.loads.compactMapValues { earlier in
            let rest = earlier.filter { !loading.contains($0) }
            return rest.isEmpty ? nil : rest
        }
        for (earlier, read) in core.handover.statusReads {
            let overtaken = read.rides.filter { loading.contains(Ownership.bucket(of: $0)) }
            guard !overtaken.isEmpty else { continue }
            forgetStatusReads(of: overtaken, core: &core)
            core.handover.statusReads[earlier]?.rides.removeAll { loading.contains(Ownership.bucket(of: $0)) }
        }
        core.handover.loads[generation] = buckets
        for filter in loadFilters(buckets) {
            subscriptions.subscribe(
                filter, qos: settings.manySubscriptionsQoS, options: MQTTSubscribeOptions(noLocal: true))
        }
        subscriptions.publish(loadMarker, Array("\(core.handover.markerNonce):\(generation)".utf8))
    }

    /// G3: the subscriptions that read these buckets' states: one per bucket, or, past
    /// ``WorkerSettings/bucketFiltersPerLoad``, one for every bucket's states, of which only the arriving
    /// buckets' are kept (``stage(_:ride:legacy:now:core:)`` is called for those alone).
    private func loadFilters(_ buckets: [Int]) -> [String] {
        guard buckets.count <= settings.bucketFiltersPerLoad else { return [settings.topics.bucketedStateFilter] }
        return buckets.map { settings.topics.stateFilter(bucket: $0) }
    }

    /// G3: a load's marker (`{nonce}:{generation}`) came back: its buckets' states are all in. Their rides'
    /// retained statuses are read next (one subscription per ride, closed by a second marker,
    /// `s{nonce}:{generation}`), then the rides are served (``statusesRead(generation:now:core:)``).
    func loadFinished(_ message: MQTTMessage, now: Date, core: inout Core) {
        let text = String(decoding: message.payload, as: UTF8.self)
        let statuses = text.hasPrefix("s")
        let parts = text.dropFirst(statuses ? 1 : 0).split(separator: ":")
        guard parts.count == 2, parts[0] == core.handover.markerNonce, let generation = Int(parts[1]) else { return }
        if statuses { return statusesRead(generation: generation, now: now, core: &core) }
        guard let buckets = core.handover.loads.removeValue(forKey: generation) else { return }
        // A bucket its previous owner released comes with each ride's last state, written at the release: only
        // the others (a dead owner's, a SIGTERM's, a read again) may lag a block behind the rider's screen.
        let machine = core.handover.machine
        let lagging = Set(buckets.filter { !machine.arrivesReleased($0) })
        let rides = core.handover.staged.keys.filter {
            lagging.contains(Ownership.bucket(of: $0)) && core.engine.ride($0) == nil
        }
        for filter in loadFilters(buckets) { subscriptions.unsubscribe(filter) }
        // Not in MQTT 3.1.1 mode (NATS): a NATS node loads each subscription's retained messages in the
        // connection's read loop, and after a node's loss each such load can wait out JetStream's API timeout
        // (5 s, docs/research/nats-cluster.md), stalling the worker's connection for a ride each. There the
        // rides start from their states (at most a block of statuses old).
        guard !rides.isEmpty, settings.protocolVersion == .v5, settings.takeoverReadsStatuses else {
            return carryOut(
                core.handover.machine.loaded(buckets, generation: generation, now: now.timeIntervalSince1970),
                now: now, core: &core)
        }
        core.handover.statusReads[generation] = (buckets, rides)
        core.handover.readingStatus.formUnion(rides)
        // No local: this worker's own statuses of these rides (once served) never come back on them.
        for ride in rides {
            subscriptions.subscribe(
                settings.topics.status(ride: ride), qos: settings.manySubscriptionsQoS,
                options: MQTTSubscribeOptions(noLocal: true))
        }
        subscriptions.publish(loadMarker, Array("s\(core.handover.markerNonce):\(generation)".utf8))
    }

    /// G3, V5: the retained statuses of a load's rides are in: each staged state takes what its status adds
    /// (the last location, sequence and time, as at a recovery, L5), then the rides are served.
    private func statusesRead(generation: Int, now: Date, core: inout Core) {
        guard let (buckets, rides) = core.handover.statusReads.removeValue(forKey: generation) else { return }
        for ride in rides {
            core.handover.readingStatus.remove(ride)
            if let retained = core.handover.retainedStatuses.removeValue(forKey: ride) {
                core.handover.staged[ride]?.merge(retained)
            }
        }
        // Served first, so the rides' vehicle subscriptions are queued before the status unsubscribes.
        carryOut(
            core.handover.machine.loaded(buckets, generation: generation, now: now.timeIntervalSince1970), now: now,
            core: &core)
        for ride in rides { subscriptions.unsubscribe(settings.topics.status(ride: ride)) }
    }

    /// Forgets the reads of these rides' statuses (their load was asked for anew, or the worker rejoins): their
    /// subscriptions go.
    private func forgetStatusReads(of rides: [String], core: inout Core) {
        for ride in rides {
            core.handover.readingStatus.remove(ride)
            core.handover.retainedStatuses[ride] = nil
            subscriptions.unsubscribe(settings.topics.status(ride: ride))
        }
    }

    /// G3, V5, A2: a retained status of a ride whose load reads statuses, checked as fresh input is; what fails
    /// is logged naming A2, dead-lettered and left retained (the ride is served from its state alone).
    func takeOverStatus(_ message: MQTTMessage, ride: String, now: Date, core: inout Core) {
        guard core.handover.readingStatus.contains(ride), !message.payload.isEmpty else { return }
        do throws(Rejection) {
            let read = try RetainedStatus.read(
                topicRide: ride, payload: message.payload, now: now, configuration: settings.ride)
            if let kept = core.handover.retainedStatuses[ride], kept.sequence >= read.sequence { return }
            core.handover.retainedStatuses[ride] = read
        } catch {
            refuseReadBack(
                message, error,
                "retained ride status refused at a takeover (A2); the ride is served from its state alone",
                now: now, core: &core)
        }
    }

    /// A2: something read back from the broker failed the checks of fresh input: logged with the rule and
    /// dead-lettered; it stays retained for a person to look at.
    private func refuseReadBack(
        _ message: MQTTMessage, _ error: Rejection, _ consequence: Logger.Message, now: Date, core: inout Core
    ) {
        logger.error(
            consequence,
            metadata: [
                "topic": "\(message.topic)", "reason": "\(error.reason.rawValue)", "detail": "\(error.detail)",
            ])
        executor.execute(
            core.engine.reject(error, topic: message.topic, payload: message.payload, now: now),
            engine: &core.engine, now: now)
    }

    /// G3: serves these buckets' loaded rides, each under a new epoch and above its last sequence (C5), at once
    /// (C4); then replays the control messages kept for them, in order.
    /// - Parameter recovering: a worker alone in its first view, resuming every ride it read at its recovery
    ///   (L5). They continue just above the ceiling: the retained status read with them brings the last
    ///   sequence the broker kept. Rides taken over from a live group continue a block above. (A worker that
    ///   starts alone after its peers died takes their rides this way too, without the block: a status of
    ///   theirs that a clustered broker still holds can then arrive with a number it reuses. On one broker it
    ///   cannot: the broker delivered it before the worker's recovery read.)
    /// - Parameter resuming: the buckets were served here all along (``Handover/Action/resume(_:)``): only the
    ///   rides not held here are served again, and of those only the ones in `resuming`.
    private func serve(
        _ buckets: [Int], now: Date, core: inout Core, recovering: Bool, resuming: Set<String>? = nil
    ) {
        let gained = Set(buckets)
        var count = 0
        for (id, staged) in core.handover.staged where gained.contains(Ownership.bucket(of: id)) {
            if core.engine.ride(id) != nil || resuming.map({ !$0.contains(id) }) == true {
                // Held here: what is served stays (a bucket's rides are never held before it is served, but a
                // bucket read again keeps the rides no other worker fenced off).
                core.handover.staged[id] = nil
                continue
            }
            var ride = staged
            ride.takeOver(sequenceBlock: recovering ? 0 : settings.ride.sequenceBlock)
            executor.execute(core.engine.restore(ride, now: now), engine: &core.engine, now: now)
            core.handover.staged[id] = nil
            count += 1
            if core.handover.legacy.remove(id) != nil, let current = core.engine.ride(id) {
                // Upgrades keep rides: the state moves under its bucket before the old topic is cleared.
                executor.writeState(of: current)
                try? transport.publish(settings.topics.legacyState(ride: id), [], retain: true)
            }
        }
        core.handover.counts.gained += count
        let replay = core.handover.recent.take(buckets: gained, now: now.timeIntervalSince1970)
        for message in replay { handle(message, parsed: settings.topics.parse(message.topic), now: now, core: &core) }
        if resuming != nil {
            guard count + replay.count > 0 else { return planWake(&core) }
            logger.warning(
                "rides fenced off here served again: the worker that took them released their buckets (G3, G4)",
                metadata: [
                    "buckets": "\(buckets.count)", "rides": "\(count)", "controls.replayed": "\(replay.count)",
                    "rides.held": "\(core.engine.activeRideCount)",
                ])
        } else if core.lifecycle.recovered, count + replay.count > 0 || buckets.count < Ownership.bucketCount {
            logger.info(
                "rides taken over (G3)",
                metadata: [
                    "buckets": "\(buckets.count)", "rides": "\(count)", "controls.replayed": "\(replay.count)",
                    "rides.held": "\(core.engine.activeRideCount)",
                ])
        }
        planWake(&core)
    }

    /// L5, G3: one ride state read (at the recovery, by a load, or live from another worker) for a bucket on
    /// its way here: the newer copy is kept; a deleted state (zero-length) removes the ride (it was stopped).
    /// What fails the checks of A2 is dead-lettered and left retained.
    func stage(_ message: MQTTMessage, ride id: String, legacy: Bool, now: Date, core: inout Core) {
        guard !message.payload.isEmpty else {
            if !legacy { core.handover.staged[id] = nil }
            return
        }
        do throws(Rejection) {
            let ride = try Ride.restored(
                topicRide: id, payload: message.payload, now: now, configuration: settings.ride)
            if legacy { core.handover.legacy.insert(id) }
            if let current = core.handover.staged[id], !ride.isNewer(than: current) { return }
            core.handover.staged[id] = ride
        } catch {
            refuseReadBack(
                message, error, "ride state refused (A2); it stays retained and the ride is not resumed", now: now,
                core: &core)
        }
    }

    /// G4, A2: another client wrote the state of a ride this worker serves. Under a higher epoch it is a new
    /// owner's: this worker stops publishing the ride at once, writing nothing. Under MQTT 3.1.1 (no no-local)
    /// one under its own epoch is its own echo. Anything else (a deletion, an older owner's last write, a
    /// forgery) is overwritten with this worker's own state, so that a restart does
    /// not lose the ride.
    func stateWritten(by message: MQTTMessage, ride current: Ride, now: Date, core: inout Core) {
        let other =
            message.payload.isEmpty
            ? nil
            : try? Ride.restored(
                topicRide: current.rideIdentifier, payload: message.payload, now: now, configuration: settings.ride)
        let bucket = Ownership.bucket(of: current.rideIdentifier)
        // A bucket read again brings this worker's own retained states back (MQTT 5's No Local spares no
        // retained message): nothing to undo.
        if let other, other.epoch == current.epoch, core.handover.machine.isReclaiming(bucket) { return }
        if let other, other.epoch > current.epoch {
            if let (_, actions) = core.engine.handOver(current.rideIdentifier) {
                executor.execute(actions, engine: &core.engine, now: now)
            }
            core.handover.counts.fenced += 1
            logger.warning(
                "ride taken over under a newer epoch; no longer publishing it (G4)",
                metadata: [
                    "ride.id": "\(current.rideIdentifier)", "epoch": "\(current.epoch)", "epoch.seen": "\(other.epoch)",
                ])
            fenced(current.rideIdentifier, by: other, now: now, core: &core)
            return
        }
        // MQTT 3.1.1 has no no-local: this worker's own writes come back, under its own epoch.
        if settings.protocolVersion == .v311, let other, other.epoch == current.epoch { return }
        executor.rewriteState(of: current, payloadBytes: message.payload.count)
    }

    /// The largest release notice read: every bucket listed, with room to spare.
    static var maximumReleaseNotice: Int { 64 * 1024 }

    /// G3: `{serviceName}/workers/{workerId}/released`: `{"buckets":[...],"incarnation":N}`.
    static func releaseNotice(buckets: [Int], incarnation: UInt64) -> [UInt8] {
        var writer = JSONWriter(capacity: 16 + 6 * buckets.count)
        writer.beginObject()
        writer.key("buckets")
        writer.beginArray()
        for bucket in buckets { writer.integer(bucket) }
        writer.endArray()
        writer.key("incarnation")
        writer.integer(Int(clamping: incarnation))
        writer.endObject()
        return writer.bytes
    }

    /// G3: another worker's release notice: the buckets it lists have their last states written.
    func receiveRelease(_ message: MQTTMessage, worker: String, now: Date, core: inout Core) {
        guard worker != identity.id, core.handover.viewFormed else { return }
        // Not the input decoder: a notice lists up to 8,192 buckets (about 48 KB), above the input size limit.
        guard message.payload.count <= Self.maximumReleaseNotice,
            let notice = try? JSONParser.parse(message.payload), case .array(let items)? = notice["buckets"]
        else {
            executor.execute(
                core.engine.reject(
                    Rejection(.invalidField, "release notice: buckets is not a list of bucket numbers (G3)"),
                    topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
            return
        }
        let buckets = items.compactMap { item -> Int? in
            guard let number = item.doubleValue, let bucket = Int(exactly: number),
                (0..<Ownership.bucketCount).contains(bucket)
            else { return nil }
            return bucket
        }
        let served = buckets.filter { core.handover.machine.serving.contains($0) }
        carryOut(
            core.handover.machine.released(buckets, by: worker, now: now.timeIntervalSince1970), now: now, core: &core)
        guard !served.isEmpty else { return }
        // G3, G4: buckets served here all along: the other worker served them too for a while (its view lacked
        // this one). Those of which it fenced a ride off here are read again, and the ride served again.
        for bucket in served { core.handover.releasedHere[bucket] = (worker, now.timeIntervalSince1970) }
        startReclaim(served.filter { core.handover.fenced[$0] != nil }, now: now, core: &core)
    }

    /// Reads these served buckets again for the rides fenced off in them so far.
    private func startReclaim(_ buckets: [Int], now: Date, core: inout Core) {
        let actions = core.handover.machine.reclaim(buckets, now: now.timeIntervalSince1970)
        for case .load(let reading, _) in actions {
            for bucket in reading {
                core.handover.reclaimed[bucket] = core.handover.fenced[bucket].map { Set($0.keys) }
            }
        }
        carryOut(actions, now: now, core: &core)
    }

    /// G3, G4: a read again ended: the rides fenced off before it began, and not held here, are served again
    /// from the newer of what the read found and what was seen of them live (a clustered broker's retained
    /// copy can lag). A ride the read did not find ended meanwhile (its state deleted): it stays ended. Rides
    /// fenced off during the read wait for a release of their own.
    private func resume(_ buckets: [Int], now: Date, core: inout Core) {
        var rides: Set<String> = []
        for bucket in buckets {
            let ids = core.handover.reclaimed.removeValue(forKey: bucket) ?? []
            rides.formUnion(ids)
            for id in ids {
                guard let seen = core.handover.forgetFenced(id, bucket: bucket) else { continue }
                if let read = core.handover.staged[id], seen.isNewer(than: read) { core.handover.staged[id] = seen }
            }
        }
        serve(buckets, now: now, core: &core, recovering: false, resuming: rides)
        // Fenced off during the read, after a release still remembered: read again for them.
        let (handover, members) = (core.handover, core.group.members)
        let again = buckets.filter {
            handover.fenced[$0] != nil && recentlyReleased($0, now: now, handover: handover, members: members)
        }
        if !again.isEmpty { startReclaim(again, now: now, core: &core) }
    }

    /// Whether a member released this served bucket within ``releaseMemory(_:)``.
    private func recentlyReleased(_ bucket: Int, now: Date, handover: HandoverState, members: [String]) -> Bool {
        guard let release = handover.releasedHere[bucket] else { return false }
        return now.timeIntervalSince1970 - release.at <= Self.releaseMemory(settings.ride.updateInterval)
            && members.contains(release.worker)
    }

    /// G4: a ride of a bucket this worker serves was fenced off here by `other`'s write. It is kept as fenced
    /// until its bucket is read again: at once if a member released the bucket within ``releaseMemory(_:)``
    /// (the notice can come first, or a read again found the retained copy behind), else when a release comes
    /// (``receiveRelease(_:worker:now:core:)``). Past that memory a fence stays: two workers whose views differ
    /// do not take a ride back and forth.
    private func fenced(_ ride: String, by other: Ride, now: Date, core: inout Core) {
        let bucket = Ownership.bucket(of: ride)
        guard core.handover.machine.serving.contains(bucket) else { return }
        keepFenced(ride, other, bucket: bucket, core: &core)
        if recentlyReleased(bucket, now: now, handover: core.handover, members: core.group.members) {
            startReclaim([bucket], now: now, core: &core)
        }
    }

    /// G4: a later state of a ride fenced off here (the fencing worker's release write, say): kept if newer.
    /// A deleted state (the ride was stopped meanwhile) forgets the ride.
    func noteFencedState(_ message: MQTTMessage, ride: String, now: Date, core: inout Core) {
        guard core.handover.isFencedAway(ride: ride) else { return }
        let bucket = Ownership.bucket(of: ride)
        guard !message.payload.isEmpty else {
            core.handover.forgetFenced(ride, bucket: bucket)
            return
        }
        guard
            let state = try? Ride.restored(
                topicRide: ride, payload: message.payload, now: now, configuration: settings.ride)
        else { return }
        keepFenced(ride, state, bucket: bucket, core: &core)
    }

    private func keepFenced(_ ride: String, _ state: Ride, bucket: Int, core: inout Core) {
        if let kept = core.handover.fenced[bucket]?[ride], !state.isNewer(than: kept) { return }
        core.handover.fenced[bucket, default: [:]][ride] = state
    }

    /// How long a release of a served bucket is remembered for a fence that comes after it: the notice and the
    /// fencing state travel on different subscriptions, which a clustered broker may deliver seconds apart.
    static func releaseMemory(_ interval: Double) -> Double { max(10, 3 * interval) }

    /// Buckets lost: nothing of them is waited for or read again here any more.
    private func forgetReclaims(of buckets: [Int], core: inout Core) {
        for bucket in buckets {
            core.handover.fenced[bucket] = nil
            core.handover.releasedHere[bucket] = nil
            core.handover.reclaimed[bucket] = nil
        }
        // Only a bucket read again has staged states while served.
        core.handover.dropStaged(of: buckets)
    }
}
