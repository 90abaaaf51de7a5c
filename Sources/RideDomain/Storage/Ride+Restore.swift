package import Foundation
import RideStatusKit
package import WorkerGroup

// MARK: - Restoring durable state (L5, A2)

extension Ride {
    /// The largest `sequence` a ride may carry: 2^53 - 1, the largest integer every JSON reader keeps exactly.
    /// A stored sequence above it could never be continued without loss (or, at `Int.max`, without trapping).
    package static let maxSequence = RideNumbering.maxSequence
    /// 2000-01-01T00:00:00Z: no ride state of this worker is older; earlier times (year 1 writes fine as RFC
    /// 3339) would make every duration computed from them absurd.
    static let earliestTime = Date(timeIntervalSince1970: 946_684_800)

    /// A2, L5: a ride read back from its retained state on `ridestatus/state/{ride}`, checked as fresh input is:
    /// I1 for every identifier, the topic's ride id equal to the payload's, ranges for sequence, dates, money and
    /// places. The worker takes nothing on trust from its broker.
    /// - Parameter topicRide: the ride identifier in the state message's topic.
    /// - Throws: a ``Rejection`` whose detail names the rule (A2 and the rule of the field).
    package static func restored(
        topicRide: String, payload: [UInt8], now: Date, configuration: RideConfiguration
    ) throws(Rejection) -> Ride {
        try checkIdentifier(topicRide, field: "the state topic's ride")
        // A ride's state is bigger than its booking (it holds the last valid status too), but bounded.
        let limit = 4 * configuration.maxPayloadBytes
        guard payload.count <= limit else {
            throw Rejection(.payloadTooLarge, "ride state of \(payload.count) bytes is over \(limit) (A2, I2)")
        }
        guard !payload.isEmpty else { throw Rejection(.malformedJSON, "ride state is empty (A2, I2)") }
        let ride: Ride
        do {
            ride = try Ride.decodeDurableState(payload)
        } catch {
            throw Rejection(.malformedJSON, "ride state does not decode: \(Self.summary(of: error)) (A2, L5)")
        }
        try ride.checkRestorable(topicRide: topicRide, now: now, configuration: configuration)
        return ride
    }

