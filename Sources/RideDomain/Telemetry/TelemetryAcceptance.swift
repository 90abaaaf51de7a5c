public import Foundation
public import RideStatusKit

/// The last accepted fix of one vehicle, as far as T3, T4 and T7 compare a new fix with it: its time and
/// place (kept small: one per subscribed vehicle).
public struct VehicleTrack: Sendable, Equatable {
    public private(set) var lastTimestamp: Date?
    public private(set) var lastCoordinate = Coordinate(latitude: 0, longitude: 0)

    public init(last: TelemetryFix? = nil) {
        if let last { record(last) }
    }

    public mutating func record(_ fix: TelemetryFix) {
        lastTimestamp = fix.timestamp
        lastCoordinate = fix.coordinate
    }
}

/// What happened to one decoded fix.
public enum FixOutcome: Equatable, Sendable {
    /// Accepted, with speed and course derived from the previous fix where absent (T7).
    case accepted(TelemetryFix)
    /// Not newer than the last accepted fix: dropped silently and counted (T3).
    case duplicate
    case rejected(Rejection)
}

public enum TelemetryAcceptance {
    /// Applies T2-T5 and T7 to a fix that decoded (T1, T6 are applied while decoding).
    public static func evaluate(
        _ fix: TelemetryFix, track: VehicleTrack, now: Date, configuration: RideConfiguration
    ) -> FixOutcome {
        // T3 before T2: a late redelivery is a duplicate, never a dead letter.
        if let lastTimestamp = track.lastTimestamp, fix.timestamp <= lastTimestamp { return .duplicate }
        let age = now.timeIntervalSince(fix.timestamp)
        if age < -configuration.futureTolerance {
            return .rejected(
                Rejection(.timestampInFuture, "fix is \(Int(-age)) s ahead of now, over futureTolerance (T2)"))
        }
        if age > configuration.maxFixAge {
            return .rejected(Rejection(.timestampTooOld, "fix is \(Int(age)) s old, over maxFixAge (T2)"))
        }
        if let accuracy = fix.horizontalAccuracy,
            accuracy > configuration.maxAccuracy || accuracy < 0 || !accuracy.isFinite
        {
            return .rejected(Rejection(.poorAccuracy, "horizontalAccuracy \(accuracy) m is over maxAccuracy (T5)"))
        }
        var accepted = fix
        if let lastTimestamp = track.lastTimestamp {
            let last = track.lastCoordinate
            let seconds = fix.timestamp.timeIntervalSince(lastTimestamp)
            let metres = last.distance(to: fix.coordinate)
            let implied = metres / seconds
            if implied > configuration.maxSpeed {
                return .rejected(
                    Rejection(.impossibleSpeed, "implied speed \(Int(implied)) m/s is over maxSpeed (T4)"))
            }
            // T7: derive what is absent from the last two accepted fixes.
            if accepted.speed == nil { accepted.speed = implied }
            if accepted.course == nil && metres > 0.5 { accepted.course = last.bearing(to: fix.coordinate) }
        }
        return .accepted(accepted)
    }
}
