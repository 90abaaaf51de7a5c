import Foundation

/// What the owner of a ``RideEngine`` must do. The engine itself does no I/O.
public enum RideAction: Sendable, Equatable {
    /// Publish the status (retained, QoS 1) and keep `state` durably (L5) before it.
    case publish(RideStatus, state: Ride)
    /// L2: publish a zero-length retained status and forget the ride's durable state.
    case clear(ride: String)
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
    public var rejections: [RejectionReason: Int] = [:]
    public var deadLettersSuppressed = 0
    public var statusesPublished = 0
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
    public let topics: Topics
    private let decoder: InputDecoder
    /// Every active ride; fixes reach them by slot, without hashing their identifiers.
    private var rideTable = SlotTable<Ride>()
    /// Every active ride by identifier (a copy: for inspection and tests).
    public var rides: [String: Ride] { rideTable.dictionary }
    /// One active ride.
    public func ride(_ identifier: String) -> Ride? { rideTable[identifier] }
    /// L3: each subscribed vehicle's active rides (a vehicle is subscribed while it has one) and its last
    /// accepted fix (T3, T4, T7), in one entry so that a fix costs one lookup for both.
    private var vehicles = SlotTable<VehicleState>()

    struct VehicleState: Sendable {
        /// Slots in `rideTable`.
        var rides: RideSlots
        var track = VehicleTrack()
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
    public var vehicleRides: [String: Set<String>] {
        vehicles.dictionary.mapValues { Set($0.rides.map { rideTable.identifier(at: $0) }) }
    }
    private var scheduler = CadenceScheduler()
    /// One copy of each map annotation image URL, however many rides show it.
    private var images = StringInterner()
    private var limiter: DeadLetterLimiter
    public private(set) var counters = RideCounters()

    /// The ride-option catalog, for booking by name (3.4); nil when the service offers no quotes.
    public let catalog: RideOptionCatalog?

