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

    /// E1: the smoothed speed after a fix that reports `speed`, `seconds` after the previous fix. Exponential in time, not in fixes, so a tracker that reports every second and one that reports
    /// every ten weigh the same stretch of driving alike: the new speed counts 1 - e^(-seconds / time constant).
    /// The first speed starts the smoothing, unless the car stands still then (a first fix at a red light):
    /// then it starts from the typical speed.
    public static func smoothed(
        _ smoothed: Double?, with speed: Double, over seconds: Double?, configuration: RideConfiguration
    ) -> Double {
        guard let smoothed else { return speed >= configuration.stoppedSpeed ? speed : configuration.typicalSpeed }
        // Without an earlier fix to count from (a ride restored with its speed), the fix counts as a second.
        let weight = 1 - exp(-max(0, seconds ?? 1) / configuration.speedTimeConstant)
        return smoothed + weight * (speed - smoothed)
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
        let speed = smoothedSpeed ?? configuration.typicalSpeed
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
