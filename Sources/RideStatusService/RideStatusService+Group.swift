import Foundation
import Logging
import MQTTClient
import RideDomain
import RideStatusKit
import WorkerGroup

// MARK: - The group (G1): who else serves these topics, from their presence and wills

extension RideStatusService {
    /// G1, L8: one worker's presence (a birth, a will, a goodbye, or a deletion); a change of the members is
    /// logged with the rides this worker would gain and lose by it (`ridestatus_group_members` counts them). What does not read is
    /// dead-lettered (A2: read back from the broker, it is checked like any input).
    func receivePresence(_ message: MQTTMessage, worker: String, now: Date, core: inout Core) {
        let presence: GroupMembership.Sighting?
        do throws(Rejection) {
            guard Identifier.isValid(worker) else {
                throw Rejection(.invalidIdentifier, "worker id in the presence topic breaks I1 (G1, A2)")
            }
            if core.group.presences[worker] == nil, core.group.presences.count >= Self.maximumGroupSize {
                throw Rejection(
                    .invalidField, "more than \(Self.maximumGroupSize) workers' presences: this one is ignored (G1)")
            }
            presence = try Presence.member(from: message.payload, decoder: decoder, now: now)
        } catch {
            logger.warning(
                "worker presence refused (G1, A2)",
                metadata: ["topic": "\(message.topic)", "detail": "\(error.detail)"])
            executor.execute(
                core.engine.reject(error, topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
            return
        }
        if worker == identity.id, presence?.online != true, (presence?.incarnation ?? 0) < transport.incarnation {
            rejoin(after: presence?.incarnation ?? 0, now: now, core: &core)
        }
        if worker == identity.id, let announced = presence?.incarnation, announced > transport.incarnation,
            transport.incarnation > 0
        {
            // The clock went back since this worker announced `announced`: every birth it makes now would be
            // taken for a stale one, and the group would never see it (G1).
            logger.warning(
                "this host's clock is behind an incarnation this worker announced before; reconnecting above it (G1)",
                metadata: ["incarnation.announced": "\(announced)", "incarnation.now": "\(transport.incarnation)"])
            transport.reconnect(incarnationAbove: announced)
        }
        // G1: when the worker was heard from. A retained presence read at subscription tells its age by its own
        // `at` (a ghost whose will was lost is old); anything live is heard now.
        var heard = presence
        let clock = now.timeIntervalSince1970
        heard?.seenAt = message.retain ? min(clock, presence?.seenAt ?? clock) : clock
        let previousMembers = core.group.members
        var change = core.group.received(worker: worker, presence: heard, now: clock)
        if worker == identity.id, presence?.online == true, presence?.incarnation == transport.incarnation {
            change = core.group.heardSelf(at: clock) ?? change
        }
        // G5, G6: a bucket granted here whose last holder is now offline (its connection closed) is served.
        if worker != identity.id {
            let online = core.group.presences[worker]?.online ?? false
            stepGrants(&core) { $0.presenceHeard(worker: worker, online: online, now: $1) }
        }
        guard let change else { return }
        groupChanged(change, previousMembers: previousMembers, now: now, core: &core)
    }

    /// G1: the members changed (a presence, or a member's silence): logged with the rides that move, and the
    /// handover follows once the first view is formed.
    func groupChanged(_ change: GroupMembership.Change, previousMembers: [String], now: Date, core: inout Core) {
        guard core.handover.machine.viewFormed else { return membersChanged(now: now, core: &core) }
        let served = core.engine.activeRideCount
        let before = Ownership(members: previousMembers)
        let after = Ownership(members: change.members)
        var moving = 0
        for ride in core.engine.rideIdentifiers where before.owner(ofRide: ride) != after.owner(ofRide: ride) {
            moving += 1
        }
        logger.info(
            "group membership changed (G1)",
            metadata: [
                "members": "\(change.members)", "joined": "\(change.joined)", "left": "\(change.left)",
                "rides.held": "\(served)", "rides.leaving": "\(moving)",
                "buckets.arriving": "\(core.handover.machine.pendingCount)",
            ])
        membersChanged(now: now, core: &core)
    }
}

extension RideStatusService {
    /// G1: how often a worker repeats its birth (seconds), so that the others hear it is alive.
    static var heartbeatInterval: Double { 10 }
    /// G1: how long a member may stay unheard, measured against this worker's own heartbeat coming back, before
    /// it no longer counts (its will was lost): three heartbeats.
    static var silenceLimit: Double { 3 * heartbeatInterval }

    /// G1: once a second: repeats the birth when a heartbeat is due, and lets silent members go.
    func heartbeat(now: Date, core: inout Core) {
        // L8: only a connection that announced repeats its birth, and only while it is the current one.
        if let incarnation = core.lifecycle.announcedIncarnation,
            now.timeIntervalSince(core.lastHeartbeat) >= Self.heartbeatInterval, transport.isConnected,
            transport.incarnation == incarnation
        {
            core.lastHeartbeat = now
            try? transport.publish(
                identity.presenceTopic,
                identity.presence(online: true, incarnation: incarnation, since: core.onlineSince, now: now),
                retain: true)
        }
        let previousMembers = core.group.members
        if let change = core.group.tick(now: now.timeIntervalSince1970) {
            logger.warning(
                "members silent for \(Int(Self.silenceLimit)) s no longer count (their wills were lost?) (G1)",
                metadata: ["left": "\(change.left)"])
            groupChanged(change, previousMembers: previousMembers, now: now, core: &core)
        }
    }

    /// Presences the worker keeps, at most: a broker full of retained presences (any client may write one
    /// where ACLs do not stop it) must not grow the worker or its ownership tables without bound.
    static var maximumGroupSize: Int { 1000 }
}

extension Presence {
    /// G1, A2: what the group reads of a presence message from the broker: nil for a deleted one (a zero-length retained message); an
    /// `incarnation` absent (releases before groups) reads as 0.
    static func member(from payload: [UInt8], decoder: InputDecoder = InputDecoder(), now: Date)
        throws(Rejection) -> GroupMembership.Sighting?
    {
        guard !payload.isEmpty else { return nil }
        // I2 as for every input: size, UTF-8, a JSON object.
        let value = try decoder.object(payload, emptyAsObject: false)
        let online: Bool
        switch value["state"]?.stringValue {
        case "online": online = true
        case "offline": online = false
        case nil: throw Rejection(.missingField, "presence: state (G1, L8)")
        case let other?: throw Rejection(.invalidField, "presence: state '\(other)' is not online or offline (L8)")
        }
        var incarnation: UInt64 = 0
        if let field = value["incarnation"] {
            guard let number = field.doubleValue, number >= 0, number < 9_007_199_254_740_992,
                number == number.rounded()
            else { throw Rejection(.invalidField, "presence: incarnation is not a whole number up to 2^53 (G1)") }
            // An incarnation from the future would make every real birth of that worker look stale (A2).
            guard GroupMembership.isPlausible(incarnation: number, now: now.timeIntervalSince1970) else {
                throw Rejection(.invalidField, "presence: incarnation \(Int(number)) is more than a day ahead (G1, A2)")
            }
            incarnation = UInt64(number)
        }
        // G1: when it was published (heartbeats); a time that does not read is no time.
        let at = value["at"].flatMap { Timestamps.parse($0) }
        return GroupMembership.Sighting(
            online: online, incarnation: incarnation, seenAt: at.map(\.timeIntervalSince1970))
    }
}
