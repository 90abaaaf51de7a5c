public import Foundation
public import RideStatusKit
public import WorkerGroup

/// Several `ride-push` processes sharing the rides: a pure state machine over ``PushPlanner``, with
/// presences, registrations and ticks in and ``GroupActions`` out, tested alone.
///
/// - **Who serves a ride.** `WorkerGroup`'s ``Ownership`` over the live members (``GroupMembership``, from the
///   retained presences `{service}/push/members/{id}` and their wills): every member computes the same owner for
///   every ride with no coordination, and only the owner pushes it. mosquitto's shared subscriptions would deal
///   statuses round-robin, not by ride, so two processes could send one device states out of order.
/// - **Registrations in the broker.** A device registers with whichever process its request reaches; that process
///   writes a retained record `{service}/push/devices/{ride}/{key}` and every member reads them all. The owner
///   feeds its rides' records to its planner, and deletes a record (an empty retained message) when its planner
///   removes the device. So a registration survives a restart of every process, and a new owner finds the
///   devices of the rides it wins.
/// - **No older state after a newer one across a handover.** Rendezvous hashing moves rides only to a member that
///   joins and only from one that leaves. A member that sees a newcomer stops pushing the rides it lost at once;
///   the newcomer serves nothing before ``Settings/startDelay`` after its own presence came back from the broker
///   (when the others see it too), so a push the old owner had out lands first. A new owner registers each
///   device as taken over: every process keeps its timestamps within a second of the later of its clock and the
///   state's `issuedAt`, so the first push waits for the next whole second and goes one above it, above anything
///   the old owner sent (``PushPlanner/register(_:ride:expires:now:takenOver:)``). A member that dies (its will)
///   hands its rides over at once: it sends nothing more.
/// - **Not fenced against a live process that lost the broker.** Such a process stops serving as soon as its
///   client reports the loss, and starts again only ``Settings/startDelay`` after its presence came back; a push
///   it had out at that moment may still land after the new owner's first. The device then drops it, its
///   timestamp being lower.
public struct PushGroup: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Seconds after this member's own presence came back from the broker (the others see it then, and stop
        /// pushing the rides it wins) before it serves anything; the retained presences and registrations arrive
        /// meanwhile.
        public var startDelay: TimeInterval = 3
        /// Seconds a member may stay unheard (its will lost) before it no longer counts: three heartbeats.
        public var silenceLimit: TimeInterval = 15
        public var planner = PushPlanner.Settings()

        public init() {}
    }

    /// A registration as the broker holds it.
    public struct Record: Sendable, Hashable {
        public var device: PushDevice
        /// When the share token it registered with expires.
        public var expires: Date

        public init(device: PushDevice, expires: Date) {
            self.device = device
            self.expires = expires
        }
    }

    public let selfID: String
    public let settings: Settings
    public private(set) var planner: PushPlanner
    public private(set) var membership: GroupMembership
    public private(set) var ownership: Ownership
    /// Every registration the broker holds, by ride and then by key.
    private var records: [String: [String: Record]] = [:]
    /// When this member may serve: ``Settings/startDelay`` after its presence came back; nil while it waits for
    /// that, or after losing the broker.
    private var servingFrom: Date?
    /// The first tick after ``servingFrom`` serves what this member owns.
    private var startPending = false
    /// When this member last heard its own presence back.
    private var selfHeardAt: Date?

    public init(selfID: String, settings: Settings = Settings(), seed: UInt64 = 0x5EED) {
        self.selfID = selfID
        self.settings = settings
        self.planner = PushPlanner(settings: settings.planner, seed: seed)
        self.membership = GroupMembership(selfID: selfID, silenceLimit: settings.silenceLimit)
        self.ownership = Ownership(members: [selfID])
    }

    // MARK: - Events

    /// A member's presence (`nil`: its retained presence was deleted).
    public mutating func presence(
        of member: String, _ sighting: GroupMembership.Sighting?, now: Date
    ) -> GroupActions {
        guard let change = membership.received(worker: member, presence: sighting, now: now.timeIntervalSince1970)
        else { return GroupActions() }
        return membershipChanged(change, now: now)
    }

    /// This member's own presence of its current connection came back from the broker: the others see it now.
    public mutating func heardSelf(now: Date) -> GroupActions {
        var actions = GroupActions()
        selfHeardAt = now
        if servingFrom == nil {
            servingFrom = now.addingTimeInterval(settings.startDelay)
            startPending = true
        }
        if let change = membership.heardSelf(at: now.timeIntervalSince1970) {
            actions.add(membershipChanged(change, now: now))
        }
        return actions
    }

    /// This member lost the broker: it serves nothing until its presence comes back (another member may take its
    /// rides meanwhile). Its registrations stay in the broker.
    public mutating func disconnected() -> GroupActions {
        servingFrom = nil
        startPending = false
        var actions = GroupActions()
        for ride in records.keys where planner.serves(ride: ride) { actions.add(planner.release(ride: ride)) }
        return actions
    }

    /// A registration record read from the broker; `nil` when it was deleted. `local`: this process wrote it just
    /// now, for a device that registered with it; any other record may be of a device another process served, so
    /// its first push here goes as taken over (``PushPlanner/register(_:ride:expires:now:takenOver:)``).
    public mutating func record(
        ride: String, key: String, _ record: Record?, local: Bool = false, now: Date
    ) -> GroupActions {
        var actions = GroupActions()
        let old = records[ride]?[key]
        if let record {
            records[ride, default: [:]][key] = record
        } else {
            dropRecord(ride: ride, key: key)
        }
        let serving = planner.serves(ride: ride)
        if let old, old.device != record?.device, serving {
            // Deleted (or, never from ride-push, a key reused for another token): the device leaves.
            actions.add(planner.unregister(old.device, ride: ride))
        }
        guard let record, mayServe(ride: ride, now: now) else { return actions }
        let takenOver = !local || old != nil
        if serving {
            register(record, key: key, ride: ride, takenOver: takenOver, now: now, into: &actions)
        } else {
            // The ride's first record here, or the first since it was won: serve all it has.
            serve(ride: ride, takenOver: takenOver || records[ride]!.count > 1, now: now, into: &actions)
        }
        return actions
    }

    /// A status of a ride with devices here.
    public mutating func status(_ status: RideStatus, now: Date) -> GroupActions {
        settle(planner.status(status, now: now))
    }

    /// The ride's stop (the zero-length status).
    public mutating func stopped(ride: String, now: Date) -> GroupActions {
        settle(planner.stopped(ride: ride, now: now))
    }

    /// What became of a push.
    public mutating func outcome(_ outcome: PushPlanner.Outcome, of push: Push, now: Date) -> GroupActions {
        settle(planner.outcome(outcome, of: push, now: now))
    }

    /// Time passes: silent members leave, this member starts serving once its start delay is over, the planner's
    /// retries and refreshes.
    public mutating func tick(now: Date) -> GroupActions {
        var actions = GroupActions()
        // Its own presence unheard for the silence limit: the others may count it gone and take its rides, so
        // it stops serving until it hears itself again (then waits its start delay once more).
        if servingFrom != nil, let selfHeardAt, now.timeIntervalSince(selfHeardAt) > settings.silenceLimit {
            actions.add(disconnected())
        }
        if let change = membership.tick(now: now.timeIntervalSince1970) {
            actions.add(membershipChanged(change, now: now))
        }
        if startPending, let servingFrom, servingFrom <= now {
            startPending = false
            actions.add(reconcile(now: now))
        }
        actions.add(settle(planner.tick(now: now)))
        return actions
    }

    // MARK: - Questions

    /// Why `device` could not register for `ride` now, or nil. Asked by the member the request reached, which may
    /// not own the ride: the records count toward the cap everywhere, and the owner's planner knows an ended ride.
    public func refusal(of device: PushDevice, ride: String) -> PushPlanner.Refusal? {
        let held = records[ride] ?? [:]
        if !held.values.contains(where: { $0.device == device }),
            held.count >= settings.planner.maximumDevicesPerRide
        {
            return .tooManyDevices
        }
        return planner.refusal(of: device, ride: ride)
    }

    /// Whether `device` has a record for `ride`.
    public func isRegistered(_ device: PushDevice, ride: String) -> Bool {
        records[ride]?.values.contains(where: { $0.device == device }) ?? false
    }

    /// The key of `device`'s record for `ride`, if it has one.
    public func key(of device: PushDevice, ride: String) -> String? {
        records[ride]?.first(where: { $0.value.device == device })?.key
    }

    /// Records read from the broker, over every ride.
    public var recordCount: Int { records.values.reduce(0) { $0 + $1.count } }

    /// Whether this member serves at all (its start delay is over and it has the broker).
    public func isServing(now: Date) -> Bool { servingFrom.map { $0 <= now } ?? false }

    // MARK: - Deciding

    private func mayServe(ride: String, now: Date) -> Bool {
        guard let servingFrom, servingFrom <= now else { return false }
        return ownership.owner(ofRide: ride) == selfID
    }

    private mutating func membershipChanged(_ change: GroupMembership.Change, now: Date) -> GroupActions {
        ownership = Ownership(members: change.members)
        return reconcile(now: now)
    }

    /// Serves the rides this member may serve and releases the others.
    private mutating func reconcile(now: Date) -> GroupActions {
        var actions = GroupActions()
        for ride in records.keys {
            let serving = planner.serves(ride: ride)
            let wanted = mayServe(ride: ride, now: now)
            if wanted && !serving {
                serve(ride: ride, takenOver: true, now: now, into: &actions)
            } else if !wanted && serving {
                actions.add(planner.release(ride: ride))
            }
        }
        return actions
    }

    private mutating func serve(ride: String, takenOver: Bool, now: Date, into actions: inout GroupActions) {
        for (key, record) in records[ride] ?? [:] {
            register(record, key: key, ride: ride, takenOver: takenOver, now: now, into: &actions)
        }
    }

    private mutating func register(
        _ record: Record, key: String, ride: String, takenOver: Bool, now: Date, into actions: inout GroupActions
    ) {
        switch planner.register(record.device, ride: ride, expires: record.expires, now: now, takenOver: takenOver) {
        case .success(let registered):
            actions.add(settle(registered))
        case .failure(let refusal):
            // Two members accepted devices for one ride at once, or the ride ended: the owner's word holds.
            dropRecord(ride: ride, key: key)
            actions.deleteRecords.append(.init(ride: ride, key: key))
            actions.refusedRecords.append(.init(ride: ride, device: record.device, refusal: refusal))
        }
    }

    /// Forgets a record, and its ride once it has none.
    private mutating func dropRecord(ride: String, key: String) {
        records[ride]?[key] = nil
        if records[ride]?.isEmpty == true { records[ride] = nil }
    }

    /// The planner's actions, with a record deletion for every device it removed that still has one.
    private mutating func settle(_ planned: PushActions) -> GroupActions {
        var actions = GroupActions()
        actions.add(planned)
        for removed in planned.removed {
            guard let key = key(of: removed.device, ride: removed.ride) else { continue }
            dropRecord(ride: removed.ride, key: key)
            actions.deleteRecords.append(.init(ride: removed.ride, key: key))
        }
        return actions
    }
}

