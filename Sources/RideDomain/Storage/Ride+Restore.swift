package import Foundation
import RideStatusKit
package import WorkerGroup

// MARK: - Restoring durable state (L5, A2)

extension Ride {
    /// The largest `sequence` a ride may carry: 2^53 - 1, the largest integer every JSON reader keeps exactly.
    /// A stored sequence above it could never be continued without loss (or, at `Int.max`, without trapping).
    package static let maxSequence = 9_007_199_254_740_991
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
    /// G2, G3 in broker-only mode: a new owner takes the ride over: its epoch grows by one (64 bits: it never
    /// wraps; under an authority, G6, the grant gives the epoch instead, ``grant(epoch:)``), so that the old owner,
    /// seeing a state under a higher epoch, stops publishing the ride (G4); and its ceiling rises by one
    /// `sequenceBlock` (C5), so the new owner continues above every sequence the old owner may have reserved.
    ///
    /// The state read may lag the old owner's last write by one: the old owner sends each ceiling before the
    /// statuses it covers, but a clustered broker can deliver those statuses to subscribers while its copy of
    /// the retained state is not yet the new one (a NATS node lost mid-write: the old owner's status 7 was
    /// delivered, the new owner read the ceiling 6 and issued 7 again, `GroupNATSClusterTests`). One write
    /// reserves at most one block above the ceiling before it, so skipping a block keeps the numbering
    /// strictly increasing across owners; C5 allows the gap.
    ///
    /// A `floor` from the previous owner's release notice bounds both from below: the read can lag further than
    /// one write (``SequenceFloor``).
    package mutating func takeOver(sequenceBlock: Int, floor: SequenceFloor? = nil) {
        if let floor { epoch = max(epoch, floor.epoch) }
        if epoch < .max { epoch += 1 }
        let reserved = min(max(sequence, sequenceCeiling, floor?.ceiling ?? 0), Ride.maxSequence)
        sequenceCeiling = reserved + min(max(sequenceBlock, 0), Ride.maxSequence - reserved)
    }

    /// G6: a worker granted the ride's bucket under `epoch` by the authority takes the ride over: the epoch is
    /// the grant's, and the next status is numbered in its range (``SequenceNumbering``), above every number
    /// published or reserved before. Nothing changes unless the outcome is ``SequenceNumbering/Outcome/next(_:)``.
    package mutating func grant(epoch granted: UInt64) -> SequenceNumbering.Outcome {
        let outcome = SequenceNumbering.next(after: max(sequence, sequenceCeiling), epoch: granted)
        if case .next(let next) = outcome {
            epoch = granted
            // The next status adds one; its state write reserves the block above first (C5, L5).
            sequence = next - 1
            sequenceCeiling = sequence
        }
        return outcome
    }

    /// C5 across owners whose views split: how many numbers a ride's owners may use per second of its life at
    /// most, so that a taker later by a tenth of a second numbers above one earlier (``clockCeiling(at:)``). A
    /// ride publishes every `rides.updateInterval` and at its changes: far fewer.
    package static let takeoverNumbersPerSecond = 10.0

    /// C5, G3: the lowest ceiling a worker taking the ride over at `now` reserves from: its age at `now` times
    /// ``takeoverNumbersPerSecond``. Two workers whose views of the group split (a NATS node lost while a worker
    /// died) both take the dead worker's rides over from the same read; each continuing a block above that read,
    /// they issued the same numbers (`GroupNATSClusterTests`, five seconds apart). Counted from the ride's start
    /// on each taker's clock, the later one starts above the earlier by 10 numbers per second between them,
    /// more than the earlier issues at the cadence (what it does not cover: docs/CONTRACT-NOTES.md, "C5 across
    /// a NATS node's loss"). It leaves a gap at a handover (C5 allows gaps), up to 216,000 numbers for a ride six
    /// hours old.
    package func clockCeiling(at now: Date) -> Int {
        let age = now.timeIntervalSince(startedAt)
        guard age.isFinite, age > 0 else { return 0 }
        return Int(min(age * Self.takeoverNumbersPerSecond, Double(Self.maxSequence / 2)))
    }

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
