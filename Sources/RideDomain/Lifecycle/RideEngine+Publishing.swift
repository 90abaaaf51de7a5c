public import Foundation

// MARK: - Statuses out: the cadence (C1, C4), queries (L7), recovery (L5), stops (L2) and dead letters (3.5)

extension RideEngine {
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
        let slot = rideTable.insert(ride, for: id)
        if let vehicle = ride.vehicleId { retain(vehicle: vehicle, ride: id, into: &actions) }
        scheduler.schedule(slot, at: now.timeIntervalSince1970)
        return actions
    }

    // MARK: Internals

    mutating func stop(_ id: String, into actions: inout [RideAction]) {
        // L2: unknown or ended rides are a no-op; idempotent.
        guard let rideSlot = rideTable.slot(of: id), let ride = rideTable.remove(id) else { return }
        scheduler.cancel(rideSlot)
        if let vehicle = ride.vehicleId { release(vehicle: vehicle, rideSlot: rideSlot, into: &actions) }
        counters.ridesStopped += 1
        actions.append(.clear(ride: id))
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

    /// - Parameter nextIn: the share of the interval until the ride's next status (1: a whole interval; less
    ///   staggers rides that would otherwise all come due together, still within C1).
    mutating func publish(
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