    /// A2: every identifier, range and place of a restored ride, as fresh input would be checked.
    func checkRestorable(topicRide: String, now: Date, configuration: RideConfiguration) throws(Rejection) {
        try Self.checkIdentifier(rideIdentifier, field: "rideIdentifier")
        guard rideIdentifier == topicRide else {
            throw Rejection(
                .identifierMismatch, "ride state for '\(rideIdentifier)' on the topic of '\(topicRide)' (A2, I3)")
        }
        if let vehicleId { try Self.checkIdentifier(vehicleId, field: "vehicleId") }
        guard (0...Self.maxSequence).contains(sequence) else {
            throw Rejection(.invalidField, "sequence \(sequence) is outside 0...\(Self.maxSequence) (A2, C5)")
        }
        guard (0...Self.maxSequence).contains(sequenceCeiling) else {
            throw Rejection(
                .invalidField, "sequenceCeiling \(sequenceCeiling) is outside 0...\(Self.maxSequence) (A2, C5)")
        }
        guard epoch >= 1 else { throw Rejection(.invalidField, "epoch 0: epochs start at 1 (A2, G2)") }
        guard epoch <= UInt64(Self.maxSequence) else {
            throw Rejection(.invalidField, "epoch \(epoch) is above 2^53 - 1 (A2, G2)")
        }
        if let last = lastValidStatus, last.sequence > sequence || last.sequence < 0 {
            throw Rejection(.invalidField, "lastValid.sequence \(last.sequence) is above sequence \(sequence) (A2, C5)")
        }
        // Times the worker itself took: this century, and not in the future. (A vehicle's own fix time is the
        // vehicle's clock, accepted at intake within T2, and only has to be a writable time.)
        let latest = now.addingTimeInterval(configuration.futureTolerance)
        let happened: [(String, Date?)] = [
            ("startedAt", startedAt), ("lastIssuedAt", lastIssuedAt), ("lastFixAcceptedAt", lastFixAcceptedAt),
            ("completedAt", completedAt), ("pickupArrivedAt", pickupArrivedAt), ("ongoingSince", ongoingSince),
        ]
        for case (let field, let date?) in happened where date < Self.earliestTime || date > latest {
            throw Rejection(.invalidField, "\(field) \(date.timeIntervalSince1970) is not a past time (A2, T2)")
        }
        if let stamp = location?.timestamp, !Timestamps.isRepresentable(stamp) {
            throw Rejection(.invalidField, "location.timestamp is not a valid time (A2, T2)")
        }
        let estimates: [(String, Date?)] = [
            ("estimatedPickupDate", estimatedPickupDate), ("estimatedDropOffDate", estimatedDropOffDate),
            ("estimatedPickupEndDate", estimatedPickupEndDate),
            ("rideOption.estimatedPickupDate", booking.rideOption.estimatedPickupDate),
            ("lastValid.estimatedPickupDateLatest", lastValid?.value.estimatedPickupDateLatest),
            ("lastValid.estimatedDropOffDateLatest", lastValid?.value.estimatedDropOffDateLatest),
        ]
        for case (let field, let date?) in estimates where !Timestamps.isRepresentable(date) {
            throw Rejection(.invalidField, "\(field) is not a valid time (A2, V6)")
        }
        guard drivenMetres.isFinite && drivenMetres >= 0 else {
            throw Rejection(.invalidField, "drivenMetres \(drivenMetres) is not a distance (A2)")
        }
        // 0: an older shape without the factor (the engine supplies one); otherwise E1's bounds for any factor.
        guard detourFactor == 0 || (1...5).contains(detourFactor) else {
            throw Rejection(.invalidField, "detourFactor \(detourFactor) is outside 1...5 (A2, E1)")
        }
        // E1's pace and cruise, bounded as the pace counts fresh input: at most `rides.maxSpeed` (T4), over at
        // most a ride's longest time, so a state read back cannot pin a ride's ETAs to now.
        if let speed = smoothedSpeed, !(speed.isFinite && speed >= 0 && speed <= configuration.maxSpeed) {
            throw Rejection(.invalidField, "smoothedSpeed \(speed) is not a speed within maxSpeed (A2, T4, T6)")
        }
        // E1's range (V6): a stored latest time is never before its estimate.
        if let last = lastValid?.value {
            if let latest = last.estimatedPickupDateLatest, latest < (last.estimatedPickupDate ?? .distantFuture) {
                throw Rejection(.invalidField, "lastValid.estimatedPickupDateLatest is before its estimate (A2, V6)")
            }
            if let latest = last.estimatedDropOffDateLatest, latest < (last.estimatedDropOffDate ?? .distantFuture) {
                throw Rejection(.invalidField, "lastValid.estimatedDropOffDateLatest is before its estimate (A2, V6)")
            }
        }
        if let share = stopShare, !(0...1).contains(share) {
            throw Rejection(.invalidField, "stopShare \(share) is not a share of time, 0...1 (A2, E1)")
        }
        guard cruiseSeconds.isFinite, cruiseSeconds >= 0, Double(cruiseSeconds) <= configuration.maxRideDuration,
            cruiseMetres.isFinite, cruiseMetres >= 0,
            Double(cruiseMetres) <= Double(cruiseSeconds) * configuration.maxSpeed * 1.001 + 1
        else {
            throw Rejection(
                .invalidField, "cruiseMetres \(cruiseMetres) over cruiseSeconds \(cruiseSeconds) is not a pace (A2, E1)"
            )
        }
        if let track = terms.value.route {
            guard track.receivedAt >= Self.earliestTime && track.receivedAt <= latest else {
                throw Rejection(.invalidField, "route.receivedAt is not a past time (A2, E2)")
            }
            if let departed = track.departedAt, departed < Self.earliestTime || departed > latest {
                throw Rejection(.invalidField, "route.departedAt is not a past time (A2, E2)")
            }
            guard track.startAlong.isFinite, (0...track.length + 1).contains(track.startAlong),
                routeAlong.isFinite, (0...track.length + 1).contains(Double(routeAlong))
            else {
                throw Rejection(.invalidField, "routeAlong or route.startAlong is not a place on the route (A2, E2)")
            }
            guard routeMisses < RouteTrack.offRouteFixes else {
                throw Rejection(.invalidField, "routeMisses \(routeMisses) would have given the route up (A2, E2)")
            }
        }
        if let prior = cruisePrior, !AreaLearning.speeds.contains(prior) {
            throw Rejection(.invalidField, "cruisePrior \(prior) is outside 0.5...60 m/s (A2, E1)")
        }
        // Places (T1).
        let places: [(String, Coordinate?)] = [
            ("pickupLocation", booking.pickupLocation.coordinate),
            ("dropOffLocation", booking.dropOffLocation.coordinate), ("location", location?.coordinate),
            ("lastValid.vehicleLocation", lastValidStatus?.vehicle.location?.coordinate),
        ]
        for case (let field, let coordinate?) in places where !coordinate.isValid {
            throw Rejection(.invalidCoordinates, "\(field) is not a valid position (A2, T1)")
        }
        // Money (V6): what the ride can still charge or show is never negative and always ISO 4217.
        var amounts: [(String, Decimal, String)] = []
        if let fare = booking.fare {
            amounts += [
                ("fare.baseCharge", fare.baseCharge, fare.currencyCode),
                ("fare.perKilometer", fare.perKilometer, fare.currencyCode),
                ("fare.perMinute", fare.perMinute, fare.currencyCode),
            ]
            if let catalog = fare.catalog {
                amounts.append(("fare.catalog.minimumFare", catalog.minimumFare, fare.currencyCode))
                amounts.append(("fare.catalog.partySurcharge", catalog.partySurcharge, fare.currencyCode))
                amounts += catalog.surcharges.map { ("fare.catalog.surcharges", $0.amount, fare.currencyCode) }
                amounts += catalog.discounts.compactMap { discount in
                    discount.amount.map { ("fare.catalog.discounts", $0, fare.currencyCode) }
                }
                // A fixed price's trip is a distance and a time.
                if let trip = catalog.fixedTrip,
                    !(trip.metres.isFinite && trip.metres >= 0 && trip.seconds.isFinite && trip.seconds >= 0)
                {
                    throw Rejection(.invalidField, "fare.catalog.fixedTrip is not a distance and a time (A2)")
                }
                guard catalog.partySizes.lowerBound >= 1 else {
                    throw Rejection(.invalidField, "fare.catalog.partySizes must start at 1 or more (A2)")
                }
                guard catalog.discounts.allSatisfy({ ($0.percent ?? 0) >= 0 && ($0.percent ?? 0) <= 100 }) else {
                    throw Rejection(.invalidField, "fare.catalog.discounts: a percent outside 0...100 (A2, V6)")
                }
            }
        }
        if let range = booking.rideOption.priceRange {
            amounts += [
                ("priceRange.minimumPrice", range.minimumPrice, range.currencyCode),
                ("priceRange.maximumPrice", range.maximumPrice, range.currencyCode),
            ]
        }
        if let payment = completion?.paymentAmount {
            amounts.append(("completion.paymentAmount", payment.amount, payment.currencyCode))
        }
        for (field, amount, code) in amounts where amount < 0 || !Money.isValidCurrencyCode(code) {
            throw Rejection(.invalidField, "\(field) \(amount) \(code) is negative or not ISO 4217 (A2, V6)")
        }
        // V3: the phase and the completion status agree.
        guard (phase == .completed) == (completion != nil) else {
            throw Rejection(.invalidField, "phase \(phase.rawValue) and completion disagree (A2, V3)")
        }
    }

