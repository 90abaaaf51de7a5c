public import Foundation

public import struct RideStatusKit.CompletionStatus
public import struct RideStatusKit.FareLineItem
public import struct RideStatusKit.Place
public import struct RideStatusKit.RideOption
public import enum RideStatusKit.RidePhase
public import struct RideStatusKit.RideStatus
public import struct RideStatusKit.Vehicle
public import struct RideStatusKit.VehicleLocation

// MARK: - The next status (C1, C5) and the last valid one (V7)

extension Ride {
    /// The next status (sequence + 1, `issuedAt` never earlier than the last). Not yet validated.
    /// - Parameters:
    ///   - ranges: E1's learned ranges, for the latest times; nil gives none.
    ///   - area: the name of the ride's service area (``areaIndex``), whose ranges apply; "" outside every area.
    public mutating func nextStatus(
        now: Date, configuration: RideConfiguration, ranges: ArrivalRanges? = nil, area: String = ""
    ) -> RideStatus {
        updateEstimates(now: now, configuration: configuration)
        limitEstimateDelays(now: now, configuration: configuration)
        let (pickupLatest, dropOffLatest) =
            ranges.map { latestTimes(now: now, ranges: $0, area: area) } ?? (nil, nil)
        sequence += 1
        let issuedAt = max(now, lastIssuedAt ?? now)
        cadenceGap = lastIssuedAt.map { issuedAt.timeIntervalSince($0) }
        lastIssuedAt = issuedAt
        var option = booking.rideOption
        option.estimatedPickupDate = estimatedPickupDate
        describeFare(in: &option, completed: phase == .completed)
        return RideStatus(
            rideIdentifier: booking.rideIdentifier, phase: phase, completionStatus: completion,
            vehicle: Vehicle(vehicle, location: location), driver: driver, rideOption: option,
            estimatedPickupDate: estimatedPickupDate, estimatedPickupEndDate: estimatedPickupEndDate,
            estimatedDropOffDate: estimatedDropOffDate, estimatedPickupDateLatest: pickupLatest,
            estimatedDropOffDateLatest: dropOffLatest, pickupLocation: booking.pickupLocation,
            dropOffLocation: booking.dropOffLocation, waypoints: booking.waypoints,
            scheduledPickupTime: booking.scheduledPickupTime, sequence: sequence, issuedAt: issuedAt,
            stale: isStale(now: now, configuration: configuration), estimateSource: estimateSource)
    }

    /// E1's range: the latest times of the estimates just made, from the ranges learned for the ride's
    /// area; the estimates of the leg under way are kept to learn from when the car arrives (only E1's own: not
    /// the booking's estimate, which stands while the car's position is unknown). Before the pickup the
    /// drop-off's latest time adds the ride's leg to the pickup's latest time, at least.
    mutating func latestTimes(now: Date, ranges: ArrivalRanges, area: String) -> (pickup: Date?, dropOff: Date?) {
        var pickup: Date?
        if phase < .pickup {
            let toGo = max(0, estimatedPickupDate.timeIntervalSince(now))
            let latest = ranges.latest(in: toGo, leg: .pickup, area: area)
            let date = now.addingTimeInterval(latest)
            // A booking's estimate far enough out has no writable latest time (V6): none is given.
            guard Timestamps.isRepresentable(date) else { return (nil, nil) }
            pickup = date
            if location != nil {
                arrivalSamples.record(.pickup, at: now, since: startedAt, toGo: toGo, latest: latest)
            }
        }
        guard phase < .completed, let dropOffDate = estimatedDropOffDate else { return (pickup, nil) }
        let toGo = max(0, dropOffDate.timeIntervalSince(now))
        let latest = ranges.latest(in: toGo, leg: .dropOff, area: area)
        var dropOff = now.addingTimeInterval(latest)
        if let pickup {
            dropOff = max(dropOff, pickup.addingTimeInterval(dropOffDate.timeIntervalSince(estimatedPickupDate)))
        }
        guard Timestamps.isRepresentable(dropOff) else { return (pickup, nil) }
        if phase == .ongoing {
            arrivalSamples.record(.dropOff, at: now, since: startedAt, toGo: toGo, latest: latest)
        }
        return (pickup, dropOff)
    }

