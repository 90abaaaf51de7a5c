import Foundation

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

// MARK: - The pace (E1's smoothed speed, issue 31)

extension Ride {
    /// Seconds between two fixes up to which a tracker's own `speed` stands for the whole interval; over it
    /// (a sampling gap) the interval counts at the distance covered over its time, which takes in any stop
    /// the gap hid. Fixed, not a setting: trackers send every 1 to 10 s.
    static let paceGap: Double = 15

    /// E1's smoothed speed: the pace while moving times the share of time moving, floored by the estimator;
    /// the typical speed until the car is seen moving.
    func paceSpeed(configuration: RideConfiguration) -> Double {
        smoothedSpeed.map { $0 * (1 - (stopShare ?? configuration.typicalStopShare)) } ?? configuration.typicalSpeed
    }

    /// E1 (issue 31): the pace after an accepted fix, in two parts that move apart: the speed while moving,
    /// smoothed over moving seconds only (`rides.speedTimeConstant`, 10 s: a new steady pace is followed within
    /// about 30 s of driving at it, and a red light does not drag it down), and the share of time standing,
    /// smoothed over all seconds (`rides.stopShareTimeConstant`, 120 s: lights and jams slow the estimate by what
    /// they cost on average, not by what the last one cost). Each interval between fixes counts at the tracker's
    /// own `speed`; without one (T7 derives it from two fixes, GPS jitter included: a car standing at a light
    /// seems to move at 2 to 4 m/s a second apart), or over a sampling gap, the interval counts at the distance
    /// from the point counted last once it lies beyond twice the fix's accuracy, over the time since; a car that
    /// stays within that distance long enough that it cannot have moved at `stoppedSpeed` is standing.
    /// P5's distance driven is counted between the same points.
    mutating func recordPace(
        _ fix: TelemetryFix, reportedSpeed: Double?, previous: VehicleLocation?,
        configuration: RideConfiguration
    ) {
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
            // carry a speed: this keeps E1 within issue 31's budget of 5 % more instructions per fix); a gap or a
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
    private mutating func countPace(speed: Double, over seconds: Double, _ configuration: RideConfiguration) {
        guard seconds > 0 else { return }
        let stopShare = self.stopShare ?? configuration.typicalStopShare
        if speed >= configuration.stoppedSpeed {
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
        let speed = paceSpeed(configuration: configuration)
        let legSeconds = estimator.travelTime(metres: legMetres, speed: speed)
        if phase < .pickup {
            if let location {
                let metres = metresToPickup ?? location.coordinate.distance(to: pickup)
                let seconds = estimator.travelTime(metres: metres, speed: speed)
                estimatedPickupDate = now.addingTimeInterval(seconds)
            } else {
                estimatedPickupDate = max(estimatedPickupDate, now)
            }
            estimatedDropOffDate = estimatedPickupDate.addingTimeInterval(legSeconds)
        } else if phase == .pickup {
            estimatedDropOffDate = max(now, estimatedPickupDate).addingTimeInterval(legSeconds)
        } else {
            let from = location?.coordinate ?? pickup
            let seconds = estimator.travelTime(metres: from.distance(to: dropOff), speed: speed)
            estimatedDropOffDate = max(now.addingTimeInterval(seconds), estimatedPickupDate)
        }
    }
}

extension Ride {
    /// E1 (issue 15): between two statuses, an ETA moves later by at most `estimateDelayLimit` while the vehicle
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
