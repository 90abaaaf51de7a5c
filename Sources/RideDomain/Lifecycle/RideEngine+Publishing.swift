public import Foundation
package import RideStatusKit

// MARK: - Statuses out: the cadence (C1, C4), queries (L7), recovery (L5), stops (L2) and dead letters (3.5)

extension RideEngine {
    // MARK: Time

    /// C1, C3, P6, L4: publishes every ride whose interval is due, at most `limit` of them: an owner that
    /// holds a lock while carrying out the actions calls again until ``hasDue(now:)`` is false, letting
    /// other inputs in between (a burst of 10,000 due rides must not delay a phase change, C2).
    public mutating func tick(now: Date, limit: Int = .max) -> [RideAction] {
        let due = scheduler.popDue(now: now.timeIntervalSince1970, limit: limit)
        // One action per due ride, mostly: reserved at once, not grown by doubling (an action carries a whole
        // status, and each growth copied all before it: 1,073 instructions a status at 1,000 rides under
        // callgrind, `make bench-instructions`).
        var actions: [RideAction] = []
        actions.reserveCapacity(due.count)
        // A popped slot always holds its ride: stopping a ride cancels its entry.
        for slot in due {
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

    /// C4 at fleet scale: every active ride due now. The owner's cadence then publishes them as fast as the
    /// broker takes them (``tick(now:limit:)``), each its newest status, instead of all of them in one burst
    /// that would wait in memory for a slow broker.
    public mutating func makeAllDue(now: Date) {
        for slot in rideTable.slots { scheduler.schedule(slot, at: now.timeIntervalSince1970) }
    }

    /// C1, C5: the status numbered for `ride` could not leave (no room at the broker: a burst of bookings or
    /// phase changes while the broker falls behind). The ride is due again at once, so its newest status
    /// leaves as soon as there is room; a durable state that stayed behind with it is written with that one.
    public mutating func deferStatus(of ride: String, stateDropped: Bool, now: Date) {
        guard let slot = rideTable.slot(of: ride) else { return }
        rideTable[slot: slot].unpublished(stateDropped: stateDropped)
        counters.statusesDeferred += 1
        counters.statusesPublished -= 1
        if stateDropped { counters.statesWritten -= 1 }
        scheduler.schedule(slot, at: now.timeIntervalSince1970)
    }

    // MARK: Queries and recovery

    /// L7: the ride's current status (the last one published), if the ride is active.
    package func currentStatus(of ride: String) -> RideStatus? { rideTable[ride]?.lastValidStatus }

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
    package mutating func restore(_ ride: Ride, now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        let id = ride.rideIdentifier
        guard Identifier.isValid(id), !rideTable.contains(id) else { return actions }
        // C5: statuses up to the ceiling may have been published after this state was written.
        var ride = ride
        ride.sequence = max(ride.sequence, ride.sequenceCeiling)
        // G3: the factor the ride started with, kept in its state, so its ETA does not jump with a new owner's
        // learned one; a state of an older shape has none and takes its area's.
        if ride.detourFactor < 1 { ride.detourFactor = detourFactor(at: ride.booking.pickupLocation.coordinate) }
        let (index, area) = catalogArea(at: ride.booking.pickupLocation.coordinate)
        ride.areaIndex = index
        // G3: the cruise and its prior come with the state, so a far ETA does not jump with a new owner's learned
        // speed; a state of an older shape has neither and takes its area's.
        if ride.cruisePrior == nil {
            ride.cruisePrior = learning.speed(for: area, at: now, configuration: configuration)
        }
        let slot = rideTable.insert(ride, for: id)
        if let vehicle = ride.vehicleId { retain(vehicle: vehicle, ride: id, into: &actions) }
        scheduler.schedule(slot, at: now.timeIntervalSince1970)
        return actions
    }

    /// L5, A2: the retained status of `ride`, read back during recovery and checked as fresh input is (what
    /// fails is dead-lettered with the rule in its detail and left alone). It is kept until
    /// ``mergeRetainedStatuses()``, since it may arrive before or after the ride's state.
    public mutating func noteRetainedStatus(topic: String, ride: String, payload: [UInt8], now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        guard !payload.isEmpty, Identifier.isValid(ride) else { return actions }
        do throws(Rejection) {
            retainedStatuses[ride] = try RetainedStatus.read(
                topicRide: ride, payload: payload, now: now, configuration: configuration)
        } catch {
            reject(error, topic: topic, payload: payload, now: now, into: &actions)
        }
        return actions
    }

    /// L5, C5: once every retained state is restored, each restored ride takes what its retained status adds
    /// (the last sequence, time and location); call before ``publishAll(now:)``. Returns how many rides took
    /// something; statuses of rides without a state are dropped.
    @discardableResult
    public mutating func mergeRetainedStatuses() -> Int {
        var merged = 0
        for (id, retained) in retainedStatuses {
            guard let slot = rideTable.slot(of: id) else { continue }
            rideTable[slot: slot].merge(retained)
            merged += 1
        }
        retainedStatuses = [:]
        return merged
    }

    // MARK: Handover (G3, G4)

    /// G3, G4: the ride leaves this engine without ending: nothing is cleared (its state and status stay
    /// retained for the next owner), its cadence stops, and its vehicle is unsubscribed unless another ride
    /// here needs it (L3). Returns the ride as it was, to write as its released state; nil if it is not here.
    public mutating func handOver(_ id: String) -> (ride: Ride, actions: [RideAction])? {
        guard let rideSlot = rideTable.slot(of: id), let ride = rideTable.remove(id) else { return nil }
        scheduler.cancel(rideSlot)
        var actions: [RideAction] = []
        if let vehicle = ride.vehicleId { release(vehicle: vehicle, rideSlot: rideSlot, into: &actions) }
        return (ride, actions)
    }

    // MARK: Internals

    mutating func stop(_ id: String, into actions: inout [RideAction]) {
        // L2: unknown or ended rides are a no-op; idempotent.
        guard let rideSlot = rideTable.slot(of: id), let ride = rideTable.remove(id) else { return }
        scheduler.cancel(rideSlot)
        if let vehicle = ride.vehicleId { release(vehicle: vehicle, rideSlot: rideSlot, into: &actions) }
        counters.ridesStopped += 1
        actions.append(.clear(ride: id, epoch: ride.epoch))
    }

    mutating func retain(vehicle: String, ride: String, into actions: inout [RideAction]) {
        guard let rideSlot = rideTable.slot(of: ride) else { return }
        if let slot = vehicles.slot(of: vehicle) {
            if !vehicles[slot: slot].rides.contains(rideSlot) { vehicles[slot: slot].rides.append(rideSlot) }
        } else {
            vehicles.insert(VehicleState(rides: RideSlots(rideSlot)), for: vehicle)
            actions.append(.subscribe(vehicle: vehicle))
        }
    }

    /// - Parameter rideSlot: the ride's slot (the ride may already have left the table).
    mutating func release(vehicle: String, rideSlot: Int, into actions: inout [RideAction]) {
        guard let slot = vehicles.slot(of: vehicle) else { return }
        vehicles[slot: slot].rides.remove(rideSlot)
        if vehicles[slot: slot].rides.isEmpty {
            vehicles.remove(vehicle)
            actions.append(.unsubscribe(vehicle: vehicle))
        }
    }

    /// - Parameters:
    ///   - phaseChanged: the phase or the completion status changed (C2); the durable state is written too.
    ///   - crewChanged: the vehicle or the driver changed (`assign`); the durable state is written too.
    ///   - nextIn: the share of the interval until the ride's next status (1: a whole interval; less
    ///     staggers rides that would otherwise all come due together, still within C1).
    mutating func publish(
        _ slot: Int, now: Date, phaseChanged: Bool, crewChanged: Bool = false, nextIn share: Double = 1,
        into actions: inout [RideAction]
    ) {
        let id = rideTable.identifier(at: slot)
        // In place, by slot: the ride is neither looked up again nor copied out and back.
        // E1's range: a change of phase may end a leg, whose estimates teach their area how late cars come.
        let area = areaName(rideTable[slot: slot].areaIndex)
        // What it taught goes to the group with the area's priors.
        if phaseChanged, rideTable[slot: slot].endLeg(now: now, ranges: &ranges, area: area) {
            rangesChanged.insert(area)
        }
        let status = rideTable[slot: slot].nextStatus(
            now: now, configuration: configuration, ranges: ranges, area: area)
        // V5, G3: the first status with a location writes the state too, so that a new owner reading it never
        // starts from no location once one was shown (the state's location may then lag by up to a block).
        let located = status.vehicle.location != nil && rideTable[slot: slot].lastValid?.value.vehicleLocation == nil
        let significant = phaseChanged || crewChanged || located
        if let violation = StatusValidator.violation(of: status, bookedRide: id) {
            counters.invalidStatuses += 1
            actions.append(.invalidStatus(ride: id, violation: violation))
            if let replacement = rideTable[slot: slot].replacementStatus(now: now) {
                counters.statusesPublished += 1
                actions.append(
                    .publish(
                        replacement, state: durableState(slot, significant: significant),
                        gap: rideTable[slot: slot].cadenceGap))
            }
        } else {
            // E1: a ride completed (not canceled, not missed) teaches its area's detour factor, once: at its
            // first completed status. Each leg driven to its end, to the pickup and to the drop-off, teaches its
            // stop share, once: at the first status of the phase that ends it.
            let before = rideTable[slot: slot].lastValid?.value.phase
            if phaseChanged, status.phase == .pickup || status.phase == .completed, before != status.phase,
                before.map({ $0 < .pickup || status.phase == .completed }) ?? true,
                status.completionStatus.map({ !$0.canceled && !$0.missedPickup }) ?? true
            {
                let ride = rideTable[slot: slot]
                let area = serviceArea(ride.areaIndex)
                if status.phase == .completed {
                    learning.learn(
                        driven: ride.drivenMetres, straight: ride.legMetres, area: area, configuration: configuration)
                }
                // A ride completed from `pickup` drove no leg of its own since the pickup taught its approach:
                // nothing to teach again. Only a leg the car was seen driving: its stop share is its own, not the
                // prior's.
                if before != .pickup {
                    if let share = ride.stopShare, ride.smoothedSpeed != nil {
                        learning.learn(stopShare: share, area: area, at: now, configuration: configuration)
                    }
                    if Double(ride.cruiseSeconds) >= AreaLearning.shortestCruise {
                        learning.learn(
                            speed: Double(ride.cruiseMetres / ride.cruiseSeconds), area: area, at: now,
                            configuration: configuration)
                    }
                }
            }
            rideTable[slot: slot].recordValid(status)
            counters.statusesPublished += 1
            if phaseChanged { counters.phaseTransitions += 1 }
            actions.append(
                .publish(
                    status, state: durableState(slot, significant: significant), gap: rideTable[slot: slot].cadenceGap))
        }
        let interval = configuration.updateInterval
        let first = rideTable[slot: slot].cadenceGap == nil && rideTable[slot: slot].sequence <= 1
        scheduler.schedule(
            slot, at: now.timeIntervalSince1970 + interval * share,
            levellingWithin: Self.levellingLead(interval: interval, share: share, firstStatus: first))
    }

    /// C1 leaves a status free to come early: a crowded tenth of a second sends some rides up to a fifth of the
    /// interval (at most 1 s) sooner, so bursts of bookings even out (``CadenceScheduler``). A share of the
    /// interval (C4's spread) is levelled within half of itself, so it never comes due at once.
    ///
    /// A fifth, not a tenth: with a tenth, at 100,000 rides the crowds a burst of bookings leaves
    /// (`make bench-scale`: 27,000 statuses in one second, 9,000 in another, the broker's limit about 25,000)
    /// took most of a minute to even out within half a second, and a status in a crowded second came late.
    /// A ride's first status may move its second by half an interval: it has no place in the interval yet, and
    /// a burst of bookings spreads over half an interval instead of staying a burst.
    package static func levellingLead(interval: Double, share: Double = 1, firstStatus: Bool = false) -> Double {
        firstStatus ? interval * share / 2 : min(1, interval / 5, interval * share / 2)
    }

    /// C5, L5: the ride to keep durably before the status it has just numbered, or nil when the last written
    /// state still covers it. The state is written on a change that matters (phase, completion, vehicle,
    /// driver; the booking is written with the first status) and whenever the sequence passes the ceiling the
    /// last write reserved, and with the first status that has a location (V5 across owners); each write reserves
    /// the next `sequenceBlock` numbers. A restart continues above
    /// the ceiling, so no published sequence is ever reused, and the broker carries one state message per
    /// block instead of one per status. (The last location between writes comes from the retained status on
    /// recovery: ``mergeRetainedStatuses()``.)
    private mutating func durableState(_ slot: Int, significant: Bool) -> Ride? {
        let sequence = rideTable[slot: slot].sequence
        guard significant || sequence > rideTable[slot: slot].sequenceCeiling else { return nil }
        // A significant write comes to many rides at once (a burst of bookings, a handover) and would keep them
        // in step: all of them past their ceilings in the same second one block later, a burst of state writes
        // on top of the cadence (`make bench-scale`: 13,600 in one second at 100,000 rides, the cadence
        // slipping). Its block is shorter by up to half, by slot, so the writes after it spread out.
        let block = configuration.sequenceBlock
        let spread = significant ? slot % (block / 2 + 1) : 0
        // Never lower: within an epoch a later state has a ceiling no lower than an earlier one, which is how two
        // copies of a state read during a handover are ordered (``Ride/isNewer(than:)``).
        let ceiling = min(sequence + block - 1 - spread, Ride.maxSequence)
        rideTable[slot: slot].sequenceCeiling = max(rideTable[slot: slot].sequenceCeiling, ceiling)
        counters.statesWritten += 1
        return rideTable[slot: slot]
    }

    /// 3.5: a rejection found outside the engine (quotes, availability): counted, and a dead letter if the
    /// per-reason limit allows.
    public mutating func reject(_ rejection: Rejection, topic: String, payload: [UInt8], now: Date) -> [RideAction] {
        var actions: [RideAction] = []
        reject(rejection, topic: topic, payload: payload, now: now, into: &actions)
        return actions
    }

    mutating func reject(
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
