import Foundation

/// One active ride: the phase rules P1-P8 and estimates E1 as a plain value. No I/O; `now` is passed in.
/// Methods return whether the phase or the completion status changed (which publishes at once, C2).
public struct Ride: Sendable, Equatable {
    // Every active ride keeps one of these (issue 3: at most 1 KB each with 100,000 rides). What rarely
    // changes sits in shared boxes; optional times and measurements take one word each (CompactStorage.swift).
    // The durable state keeps its own shape (Ride+Durable.swift).

    /// The booking, immutable once the ride starts.
    private var terms: Shared<BookingTerms>
    /// What the ride keeps of its booking; the vehicle, driver and position live in the ride itself.
    public var booking: BookingTerms { terms.value }
    public private(set) var phase: RidePhase
    public private(set) var vehicleId: String?
    /// Vehicle details and driver, shared with the V7 snapshot until the next `assign`.
    private var crew: Shared<Crew>
    public var vehicle: VehicleDetails { crew.value.vehicle }
    public var driver: Driver? { crew.value.driver }
    @PackedLocation public private(set) var location: VehicleLocation?
    @NaNBoxed public private(set) var lastFixAcceptedAt: Date?
    public private(set) var startedAt: Date
    public private(set) var sequence: Int
    @NaNBoxed public private(set) var lastIssuedAt: Date?
    /// Seconds from the status before to the latest one (the cadence gap a subscriber saw, C1); nil for
    /// the first status, and for the first after a restart too (not durable).
    @NaNBoxed public private(set) var cadenceGap: Double?
    /// Set once, on completion; shared with the V7 snapshot.
    private var completionBox: Shared<CompletionStatus>?
    public var completion: CompletionStatus? { completionBox?.value }
    @NaNBoxed public private(set) var completedAt: Date?
    @NaNBoxed public private(set) var pickupArrivedAt: Date?
    @NaNBoxed public private(set) var estimatedPickupEndDate: Date?
    @NaNBoxed public private(set) var ongoingSince: Date?
    public private(set) var drivenMetres: Double
    @NaNBoxed public private(set) var smoothedSpeed: Double?
    public private(set) var estimatedPickupDate: Date
    @NaNBoxed public private(set) var estimatedDropOffDate: Date?
    /// V7: what the last valid status said beyond the booking, boxed; the booking's part never changes,
    /// so the status is rebuilt from both rather than kept whole.
    private var lastValid: Shared<LastValidStatus>?
    /// V7: the last status that passed validation.
    public var lastValidStatus: RideStatus? { lastValid.map { status(from: $0.value) } }
    /// Great-circle metres from pickup to drop-off, computed once.
    private var legMetres: Double

    public var rideIdentifier: String { booking.rideIdentifier }