    /// I1 for an identifier of a ride state, never echoed into a topic.
    private static func checkIdentifier(_ value: String, field: String) throws(Rejection) {
        guard Identifier.isValid(value) else {
            throw Rejection(.invalidIdentifier, "\(field) in ride state breaks I1 (A2, I1)")
        }
    }

    /// A decoding error in one line: the field's path and what was wrong, not Foundation's whole description.
    private static func summary(of error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the document" : keys.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(path(context)).\(key.stringValue) is missing"
        @unknown default:
            return "\(error)"
        }
    }
}

extension Ride {
    /// C5: takes the numbers ``RideNumbering`` decided (read from ``version``): epoch, sequence and ceiling.
    private mutating func take(_ numbers: RideNumbering.Numbers) {
        epoch = numbers.epoch
        sequence = numbers.sequence
        sequenceCeiling = numbers.ceiling
    }

    /// C5, G3, G6: the ride served here from now on, numbered as ``RideNumbering/start(_:basis:floor:reserved:)``
    /// decides; unchanged when the start is refused.
    @discardableResult
    package mutating func start(_ start: RideNumbering.Start) -> Bool {
        guard case .numbers(let numbers) = start else { return false }
        take(numbers)
        return true
    }

    /// G2, G3 in broker-only mode: a new owner takes the ride over (``RideNumbering/takeOver(_:block:floor:)``).
    package mutating func takeOver(sequenceBlock: Int, floor: SequenceFloor? = nil) {
        take(RideNumbering.takeOver(version, block: sequenceBlock, floor: floor))
    }

    /// G6: a worker granted the ride's bucket under `epoch` takes the ride over
    /// (``RideNumbering/start(_:basis:floor:reserved:)``). Nothing changes unless the outcome is
    /// ``SequenceNumbering/Outcome/next(_:)``.
    package mutating func grant(epoch granted: UInt64) -> SequenceNumbering.Outcome {
        switch RideNumbering.start(version, basis: .grant(granted)) {
        case .numbers(let numbers):
            take(numbers)
            return .next(numbers.sequence + 1)
        case .refused(let outcome):
            return outcome
        }
    }

    /// The ride's age at `now`, in seconds, by this worker's clock.
    package func age(at now: Date) -> Double { now.timeIntervalSince(startedAt) }

    /// C5, G3: the lowest ceiling a worker taking the ride over at `now` reserves from
    /// (``RideNumbering/clockCeiling(age:)``).
    package func clockCeiling(at now: Date) -> Int { RideNumbering.clockCeiling(age: age(at: now)) }

    /// G3: whether this copy of a ride's durable state is newer than `other` (a higher epoch; the same epoch
    /// and a higher ceiling; or both the same and a higher sequence): of two copies read during a handover, the
    /// newer is served.
    /// A release write ties with the block write before it on epoch and ceiling (it reserves nothing new): the
    /// sequence breaks the tie, so the copy with the last status's numbers wins.
    package func isNewer(than other: Ride) -> Bool { version > other.version }

    /// G3: this copy's version, as the handover compares copies (``StateVersion``).
    package var version: StateVersion {
        StateVersion(epoch: epoch, ceiling: max(sequence, sequenceCeiling), sequence: sequence)
    }
}
