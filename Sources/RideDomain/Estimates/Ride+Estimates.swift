import Foundation

import enum RideStatusKit.RidePhase
import struct RideStatusKit.TelemetryFix
import struct RideStatusKit.VehicleLocation

// MARK: - Estimates (E1)

/// E1: remaining time from great-circle distance, a detour factor and a smoothed speed with a floor.
public struct Estimator: Sendable {
    public var detourFactor: Double
    public var speedFloor: Double

    public init(detourFactor: Double, speedFloor: Double) {
        self.detourFactor = detourFactor
        self.speedFloor = speedFloor
    }

    /// Seconds to cover the great-circle distance `metres` at `speed` (m/s, floored).
    public func travelTime(metres: Double, speed: Double?) -> Double {
        metres * detourFactor / max(speed ?? speedFloor, speedFloor)
    }

    /// E1: `value` moved toward `target` by what `seconds` of it weigh: 1 - e^(-seconds / time constant).
    /// Exponential in time, not in fixes, so a tracker that reports every second and one that reports every ten
    /// weigh the same stretch of driving alike. Negative seconds change nothing.
    public static func smoothed(_ value: Double, toward target: Double, over seconds: Double, timeConstant: Double)
        -> Double
    {
        value + (1 - exp(-max(0, seconds) / timeConstant)) * (target - value)
    }
}

// MARK: - The pace (E1's smoothed speed)

extension Ride {
    /// Seconds between two fixes up to which a tracker's own `speed` stands for the whole interval; over it
    /// (a sampling gap) the interval counts at the distance covered over its time, which takes in any stop
    /// the gap hid. Fixed, not a setting: trackers send every 1 to 10 s.
    static let paceGap: Double = 15

    /// E1: the speed before the car is seen moving: the speed while moving that the ride's area
    /// learned (``cruisePrior``) times the share of time moving; `rides.typicalSpeed` where none was learned.
    func unseenSpeed(configuration: RideConfiguration) -> Double {
        cruisePrior.map { $0 * (1 - (stopShare ?? configuration.typicalStopShare)) } ?? configuration.typicalSpeed
    }

    /// Moving seconds over which the cruise forgets (``cruiseMetres``). Fixed, not a setting: `make bench-eta`
    /// measured 120, 300 and 600 s alike within a second on every class; 300 s spans a recorded window.
    public static let cruiseMemory: Double = 300
    /// Moving seconds that an area's learned speed weighs in the cruise: a car seen a minute on the move is
    /// judged half by itself. `make bench-eta` (arterial pickups, 120-240 s out): 30, 60 and 120 s within half a
    /// second of each other; the learned prior 1.1 s better than none (4 s with the class's true speed).
    public static let cruisePriorWeight: Double = 60
    /// Seconds over which a pace that differs from the cruise is expected to fade back to it (a stretch of road,
    /// a queue); `make bench-eta` measured 15, 30 and 60 s within half a second of each other.
    public static let speedCorrelation: Double = 30

    /// E1: the speed while moving expected on average over the next `horizon` seconds, when the pace
    /// now is `pace` and the cruise `cruise`: the difference is expected to fade over ``speedCorrelation``
    /// seconds, so a near arrival follows the pace (the last 30 s of driving) and a far one
    /// the cruise (what a minute's stretch of fast or slow road says of the next three is little).
    /// The mean over the horizon of an exponential fade: cruise + (pace - cruise) x (t / h)(1 - e^(-h / t)).
    public static func expectedSpeed(pace: Double, cruise: Double, horizon: Double) -> Double {
        guard horizon > 0 else { return pace }
        // (1 - e^(-y)) / y for y = h / t, by the rational function (1 + y/6) / (1 + 2y/3 + y^2/6): equal at 0 and
        // in its first two derivatives, 1/y far out, and within 10 % between (0.7 % at y = 1, 5.2 % at 3): the speed
        // it gives is within 2 % of the difference between pace and cruise of the exact fade's. `make
        // bench-instructions`: `exp` here cost 1 % more instructions per fix, over E1's budget of 5 %.
        let faded = horizon / speedCorrelation
        let fade = (1 + faded / 6) / (1 + faded * (2.0 / 3 + faded / 6))
        return cruise + (pace - cruise) * fade
    }

