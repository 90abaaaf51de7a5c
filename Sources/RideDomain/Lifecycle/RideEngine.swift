public import Foundation
public import RideStatusKit
package import WorkerGroup

/// What the owner of a ``RideEngine`` must do. The engine itself does no I/O.
public enum RideAction: Sendable, Equatable {
    /// Publish the status (retained, QoS 1), and keep `state` durably (L5) before it when there is one: the
    /// engine writes the state only on changes that matter and once per sequence block (C5). `gap`: seconds
    /// since the ride's status before (C1; nil for a ride's first status after a start or a restart).
    case publish(RideStatus, state: Ride?, gap: Double?)
    /// L2: publish a zero-length retained status and forget the ride's durable state; G2: under the ride's
    /// last ownership epoch.
    case clear(ride: String, epoch: UInt64 = 1)
    /// L3: first active ride of the vehicle.
    case subscribe(vehicle: String)
    /// L3: last active ride of the vehicle ended or was reassigned.
    case unsubscribe(vehicle: String)
    /// 3.5: publish on the dead-letter topic (already rate limited).
    case deadLetter(DeadLetter)
    /// V7: a status failed validation; the last valid one was published instead (or none, if there was none).
    case invalidStatus(ride: String, violation: StatusViolation)
}

/// Counts the owner turns into metrics.
public struct RideCounters: Sendable, Equatable {
    public var fixesAccepted = 0
    public var fixesDuplicate = 0
    public var fixesWithoutRide = 0
    public var fixesIgnored = 0
    public var rejections: [DeadLetter.Reason: Int] = [:]
    public var deadLettersSuppressed = 0
    public var statusesPublished = 0
    /// Durable-state writes asked for (C5, L5): one per change that matters and per sequence block.
    public var statesWritten = 0
    /// Statuses numbered that could not leave for lack of room at the broker; their rides published again
    /// as soon as there was room (not counted in `statusesPublished` or `statesWritten`).
    public var statusesDeferred = 0
    public var phaseTransitions = 0
    public var duplicateStarts = 0
    public var invalidStatuses = 0
    public var ridesStarted = 0
    public var ridesStopped = 0

    public init() {}
}

/// Every active ride, the vehicle subscriptions they need and the cadence scheduler: the whole domain
/// behind one value. Inputs are raw topic and payload bytes; outputs are ``RideAction``s.
public struct RideEngine: Sendable {
    public let configuration: RideConfiguration
    public let topics: RideTopics
    let decoder: InputDecoder
    /// Every active ride; fixes reach them by slot, without hashing their identifiers.
    var rideTable = SlotTable<Ride>()
    /// Every active ride by identifier (a copy: for inspection and tests).
    package var rides: [String: Ride] { rideTable.dictionary }
    /// One active ride.
    public func ride(_ identifier: String) -> Ride? { rideTable[identifier] }
    /// The identifiers of the active rides.
    public var rideIdentifiers: [String] { rideTable.keys }
    /// C5: a ride's sequence, without copying the ride out.
    package func sequence(of identifier: String) -> Int? {
        rideTable.slot(of: identifier).map { rideTable[slot: $0].sequence }
    }
    /// G2: a ride's ownership epoch, without copying the ride out.
    public func epoch(of identifier: String) -> UInt64? {
        rideTable.slot(of: identifier).map { rideTable[slot: $0].epoch }
    }
    /// C5, G3: the ``SequenceFloor`` of each bucket that holds active rides (all of them, or those `in` the
    /// given buckets): the highest epoch and reserved sequence among its rides, for a release notice.
    package func sequenceFloors(in buckets: Set<Int>? = nil) -> [Int: SequenceFloor] {
        var floors: [Int: SequenceFloor] = [:]
        // By slot: no identifier array built and no hash lookup per ride.
        for slot in rideTable.slots {
            let bucket = Ownership.bucket(of: rideTable[slot: slot].rideIdentifier)
            guard buckets?.contains(bucket) ?? true else { continue }
            let floor = RideNumbering.floor(of: rideTable[slot: slot].version)
            floors[bucket] = floors[bucket].map { floor.merged(with: $0) } ?? floor
        }
        return floors
    }
    /// C5, G3: another worker's release notice says it served these buckets too, up to these floors (both took
    /// them over from the same read while their views split, under the same epoch, so neither fenced the other):
    /// each ride held here in such a bucket numbers its next status above its floor's ceiling (C5 allows gaps),
    /// its state reserving a block first as any status past its ceiling does. Before, a subscriber keeping the
    /// highest sequence dropped this worker's statuses until its numbers passed the other's, minutes at the
    /// cadence for takeovers seconds apart. Rides already above their floor are left as they are.
    /// - Returns: the rides lifted, for the caller to write their states now: each says the floor as its sequence
    ///   and ceiling (nothing above it is published yet), so a restart, or a worker taking the ride over from the
    ///   state, continues above the lift even before the next status. That write is an extra: the next status
    ///   writes its own, reserving its block, before it goes (a write that found no room at the broker therefore
    ///   loses nothing). It reserves no block itself: the next status's write, whose block a change may shorten
    ///   (``durableState(_:significant:)``), must never have a lower ceiling than it, or a reader comparing the
    ///   two copies (epoch, ceiling, sequence) would take the older for the newer.
    package mutating func liftSequences(above floors: [Int: SequenceFloor]) -> [Ride] {
        guard !floors.isEmpty else { return [] }
        var lifted: [Ride] = []
        for slot in rideTable.slots {
            guard let floor = floors[Ownership.bucket(of: rideTable[slot: slot].rideIdentifier)],
                let ride = lift(slot, to: floor.ceiling)
            else { continue }
            lifted.append(ride)
        }
        return lifted
    }

