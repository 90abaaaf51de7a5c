public import Foundation
public import RideStatusKit
import WorkerGroup

// MARK: - Messages in: fixes (T1-T7, then P2-P5) and control messages (L1-L3, P1, P6-P8, 3.5)

extension RideEngine {
    /// One message from the broker.
    public mutating func receive(topic: String, payload: [UInt8], now: Date) -> [RideAction] {
        receive(topics.parse(topic), topic: topic, payload: payload, now: now)
    }

    /// One message whose topic the caller has already parsed (the service parses each topic once, at its edge).
    public mutating func receive(_ parsed: RideTopics.Parsed, topic: String, payload: [UInt8], now: Date)
        -> [RideAction]
    {
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
        case .vehicleEvent(let vehicle):
            do throws(Rejection) {
                try receiveVehicleEvent(vehicle: vehicle, payload: payload, now: now, into: &actions)
            } catch {
                reject(error, topic: topic, payload: payload, now: now, into: &actions)
            }
        case .statusRequest, .status, .rideOptionsRequest, .availability, .state, .presence, .released, .unknown:
            break
        case .priors:
            break  // ``receivePriors(key:topic:payload:now:worker:since:)``: its echo depends on the worker's id.
        }
        return actions
    }

    mutating func receiveFix(
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
    mutating func apply(
        _ fix: TelemetryFix, topic: String?, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) {
        // The worker's decoders always name the topic's vehicle (I3); a fix without one belongs to no ride.
        guard let vehicle = fix.vehicleId, let slot = vehicles.slot(of: vehicle) else {
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
                rejection, topic: topic ?? topics.position(vehicle: vehicle), payload: payload, now: now,
                into: &actions)
        case .accepted(let accepted):
            counters.fixesAccepted += 1
            vehicles[slot: slot].track.record(accepted)
            vehicles[slot: slot].recent.record(accepted, capacity: configuration.trackLength)
            for rideSlot in vehicles[slot: slot].rides {
                // In place, by slot: no hashing and no copy of the ride per fix.
                let effect = rideTable[slot: rideSlot].apply(
                    accepted, reportedSpeed: fix.speed, now: now, configuration: configuration)
                // C2 on a phase change; C3: a fresh fix clears `stale` at once.
                if effect.phaseChanged || effect.staleCleared {
                    publish(rideSlot, now: now, phaseChanged: effect.phaseChanged, into: &actions)
                }
            }
        }
    }

    mutating func receiveControl(
        _ kind: RideTopics.Control, ride id: String, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) throws(Rejection) {
        switch kind {
        case .start:
            var (booking, fare) = resolveOption(of: try decoder.booking(rideIdentifier: id, payload: payload))
            try checkTopicSafe(booking.vehicleId)
            guard !rideTable.contains(id) else {
                counters.duplicateStarts += 1  // L1
                return
            }
            let image = images.intern(booking.vehicle?.mapAnnotationImage)
            booking.vehicle?.mapAnnotationImage = image
            // E1: the area's learned detour factor, stop share and speed while moving.
            let (index, area) = catalogArea(at: booking.pickupLocation.coordinate)
            var ride = Ride(
                booking: booking, fare: fare, now: now, configuration: configuration,
                detourFactor: learning.factor(for: area, configuration: configuration),
                stopShare: learning.stopShare(for: area, at: now, configuration: configuration),
                cruisePrior: learning.speed(for: area, at: now, configuration: configuration), areaIndex: index)
            // G6: a new ride's first number is its bucket's grant's first (a fresh ride is never fenced).
            if let epoch = grantEpochs?[Ownership.bucket(of: id)] { _ = ride.grant(epoch: epoch) }
            try checkPublishable(ride, now: now, reason: .invalidBooking)
            let slot = rideTable.insert(ride, for: id)
            counters.ridesStarted += 1
            if let vehicle = booking.vehicleId { retain(vehicle: vehicle, ride: id, into: &actions) }
            publish(slot, now: now, phaseChanged: true, into: &actions)
        case .assign:
            var assignment = try decoder.assignment(rideIdentifier: id, payload: payload)
            try checkTopicSafe(assignment.vehicleId)
            let slot = try activeSlot(of: id)
            let image = images.intern(assignment.vehicle?.mapAnnotationImage)
            assignment.vehicle?.mapAnnotationImage = image
            // On a copy: a refused input leaves the ride exactly as it was.
            var ride = rideTable[slot: slot]
            let (replaced, changed, routeRefused) = try ride.assign(
                assignment, now: now, configuration: configuration)
            try checkPublishable(ride, now: now, reason: .invalidField)
            rideTable[slot: slot] = ride
            // E2: a route the worker cannot follow is refused alone; the car and driver stand.
            if let routeRefused {
                let topic = topics.control(.assign, ride: id)
                reject(routeRefused, topic: topic, payload: payload, now: now, into: &actions)
            }
            if let replaced { release(vehicle: replaced, rideSlot: slot, into: &actions) }
            retain(vehicle: assignment.vehicleId, ride: id, into: &actions)
            publish(slot, now: now, phaseChanged: changed, crewChanged: true, into: &actions)
        case .event:
            let event = try decoder.event(rideIdentifier: id, payload: payload)
            try apply(event, slot: try activeSlot(of: id), now: now, into: &actions)
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
        case .route:
            let route = try decoder.route(rideIdentifier: id, payload: payload)
            let slot = try activeSlot(of: id)
            var ride = rideTable[slot: slot]
            guard ride.vehicleId != nil, ride.phase < .completed else {
                throw Rejection(
                    .eventNotAllowed,
                    "a route needs an assigned vehicle and a ride not completed (phase \(ride.phase.rawValue), E2)")
            }
            try ride.follow(route, now: now)
            ride.updateEstimates(now: now, configuration: configuration)
            try checkPublishable(ride, now: now, reason: .invalidField)
            rideTable[slot: slot] = ride
        }
    }

    /// A3: a driver event from a vehicle's own driver app applies, as one on `rides/{ride}/event` would (P3-P5,
    /// P8), only while that vehicle is the ride's assigned vehicle. An inactive ride is `unknownRide` first, as
    /// for dispatch's events; another vehicle's event is `notAssignedVehicle` and changes nothing.
    mutating func receiveVehicleEvent(
        vehicle: String, payload: [UInt8], now: Date, into actions: inout [RideAction]
    ) throws(Rejection) {
        let (id, event) = try decoder.vehicleEvent(vehicleId: vehicle, payload: payload)
        let slot = try activeSlot(of: id)
        guard rideTable[slot: slot].vehicleId == vehicle else {
            throw Rejection(.notAssignedVehicle, "vehicle \(vehicle) is not the assigned vehicle of ride \(id) (A3)")
        }
        try apply(event, slot: slot, now: now, into: &actions)
    }

    /// P3-P5, P8: a driver event, from dispatch or from the assigned vehicle; on a copy, so a refused event leaves
    /// the ride as it was.
    private mutating func apply(
        _ event: DriverEvent, slot: Int, now: Date, into actions: inout [RideAction]
    ) throws(Rejection) {
        var ride = rideTable[slot: slot]
        let changed = try ride.handle(event, now: now, configuration: configuration)
        rideTable[slot: slot] = ride
        if changed { publish(slot, now: now, phaseChanged: true, into: &actions) }
    }

    /// V4-V6 at intake: a booking (or an assignment) whose next status would fail validation is refused
    /// with the rule's detail, rather than taken in to publish nothing: V7 has no valid status to fall back
    /// on for a new ride, so it would stay silent until L4 removes it.
    func checkPublishable(_ ride: Ride, now: Date, reason: DeadLetter.Reason) throws(Rejection) {
        var trial = ride
        let status = trial.nextStatus(
            now: now, configuration: configuration, ranges: ranges, area: areaName(ride.areaIndex))
        if let violation = StatusValidator.violation(of: status, bookedRide: ride.rideIdentifier) {
            throw Rejection(reason, "\(violation.detail) (\(violation.rule))")
        }
    }

    /// I1 where the broker refuses `.` in topic names (``RideConfiguration/dotsInTopics``): the vehicle's
    /// position topic could not be subscribed to, so the booking or assignment is refused, visibly.
    func checkTopicSafe(_ vehicle: String?) throws(Rejection) {
        guard !configuration.dotsInTopics, let vehicle, vehicle.utf8.contains(UInt8(ascii: ".")) else { return }
        throw Rejection(
            .invalidIdentifier, "vehicleId contains '.', which this broker refuses in topic names (I1, dotsInTopics)")
    }

    func activeSlot(of id: String) throws(Rejection) -> Int {
        guard let slot = rideTable.slot(of: id) else { throw Rejection(.unknownRide, "ride \(id) is not active") }
        return slot
    }

    /// Booking by name (3.4): a ride option named by any of the catalog's names (any case, localized too)
    /// supplies the map annotation image (V5) and the fare of the pickup's service area (P5) that the
    /// booking leaves out.
    func resolveOption(of booking: Booking) -> (booking: Booking, fare: FareTerms?) {
        let brought = booking.fare.map(FareTerms.init)
        guard let catalog, let option = catalog.option(named: booking.rideOption.name) else {
            return (booking, brought)
        }
        var resolved = booking
        // V4: the catalog's canonical name downstream; the booking's own spelling stays as `localizedName`.
        if option.name != booking.rideOption.name {
            resolved.rideOption.localizedName = booking.rideOption.name
            resolved.rideOption.name = option.name
        }
        if resolved.vehicle?.mapAnnotationImage == nil {
            resolved.vehicle = resolved.vehicle ?? Vehicle()
            resolved.vehicle?.mapAnnotationImage = option.mapAnnotationImage
        }
        guard brought == nil, let area = catalog.area(containing: booking.pickupLocation.coordinate),
            let table = option.fares[area.name]
        else { return (resolved, brought) }
        // P5: the option's whole pricing in the area, for the party's tier; a fixed price is the
        // quote's for this pickup and drop-off, made now, so the rider pays what was quoted.
        let trip = RideOptionQuoter.trip(
            from: booking.pickupLocation.coordinate, to: booking.dropOffLocation.coordinate,
            detourFactor: configuration.detourFactor, averageSpeed: catalog.quotes.averageSpeed)
        let fare = table.fare(
            currency: area.currencyCode, capacity: option.capacity, partySize: booking.partySize ?? 1,
            fixedFor: option.pricing == .fixed ? trip : nil)
        return (resolved, fare)
    }
}
