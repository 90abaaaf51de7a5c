import Foundation

package import enum RideStatusKit.EstimateSource
package import struct RideStatusKit.Route
package import struct RideStatusKit.TelemetryFix

// MARK: - E2: a route, and a navigation app's progress

extension Ride {
    /// E2: what makes the ride's ETAs now.
    package var estimateSource: EstimateSource {
        guard phase < .completed else { return .estimate }
        if navigating { return .navigation }
        // As ``updateEstimates(now:configuration:metresToPickup:)`` decides: the ETA of the leg under way.
        if let track = terms.value.route {
            switch phase {
            case .pickup: if track.pickupAlong != nil && track.dropOffAlong != nil { return .route }
            case .ongoing: if location != nil && track.dropOffAlong != nil { return .route }
            default: if location != nil && track.pickupAlong != nil { return .route }
            }
        }
        return .estimate
    }

    /// E2: follows `route` from now on (on `assign`, or `rides/{ride}/route` after a reroute); the car's progress
    /// starts from its place on it.
    mutating func follow(_ route: Route, now: Date) throws(Rejection) {
        let points = try RouteTrack.points(of: route)
        let track = RouteTrack(
            points: points, distance: route.distance, duration: route.duration, version: route.version,
            receivedAt: now, pickup: booking.pickupLocation.coordinate, dropOff: booking.dropOffLocation.coordinate,
            car: location?.coordinate)
        guard track.pickupAlong != nil || track.dropOffAlong != nil else {
            throw Rejection(
                .invalidField,
                "route passes neither the pickup nor the drop-off within \(Int(RouteTrack.offRouteMetres)) m (E2)")
        }
        guard phase < .pickup || track.dropOffAlong != nil else {
            throw Rejection(
                .invalidField,
                "from the pickup on, a route must reach the drop-off within \(Int(RouteTrack.offRouteMetres)) m (E2)")
        }
        setRoute(track)
    }

    /// E2: the car's pace along the route counts again from where it is (at the pickup: the wait is no driving).
    mutating func restartRoutePace() {
        guard let track = terms.value.route else { return }
        var updated = terms.value
        updated.route = track.restarted(from: Double(routeAlong))
        terms = Shared(updated)
    }

    /// E2: no route from now on: another car, or the car left it.
    mutating func dropRoute() {
        guard terms.value.route != nil else { return }
        setRoute(nil)
    }

    mutating func setRoute(_ track: RouteTrack?) {
        var updated = terms.value
        updated.route = track
        terms = Shared(updated)
        routeAlong = Float(track?.startAlong ?? 0)
        routeMisses = 0
    }

    /// E2: a fix on the route moves the car along it, never back; ``RouteTrack/offRouteFixes`` in a row off it
    /// give the route up, and E1 applies until a new one comes.
    /// - Parameter seconds: since the fix before: how far on the car can have driven (at most 40 m/s, plus the
    ///   fixes' error). After a fix off the route, the whole rest of it: the car may come back anywhere on it.
    /// - Parameter at: the fix's time.
    mutating func advanceOnRoute(_ track: RouteTrack, _ coordinate: Coordinate, seconds: Double, at time: Date) {
        let reach = routeMisses > 0 ? .infinity : 60 + 40 * max(0, seconds)
        let place = track.place(of: coordinate, from: Double(routeAlong), reach: reach)
        if place.offset <= Double(RouteTrack.offRouteMetres) {
            routeAlong = max(routeAlong, Float(place.along))
            routeMisses = 0
            // Left the start: between the fix before and this one, halfway for want of better.
            if track.departedAt == nil, Double(routeAlong) - track.startAlong >= 30 {
                var updated = terms.value
                updated.route = track.departed(at: time.addingTimeInterval(-max(0, seconds) / 2))
                terms = Shared(updated)
            }
        } else {
            routeMisses += 1
            if routeMisses >= RouteTrack.offRouteFixes { dropRoute() }
        }
    }

    /// E2: a fix with the navigation app's progress sets the ETA to where the car goes next: the fix's time plus
    /// the app's remaining duration. One without it hands the ETAs back to the route or E1.
    mutating func navigate(_ fix: TelemetryFix, now: Date) {
        guard let seconds = fix.remainingDuration, fix.remainingDistance != nil, phase < .completed else {
            navigating = false
            return
        }
        navigating = true
        let arrival = max(now, fix.timestamp.addingTimeInterval(seconds))
        if phase < .pickup { estimatedPickupDate = arrival } else { estimatedDropOffDate = arrival }
    }

    /// E2: seconds from the car's place on the route to `target` metres along it (the engine's duration scaled by
    /// the car's pace so far, or without one the road left at `speed`); nil without a route that reaches it.
    /// - Parameter track: the ride's route (passed down, not read again from the booking's box: each read retains
    ///   it, `make bench-instructions`).
    func routeSeconds(
        _ track: RouteTrack?, to target: Double?, from start: Double? = nil, now: Date, speed: (Double) -> Double
    ) -> Double? {
        guard let track, let target else { return nil }
        let from = start ?? Double(routeAlong)
        // From the last fix's place, so from its time: the road driven since is not counted twice. The car's pace
        // so far runs to that fix too.
        let fixTime = min(now, location?.timestamp ?? now)
        let spent = start == nil ? now.timeIntervalSince(fixTime) : 0
        if let seconds = track.engineSeconds(
            fromAlong: from, toAlong: target, carAlong: Double(routeAlong),
            elapsed: fixTime.timeIntervalSince(track.departedAt ?? track.receivedAt))
        {
            return max(0, seconds - spent)
        }
        let metres = max(0, target - from)
        return max(0, metres / speed(metres) - spent)
    }
}