    /// P1: with a vehicle `confirmed` (or the booking's `received`/`confirmed`); without, `received`.
    public init(booking: Booking, now: Date, configuration: RideConfiguration, sequence: Int = 0) {
        terms = Shared(BookingTerms(booking))
        vehicleId = booking.vehicleId
        phase = booking.vehicleId == nil ? .received : (booking.phase ?? .confirmed)
        var details = booking.vehicle
        if (details.mapAnnotationImage ?? "").isEmpty {
            details.mapAnnotationImage = configuration.mapAnnotationImages[booking.rideOption.name]
        }
        crew = Shared(Crew(vehicle: details, driver: booking.driver))
        location = booking.vehicleLocation
        startedAt = now
        self.sequence = sequence
        drivenMetres = 0
        legMetres = booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate)
        estimatedPickupDate = booking.rideOption.estimatedPickupDate
        updateEstimates(now: now, configuration: configuration)
    }

    // MARK: Inputs

    /// `assign`: allowed before `pickup`. Returns the vehicle it replaced, if any, and whether the phase changed.
    public mutating func assign(_ assignment: Assignment, now: Date, configuration: RideConfiguration) throws(Rejection)
        -> (replaced: String?, changed: Bool)
    {
        guard phase < .pickup else {
            throw Rejection(.eventNotAllowed, "assign is not allowed in phase \(phase.rawValue) (P8)")
        }
        let replaced = vehicleId == assignment.vehicleId ? nil : vehicleId
        if replaced != nil { location = nil }
        vehicleId = assignment.vehicleId
        if assignment.vehicle != nil || assignment.driver != nil {
            var updated = crew.value
            if var details = assignment.vehicle {
                if (details.mapAnnotationImage ?? "").isEmpty {
                    details.mapAnnotationImage =
                        vehicle.mapAnnotationImage ?? configuration.mapAnnotationImages[booking.rideOption.name]
                }
                updated.vehicle = details
            }
            if let driver = assignment.driver { updated.driver = driver }
            crew = Shared(updated)
        }
        if let known = assignment.vehicleLocation { location = known }
        let changed = phase == .received
        if changed { phase = .confirmed }
        updateEstimates(now: now, configuration: configuration)
        return (replaced, changed)
    }

    /// What an accepted fix changed: the phase (C2), or a `stale` flag that the fix cleared (C3).
    public struct FixEffect: Equatable, Sendable {
        public var phaseChanged: Bool
        public var staleCleared: Bool
    }

    /// An accepted fix of this ride's vehicle: P2-P5 from position and speed.
    public mutating func apply(_ fix: TelemetryFix, now: Date, configuration: RideConfiguration) -> FixEffect {
        let wasStale = isStale(now: now, configuration: configuration)
        let previous = location
        location = VehicleLocation(
            coordinate: fix.coordinate, course: fix.course ?? previous?.course, speed: fix.speed,
            horizontalAccuracy: fix.horizontalAccuracy, timestamp: fix.timestamp)
        lastFixAcceptedAt = now
        if let speed = fix.speed {
            let alpha = configuration.speedSmoothing
            smoothedSpeed = smoothedSpeed.map { alpha * speed + (1 - alpha) * $0 } ?? speed
        }
        if phase == .ongoing, let previous { drivenMetres += previous.coordinate.distance(to: fix.coordinate) }
        let before = phase
        let stopped = (fix.speed ?? 0) < configuration.stoppedSpeed
        let toPickup = fix.coordinate.distance(to: booking.pickupLocation.coordinate)
        switch phase {
        case .confirmed, .approachingPickup:
            if toPickup <= configuration.arrivalRadius && stopped {
                arriveAtPickup(now: now, configuration: configuration)  // P3
            } else if phase == .confirmed {
                let eta = Estimator(detourFactor: configuration.detourFactor, speedFloor: configuration.speedFloor)
                    .travelTime(metres: toPickup, speed: smoothedSpeed)
                if eta <= configuration.approachingWithin || toPickup <= configuration.approachingDistance {
                    phase = .approachingPickup  // P2
                }
            }
        case .pickup:
            if toPickup > 2 * configuration.arrivalRadius { startRide(now: now) }  // P4
        case .ongoing:
            let toDropOff = fix.coordinate.distance(to: booking.dropOffLocation.coordinate)
            // P5
            if toDropOff <= configuration.arrivalRadius && stopped { complete(now: now, configuration: configuration) }
        case .received, .completed:
            break
        }
        updateEstimates(now: now, configuration: configuration, metresToPickup: toPickup)
        return FixEffect(phaseChanged: phase != before, staleCleared: wasStale)
    }

    /// A driver event; P8 rejects events that do not fit the phase. A repeat of the event that caused the
    /// current phase (a redelivery) changes nothing and is not an error.
    public mutating func handle(_ event: DriverEvent, now: Date, configuration: RideConfiguration) throws(Rejection)
        -> Bool
    {
        switch (event.kind, phase) {
        case (.arrivedAtPickup, .pickup), (.passengerOnBoard, .ongoing):
            return false
        case (.arrivedAtDropOff, .completed) where completion?.completed == true:
            return false
        case (.arrivedAtPickup, .confirmed), (.arrivedAtPickup, .approachingPickup):
            arriveAtPickup(now: now, configuration: configuration)
        case (.passengerOnBoard, .confirmed), (.passengerOnBoard, .approachingPickup), (.passengerOnBoard, .pickup):
            startRide(now: now)
        case (.arrivedAtDropOff, .pickup), (.arrivedAtDropOff, .ongoing):  // P5: steps may be skipped
            complete(now: now, configuration: configuration)
        default:
            throw Rejection(.eventNotAllowed, "\(event.kind.rawValue) is not allowed in phase \(phase.rawValue) (P8)")
        }
        updateEstimates(now: now, configuration: configuration)
        return true
    }

    /// P7: `completed` with `canceled` and `canceledBy`; a fee becomes an outstanding payment.
    public mutating func cancel(_ cancellation: Cancellation, now: Date) throws(Rejection) -> Bool {
        if phase == .completed {
            if completion?.canceled == true && completion?.canceledBy == cancellation.canceledBy { return false }
            throw Rejection(.eventNotAllowed, "cancel is not allowed in phase completed (P8)")
        }
        finish(.canceled(by: cancellation.canceledBy, fee: cancellation.cancellationFee), now: now)
        return true
    }

    /// What the cadence tick found besides publishing.
    public enum Expiry: Equatable, Sendable {
        case none
        /// P6 fired: the status changed to a missed pickup.
        case missedPickup
        /// L4: the ride must be stopped (completed linger or maximum duration).
        case stop(reason: String)
    }

    /// P6 and L4 at a cadence tick.
    public mutating func expire(now: Date, configuration: RideConfiguration) -> Expiry {
        if let completedAt, now.timeIntervalSince(completedAt) >= configuration.completedLinger {
            return .stop(reason: "completedLinger")
        }
        if now.timeIntervalSince(startedAt) >= configuration.maxRideDuration { return .stop(reason: "maxRideDuration") }
        if phase == .pickup, let end = estimatedPickupEndDate, now >= end {
            finish(.canceled(by: .service, fee: nil, missedPickup: true), now: now)
            return .missedPickup
        }
        return .none
    }

    // MARK: Status

    /// The next status (sequence + 1, `issuedAt` never earlier than the last). Not yet validated.
    public mutating func nextStatus(now: Date, configuration: RideConfiguration) -> RideStatus {
        updateEstimates(now: now, configuration: configuration)
        sequence += 1
        let issuedAt = max(now, lastIssuedAt ?? now)
        cadenceGap = lastIssuedAt.map { issuedAt.timeIntervalSince($0) }
        lastIssuedAt = issuedAt
        var option = booking.rideOption
        option.estimatedPickupDate = estimatedPickupDate
        return RideStatus(
            rideIdentifier: booking.rideIdentifier, phase: phase, completionStatus: completion,
            vehicleLocation: location, vehicle: vehicle, driver: driver, rideOption: option,
            estimatedPickupDate: estimatedPickupDate, estimatedPickupEndDate: estimatedPickupEndDate,
            estimatedDropOffDate: estimatedDropOffDate, pickupLocation: booking.pickupLocation,
            dropOffLocation: booking.dropOffLocation, waypoints: booking.waypoints,
            scheduledPickupTime: booking.scheduledPickupTime, sequence: sequence, issuedAt: issuedAt,
            stale: isStale(now: now, configuration: configuration))
    }

    /// V7: remembers a status that passed validation.
    public mutating func recordValid(_ status: RideStatus) {
        lastValid = snapshot(LastValidStatus.Durable(status))
    }

    /// A V7 snapshot that shares the ride's crew and completion boxes where it says the same (a status
    /// built from this ride always does; a restored snapshot may differ, and then gets its own).
    private func snapshot(_ last: LastValidStatus.Durable) -> Shared<LastValidStatus> {
        let lastCrew = Crew(vehicle: last.vehicle, driver: last.driver)
        let completion = last.completionStatus.map { $0 == completionBox?.value ? completionBox! : Shared($0) }
        return Shared(
            LastValidStatus(
                phase: last.phase, completion: completion, vehicleLocation: last.vehicleLocation,
                crew: lastCrew == crew.value ? crew : Shared(lastCrew), optionPickupDate: last.optionPickupDate,
                estimatedPickupDate: last.estimatedPickupDate, estimatedPickupEndDate: last.estimatedPickupEndDate,
                estimatedDropOffDate: last.estimatedDropOffDate, sequence: last.sequence, issuedAt: last.issuedAt,
                stale: last.stale))
    }

    private func status(from last: LastValidStatus) -> RideStatus {
        var option = booking.rideOption
        option.estimatedPickupDate = last.optionPickupDate
        return RideStatus(
            rideIdentifier: booking.rideIdentifier, phase: last.phase, completionStatus: last.completion?.value,
            vehicleLocation: last.vehicleLocation, vehicle: last.crew.value.vehicle, driver: last.crew.value.driver,
            rideOption: option,
            estimatedPickupDate: last.estimatedPickupDate, estimatedPickupEndDate: last.estimatedPickupEndDate,
            estimatedDropOffDate: last.estimatedDropOffDate, pickupLocation: booking.pickupLocation,
            dropOffLocation: booking.dropOffLocation, waypoints: booking.waypoints,
            scheduledPickupTime: booking.scheduledPickupTime, sequence: last.sequence, issuedAt: last.issuedAt,
            stale: last.stale)
    }

    /// V7: the last valid status again, with this publish's sequence and time.
    public mutating func replacementStatus(now: Date) -> RideStatus? {
        guard var status = lastValidStatus else { return nil }
        sequence += 1
        let issuedAt = max(now, lastIssuedAt ?? now)
        cadenceGap = lastIssuedAt.map { issuedAt.timeIntervalSince($0) }
        lastIssuedAt = issuedAt
        status.sequence = sequence
        status.issuedAt = issuedAt
        return status
    }

    /// Whether no fix has been accepted for `staleAfter` (C3).
    public func isStale(now: Date, configuration: RideConfiguration) -> Bool {
        phase != .completed && now.timeIntervalSince(lastFixAcceptedAt ?? startedAt) > configuration.staleAfter
    }

    // MARK: Transitions

    private mutating func arriveAtPickup(now: Date, configuration: RideConfiguration) {
        phase = .pickup
        pickupArrivedAt = now
        estimatedPickupEndDate = now.addingTimeInterval(configuration.maxPickupWait)
        estimatedPickupDate = now
    }

    private mutating func startRide(now: Date) {
        if pickupArrivedAt == nil { estimatedPickupDate = min(estimatedPickupDate, now) }
        phase = .ongoing
        ongoingSince = now
    }

    private mutating func complete(now: Date, configuration: RideConfiguration) {
        let payment: Money?
        if let fare = booking.fare {
            payment = fare.price(drivenMetres: drivenMetres, rideSeconds: now.timeIntervalSince(ongoingSince ?? now))
        } else if let range = booking.rideOption.priceRange {
            payment = Money(amount: range.minimumPrice, currencyCode: range.currencyCode).rounded
        } else {
            payment = nil
        }
        estimatedDropOffDate = now
        finish(
            .completed(
                payment: payment, feedbackType: configuration.feedbackTypes,
                tipping: configuration.defaultTippingOptions),
            now: now)
    }

    private mutating func finish(_ status: CompletionStatus, now: Date) {
        phase = .completed
        completionBox = Shared(status)
        completedAt = now
        if estimatedDropOffDate.map({ $0 < estimatedPickupDate }) ?? false {
            estimatedDropOffDate = estimatedPickupDate
        }
    }

    /// E1: from the remaining great-circle distance, the detour factor and the smoothed speed (floored);
    /// never in the past while the phase is not reached.
    private mutating func updateEstimates(
        now: Date, configuration: RideConfiguration, metresToPickup: Double? = nil
    ) {
        guard phase != .completed else { return }
        let estimator = Estimator(detourFactor: configuration.detourFactor, speedFloor: configuration.speedFloor)
        let pickup = booking.pickupLocation.coordinate
        let dropOff = booking.dropOffLocation.coordinate
        let legSeconds = estimator.travelTime(metres: legMetres, speed: smoothedSpeed)
        if phase < .pickup {
            if let location {
                let metres = metresToPickup ?? location.coordinate.distance(to: pickup)
                let seconds = estimator.travelTime(metres: metres, speed: smoothedSpeed)
                estimatedPickupDate = now.addingTimeInterval(seconds)
            } else {
                estimatedPickupDate = max(estimatedPickupDate, now)
            }
            estimatedDropOffDate = estimatedPickupDate.addingTimeInterval(legSeconds)
        } else if phase == .pickup {
            estimatedDropOffDate = max(now, estimatedPickupDate).addingTimeInterval(legSeconds)
        } else {
            let from = location?.coordinate ?? pickup
            let seconds = estimator.travelTime(metres: from.distance(to: dropOff), speed: smoothedSpeed)
            estimatedDropOffDate = max(now.addingTimeInterval(seconds), estimatedPickupDate)
        }
    }
}