    /// e^(-x) for the cruise's decay. Between fixes up to ``paceGap`` apart x = seconds / ``cruiseMemory`` is at
    /// most 0.05, where three terms of the series are within 3e-7 of it; `exp` beyond. `make bench-instructions`:
    /// `exp` here cost about 1 % of a fix's instructions (the budget is 5 % for all of E1's pace).
    static func decay(_ x: Double) -> Double {
        x <= 0.05 ? 1 - x * (1 - x / 2 * (1 - x / 3)) : exp(-x)
    }

    /// The cruise: the speed while moving over ``cruiseMemory``, shrunk toward the area's learned one by
    /// ``cruisePriorWeight`` seconds; without either, the pace.
    func cruise(pace: Double) -> Double {
        let priorWeight = cruisePrior == nil ? 0 : Self.cruisePriorWeight
        let weight = priorWeight + Double(cruiseSeconds)
        return weight > 0 ? (priorWeight * (cruisePrior ?? 0) + Double(cruiseMetres)) / weight : pace
    }

    /// E1: the pace after an accepted fix, in two parts that move apart: the speed while moving,
    /// smoothed over moving seconds only (`rides.speedTimeConstant`, 10 s: a new steady pace is followed within
    /// about 30 s of driving at it, and a red light does not drag it down), and the share of time standing,
    /// smoothed over all seconds (`rides.stopShareTimeConstant`, 300 s: lights and jams slow the estimate by what
    /// they cost on average, not by what the last one cost). Each interval between fixes counts at the tracker's
    /// own `speed`; without one (T7 derives it from two fixes, GPS jitter included: a car standing at a light
    /// seems to move at 2 to 4 m/s a second apart), or over a sampling gap, the interval counts at the distance
    /// from the point counted last once it lies beyond twice the fix's accuracy, over the time since; a car that
    /// stays within that distance long enough that it cannot have moved at `stoppedSpeed` is standing.
    /// P5's distance driven is counted between the same points.
    mutating func recordPace(
        _ fix: TelemetryFix, reportedSpeed reported: Double?, previous: VehicleLocation?,
        configuration: RideConfiguration
    ) {
        // A tracker's own `speed` is only checked to be finite and not negative (T4 bounds the speed derived from
        // two fixes): the pace counts it at most `rides.maxSpeed`, first fix included, so one absurd value (1e308)
        // cannot pin every later ETA to now.
        let reportedSpeed = reported.map { min($0, configuration.maxSpeed) }
        let threshold = min(max(2 * (fix.horizontalAccuracy ?? 5), 5), 20)
        guard let latitude = anchorLatitude, let since = anchorTime else {
            (anchorLatitude, anchorLongitude, anchorTime) = (
                fix.coordinate.latitude, fix.coordinate.longitude, fix.timestamp
            )
            // A first fix: its own speed starts the pace if the car is moving (none: T7 needs two fixes).
            if let reportedSpeed, reportedSpeed >= configuration.stoppedSpeed, smoothedSpeed == nil {
                smoothedSpeed = reportedSpeed
            }
            return
        }
        let anchor = Coordinate(latitude: latitude, longitude: anchorLongitude)
        if let reportedSpeed, let previous, fix.timestamp.timeIntervalSince(previous.timestamp) <= Self.paceGap {
            countPace(speed: reportedSpeed, over: fix.timestamp.timeIntervalSince(previous.timestamp), configuration)
            anchorTime = fix.timestamp
            // Outside the ride the point counted last follows the fixes, with no distance to compute (most fixes
            // carry a speed: this keeps E1 within its budget of 5 % more instructions per fix); a gap or a
            // fix without a speed then counts from the last fix, and the ride's first distance starts there.
            guard phase == .ongoing else {
                (anchorLatitude, anchorLongitude) = (fix.coordinate.latitude, fix.coordinate.longitude)
                return
            }
            let step = anchor.nearbyDistance(to: fix.coordinate)
            if step >= threshold {
                drivenMetres += step  // P5
                (anchorLatitude, anchorLongitude) = (fix.coordinate.latitude, fix.coordinate.longitude)
            }
            return
        }
        let step = anchor.nearbyDistance(to: fix.coordinate)
        let elapsed = fix.timestamp.timeIntervalSince(since)
        if step >= threshold {
            if elapsed > 0 { countPace(speed: step / elapsed, over: elapsed, configuration) }
            anchorTime = fix.timestamp
            if phase == .ongoing { drivenMetres += step }  // P5
            (anchorLatitude, anchorLongitude) = (fix.coordinate.latitude, fix.coordinate.longitude)
        } else if elapsed >= threshold / configuration.stoppedSpeed {
            countPace(speed: 0, over: elapsed, configuration)
            anchorTime = fix.timestamp
        }
    }

