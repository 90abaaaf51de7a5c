public import Foundation
public import WorkerGroup

/// ride-push's side of its broker connection, as a machine: when this process announces itself (G1's presence),
/// when the group may serve, and when it must stop. Events in, actions out; the service carries them out.
public struct PushConnection: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Publish this process's online presence (retained), straight to the client: a heartbeat stamped long
        /// before it leaves, behind thousands of subscriptions after a takeover, would make the others count this
        /// one gone.
        case announce(incarnation: UInt64, since: Date)
        /// Its own presence came back from the broker, so the others see it: the group may serve.
        case heardSelf
        /// The connection ended: serve nothing until the presence is back.
        case stopServing
    }

    /// Seconds between presences while connected.
    public let heartbeat: TimeInterval
    /// The connection's incarnation while connected, nil otherwise.
    public private(set) var incarnation: UInt64?
    /// The group's presences and registrations are subscribed, once: the broker keeps them across reconnects.
    public private(set) var groupSubscribed = false
    private var onlineSince = Date.distantPast
    private var lastAnnounced = Date.distantPast

    public init(heartbeat: TimeInterval) { self.heartbeat = heartbeat }

    /// Requests that need the broker (a registration's write) are refused with nil.
    public var isConnected: Bool { incarnation != nil }

    /// The broker acknowledged every subscription of the connection of `incarnation`.
    public mutating func connected(incarnation: UInt64, now: Date) -> Action? {
        self.incarnation = incarnation
        onlineSince = now
        return announce(now: now)
    }

    /// The group's presences and registrations are subscribed: nothing is announced before, so that this
    /// process hears its own presence come back.
    public mutating func subscribedGroup(now: Date) -> Action? {
        groupSubscribed = true
        return announce(now: now)
    }

    public mutating func disconnected() -> Action {
        incarnation = nil
        return .stopServing
    }

    /// Once a tick: the heartbeat, when one is due.
    public mutating func tick(now: Date) -> Action? {
        guard now.timeIntervalSince(lastAnnounced) >= heartbeat else { return nil }
        return announce(now: now)
    }

    /// This process's own presence, read back from the broker: only the current connection's online one counts.
    public func heard(own sighting: GroupMembership.Sighting?) -> Action? {
        guard let sighting, sighting.online, let incarnation, sighting.incarnation == incarnation else { return nil }
        return .heardSelf
    }

    private mutating func announce(now: Date) -> Action? {
        guard let incarnation, groupSubscribed else { return nil }
        lastAnnounced = now
        return .announce(incarnation: incarnation, since: onlineSince)
    }
}

/// Pushes waiting to be sent, with at most ``limit`` in flight at once over both services. The queue's head moves
/// instead of each send shifting the array: after an outage 100,000 may wait.
public struct SendQueue: Sendable {
    public let limit: Int
    private var waiting: [Push] = []
    private var head = 0
    public private(set) var inFlight = 0

    public init(limit: Int) { self.limit = max(1, limit) }

    /// Pushes queued and not yet sent.
    public var waitingCount: Int { waiting.count - head }

    /// Queues `pushes`; returns those to send now, counted in flight.
    public mutating func add(_ pushes: [Push]) -> [Push] {
        waiting += pushes
        return startable()
    }

    /// A send ended; returns those to send now.
    public mutating func finished() -> [Push] {
        inFlight = max(0, inFlight - 1)
        return startable()
    }

    private mutating func startable() -> [Push] {
        var started: [Push] = []
        while inFlight < limit, head < waiting.count {
            started.append(waiting[head])
            head += 1
            inFlight += 1
        }
        if head == waiting.count || (head >= 1024 && head * 2 >= waiting.count) {
            waiting.removeFirst(head)
            head = 0
        }
        return started
    }
}