    /// C5: ride `id` is lifted to `sequence`, the ceiling another worker reserved it up to under the same epoch (it
    /// took the ride over too, from the same read, while their views split): its next status numbers above, its
    /// state reserving first as any status past its ceiling does. Nothing needs writing now: the other's state,
    /// retained, already tells a restart to go above.
    /// - Returns: the ride lifted; nil when it is not held here or already numbers at or above `sequence`.
    package mutating func liftSequence(of id: String, above sequence: Int) -> Ride? {
        rideTable.slot(of: id).flatMap { lift($0, to: sequence) }
    }

    /// C5: the ride in `slot` numbered at `sequence` (at most ``Ride/maxSequence``) if that is above its own; nil
    /// when it is not.
    private mutating func lift(_ slot: Int, to sequence: Int) -> Ride? {
        guard let lifted = RideNumbering.lift(rideTable[slot: slot].sequence, to: sequence) else { return nil }
        rideTable[slot: slot].sequence = lifted
        return rideTable[slot: slot]
    }

    /// L3: each subscribed vehicle's active rides (a vehicle is subscribed while it has one) and its last
    /// accepted fix (T3, T4, T7), in one entry so that a fix costs one lookup for both.
    var vehicles = SlotTable<VehicleState>()
    /// L5: retained statuses read back during recovery, merged into their rides once every state is in.
    var retainedStatuses: [String: RetainedStatus] = [:]
    /// G6: under an authority (etcd), the epoch of each bucket granted to this worker: a ride started here is
    /// numbered under its bucket's grant (``Ride/grant(epoch:)``). nil in broker-only mode.
    package var grantEpochs: [Int: UInt64]?

    struct VehicleState: Sendable {
        /// Slots in `rideTable`.
        var rides: RideSlots
        var track = VehicleTrack()
        /// The last accepted fixes, for the read API (`rides.trackLength`).
        var recent = RecentTrack()
    }

    /// A vehicle's rides: almost always one, kept inline; more only in the rare shared case, without an
    /// array allocation per vehicle otherwise.
    struct RideSlots: Sendable, Sequence {
        private var first: Int
        private var others: [Int] = []

        init(_ slot: Int) { first = slot }

        var isEmpty: Bool { first < 0 && others.isEmpty }

        func contains(_ slot: Int) -> Bool { first == slot || others.contains(slot) }

        mutating func append(_ slot: Int) {
            if first < 0 { first = slot } else { others.append(slot) }
        }

        mutating func remove(_ slot: Int) {
            if first == slot { first = others.popLast() ?? -1 } else { others.removeAll { $0 == slot } }
        }

        func makeIterator() -> Iterator { Iterator(first: first, others: others) }

        struct Iterator: IteratorProtocol {
            let first: Int
            let others: [Int]
            var position = -1