    /// One interval of `seconds` at `speed`: moving counts toward the moving pace and against the stop share,
    /// standing toward the stop share only, except while the car waits at the pickup (a wait for the rider,
    /// up to `maxPickupWait`, says nothing of the road's lights and jams). The first moving interval starts
    /// the pace.
    private mutating func countPace(speed reported: Double, over seconds: Double, _ configuration: RideConfiguration) {
        guard seconds > 0 else { return }
        // At most `rides.maxSpeed`, whatever the interval's speed came from (``recordPace`` bounds a reported one).
        let speed = min(reported, configuration.maxSpeed)
        let stopShare = self.stopShare ?? configuration.typicalStopShare
        if speed >= configuration.stoppedSpeed {
            let kept = Self.decay(seconds / Self.cruiseMemory)
            cruiseMetres = Float(Double(cruiseMetres) * kept + speed * seconds)
            cruiseSeconds = Float(Double(cruiseSeconds) * kept + seconds)
            smoothedSpeed =
                smoothedSpeed.map {
                    Estimator.smoothed($0, toward: speed, over: seconds, timeConstant: configuration.speedTimeConstant)
                } ?? speed
            self.stopShare = Estimator.smoothed(
                stopShare, toward: 0, over: seconds, timeConstant: configuration.stopShareTimeConstant)
        } else if phase != .pickup {  // waiting for the rider is not a stop on the road
            self.stopShare = Estimator.smoothed(
                stopShare, toward: 1, over: seconds, timeConstant: configuration.stopShareTimeConstant)
        }
    }
}