    /// E1's range: a change of phase ends a leg. Arriving at the pickup (or boarding without `pickup`) teaches
    /// the pickup's estimates; completing teaches the drop-off's; a cancellation teaches nothing.
    /// - Returns: whether the leg taught `ranges` a ratio (so that the area's priors are shared again).
    @discardableResult
    mutating func endLeg(now: Date, ranges: inout ArrivalRanges, area: String) -> Bool {
        guard let leg = arrivalSamples.leg else { return false }
        if completion.map({ $0.canceled || $0.missedPickup }) == true {
            arrivalSamples.clear()
        } else if leg == .pickup, phase >= .pickup {
            return arrivalSamples.teach(
                &ranges, arrival: pickupArrivedAt ?? ongoingSince ?? now, since: startedAt, area: area)
        } else if leg == .dropOff, phase == .completed {
            return arrivalSamples.teach(&ranges, arrival: completedAt ?? now, since: startedAt, area: area)
        }
        return false
    }

    /// C1, C5: the status just numbered did not leave (the broker had no room for it). Its number is given
    /// back: nobody saw it, and a number burnt here would let the next durable state reserve more than one
    /// block above the last one the broker has, which a new owner's margin counts on (``takeOver(sequenceBlock:)``).
    /// The next status is measured from the status before it, and, when this one's durable state stayed behind
    /// too, writes the state first: the ceiling on the broker is still the one before, so no later status may
    /// pass it unwritten.
    mutating func unpublished(stateDropped: Bool) {
        if let issued = lastIssuedAt { lastIssuedAt = cadenceGap.map { issued.addingTimeInterval(-$0) } }
        cadenceGap = nil
        if sequence > 0 { sequence -= 1 }
        if stateDropped { sequenceCeiling = min(sequenceCeiling, sequence) }
        // E1's range counts the statuses riders saw: this one they did not.
        arrivalSamples.uncount()
    }

    /// V7: remembers a status that passed validation. Built from the status's fields in place: going through a
    /// ``LastValidStatus/Durable`` first copied each of them once more (callgrind, `make bench-instructions`).
    public mutating func recordValid(_ status: borrowing RideStatus) {
        let current = crew.value
        let sameCrew = current.driver == status.driver && current.vehicle.describes(status.vehicle)
        let completion = status.completionStatus.map { $0 == completionBox?.value ? completionBox! : Shared($0) }
        lastValid = Shared(
            LastValidStatus(
                phase: status.phase, stale: status.stale, completion: completion,
                vehicleLocation: status.vehicle.location,
                crew: sameCrew ? crew : Shared(Crew(vehicle: status.vehicle.details, driver: status.driver)),
                optionPickupDate: status.rideOption.estimatedPickupDate,
                estimatedPickupDate: status.estimatedPickupDate, estimatedPickupEndDate: status.estimatedPickupEndDate,
                estimatedDropOffDate: status.estimatedDropOffDate,
                estimatedPickupDateLatest: status.estimatedPickupDateLatest,
                estimatedDropOffDateLatest: status.estimatedDropOffDateLatest, sequence: status.sequence,
                issuedAt: status.issuedAt))
    }

    /// A V7 snapshot that shares the ride's crew and completion boxes where it says the same (a status
    /// built from this ride always does; a restored snapshot may differ, and then gets its own).
    func snapshot(_ last: LastValidStatus.Durable) -> Shared<LastValidStatus> {
        let lastCrew = Crew(vehicle: last.vehicle, driver: last.driver)
        let completion = last.completionStatus.map { $0 == completionBox?.value ? completionBox! : Shared($0) }
        return Shared(
            LastValidStatus(
                phase: last.phase, stale: last.stale, completion: completion, vehicleLocation: last.vehicleLocation,
                crew: lastCrew == crew.value ? crew : Shared(lastCrew), optionPickupDate: last.optionPickupDate,
                estimatedPickupDate: last.estimatedPickupDate, estimatedPickupEndDate: last.estimatedPickupEndDate,
                estimatedDropOffDate: last.estimatedDropOffDate,
                estimatedPickupDateLatest: last.estimatedPickupDateLatest,
                estimatedDropOffDateLatest: last.estimatedDropOffDateLatest, sequence: last.sequence,
                issuedAt: last.issuedAt))
    }

