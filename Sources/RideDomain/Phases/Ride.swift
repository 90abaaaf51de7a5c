public import Foundation
public import RideStatusKit

/// One active ride: the phase rules P1-P8 and estimates E1 as a plain value. No I/O; `now` is passed in.
/// Methods return whether the phase or the completion status changed (which publishes at once, C2).
public struct Ride: Sendable, Equatable {
    // Every active ride keeps one of these (at most 1 KB each with 100,000 rides: `make bench-scale`). What rarely
    // changes sits in shared boxes; optional times and measurements take one word each (CompactStorage.swift).
    // The durable state keeps its own shape (Ride+Durable.swift).

    /// The booking, immutable once the ride starts.
    var terms: Shared<BookingTerms>
    /// What the ride keeps of its booking; the vehicle, driver and position live in the ride itself.
    package var booking: BookingTerms { terms.value }
    package internal(set) var vehicleId: String?
    /// Vehicle details and driver, shared with the V7 snapshot until the next `assign`.
    var crew: Shared<Crew>
    package var vehicle: VehicleDetails { crew.value.vehicle }
    package var driver: Driver? { crew.value.driver }
    @PackedLocation package internal(set) var location: VehicleLocation?
    @NaNBoxed var lastFixAcceptedAt: Date?
    var startedAt: Date
    package internal(set) var sequence: Int
    /// C5, L5: the highest `sequence` the last written durable state allows before the next write; a restart
    /// continues above it (RideEngine+Publishing.swift). Not part of the status.
    package internal(set) var sequenceCeiling = 0
    @NaNBoxed var lastIssuedAt: Date?
    /// Seconds from the status before to the latest one (the cadence gap a subscriber saw, C1); nil for
    /// the first status, and for the first after a restart too (not durable).
    @NaNBoxed public internal(set) var cadenceGap: Double?
    /// Set once, on completion; shared with the V7 snapshot.
    var completionBox: Shared<CompletionStatus>?
    package var completion: CompletionStatus? { completionBox?.value }
    @NaNBoxed var completedAt: Date?
    @NaNBoxed var pickupArrivedAt: Date?
    @NaNBoxed package internal(set) var estimatedPickupEndDate: Date?
    @NaNBoxed var ongoingSince: Date?
    package internal(set) var drivenMetres: Double
    /// E1, P5: where and when the pace and the distance driven were last counted (``recordPace``); not durable.
    @NaNBoxed var anchorLatitude: Double?
    var anchorLongitude = 0.0
    @NaNBoxed var anchorTime: Date?
    /// E1: the speed while moving, smoothed over moving seconds; nil until the car is seen moving.
    @NaNBoxed package internal(set) var smoothedSpeed: Double?
    /// E1: the share of time standing, smoothed over all seconds; nil until counted (`rides.typicalStopShare`).
    @NaNBoxed package internal(set) var stopShare: Double?
    /// E1: the cruise, the speed while moving over a longer memory than the pace (``cruiseMemory``):
    /// metres and seconds moving, both decayed alike; a far arrival is estimated toward it
    /// (``expectedSpeed(pace:cruise:horizon:)``). Durable since shape 8, with its prior (G3). Single precision
    /// (decayed sums, each step within 1e-7 of its value): 8 bytes a ride less.
    package internal(set) var cruiseMetres: Float = 0
    package internal(set) var cruiseSeconds: Float = 0
    /// E1: the speed while moving that the ride's area taught (``AreaLearning``); nil when none did.
    @NaNBoxed package internal(set) var cruisePrior: Double?
    package internal(set) var estimatedPickupDate: Date
    @NaNBoxed package internal(set) var estimatedDropOffDate: Date?
    /// V7: what the last valid status said beyond the booking, boxed; the booking's part never changes,
    /// so the status is rebuilt from both rather than kept whole.
    var lastValid: Shared<LastValidStatus>?
    /// V7: the last status that passed validation.
    package var lastValidStatus: RideStatus? { lastValid.map { status(from: $0.value) } }
    /// Great-circle metres from pickup to drop-off, computed once.
    var legMetres: Double
    /// E1: road over great-circle distance for this ride, its area's when it started (``AreaLearning``).
    package internal(set) var detourFactor: Double
    /// E1's range: the estimates of the leg under way that the ride learns from when the car arrives.
    var arrivalSamples = ArrivalSamples()
    // The small fields last, in the padding after the samples' one-byte leg (`ride-bench memory`).
    package internal(set) var phase: RidePhase
    /// E1's range: the service area of the ride's pickup, as its place in the engine's catalog plus one (0:
    /// outside every area), whose learned ranges its latest times use (``ArrivalRanges``); an index, not the
    /// name, so it fits the padding here (16 bytes a ride). Not durable: an engine finds it again.
    package internal(set) var areaIndex: UInt16 = 0
    /// E2: fixes off the ride's route in a row (``RouteTrack/offRouteFixes`` of them give it up).
    package internal(set) var routeMisses: UInt8 = 0
    /// E2: the ETA to where the car goes next is the driver's navigation app's, from the last fix.
    package internal(set) var navigating = false
    /// E2: how far along its route the car is, in metres; only forward.
    package internal(set) var routeAlong: Float = 0
    /// G2: the ownership epoch, which grows with every change of the ride's owner; carried by every status
    /// and state publish as the MQTT 5 user property `epoch`, and kept in the durable state.
    package internal(set) var epoch: UInt64 = 1