extension Ride {
    /// E1: from the remaining great-circle distance, the detour factor and the smoothed speed (floored);
    /// never in the past while the phase is not reached.
    mutating func updateEstimates(
        now: Date, configuration: RideConfiguration, metresToPickup: Double? = nil
    ) {
        guard phase != .completed else { return }
        let estimator = Estimator(detourFactor: detourFactor, speedFloor: configuration.speedFloor)
        let pickup = booking.pickupLocation.coordinate
        let dropOff = booking.dropOffLocation.coordinate
        // E1's smoothed speed: the speed while moving times the share of time moving; until the car is seen
        // moving, ``unseenSpeed(configuration:)``. For the ride's whole leg while it is still to come (before and at the pickup) the
        // speed while moving is the cruise (the pace now says little of a leg that starts later); for an arrival
        // `metres` away it is the one expected over the time to get there
        // (``expectedSpeed(pace:cruise:horizon:)``). The cruise is worked out once per update (its cost per
        // fix: `make bench-instructions`).
        let moving = 1 - (stopShare ?? configuration.typicalStopShare)
        let pace = smoothedSpeed
        let cruising = pace.map { cruise(pace: $0) }
        func speed(toCover metres: Double) -> Double {
            guard let pace, let cruise = cruising else { return unseenSpeed(configuration: configuration) }
            let horizon = metres * detourFactor / max(pace * moving, configuration.speedFloor)
            return Self.expectedSpeed(pace: pace, cruise: cruise, horizon: horizon) * moving
        }
        // E2: along the route where it reaches the pickup or the drop-off: the whole leg from the pickup, the rest
        // from the car's place on it.
        let track = terms.value.route
        let floor = configuration.speedFloor
        let legSpeed = max(cruising.map { $0 * moving } ?? unseenSpeed(configuration: configuration), floor)
        let routeLeg = track.flatMap { track in
            track.pickupAlong.flatMap { from in
                routeSeconds(track, to: track.dropOffAlong, from: from, now: now) { _ in legSpeed }
            }
        }
        let legSeconds =
            routeLeg
            ?? estimator.travelTime(
                metres: legMetres, speed: cruising.map { $0 * moving } ?? unseenSpeed(configuration: configuration))
        if phase < .pickup {
            if navigating {
                // E2: the navigation app's ETA, set by the fix (``navigate(_:now:)``); never in the past.
                estimatedPickupDate = max(estimatedPickupDate, now)
            } else if location != nil,
                let seconds = routeSeconds(
                    track, to: track?.pickupAlong, now: now, speed: { max(speed(toCover: $0), floor) })
            {
                estimatedPickupDate = now.addingTimeInterval(seconds)
            } else if let location {
                let metres = metresToPickup ?? location.coordinate.distance(to: pickup)
                let seconds = estimator.travelTime(metres: metres, speed: speed(toCover: metres))
                estimatedPickupDate = now.addingTimeInterval(seconds)
            } else {
                estimatedPickupDate = max(estimatedPickupDate, now)
            }
            estimatedDropOffDate = estimatedPickupDate.addingTimeInterval(legSeconds)
        } else if phase == .pickup {
            if navigating, let date = estimatedDropOffDate {
                estimatedDropOffDate = max(date, now, estimatedPickupDate)
            } else {
                estimatedDropOffDate = max(now, estimatedPickupDate).addingTimeInterval(legSeconds)
            }
        } else if navigating, let date = estimatedDropOffDate {
            estimatedDropOffDate = max(date, now, estimatedPickupDate)
        } else if location != nil,
            let seconds = routeSeconds(
                track, to: track?.dropOffAlong, now: now, speed: { max(speed(toCover: $0), floor) })
        {
            estimatedDropOffDate = max(now.addingTimeInterval(seconds), estimatedPickupDate)
        } else {
            let metres = (location?.coordinate ?? pickup).distance(to: dropOff)
            let seconds = estimator.travelTime(metres: metres, speed: speed(toCover: metres))
            estimatedDropOffDate = max(now.addingTimeInterval(seconds), estimatedPickupDate)
        }
    }
}

extension Ride {
    /// E1: between two statuses, an ETA moves later by at most `estimateDelayLimit` while the vehicle
    /// is moving and no farther from where it goes than at the last status (no newer fix counts as no
    /// farther: the clock alone does not push an ETA); a stopped vehicle (a red light, a jam) or one moving
    /// away moves it freely, and an ETA moving earlier is never held. Never in the past.
    mutating func limitEstimateDelays(now: Date, configuration: RideConfiguration) {
        guard let last = lastValid?.value, let location, let before = last.vehicleLocation,
            (location.speed ?? 0) >= configuration.stoppedSpeed
        else { return }
        let limit = configuration.estimateDelayLimit
        if phase < .pickup, last.phase < .pickup, let previous = last.estimatedPickupDate {
            let pickup = booking.pickupLocation.coordinate
            let held = max(now, previous.addingTimeInterval(limit))
            if location.coordinate.distance(to: pickup) <= before.coordinate.distance(to: pickup),
                estimatedPickupDate > held
            {
                // The drop-off follows the pickup it is counted from.
                estimatedDropOffDate = estimatedDropOffDate?.addingTimeInterval(
                    held.timeIntervalSince(estimatedPickupDate))
                estimatedPickupDate = held
            }
        } else if phase == .ongoing, last.phase == .ongoing, let previous = last.estimatedDropOffDate,
            let dropOffDate = estimatedDropOffDate
        {
            let dropOff = booking.dropOffLocation.coordinate
            let held = max(now, estimatedPickupDate, previous.addingTimeInterval(limit))
            if location.coordinate.distance(to: dropOff) <= before.coordinate.distance(to: dropOff), dropOffDate > held
            {
                estimatedDropOffDate = held
            }
        }
    }
}
