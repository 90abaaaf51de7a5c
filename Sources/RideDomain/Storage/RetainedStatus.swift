package import Foundation
import RideStatusKit

// MARK: - The retained status read back at recovery (L5, C5, A2)

/// What a ride's retained status adds to its durable state at recovery, and at a takeover (G3: V5 across
/// owners). The state is written on every change
/// that matters and once per `sequenceBlock` statuses (C5); the retained status is always the newest (C5),
/// so it carries what happened since: the last sequence, `issuedAt` and vehicle location a subscriber saw
/// (L5: "with phase, sequence and last location intact").
package struct RetainedStatus: Sendable, Equatable {
    package var sequence: Int
    var issuedAt: Date
    var vehicleLocation: VehicleLocation?
    var stale: Bool

    /// A2: a status read back from `rides/{ride}/status`, checked as fresh input is: the topic's ride equal to
    /// the payload's (I3), the sequence in range (C5), `issuedAt` a past time (T2), the location a real place
    /// (T1). The worker takes nothing on trust from its broker.
    /// - Throws: a ``Rejection`` whose detail names A2 and the rule of the field.
    package static func read(
        topicRide: String, payload: [UInt8], now: Date, configuration: RideConfiguration
    ) throws(Rejection) -> RetainedStatus {
        let limit = 4 * configuration.maxPayloadBytes
        guard payload.count <= limit else {
            throw Rejection(.payloadTooLarge, "retained status of \(payload.count) bytes is over \(limit) (A2, I2)")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(payload)
        } catch {
            throw Rejection(.malformedJSON, "retained status is not JSON: \(error.message) (A2, I2)")
        }
        guard case .object = json else { throw Rejection(.malformedJSON, "retained status is not an object (A2, I2)") }
        do throws(Rejection) {
            let fields = Fields(json)
            let ride = try fields.string("rideIdentifier")
            guard ride == topicRide else {
                throw Rejection(
                    .identifierMismatch, "rideIdentifier '\(ride.prefix(64))' differs from the topic's (I3)")
            }
            let number = try fields.number("sequence")
            guard let sequence = Int(exactly: number), (0...Ride.maxSequence).contains(sequence) else {
                throw Rejection(.invalidField, "sequence \(number) is not an integer in 0...\(Ride.maxSequence) (C5)")
            }
            let issuedAt = try fields.date("issuedAt")
            guard issuedAt >= Ride.earliestTime, issuedAt <= now.addingTimeInterval(configuration.futureTolerance)
            else {
                throw Rejection(.invalidField, "issuedAt \(issuedAt.timeIntervalSince1970) is not a past time (T2)")
            }
            guard case .bool(let stale)? = json["stale"] else {
                throw Rejection(.invalidField, "stale must be true or false")
            }
            var location: VehicleLocation?
            if let vehicle = json["vehicle"], case .object = vehicle {
                location = try InputDecoder.location(Fields(vehicle))
                if let stamp = location?.timestamp, !Timestamps.isRepresentable(stamp) {
                    throw Rejection(.invalidField, "vehicle.location.timestamp is not a valid time (T2)")
                }
            }
            return RetainedStatus(sequence: sequence, issuedAt: issuedAt, vehicleLocation: location, stale: stale)
        } catch {
            throw Rejection(error.reason, "retained status: \(error.detail) (A2)")
        }
    }
}

extension Ride {
    /// L5, C5: takes what the retained status says beyond this ride's durable state. The sequence never goes
    /// below it; a status issued after the state was written brings its location (and, during `ongoing`, the
    /// straight-line distance to it, P5), its `issuedAt` (never decreases, C5) and, when it was not stale, a fix
    /// time no later than the fix's own (C3).
    package mutating func merge(_ retained: RetainedStatus) {
        sequence = max(sequence, retained.sequence)
        guard retained.issuedAt > (lastIssuedAt ?? .distantPast) else { return }
        lastIssuedAt = retained.issuedAt
        guard let newer = retained.vehicleLocation, newer != location else { return }
        if phase == .ongoing, let previous = location {
            drivenMetres += previous.coordinate.distance(to: newer.coordinate)
        }
        location = newer
        if !retained.stale {
            let fixTime = min(newer.timestamp, retained.issuedAt)
            lastFixAcceptedAt = max(lastFixAcceptedAt ?? fixTime, fixTime)
        }
    }
}