// MARK: - Durable state (L5)

extension Ride {
    /// The durable state (L5) as the retained `ridestatus/state/{rideId}` payload.
    public func durableState() -> [UInt8] {
        (try? JSONEncoder().encode(self)).map(Array.init) ?? []
    }
}

// The durable state keeps the shape it had when every field was stored as written here, so that state
// written by older versions decodes and other tools can read it: the compact storage is this process's
// business only. Every earlier shape decodes: the first releases' whole `booking` and whole
// `lastValidStatus` (and the very first's missing `legMetres`), a whole booking in `bookingBox`, and a
// `lastValidBox` field (decoded without a snapshot).
extension Ride: Codable {
    private struct Durable: Codable {
        var bookingBox: BookingTerms?
        /// The first releases kept the whole booking under this name (read, never written).
        var booking: BookingTerms?
        var phase: RidePhase
        var vehicleId: String?
        var vehicle: VehicleDetails
        var driver: Driver?
        var location: VehicleLocation?
        var lastFixAcceptedAt: Date?
        var startedAt: Date
        var sequence: Int
        var lastIssuedAt: Date?
        var completion: CompletionStatus?
        var completedAt: Date?
        var pickupArrivedAt: Date?
        var estimatedPickupEndDate: Date?
        var ongoingSince: Date?
        var drivenMetres: Double
        var smoothedSpeed: Double?
        var estimatedPickupDate: Date
        var estimatedDropOffDate: Date?
        var lastValid: LastValidStatus.Durable?
        /// The first releases kept the whole last valid status (read, never written).
        var lastValidStatus: RideStatus?
        /// Derived from the booking; the first release did not keep it.
        var legMetres: Double?
    }