    public var rideIdentifier: String { booking.rideIdentifier }

    /// P1: with a vehicle `confirmed` (or the booking's `received`/`confirmed`); without, `received`.
    /// - Parameters:
    ///   - detourFactor: E1's factor for the ride's area (``AreaLearning``); `rides.detourFactor` when nil.
    ///   - stopShare: E1's stop share learned for the ride's area; `rides.typicalStopShare` when nil.
    ///   - cruisePrior: E1's speed while moving learned for the ride's area; nil when none was.
    ///   - areaIndex: the service area of the pickup, for E1's range (``areaIndex``).
    public init(
        booking: Booking, fare: FareTerms?, now: Date, configuration: RideConfiguration, sequence: Int = 0,
        detourFactor: Double? = nil, stopShare: Double? = nil, cruisePrior: Double? = nil, areaIndex: UInt16 = 0
    ) {
        terms = Shared(BookingTerms(booking, fare: fare))
        vehicleId = booking.vehicleId
        phase = booking.vehicleId == nil ? .received : (booking.phase ?? .confirmed)
        var details = booking.vehicle?.details ?? VehicleDetails()
        if (details.mapAnnotationImage ?? "").isEmpty {
            details.mapAnnotationImage = configuration.mapAnnotationImages[booking.rideOption.name]
        }
        crew = Shared(Crew(vehicle: details, driver: booking.driver))
        location = booking.vehicle?.location
        startedAt = now
        self.sequence = sequence
        drivenMetres = 0
        legMetres = booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate)
        self.detourFactor = detourFactor ?? configuration.detourFactor
        self.stopShare = stopShare
        self.cruisePrior = cruisePrior
        self.areaIndex = areaIndex
        estimatedPickupDate = booking.rideOption.estimatedPickupDate
        updateEstimates(now: now, configuration: configuration)
    }

    /// The fields without which no ride exists; the rest are set after (the durable state, Ride+Durable.swift).
    init(
        terms: Shared<BookingTerms>, phase: RidePhase, crew: Shared<Crew>, startedAt: Date, sequence: Int,
        drivenMetres: Double, estimatedPickupDate: Date, legMetres: Double
    ) {
        self.terms = terms
        self.phase = phase
        self.crew = crew
        self.startedAt = startedAt
        self.sequence = sequence
        self.drivenMetres = drivenMetres
        self.estimatedPickupDate = estimatedPickupDate
        self.legMetres = legMetres
        // Set from the durable state when it has one; otherwise the engine gives a restored ride its area's
        // factor (``AreaLearning``, ``RideEngine/restore(_:now:)``), which it recognises by 0.
        detourFactor = 0
    }

    // MARK: Inputs

    /// `assign`: allowed before `pickup`. Returns the vehicle it replaced, if any, and whether the phase changed.
    /// - Returns: also the refusal of the assignment's route, if it came with one the worker cannot follow (E2): the
    ///   assignment stands without it.
    mutating func assign(_ assignment: Assignment, now: Date, configuration: RideConfiguration) throws(Rejection)
        -> (replaced: String?, changed: Bool, routeRefused: Rejection?)
    {
        guard phase < .pickup else {
            throw Rejection(.eventNotAllowed, "assign is not allowed in phase \(phase.rawValue) (P8)")
        }
        let replaced = vehicleId == assignment.vehicleId ? nil : vehicleId
        if replaced != nil {
            // Another car (E1): the old car's pace, the point it was counted from and its estimates to learn
            // from say nothing of this one (measured from the old car's place, the new car's first fix would
            // be a pace of hundreds of m/s, and its ETA near now).
            location = nil
            (anchorLatitude, anchorTime, smoothedSpeed) = (nil, nil, nil)
            (cruiseMetres, cruiseSeconds) = (0, 0)
            arrivalSamples.clear()
            navigating = false
        }
        vehicleId = assignment.vehicleId
        if assignment.vehicle != nil || assignment.driver != nil {
            var updated = crew.value
            if var details = assignment.vehicle?.details {
                if (details.mapAnnotationImage ?? "").isEmpty {
                    details.mapAnnotationImage =
                        vehicle.mapAnnotationImage ?? configuration.mapAnnotationImages[booking.rideOption.name]
                }
                updated.vehicle = details
            }
            if let driver = assignment.driver { updated.driver = driver }
            crew = Shared(updated)
        }
        if let known = assignment.vehicle?.location { location = known }
        if replaced != nil { dropRoute() }
        var routeRefused: Rejection?
        if let route = assignment.route {
            do throws(Rejection) { try follow(route, now: now) } catch { routeRefused = error }
        }
        let changed = phase == .received
        if changed { phase = .confirmed }
        updateEstimates(now: now, configuration: configuration)
        return (replaced, changed, routeRefused)
    }

    /// What an accepted fix changed: the phase (C2), or a `stale` flag that the fix cleared (C3).
    public struct FixEffect: Equatable, Sendable {
        public var phaseChanged: Bool
        public var staleCleared: Bool
    }

    /// An accepted fix of this ride's vehicle: P2-P5 from position and speed.
    /// - Parameter reportedSpeed: the tracker's own `speed`, before T7 derived one from two fixes.
    mutating func apply(_ fix: TelemetryFix, reportedSpeed: Double?, now: Date, configuration: RideConfiguration)
        -> FixEffect
    {
        let wasStale = isStale(now: now, configuration: configuration)
        let previous = location
        location = VehicleLocation(
            coordinate: fix.coordinate, course: fix.course ?? previous?.course, speed: fix.speed,
            horizontalAccuracy: fix.horizontalAccuracy, timestamp: fix.timestamp)
        lastFixAcceptedAt = now
        // E1's pace, and P5's distance driven: counted fix to fix, but not through GPS noise (a fix counts once
        // it lies farther than twice its accuracy, 5 to 20 m, from the point counted last, so a car waiting at a
        // light is not charged for its position's jitter, which summed fix to fix added metres every second).
        recordPace(fix, reportedSpeed: reportedSpeed, previous: previous, configuration: configuration)
        if let track = terms.value.route {
            let seconds = previous.map { fix.timestamp.timeIntervalSince($0.timestamp) } ?? 0
            advanceOnRoute(track, fix.coordinate, seconds: seconds, at: fix.timestamp)
        }
        let before = phase
        // E2: before the phase moves on: the app's ETA is to where the car was going (at the pickup, P3 below
        // hands the drop-off's to the next fix that has one).
        navigate(fix, now: now)
        let stopped = (fix.speed ?? 0) < configuration.stoppedSpeed
        let toPickup = fix.coordinate.distance(to: booking.pickupLocation.coordinate)
        switch phase {
        case .confirmed, .approachingPickup:
            if toPickup <= configuration.arrivalRadius && stopped {
                arriveAtPickup(now: now, configuration: configuration)  // P3
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
        // P2, by the estimate this fix makes (E1's, the cruise included), which the next status publishes unless
        // E1's delay limit holds it back (a car approaching whose ETA moved later by more than the limit): P2 and
        // the status no longer go by two different speeds.
        if phase == .confirmed,
            estimatedPickupDate.timeIntervalSince(now) <= configuration.approachingWithin
                || toPickup <= configuration.approachingDistance
        {
            phase = .approachingPickup
        }
        return FixEffect(phaseChanged: phase != before, staleCleared: wasStale)
    }

    /// A driver event; P8 rejects events that do not fit the phase. A repeat of the event that caused the
    /// current phase (a redelivery) changes nothing and is not an error.
    mutating func handle(_ event: DriverEvent, now: Date, configuration: RideConfiguration) throws(Rejection)
        -> Bool
    {
        switch (event.type, phase) {
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
            throw Rejection(.eventNotAllowed, "\(event.type.rawValue) is not allowed in phase \(phase.rawValue) (P8)")
        }
        updateEstimates(now: now, configuration: configuration)
        return true
    }

    /// P7: `completed` with `canceled` and `canceledBy`; a fee becomes an outstanding payment.
    mutating func cancel(_ cancellation: Cancellation, now: Date) throws(Rejection) -> Bool {
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
    mutating func expire(now: Date, configuration: RideConfiguration) -> Expiry {
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

    // MARK: Transitions

    private mutating func arriveAtPickup(now: Date, configuration: RideConfiguration) {
        // The navigation app's ETA was to the pickup (E2): the drop-off's comes with the next fix that has one. The
        // car's pace along its route counts again from here: the wait is no driving.
        navigating = false
        restartRoutePace()
        phase = .pickup
        pickupArrivedAt = now
        estimatedPickupEndDate = now.addingTimeInterval(configuration.maxPickupWait)
        estimatedPickupDate = now
    }

    private mutating func startRide(now: Date) {
        if phase < .pickup { navigating = false }
        restartRoutePace()
        if pickupArrivedAt == nil { estimatedPickupDate = min(estimatedPickupDate, now) }
        phase = .ongoing
        ongoingSince = now
    }

    private mutating func complete(now: Date, configuration: RideConfiguration) {
        let payment: Money?
        if let fare = booking.fare {
            payment =
                fare.price(
                    drivenMetres: drivenMetres, rideSeconds: Self.pricedSeconds(from: ongoingSince ?? now, to: now)
                )
                .money
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

    /// P5: the ride time a fare is priced by, from times as the durable state keeps them (whole milliseconds),
    /// so a breakdown worked out again after a restart (``finalFareLineItems``) prices exactly the same time.
    static func pricedSeconds(from start: Date, to end: Date) -> Double {
        func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        return Double(milliseconds(end) - milliseconds(start)) / 1000
    }

    private mutating func finish(_ status: CompletionStatus, now: Date) {
        phase = .completed
        completionBox = Shared(status)
        completedAt = now
        if estimatedDropOffDate.map({ $0 < estimatedPickupDate }) ?? false {
            estimatedDropOffDate = estimatedPickupDate
        }
    }
}
