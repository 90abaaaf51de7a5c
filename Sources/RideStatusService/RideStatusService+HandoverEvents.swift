import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain
import RideJSON
import WorkerGroup

import struct RideStatusKit.DeadLetter

// MARK: - Handover (G3, G4): the handover's state, and the events the service hands the pure `Handover` machine

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
}