    public init(from decoder: any Decoder) throws {
        let durable = try Durable(from: decoder)
        guard let booking = durable.bookingBox ?? durable.booking else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "no booking: neither bookingBox nor booking"))
        }
        terms = Shared(booking)
        phase = durable.phase
        vehicleId = durable.vehicleId
        crew = Shared(Crew(vehicle: durable.vehicle, driver: durable.driver))
        location = durable.location
        lastFixAcceptedAt = durable.lastFixAcceptedAt
        startedAt = durable.startedAt
        sequence = durable.sequence
        lastIssuedAt = durable.lastIssuedAt
        completionBox = durable.completion.map(Shared.init)
        completedAt = durable.completedAt
        pickupArrivedAt = durable.pickupArrivedAt
        estimatedPickupEndDate = durable.estimatedPickupEndDate
        ongoingSince = durable.ongoingSince
        drivenMetres = durable.drivenMetres
        smoothedSpeed = durable.smoothedSpeed
        estimatedPickupDate = durable.estimatedPickupDate
        estimatedDropOffDate = durable.estimatedDropOffDate
        // A2: a stored value that is not a distance is derived again rather than trusted.
        legMetres =
            durable.legMetres.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
            ?? booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate)
        lastValid = nil
        if let last = durable.lastValid ?? durable.lastValidStatus.map(LastValidStatus.Durable.init) {
            lastValid = snapshot(last)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        try Durable(
            bookingBox: booking, phase: phase, vehicleId: vehicleId, vehicle: vehicle, driver: driver,
            location: location, lastFixAcceptedAt: lastFixAcceptedAt, startedAt: startedAt, sequence: sequence,
            lastIssuedAt: lastIssuedAt, completion: completion, completedAt: completedAt,
            pickupArrivedAt: pickupArrivedAt, estimatedPickupEndDate: estimatedPickupEndDate,
            ongoingSince: ongoingSince, drivenMetres: drivenMetres, smoothedSpeed: smoothedSpeed,
            estimatedPickupDate: estimatedPickupDate, estimatedDropOffDate: estimatedDropOffDate,
            lastValid: lastValid.map { LastValidStatus.Durable($0.value) }, legMetres: legMetres
        ).encode(to: encoder)
    }
}