    /// - Parameter catalog: lets a booking name its ride option by any of the catalog's names, localized
    ///   ones too: the option's map annotation image and fare fill what the booking leaves out.
    public init(
        configuration: RideConfiguration = RideConfiguration(), topics: Topics = Topics(),
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
    public var scheduledRideCount: Int { scheduler.count }

    /// When ``tick(now:)`` next has work, if any ride is active.
    public mutating func nextDueDate() -> Date? {
        scheduler.nextDue().map { Date(timeIntervalSince1970: $0) }
    }

    // MARK: Inputs

    /// One message from the broker.
    public mutating func receive(topic: String, payload: [UInt8], now: Date) -> [RideAction] {
        receive(topics.parse(topic), topic: topic, payload: payload, now: now)
    }

    /// One message whose topic the caller has already parsed (the service parses each topic once, at its edge).
    public mutating func receive(_ parsed: Topics.Parsed, topic: String, payload: [UInt8], now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        switch parsed {
        case .position(let vehicle):
            receiveFix(topic: topic, vehicle: vehicle, payload: payload, now: now, into: &actions)
        case .control(let kind, let ride):
            do throws(Rejection) {
                try receiveControl(kind, ride: ride, payload: payload, now: now, into: &actions)
            } catch {
                reject(error, topic: topic, payload: payload, now: now, into: &actions)
            }
        case .statusRequest, .rideOptionsRequest, .availability, .state, .unknown:
            break
        }
        return actions
    }

    private mutating func receiveFix(
        topic: String, vehicle: String, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) {
        let decoded: TelemetryFix?
        do throws(Rejection) {
            decoded = try decoder.telemetry(vehicleId: vehicle, payload: payload)
        } catch {
            reject(error, topic: topic, payload: payload, now: now, into: &actions)
            return
        }
        guard let fix = decoded else {
            counters.fixesIgnored += 1
            return
        }
        apply(fix, topic: topic, payload: payload, now: now, into: &actions)
    }

    /// An already decoded fix (T2-T7, then P2-P5 for every active ride of its vehicle).
    public mutating func receive(fix: TelemetryFix, now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        apply(fix, topic: nil, payload: [], now: now, into: &actions)
        return actions
    }

    /// - Parameter topic: the fix's topic, for a dead letter; nil builds it only when one is sent.
    private mutating func apply(
        _ fix: TelemetryFix, topic: String?, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) {
        guard let slot = vehicles.slot(of: fix.vehicleId) else {
            counters.fixesWithoutRide += 1
            return
        }
        switch TelemetryAcceptance.evaluate(
            fix, track: vehicles[slot: slot].track, now: now, configuration: configuration)
        {
        case .duplicate:
            counters.fixesDuplicate += 1
        case .rejected(let rejection):
            reject(
                rejection, topic: topic ?? topics.position(vehicle: fix.vehicleId), payload: payload, now: now,
                into: &actions)
        case .accepted(let accepted):
            counters.fixesAccepted += 1
            vehicles[slot: slot].track.record(accepted)
            for rideSlot in vehicles[slot: slot].rides {
                // In place, by slot: no hashing and no copy of the ride per fix.
                let effect = rideTable[slot: rideSlot].apply(accepted, now: now, configuration: configuration)
                // C2 on a phase change; C3: a fresh fix clears `stale` at once.
                if effect.phaseChanged || effect.staleCleared {
                    publish(rideSlot, now: now, phaseChanged: effect.phaseChanged, into: &actions)
                }
            }
        }
    }

    private mutating func receiveControl(
        _ kind: ControlKind, ride id: String, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) throws(Rejection) {
        switch kind {
        case .start:
            var booking = resolveOption(of: try decoder.booking(rideIdentifier: id, payload: payload))
            guard !rideTable.contains(id) else {
                counters.duplicateStarts += 1  // L1
                return
            }
            booking.vehicle.mapAnnotationImage = images.intern(booking.vehicle.mapAnnotationImage)
            let ride = Ride(booking: booking, now: now, configuration: configuration)
            try checkPublishable(ride, now: now, reason: .invalidBooking)
            let slot = rideTable.insert(ride, for: id)
            counters.ridesStarted += 1
            if let vehicle = booking.vehicleId { retain(vehicle: vehicle, ride: id, into: &actions) }
            publish(slot, now: now, phaseChanged: true, into: &actions)
        case .assign:
            var assignment = try decoder.assignment(rideIdentifier: id, payload: payload)
            let slot = try activeSlot(of: id)
            let image = images.intern(assignment.vehicle?.mapAnnotationImage)
            assignment.vehicle?.mapAnnotationImage = image
            // On a copy: a refused input leaves the ride exactly as it was.
            var ride = rideTable[slot: slot]
            let (replaced, changed) = try ride.assign(assignment, now: now, configuration: configuration)
            try checkPublishable(ride, now: now, reason: .invalidField)
            rideTable[slot: slot] = ride
            if let replaced { release(vehicle: replaced, rideSlot: slot, into: &actions) }
            retain(vehicle: assignment.vehicleId, ride: id, into: &actions)
            publish(slot, now: now, phaseChanged: changed, into: &actions)
        case .event:
            let event = try decoder.event(rideIdentifier: id, payload: payload)
            let slot = try activeSlot(of: id)
            var ride = rideTable[slot: slot]
            let changed = try ride.handle(event, now: now, configuration: configuration)
            rideTable[slot: slot] = ride
            if changed { publish(slot, now: now, phaseChanged: true, into: &actions) }
        case .cancel:
            let cancellation = try decoder.cancellation(rideIdentifier: id, payload: payload)
            let slot = try activeSlot(of: id)
            var ride = rideTable[slot: slot]
            let changed = try ride.cancel(cancellation, now: now)
            rideTable[slot: slot] = ride
            if changed { publish(slot, now: now, phaseChanged: true, into: &actions) }
        case .stop:
            _ = try decoder.stop(rideIdentifier: id, payload: payload)
            stop(id, into: &actions)
        }
    }

    /// V4-V6 at intake: a booking (or an assignment) whose next status would fail validation is refused
    /// with the rule's detail, rather than taken in to publish nothing: V7 has no valid status to fall back
    /// on for a new ride, so it would stay silent until L4 removes it.
    private func checkPublishable(_ ride: Ride, now: Date, reason: RejectionReason) throws(Rejection) {
        var trial = ride
        let status = trial.nextStatus(now: now, configuration: configuration)
        if let violation = StatusValidator.violation(of: status, bookedRide: ride.rideIdentifier) {
            throw Rejection(reason, "\(violation.detail) (\(violation.rule))")
        }
    }

    private func activeSlot(of id: String) throws(Rejection) -> Int {
        guard let slot = rideTable.slot(of: id) else { throw Rejection(.unknownRide, "ride \(id) is not active") }
        return slot
    }

    /// Booking by name (3.4): a ride option named by any of the catalog's names (any case, localized too)
    /// supplies the map annotation image (V5) and the fare of the pickup's service area (P5) that the
    /// booking leaves out.
    private func resolveOption(of booking: Booking) -> Booking {
        guard let catalog, let option = catalog.option(named: booking.rideOption.name) else { return booking }
        var resolved = booking
        // V4: the catalog's canonical name downstream; the booking's own spelling stays as `localizedName`.
        if option.name != booking.rideOption.name {
            resolved.rideOption.localizedName = booking.rideOption.name
            resolved.rideOption.name = option.name
        }
        if resolved.vehicle.mapAnnotationImage == nil {
            resolved.vehicle.mapAnnotationImage = option.mapAnnotationImage
        }
        if resolved.fare == nil, let area = catalog.area(containing: booking.pickupLocation.coordinate),
            let table = option.fares[area.name]
        {
            resolved.fare = table.fare(currency: area.currencyCode)
        }
        return resolved
    }

    // MARK: Time

    /// C1, C3, P6, L4: publishes every ride whose interval is due, at most `limit` of them: an owner that
    /// holds a lock while carrying out the actions calls again until ``hasDue(now:)`` is false, letting
    /// other inputs in between (a burst of 10,000 due rides must not delay a phase change, C2).
    public mutating func tick(now: Date, limit: Int = .max) -> [RideAction] {
        var actions: [RideAction] = []
        // A popped slot always holds its ride: stopping a ride cancels its entry.
        for slot in scheduler.popDue(now: now.timeIntervalSince1970, limit: limit) {
            switch rideTable[slot: slot].expire(now: now, configuration: configuration) {
            case .stop:
                stop(rideTable.identifier(at: slot), into: &actions)
            case .missedPickup:
                publish(slot, now: now, phaseChanged: true, into: &actions)
            case .none:
                publish(slot, now: now, phaseChanged: false, into: &actions)
            }
        }
        return actions
    }

    /// Whether a ride's interval is due at `now`.
    public mutating func hasDue(now: Date) -> Bool {
        scheduler.nextDue().map { $0 <= now.timeIntervalSince1970 } ?? false
    }

    /// C4: after every (re)connection, each active ride publishes at once.
    public mutating func publishAll(now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        // Every ride publishes now; their next statuses are spread over one interval, so that 10,000 rides do
        // not stay in step and come due in one burst every interval from now on.
        let ids = rideTable.keys.sorted()
        for (index, id) in ids.enumerated() {
            guard let slot = rideTable.slot(of: id) else { continue }
            publish(slot, now: now, phaseChanged: false, nextIn: Double(index + 1) / Double(ids.count), into: &actions)
        }
        return actions
    }

    // MARK: Queries and recovery

    /// L7: the ride's current status (the last one published), if the ride is active.
    public func currentStatus(of ride: String) -> RideStatus? { rideTable[ride]?.lastValidStatus }

    /// L7: the reply to `status/get`.
    public func statusReply(for ride: String) -> [UInt8] {
        if let status = currentStatus(of: ride) { return status.encoded() }
        return Array(#"{"code":"failure","reason":"unknownRide"}"#.utf8)
    }

    /// L5, A2: takes back a ride from its retained state message on `topic` (the state topic of `ride`),
    /// checked as fresh input is; a state that fails is dead-lettered with the rule in its detail, and
    /// left alone (it stays retained for a person to look at). No status is published here.
    public mutating func restore(topic: String, ride: String, payload: [UInt8], now: Date) -> [RideAction] {
        do throws(Rejection) {
            let restored = try Ride.restored(
                topicRide: ride, payload: payload, now: now, configuration: configuration)
            return restore(restored, now: now)
        } catch {
            var actions: [RideAction] = []
            reject(error, topic: topic, payload: payload, now: now, into: &actions)
            return actions
        }
    }

    /// L5: takes back a ride from durable state (no publish; call ``publishAll(now:)`` once recovered).
    public mutating func restore(_ ride: Ride, now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        let id = ride.rideIdentifier
        guard Identifier.isValid(id), !rideTable.contains(id) else { return actions }
        let slot = rideTable.insert(ride, for: id)
        if let vehicle = ride.vehicleId { retain(vehicle: vehicle, ride: id, into: &actions) }
        scheduler.schedule(slot, at: now.timeIntervalSince1970)
        return actions
    }

    // MARK: Internals

    private mutating func stop(_ id: String, into actions: inout [RideAction]) {
        // L2: unknown or ended rides are a no-op; idempotent.
        guard let rideSlot = rideTable.slot(of: id), let ride = rideTable.remove(id) else { return }
        scheduler.cancel(rideSlot)
        if let vehicle = ride.vehicleId { release(vehicle: vehicle, rideSlot: rideSlot, into: &actions) }
        counters.ridesStopped += 1
        actions.append(.clear(ride: id))
    }

    private mutating func retain(vehicle: String, ride: String, into actions: inout [RideAction]) {
        guard let rideSlot = rideTable.slot(of: ride) else { return }
        if let slot = vehicles.slot(of: vehicle) {
            if !vehicles[slot: slot].rides.contains(rideSlot) { vehicles[slot: slot].rides.append(rideSlot) }
        } else {
            vehicles.insert(VehicleState(rides: RideSlots(rideSlot)), for: vehicle)
            actions.append(.subscribe(vehicle: vehicle))
        }
    }

    /// - Parameter rideSlot: the ride's slot (the ride may already have left the table).
    private mutating func release(vehicle: String, rideSlot: Int, into actions: inout [RideAction]) {
        guard let slot = vehicles.slot(of: vehicle) else { return }
        vehicles[slot: slot].rides.remove(rideSlot)
        if vehicles[slot: slot].rides.isEmpty {
            vehicles.remove(vehicle)
            actions.append(.unsubscribe(vehicle: vehicle))
        }
    }

    /// - Parameter nextIn: the share of the interval until the ride's next status (1: a whole interval; less
    ///   staggers rides that would otherwise all come due together, still within C1).
    private mutating func publish(
        _ slot: Int, now: Date, phaseChanged: Bool, nextIn share: Double = 1, into actions: inout [RideAction]
    ) {
        let id = rideTable.identifier(at: slot)
        // In place, by slot: the ride is neither looked up again nor copied out and back.
        let status = rideTable[slot: slot].nextStatus(now: now, configuration: configuration)
        if let violation = StatusValidator.violation(of: status, bookedRide: id) {
            counters.invalidStatuses += 1
            actions.append(.invalidStatus(ride: id, violation: violation))
            if let replacement = rideTable[slot: slot].replacementStatus(now: now) {
                counters.statusesPublished += 1
                actions.append(.publish(replacement, state: rideTable[slot: slot]))
            }
        } else {
            rideTable[slot: slot].recordValid(status)
            counters.statusesPublished += 1
            if phaseChanged { counters.phaseTransitions += 1 }
            actions.append(.publish(status, state: rideTable[slot: slot]))
        }
        scheduler.schedule(slot, at: now.timeIntervalSince1970 + configuration.updateInterval * share)
    }

    /// 3.5: a rejection found outside the engine (quotes, availability): counted, and a dead letter if the
    /// per-reason limit allows.
    public mutating func reject(_ rejection: Rejection, topic: String, payload: [UInt8], now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        reject(rejection, topic: topic, payload: payload, now: now, into: &actions)
        return actions
    }

    private mutating func reject(
        _ rejection: Rejection, topic: String, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) {
        counters.rejections[rejection.reason, default: 0] += 1
        if limiter.allow(rejection.reason, now: now) {
            actions.append(
                .deadLetter(DeadLetter(topic: topic, rejection: rejection, payload: payload, receivedAt: now)))
        } else {
            counters.deadLettersSuppressed += 1
        }
    }
}