            mutating func next() -> Int? {
                if position < 0 {
                    position = 0
                    if first >= 0 { return first }
                }
                guard position < others.count else { return nil }
                position += 1
                return others[position - 1]
            }
        }
    }

    /// L3: the active rides of each subscribed vehicle.
    var vehicleRides: [String: Set<String>] {
        vehicles.dictionary.mapValues { Set($0.rides.map { rideTable.identifier(at: $0) }) }
    }
    var scheduler = CadenceScheduler()
    /// One copy of each map annotation image URL, however many rides show it.
    var images = StringInterner()
    var limiter: DeadLetterLimiter
    public internal(set) var counters = RideCounters()
    /// E1: each area's detour factor, corrected by completed rides (settable to carry it between engines, as the
    /// ETA benchmark's trips do).
    public var learning = AreaLearning()
    /// E1's range: how much later than estimated cars arrive, per area, leg and horizon, learned
    /// from this worker's arrivals (settable to carry it between engines, as the ETA benchmark's trips do).
    public var ranges = ArrivalRanges()
    /// The areas whose range learned since their priors were last shared (``priorsToShare(worker:now:)``): an
    /// area may teach its range before it has learned anything else (a short leg, or learning turned off).
    var rangesChanged: Set<String> = []
    /// The areas whose priors heard from the group taught something (rides, a stop share, a speed or hours): a
    /// worker that learned nothing of such an area does not share it (``priorsToShare(worker:now:)``).
    var heardLearned: Set<String> = []
    /// Whether a zone the group's priors name keeps this worker's clock for an area (``AreaLearning/sameClock``),
    /// by the two names: worked out once per pair, as priors come every minute.
    var sameClock: [String: Bool] = [:]

    /// E1: the catalog's service area containing `place` and its ``Ride/areaIndex`` (its place in the catalog plus
    /// one); (0, nil) outside every area, without a catalog, or past the 65,535th area (whose rides then learn
    /// with those outside every area: a ride's area is one fact, its index).
    func catalogArea(at place: Coordinate) -> (index: UInt16, area: ServiceArea?) {
        guard let catalog, let position = catalog.areas.firstIndex(where: { $0.contains(place) }),
            position < Int(UInt16.max)
        else { return (0, nil) }
        return (UInt16(position + 1), catalog.areas[position])
    }

    /// E1: the service area a ride's ``Ride/areaIndex`` stands for; nil outside every area.
    func serviceArea(_ index: UInt16) -> ServiceArea? {
        guard index > 0, let catalog, Int(index) <= catalog.areas.count else { return nil }
        return catalog.areas[Int(index) - 1]
    }

    /// E1: the catalog's service area named `name`; nil for "" (rides outside every area) or a name it has not.
    func serviceArea(named name: String) -> ServiceArea? { catalog?.areas.first { $0.name == name } }

    /// E1's range: the name of the area a ride's ``Ride/areaIndex`` stands for; "" outside every area.
    func areaName(_ index: UInt16) -> String { serviceArea(index)?.name ?? "" }

    /// E1: the detour factor for a ride starting at `pickup`: its area's, learned or configured.
    func detourFactor(at pickup: Coordinate) -> Double {
        learning.factor(for: catalogArea(at: pickup).area, configuration: configuration)
    }

    /// The ride-option catalog, for booking by name (3.4); nil when the service offers no quotes.
    public let catalog: RideOptionCatalog?

    /// - Parameter catalog: lets a booking name its ride option by any of the catalog's names, localized
    ///   ones too: the option's map annotation image and fare fill what the booking leaves out.
    public init(
        configuration: RideConfiguration = RideConfiguration(), topics: RideTopics = RideTopics(),
        catalog: RideOptionCatalog? = nil
    ) {
        self.configuration = configuration
        self.topics = topics
        self.catalog = catalog
        decoder = InputDecoder(maxPayloadBytes: configuration.maxPayloadBytes)
        limiter = DeadLetterLimiter(perSecond: configuration.deadLettersPerSecond)
    }

    public var activeRideCount: Int { rideTable.count }
    public var subscribedVehicleCount: Int { vehicles.count }
    package var scheduledRideCount: Int { scheduler.count }

    /// When ``tick(now:)`` next has work, if any ride is active.
    public mutating func nextDueDate() -> Date? {
        scheduler.nextDue().map { Date(timeIntervalSince1970: $0) }
    }
}
