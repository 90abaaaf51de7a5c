import Foundation
public import RideStatusKit

/// Decodes the raw bytes of every input of the contract into domain values, applying I1-I3 and the
/// syntactic part of T1 and T6. Every failure is a ``Rejection`` with a stable reason.
public struct InputDecoder: Sendable {
    public var maxPayloadBytes: Int

    public init(maxPayloadBytes: Int = RideConfiguration().maxPayloadBytes) {
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// I2: size, UTF-8, JSON, object. `emptyAsObject` lets an empty payload count as `{}` (stop, status/get).
    public func object(_ payload: [UInt8], emptyAsObject: Bool = false) throws(Rejection) -> JSONValue {
        guard payload.count <= maxPayloadBytes else {
            throw Rejection(.payloadTooLarge, "\(payload.count) bytes is over maxPayloadBytes \(maxPayloadBytes) (I2)")
        }
        if payload.isEmpty {
            if emptyAsObject { return .object([:]) }
            throw Rejection(.malformedJSON, "empty payload where a JSON object is required (I2)")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(payload)
        } catch {
            throw Rejection(.malformedJSON, "not JSON: \(error.message) at byte \(error.offset) (I2)")
        }
        guard case .object = value else { throw Rejection(.malformedJSON, "not a JSON object (I2)") }
        return value
    }

    // MARK: Telemetry (3.1)

    /// A fix from a native or OwnTracks payload; `nil` for OwnTracks messages that are not locations.
    public func telemetry(vehicleId: String, payload: [UInt8]) throws(Rejection) -> TelemetryFix? {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        if payload.count <= maxPayloadBytes,
            case .some(let fix) = TelemetryFastPath.decode(vehicleId: vehicleId, payload: payload)
        {
            return fix
        }
        return try generalTelemetry(vehicleId: vehicleId, payload: payload)
    }

    /// The general decoder for every telemetry payload; ``telemetry(vehicleId:payload:)`` tries the fast path first.
    package func generalTelemetry(vehicleId: String, payload: [UInt8]) throws(Rejection) -> TelemetryFix? {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        let json = try object(payload)
        let fields = Fields(json)
        if let type = json["_type"] {
            guard type.stringValue == "location" else { return nil }
            return try ownTracks(vehicleId: vehicleId, fields: fields)
        }
        if let payloadVehicle = try fields.optionalString("vehicleId") {
            _ = try Identifier.validated(payloadVehicle, field: "vehicleId")
            guard payloadVehicle == vehicleId else {
                throw Rejection(.identifierMismatch, "vehicleId '\(payloadVehicle)' differs from the topic's (I3)")
            }
        }
        let timestamp = try fields.date("timestamp")
        let coordinate = try fields.coordinate(latitude: "latitude", longitude: "longitude")
        return TelemetryFix(
            vehicleId: vehicleId, timestamp: timestamp, coordinate: coordinate,
            speed: try fields.optionalNumber("speed").flatMap(Self.usableSpeed),
            course: try fields.optionalNumber("course").flatMap(Self.usableCourse),
            horizontalAccuracy: try fields.optionalNumber("horizontalAccuracy"),
            sequence: try fields.optionalNumber("sequence").map { Int(exactly: $0.rounded()) ?? 0 },
            navigation: Self.usableNavigation(
                try fields.optionalNumber("remainingDistance"), try fields.optionalNumber("remainingDuration")))
    }

    func ownTracks(vehicleId: String, fields: Fields) throws(Rejection) -> TelemetryFix {
        let timestamp = try fields.date("tst")
        let coordinate = try fields.coordinate(latitude: "lat", longitude: "lon")
        let kmh = try fields.optionalNumber("vel")
        return TelemetryFix(
            vehicleId: vehicleId, timestamp: timestamp, coordinate: coordinate,
            speed: kmh.map { $0 / 3.6 }.flatMap(Self.usableSpeed),
            course: try fields.optionalNumber("cog").flatMap(Self.usableCourse),
            horizontalAccuracy: try fields.optionalNumber("acc"))
    }

    /// E2: a navigation app's progress counts with both its remaining distance and duration, finite, at least 0 and
    /// the duration at most a day;
    /// otherwise it is treated as absent, as T6 treats a negative speed: the fix's position still counts.
    static func usableNavigation(_ distance: Double?, _ duration: Double?) -> (distance: Double, duration: Double)? {
        guard let distance, let duration, distance.isFinite, duration.isFinite, distance >= 0, duration >= 0,
            duration <= RouteTrack.maximumDuration
        else {
            return nil
        }
        return (distance, duration)
    }

    /// T6: a negative speed is treated as absent.
    static func usableSpeed(_ speed: Double) -> Double? { speed.isFinite && speed >= 0 ? speed : nil }
    /// T6: a course outside [0, 360) is treated as absent.
    static func usableCourse(_ course: Double) -> Double? {
        course.isFinite && course >= 0 && course < 360 ? course : nil
    }
}
