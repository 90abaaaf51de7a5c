/// Who is in the group (G1), from the retained presence messages `ridestatus/workers/{id}` and their wills
/// (L8): a pure state machine, presence messages in, membership changes out, tested alone.
///
/// Every birth and its will carry the same incarnation, and a new connection has a larger one (the Sparkplug
/// primary-host pattern): a message of an older incarnation than one already seen is stale and ignored, so a
/// will that arrives late never turns a reborn worker offline. Within one incarnation `offline` is final: it
/// is that connection's will or its goodbye.
///
/// A will can be lost (a broker node that dies with its clients' connections, a broker that shuts down while
/// holding them), and a retained `online` would then make a ghost a member for ever, its buckets served by
/// nobody. So members repeat their presence (a heartbeat), and with a ``silenceLimit`` an `online` presence
/// not heard from for longer than that no longer counts; a fresh one counts again. Silence is measured against
/// this worker's own heartbeat as the broker sends it back (``heardSelf(at:)``), not against the clock alone: a
/// frozen or unreachable broker silences everyone at once, and nobody is taken for dead because of it.
public struct GroupMembership: Sendable {
    /// What the group reads of one worker's presence message (the payload is RideStatusKit's `Presence`): whether
    /// it is online, its connection's incarnation, and when it was heard.
    public struct Sighting: Sendable, Equatable {
        public var online: Bool
        /// Grows with every connection of the worker; 0 for a presence without one (releases before groups).
        public var incarnation: UInt64
        /// When the worker was last heard from, in seconds; nil counts as just now.
        public var seenAt: Double?

        public init(online: Bool, incarnation: UInt64, seenAt: Double? = nil) {
            self.online = online
            self.incarnation = incarnation
            self.seenAt = seenAt
        }
    }

    /// A change of the live members, to be carried out by the owner of this state machine.
    public struct Change: Sendable, Equatable {
        public var joined: [String]
        public var left: [String]
        /// The live members after the change, this worker among them.
        public var members: [String]

        public init(joined: [String], left: [String], members: [String]) {
            self.joined = joined
            self.left = left
            self.members = members
        }
    }

    /// This worker: always a member in its own view while it runs.
    public let selfID: String
    /// The newest presence seen of each worker, this one's own included.
    public private(set) var presences: [String: Sighting] = [:]
    /// The live members, sorted.
    public private(set) var members: [String]

    /// Seconds of silence after which an `online` presence no longer counts; nil: never.
    public let silenceLimit: Double?
    /// The latest time this state machine was told of.
    private var now = -Double.infinity
    /// When this worker last heard its own current heartbeat back from the broker.
    private var selfHeardAt: Double?

    public init(selfID: String, silenceLimit: Double? = nil) {
        self.selfID = selfID
        self.silenceLimit = silenceLimit
        self.members = [selfID]
    }

    /// A presence message for `worker`; `nil` when its retained presence was deleted (a zero-length message),
    /// which counts as a leave of whatever incarnation was known. Returns the change of the live members, if any.
    public mutating func received(worker: String, presence: Sighting?, now: Double? = nil) -> Change? {
        if let now { self.now = max(self.now, now) }
        let known = presences[worker]
        if let presence {
            if let known {
                if presence.incarnation < known.incarnation { return nil }  // stale: a late will or an old birth
                if presence.incarnation == known.incarnation && !known.online { return nil }  // offline is final
            }
            presences[worker] = presence
        } else {
            guard let known else { return nil }
            presences[worker] = Sighting(online: false, incarnation: known.incarnation)
        }
        return recompute()
    }

    /// This worker's own presence of its current connection came back from the broker at `time`: the broker
    /// delivers, so others' silence until then is theirs.
    public mutating func heardSelf(at time: Double) -> Change? {
        selfHeardAt = max(selfHeardAt ?? time, time)
        now = max(now, time)
        return recompute()
    }

    /// Time passes: members silent for longer than ``silenceLimit`` leave the view.
    public mutating func tick(now: Double) -> Change? {
        self.now = max(self.now, now)
        return recompute()
    }

    /// Whether `worker` is a live member in this worker's view.
    public func isMember(_ worker: String) -> Bool { members.contains(worker) }

    private mutating func recompute() -> Change? {
        var live = Set(presences.filter { $0.value.online && !isSilent($0.value) }.map(\.key))
        live.insert(selfID)
        let sorted = live.sorted()
        guard sorted != members else { return nil }
        let before = Set(members)
        let change = Change(
            joined: sorted.filter { !before.contains($0) }, left: members.filter { !live.contains($0) },
            members: sorted)
        members = sorted
        return change
    }

    private func isSilent(_ presence: Sighting) -> Bool {
        guard let silenceLimit, let seenAt = presence.seenAt else { return false }
        return (selfHeardAt ?? now) - seenAt > silenceLimit
    }
}

extension GroupMembership {
    /// G1, A2: whether a presence's incarnation (milliseconds since 1970 of its connection's start) is one a real
    /// birth could carry when read at `now` (seconds since 1970): at most a day ahead of this host's clock. One
    /// further ahead would make every real birth of that member look stale, so a presence carrying it is refused.
    /// The workers' parser and ride-push's both ask here.
    public static func isPlausible(incarnation: Double, now: Double) -> Bool { incarnation <= (now + 86_400) * 1000 }
}
