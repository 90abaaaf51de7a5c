/// The contract's topic names (section 2) under its configurable prefixes (the worker's `topics.*` settings).
/// The defaults are the contract's.
public struct RideTopics: Sendable, Hashable {
    public var fleetPrefix: String
    public var ridesPrefix: String
    public var serviceName: String
    public var rideOptionsPrefix: String
    public var replyPrefix: String

    public init(
        fleetPrefix: String = "fleet", ridesPrefix: String = "rides", serviceName: String = "ridestatus",
        rideOptionsPrefix: String = "ride-options", replyPrefix: String = "replies"
    ) {
        self.fleetPrefix = fleetPrefix
        self.ridesPrefix = ridesPrefix
        self.serviceName = serviceName
        self.rideOptionsPrefix = rideOptionsPrefix
        self.replyPrefix = replyPrefix
    }

    /// What dispatch sends about a ride (3.2).
    public enum Control: String, Sendable, Hashable, CaseIterable {
        case start, assign, event, cancel, stop
    }

    /// A vehicle's fixes (3.1).
    public func position(vehicle: String) -> String { "\(fleetPrefix)/vehicles/\(vehicle)/position" }
    /// A vehicle's availability for quotes (3.4), retained.
    public func availability(vehicle: String) -> String { "\(fleetPrefix)/vehicles/\(vehicle)/availability" }
    /// A3: a driver event from the vehicle's own driver app (``VehicleEvent``), applied only while the vehicle is
    /// the ride's assigned one.
    public func vehicleEvent(vehicle: String) -> String { "\(fleetPrefix)/vehicles/\(vehicle)/event" }
    /// Dispatch's messages about a ride (3.2).
    public func control(_ kind: Control, ride: String) -> String { "\(ridesPrefix)/\(ride)/\(kind.rawValue)" }
    /// The ride's statuses (3.3), retained: what a rider app or an Intents extension subscribes to.
    public func status(ride: String) -> String { "\(ridesPrefix)/\(ride)/status" }
    /// Every ride's statuses (dispatch, dashboards).
    public var statusFilter: String { "\(ridesPrefix)/+/status" }
    /// Ask for a ride's current status (L7), with a Response Topic under ``replyPrefix``.
    public func statusRequest(ride: String) -> String { "\(ridesPrefix)/\(ride)/status/get" }
    /// Quote requests (3.4).
    public var rideOptionsRequest: String { "\(rideOptionsPrefix)/request" }
    /// A Response Topic for a request of this client (A1: replies go only under ``replyPrefix``).
    public func reply(client: String) -> String { "\(replyPrefix)/\(client)" }
    /// Refused inputs (3.5).
    public var deadLetter: String { "\(serviceName)/deadletter" }
    /// A worker's presence (G1), retained.
    public func presence(worker: String) -> String { "\(serviceName)/workers/\(worker)" }
    /// Every worker's presence.
    public var presenceFilter: String { "\(serviceName)/workers/+" }

    /// A `ride-push` process's presence, retained, with a will: the processes share the rides by
    /// `WorkerGroup`'s ownership over these members, as the workers do over theirs.
    public func pushMember(_ member: String) -> String { "\(serviceName)/push/members/\(member)" }
    /// Every `ride-push` process's presence.
    public var pushMemberFilter: String { "\(serviceName)/push/members/+" }
    /// One device's registration for a ride, retained: written by the `ride-push` process the device
    /// registered with, served by the one that owns the ride, deleted (an empty retained message) when it ends.
    /// `key` is a digest of the push token, never the token.
    public func pushDevice(ride: String, key: String) -> String { "\(serviceName)/push/devices/\(ride)/\(key)" }
    /// Every registration.
    public var pushDeviceFilter: String { "\(serviceName)/push/devices/+/+" }

    /// The member a push presence topic names, or nil when `topic` is not one.
    public func pushMember(ofTopic topic: String) -> String? {
        let prefix = "\(serviceName)/push/members/"
        guard topic.hasPrefix(prefix) else { return nil }
        let member = topic.dropFirst(prefix.utf8.count)
        return member.isEmpty || member.contains("/") ? nil : String(member)
    }

    /// The ride and key a registration topic names, or nil when `topic` is not one.
    public func pushDevice(ofTopic topic: String) -> (ride: String, key: String)? {
        let prefix = "\(serviceName)/push/devices/"
        guard topic.hasPrefix(prefix) else { return nil }
        let levels = topic.dropFirst(prefix.utf8.count).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 2, !levels[0].isEmpty, !levels[1].isEmpty else { return nil }
        return (String(levels[0]), String(levels[1]))
    }

    /// The ride a status topic is about, or nil when `topic` is not one.
    public func ride(ofStatusTopic topic: String) -> String? {
        let prefix = ridesPrefix + "/"
        let suffix = "/status"
        guard topic.hasPrefix(prefix), topic.hasSuffix(suffix), topic.count > prefix.count + suffix.count else {
            return nil
        }
        let ride = topic.dropFirst(prefix.count).dropLast(suffix.count)
        return ride.contains("/") ? nil : String(ride)
    }
}