/// The part of a valid status that the booking does not fix (V7).
struct LastValidStatus: Sendable, Equatable {
    var phase: RidePhase
    var completion: Shared<CompletionStatus>?
    @PackedLocation var vehicleLocation: VehicleLocation?
    var crew: Shared<Crew>
    var optionPickupDate: Date
    @NaNBoxed var estimatedPickupDate: Date?
    @NaNBoxed var estimatedPickupEndDate: Date?
    @NaNBoxed var estimatedDropOffDate: Date?
    var sequence: Int
    var issuedAt: Date
    var stale: Bool
}

extension LastValidStatus {
    /// The snapshot's durable shape (L5).
    struct Durable: Codable {

        var phase: RidePhase
        var completionStatus: CompletionStatus?
        var vehicleLocation: VehicleLocation?
        var vehicle: VehicleDetails
        var driver: Driver?
        var optionPickupDate: Date
        var estimatedPickupDate: Date?
        var estimatedPickupEndDate: Date?
        var estimatedDropOffDate: Date?
        var sequence: Int
        var issuedAt: Date
        var stale: Bool
    }
}

extension LastValidStatus.Durable {
    /// A snapshot as it is kept durably.
    init(_ last: LastValidStatus) {
        self.init(
            phase: last.phase, completionStatus: last.completion?.value, vehicleLocation: last.vehicleLocation,
            vehicle: last.crew.value.vehicle, driver: last.crew.value.driver, optionPickupDate: last.optionPickupDate,
            estimatedPickupDate: last.estimatedPickupDate, estimatedPickupEndDate: last.estimatedPickupEndDate,
            estimatedDropOffDate: last.estimatedDropOffDate, sequence: last.sequence, issuedAt: last.issuedAt,
            stale: last.stale)
    }

    /// What a status says beyond the booking.
    init(_ status: RideStatus) {
        self.init(
            phase: status.phase, completionStatus: status.completionStatus, vehicleLocation: status.vehicleLocation,
            vehicle: status.vehicle, driver: status.driver, optionPickupDate: status.rideOption.estimatedPickupDate,
            estimatedPickupDate: status.estimatedPickupDate, estimatedPickupEndDate: status.estimatedPickupEndDate,
            estimatedDropOffDate: status.estimatedDropOffDate, sequence: status.sequence, issuedAt: status.issuedAt,
            stale: status.stale)
    }
}