/// What ``PushGroup`` asks its service to carry out: the planner's actions over any number of rides, and the
/// registration records to delete from the broker.
public struct GroupActions: Sendable {
    public struct RecordKey: Sendable, Equatable, Hashable {
        public var ride: String
        public var key: String

        public init(ride: String, key: String) {
            self.ride = ride
            self.key = key
        }
    }

    public struct RefusedRecord: Sendable, Equatable {
        public var ride: String
        public var device: PushDevice
        public var refusal: PushPlanner.Refusal

        public init(ride: String, device: PushDevice, refusal: PushPlanner.Refusal) {
            self.ride = ride
            self.device = device
            self.refusal = refusal
        }
    }

    public var pushes: [Push] = []
    public var subscribe: [String] = []
    public var unsubscribe: [String] = []
    public var removed: [Removed] = []
    public var refused: [(Push, String)] = []
    public var renewCredential: Set<PushDevice.Service> = []
    /// Records to delete (an empty retained message on their topic).
    public var deleteRecords: [RecordKey] = []
    /// Records the owner's planner would not take.
    public var refusedRecords: [RefusedRecord] = []

    public init() {}

    mutating func add(_ planned: PushActions) {
        pushes += planned.pushes
        if let ride = planned.subscribe { subscribe.append(ride) }
        unsubscribe += planned.unsubscribe
        removed += planned.removed
        refused += planned.refused
        if let service = planned.renewCredential { renewCredential.insert(service) }
    }

    mutating func add(_ other: GroupActions) {
        pushes += other.pushes
        subscribe += other.subscribe
        unsubscribe += other.unsubscribe
        removed += other.removed
        refused += other.refused
        renewCredential.formUnion(other.renewCredential)
        deleteRecords += other.deleteRecords
        refusedRecords += other.refusedRecords
    }
}
