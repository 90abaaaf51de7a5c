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
}

extension Ride {
    /// E1: from the remaining great-circle distance, the detour factor and the smoothed speed (floored);
    /// never in the past while the phase is not reached.
    mutating func updateEstimates(
        now: Date, configuration: RideConfiguration, metresToPickup: Double? = nil
    ) {
        guard phase != .completed else { return }
        let estimator = Estimator(detourFactor: configuration.detourFactor, speedFloor: configuration.speedFloor)
        let pickup = booking.pickupLocation.coordinate
        let dropOff = booking.dropOffLocation.coordinate
        let legSeconds = estimator.travelTime(metres: legMetres, speed: smoothedSpeed)
        if phase < .pickup {
            if let location {
                let metres = metresToPickup ?? location.coordinate.distance(to: pickup)
                let seconds = estimator.travelTime(metres: metres, speed: smoothedSpeed)
                estimatedPickupDate = now.addingTimeInterval(seconds)
            } else {
                estimatedPickupDate = max(estimatedPickupDate, now)
            }
            estimatedDropOffDate = estimatedPickupDate.addingTimeInterval(legSeconds)
        } else if phase == .pickup {
            estimatedDropOffDate = max(now, estimatedPickupDate).addingTimeInterval(legSeconds)
        } else {
            let from = location?.coordinate ?? pickup
            let seconds = estimator.travelTime(metres: from.distance(to: dropOff), speed: smoothedSpeed)
            estimatedDropOffDate = max(now.addingTimeInterval(seconds), estimatedPickupDate)
        }
    }
}