    func status(from last: LastValidStatus) -> RideStatus {
        var option = booking.rideOption
        option.estimatedPickupDate = last.optionPickupDate
        describeFare(in: &option, completed: last.phase == .completed)
        return RideStatus(
            rideIdentifier: booking.rideIdentifier, phase: last.phase, completionStatus: last.completion?.value,
            vehicle: Vehicle(last.crew.value.vehicle, location: last.vehicleLocation), driver: last.crew.value.driver,
            rideOption: option,
            estimatedPickupDate: last.estimatedPickupDate, estimatedPickupEndDate: last.estimatedPickupEndDate,
            estimatedDropOffDate: last.estimatedDropOffDate, estimatedPickupDateLatest: last.estimatedPickupDateLatest,
            estimatedDropOffDateLatest: last.estimatedDropOffDateLatest, pickupLocation: booking.pickupLocation,
            dropOffLocation: booking.dropOffLocation, waypoints: booking.waypoints,
            scheduledPickupTime: booking.scheduledPickupTime, sequence: last.sequence, issuedAt: last.issuedAt,
            stale: last.stale, estimateSource: estimateSource)
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
}

/// The part of a valid status that the booking does not fix (V7).
struct LastValidStatus: Sendable, Equatable {
    // Every ride keeps one, boxed: the two one-byte fields share a word, so the box stays in malloc's 160-byte
    // class, not the 176-byte one (`make bench-domain`'s `ride-bench memory` measured 32 bytes a ride less than
    // with `stale` last).
    var phase: RidePhase
    var stale: Bool
    var completion: Shared<CompletionStatus>?
    @PackedLocation var vehicleLocation: VehicleLocation?
    var crew: Shared<Crew>
    var optionPickupDate: Date
    @NaNBoxed var estimatedPickupDate: Date?
    @NaNBoxed var estimatedPickupEndDate: Date?
    @NaNBoxed var estimatedDropOffDate: Date?
    @NaNBoxed var estimatedPickupDateLatest: Date?
    @NaNBoxed var estimatedDropOffDateLatest: Date?
    var sequence: Int
    var issuedAt: Date
}

extension Ride {
    /// P5, for a ride booked from the catalog: `usesMeteredFare` says whether the fare is metered,
    /// and a completed ride carries its final breakdown. Before completion the items are the booking's own, as
    /// the contract's booking brought them: making a fixed price's items for every status cost 50 % more CPU
    /// per status at 100,000 rides (`make bench-scale`: 9.3 against 6.2 ms a second per 1,000 rides).
    func describeFare(in option: inout RideOption, completed: Bool) {
        guard let catalog = booking.fare?.catalog else { return }
        option.usesMeteredFare = catalog.fixedTrip == nil
        if completed, let items = finalFareLineItems { option.fareLineItems = items }
    }

    /// A completed ride's final breakdown, whose items add up to `paymentAmount` exactly. Worked out again from
    /// what the ride keeps (the distance driven, when it started and ended), exactly as at completion, so it
    /// needs no storage of its own and survives a restart.
    var finalFareLineItems: [FareLineItem]? {
        guard phase == .completed, completionBox?.value.completed == true, let fare = booking.fare,
            fare.catalog != nil, let completedAt
        else { return nil }
        return fare.price(
            drivenMetres: drivenMetres,
            rideSeconds: Self.pricedSeconds(from: ongoingSince ?? completedAt, to: completedAt)
        ).lineItems
    }
}
