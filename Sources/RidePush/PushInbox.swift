public import Foundation
public import RideStatusKit
public import WorkerGroup

/// What ride-push takes in from the broker, before its one task takes it, and what each message reads as.
///
/// While that task falls behind the broker (a burst of statuses; a slow APNs does not slow it, its pushes wait as
/// the newest state per activity), a ride's older status is replaced, not queued behind: what waits is bounded by
/// the rides subscribed, at about 20,000 statuses a second for the whole fleet of 100,000 rides (L3's figure).
///
/// A stop (the zero-length status) neither replaces a waiting status nor is replaced: the completion waiting before
/// it is the state its `end` shows. It goes in order, as a message of its own, behind the waiting status, which is
/// then sealed: what comes after the stop queues behind it too, until the task took it.
public struct PushInbox: Sendable {
    /// Where a message goes.
    public enum Arrival: Sendable, Equatable {
        /// A status now waits under its topic: wake the task for it.
        case waits
        /// It replaced the status that waited under its topic; the task is woken already.
        case replaced
        /// To the task in order, as a message of its own: not a status, a stop, or what came after a stop.
        case inOrder
    }

    /// A message as the service acts on it.
    public enum Message: Sendable {
        case status(ride: String, RideStatus)
        case stop(ride: String)
        /// On a status topic, but not a status of that ride (V1-V7 hold for what the worker publishes).
        case unreadableStatus(ride: String, bytes: Int)
        /// A member's presence; nil for a deleted one.
        case presence(member: String, GroupMembership.Sighting?)
        /// A presence that does not read (A2, G1).
        case unreadablePresence(member: String, bytes: Int)
        /// A registration record; nil for a deleted one.
        case record(ride: String, key: String, PushGroup.Record?)
        case unreadableRecord(ride: String, PushGroup.Record.Problem)
        /// None of ride-push's topics.
        case other
    }

    private struct Waiting {
        var payload: [UInt8]
        /// A stop queued behind it: nothing may take its place any more.
        var sealed = false
    }

    public let topics: RideTopics
    private var waiting: [String: Waiting] = [:]

    public init(topics: RideTopics) { self.topics = topics }

    /// A message arrived from the broker.
    public mutating func arrived(topic: String, payload: [UInt8]) -> Arrival {
        guard topics.ride(ofStatusTopic: topic) != nil else { return .inOrder }
        let stop = payload.isEmpty
        guard var entry = waiting[topic] else {
            if stop { return .inOrder }
            waiting[topic] = Waiting(payload: payload)
            return .waits
        }
        if stop || entry.sealed {
            entry.sealed = true
            waiting[topic] = entry
            return .inOrder
        }
        entry.payload = payload
        waiting[topic] = entry
        return .replaced
    }

    /// The task takes the status waiting under `topic`; nil when it took it already.
    public mutating func take(topic: String) -> [UInt8]? { waiting.removeValue(forKey: topic)?.payload }

    /// The status waiting under `topic`, if any.
    public func waiting(topic: String) -> [UInt8]? { waiting[topic]?.payload }

    /// What a message on `topic` reads as. Static: the waiting statuses are not needed, and a copy of them taken out
    /// of the lock would make the next arrival copy the whole table.
    public static func read(topic: String, payload: [UInt8], topics: RideTopics, now: Date) -> Message {
        if let ride = topics.ride(ofStatusTopic: topic) {
            if payload.isEmpty { return .stop(ride: ride) }
            guard let status = try? JSONDecoder.rideStatus.decode(RideStatus.self, from: Data(payload)),
                status.rideIdentifier == ride
            else { return .unreadableStatus(ride: ride, bytes: payload.count) }
            return .status(ride: ride, status)
        }
        if let member = topics.pushMember(ofTopic: topic) {
            guard let sighting = Self.sighting(payload, now: now) else {
                return .unreadablePresence(member: member, bytes: payload.count)
            }
            return .presence(member: member, sighting)
        }
        if let (ride, key) = topics.pushDevice(ofTopic: topic) {
            if payload.isEmpty { return .record(ride: ride, key: key, nil) }
            do throws(PushGroup.Record.Problem) {
                return .record(ride: ride, key: key, try PushGroup.Record(payload: payload, key: key))
            } catch {
                return .unreadableRecord(ride: ride, error)
            }
        }
        return .other
    }

    /// A member's presence payload as the group reads it; `.some(nil)` for a deleted one (empty), nil when it does
    /// not read (A2): not a presence, or an incarnation below zero or more than a day ahead (the workers' check).
    public static func sighting(_ payload: [UInt8], now: Date) -> GroupMembership.Sighting?? {
        if payload.isEmpty { return .some(nil) }
        guard let presence = try? JSONDecoder.rideStatus.decode(Presence.self, from: Data(payload)),
            (presence.incarnation ?? 0) >= 0,
            GroupMembership.isPlausible(
                incarnation: Double(presence.incarnation ?? 0), now: now.timeIntervalSince1970)
        else { return nil }
        return .some(
            GroupMembership.Sighting(
                online: presence.state == .online, incarnation: UInt64(presence.incarnation ?? 0),
                // A heartbeat stamped ahead of this host's clock counts as heard now: a member whose clock is ahead
                // would otherwise never fall silent here once its will is lost.
                seenAt: presence.at.map { min($0, now).timeIntervalSince1970 }))
    }
}
