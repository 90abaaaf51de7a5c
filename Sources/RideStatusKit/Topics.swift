/// The contract's topic names (section 2) under its configurable prefixes (the worker's `topics.*` settings), and
/// the workers' and ride-push's own topics under `serviceName`. The defaults are the contract's. The one table of
/// topics: the worker, ride-push, the simulator, the live view and (by a test) the broker's roles use it; the
/// worker adds its fast parser and the bucketed state topics (`Contract/Contract.swift` in RideDomain).
public struct RideTopics: Sendable, Hashable {
    public var fleetPrefix: String
    public var ridesPrefix: String
    public var serviceName: String
    public var rideOptionsPrefix: String
    /// A1: replies go only to Response Topics under this prefix.
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
        /// `route`: E2's new route after a reroute.
        case start, assign, event, cancel, stop, route
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
    /// Every vehicle's availability (3.4): retained, so a new subscription sees the whole available fleet.
    public var availabilityFilter: String { "\(fleetPrefix)/vehicles/+/availability" }
    /// Every vehicle's driver events (A3): a control subscription like `rides/+/event`.
    public var vehicleEventFilter: String { "\(fleetPrefix)/vehicles/+/event" }
    /// Dispatch's messages about every ride, one filter per kind (3.2).
    public var controlFilters: [String] { Control.allCases.map { "\(ridesPrefix)/+/\($0.rawValue)" } }
    /// Every ride's status requests (L7).
    public var statusRequestFilter: String { "\(ridesPrefix)/+/status/get" }

    // MARK: The workers' private topics (retained; the broker's worker role alone reads and writes them)

    /// The durable state of one ride (L5) under its ownership bucket's name (G1, G3), so that a worker taking over a
    /// bucket reads only that bucket's rides: `{serviceName}/state/{bucket}/{ride}`.
    public func state(bucketName: String, ride: String) -> String { "\(serviceName)/state/\(bucketName)/\(ride)" }
    /// The durable states of one bucket's rides (G3: what a new owner of the bucket reads).
    public func stateFilter(bucketName: String) -> String { "\(serviceName)/state/\(bucketName)/+" }
    /// The durable state's topic in releases before groups (`{serviceName}/state/{ride}`): still read at start,
    /// and cleared once the ride's state is written under its bucket.
    public func legacyState(ride: String) -> String { "\(serviceName)/state/\(ride)" }
    /// The durable states of releases before groups (one level: `{serviceName}/state/{ride}`).
    public var legacyStateFilter: String { "\(serviceName)/state/+" }
    /// Every ride's durable state under its bucket (G3: a load of many buckets at once).
    public var bucketedStateFilter: String { "\(serviceName)/state/+/+" }
    /// Every ride's durable state, in both layouts (bucketed and the legacy one).
    public var stateFilter: String { "\(serviceName)/state/#" }
    /// G3: a worker's notice that it has written the last states of the buckets it lists and stopped serving them.
    public func released(worker: String) -> String { "\(serviceName)/workers/\(worker)/released" }
    /// Every worker's release notices (G3).
    public var releasedFilter: String { "\(serviceName)/workers/+/released" }
    /// G5: a worker's lease pings and lease marker (private to it: it alone reads them).
    public func leaseMarker(worker: String) -> String { "\(serviceName)/workers/\(worker)/lease" }
    /// L5: the marker that closes a worker's recovery (private to it).
    public func recoveryMarker(worker: String) -> String { "\(serviceName)/workers/\(worker)/recovery" }
    /// G3: a worker's load markers (private to it).
    public func loadMarker(worker: String) -> String { "\(serviceName)/workers/\(worker)/load" }
    /// E1: one service area's learned priors, retained and private to the workers: `{serviceName}/priors/{key}`.
    public func priors(key: String) -> String { "\(serviceName)/priors/\(key)" }
    /// Every area's shared priors (E1).
    public var priorsFilter: String { "\(serviceName)/priors/+" }

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
