import Foundation

import struct RideStatusKit.CompletionStatus
import struct RideStatusKit.Driver
import enum RideStatusKit.RidePhase
import struct RideStatusKit.Route
import struct RideStatusKit.VehicleLocation

// MARK: - Durable state (L5): written by JSONWriter, read by JSONDecoder

// This release writes shape 8: the field names and nesting that every release used (other tools read them),
// with RFC 3339 UTC times (milliseconds, as on the wire), a `version` (since 3), the `sequenceCeiling`
// (since 4: a restart continues above it, so the state need not be written with every status), the
// ownership `epoch` (since 5, G2; absent, it is 1) and the ride's E1 `detourFactor` (since 6, G3: a new owner
// keeps the factor the ride started with, so its ETA does not jump at a handover), and E1's pace in two parts
// (since 7: `smoothedSpeed` is the speed while moving, `stopShare` the share of time standing; an older
// `smoothedSpeed`, stops averaged in, is read as the moving speed), and E1's cruise (since 8:
// `cruiseMetres` and `cruiseSeconds`, the decayed moving sums, and `cruisePrior`, the area's learned speed the ride
// started with, so a far ETA does not jump at a handover; absent, the new owner starts them again). It is written
// on every change that matters and once per `sequenceBlock` statuses, so it goes through the allocation-free
// JSONWriter rather than `JSONEncoder`; it is read only at recovery
// (L5) and when another client changes it (A2), where `JSONDecoder` is fast enough and reads every older
// shape: times as seconds since 2001 (shapes 1 and 2) as well as RFC 3339.

extension Ride {
    /// The shape of the durable state this release writes.
    package static let durableStateVersion = 8

    /// The durable state (L5): the retained payload of `ridestatus/state/{rideId}`.
    public func durableState() -> [UInt8] {
        var writer = JSONWriter(capacity: 2048)
        writer.beginObject()
        writer.key("version")
        writer.integer(Self.durableStateVersion)
        writer.key("bookingBox")
        booking.writeDurable(to: &writer)
        writer.key("phase")
        writer.string(phase.rawValue)
        writer.ifPresent("vehicleId", vehicleId)
        writer.key("vehicle")
        vehicle.writeDurable(to: &writer)
        if let driver {
            writer.key("driver")
            driver.writeDurable(to: &writer)
        }
        if let location {
            writer.key("location")
            location.write(to: &writer, shape: .durable)
        }
        writer.dateIfPresent("lastFixAcceptedAt", lastFixAcceptedAt)
        writer.date("startedAt", startedAt)
        writer.key("sequence")
        writer.integer(sequence)
        writer.key("sequenceCeiling")
        writer.integer(max(sequenceCeiling, sequence))
        writer.key("epoch")
        writer.integer(Int(clamping: epoch))
        writer.dateIfPresent("lastIssuedAt", lastIssuedAt)
        if let completion {
            writer.key("completion")
            completion.write(to: &writer, shape: .durable)
        }
        writer.dateIfPresent("completedAt", completedAt)
        writer.dateIfPresent("pickupArrivedAt", pickupArrivedAt)
        writer.dateIfPresent("estimatedPickupEndDate", estimatedPickupEndDate)
        writer.dateIfPresent("ongoingSince", ongoingSince)
        writer.key("drivenMetres")
        writer.number(drivenMetres)
        if let smoothedSpeed {
            writer.key("smoothedSpeed")
            writer.number(smoothedSpeed)
        }
        if let stopShare {
            writer.key("stopShare")
            writer.number(stopShare)
        }
        if cruiseSeconds > 0 {
            writer.key("cruiseMetres")
            writer.number(Double(cruiseMetres))
            writer.key("cruiseSeconds")
            writer.number(Double(cruiseSeconds))
        }
        if let cruisePrior {
            writer.key("cruisePrior")
            writer.number(cruisePrior)
        }
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.dateIfPresent("estimatedDropOffDate", estimatedDropOffDate)
        if let last = lastValid?.value {
            writer.key("lastValid")
            last.writeDurable(to: &writer)
        }
        writer.key("legMetres")
        writer.number(legMetres)
        if detourFactor >= 1 {
            writer.key("detourFactor")
            writer.number(detourFactor)
        }
        writeRoute(to: &writer)
        writer.endObject()
        return writer.bytes
    }

    /// E2: the ride's route (as polyline6, at most ``RouteTrack/maximumEncodedLength`` characters), how far along
    /// it the car is, and whether its ETA is a navigation app's. Absent without them: older workers read the rest.
    private func writeRoute(to writer: inout JSONWriter) {
        if let track = terms.value.route {
            writer.key("route")
            writer.beginObject()
            writer.key("polyline")
            writer.string(track.encoded)
            writer.key("distance")
            writer.number(track.distance)
            if let duration = track.duration {
                writer.key("duration")
                writer.number(duration)
            }
            writer.ifPresent("version", track.version)
            writer.date("receivedAt", track.receivedAt)
            writer.key("startAlong")
            writer.number(track.startAlong)
            writer.dateIfPresent("departedAt", track.departedAt)
            writer.endObject()
            writer.key("routeAlong")
            writer.number(Double(routeAlong))
            writer.key("routeMisses")
            writer.integer(Int(routeMisses))
        }
        if navigating {
            writer.key("navigating")
            writer.bool(true)
        }
    }

    /// A ride from its durable state, in any shape a release wrote (no checks: ``restored(topicRide:payload:now:configuration:)``
    /// adds A2's).
    package static func decodeDurableState(_ payload: [UInt8]) throws -> Ride {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                guard let date = Timestamps.parse(text) else {
                    throw DecodingError.dataCorruptedError(
                        in: container, debugDescription: "'\(text)' is not an RFC 3339 time")
                }
                return date
            }
            // Shapes 1 and 2: seconds since 2001-01-01, as `JSONEncoder` wrote them.
            return Date(timeIntervalSinceReferenceDate: try container.decode(Double.self))
        }
        return try decoder.decode(Ride.self, from: Data(payload))
    }
}

extension LastValidStatus {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("phase")
        writer.string(phase.rawValue)
        if let completion = completion?.value {
            writer.key("completionStatus")
            completion.write(to: &writer, shape: .durable)
        }
        if let vehicleLocation {
            writer.key("vehicleLocation")
            vehicleLocation.write(to: &writer, shape: .durable)
        }
        writer.key("vehicle")
        crew.value.vehicle.writeDurable(to: &writer)
        if let driver = crew.value.driver {
            writer.key("driver")
            driver.writeDurable(to: &writer)
        }
        writer.date("optionPickupDate", optionPickupDate)
        writer.dateIfPresent("estimatedPickupDate", estimatedPickupDate)
        writer.dateIfPresent("estimatedPickupEndDate", estimatedPickupEndDate)
        writer.dateIfPresent("estimatedDropOffDate", estimatedDropOffDate)
        writer.dateIfPresent("estimatedPickupDateLatest", estimatedPickupDateLatest)
        writer.dateIfPresent("estimatedDropOffDateLatest", estimatedDropOffDateLatest)
        writer.key("sequence")
        writer.integer(sequence)
        writer.date("issuedAt", issuedAt)
        writer.key("stale")
        writer.bool(stale)
        writer.endObject()
    }
}

// The durable state keeps the shape it had when every field was stored as written here, so that state
// written by older versions decodes and other tools can read it: the compact storage is this process's
// business only. Every earlier shape decodes: the first releases' whole `booking` and whole
// `lastValidStatus` (and the very first's missing `legMetres`), a whole booking in `bookingBox`, and a
// `lastValidBox` field (decoded without a snapshot).
extension Ride: Decodable {
    private struct Durable: Decodable {
        /// The shape's version: absent before 3 (dates as seconds since 2001), 3 for RFC 3339 dates, 4 with
        /// the sequence ceiling, 5 with the ownership epoch, 6 with the detour factor, 7 with the stop share, 8
        /// with the cruise.
        var version: Int?
        var bookingBox: BookingTerms?
        /// The first releases kept the whole booking under this name (read, never written).
        var booking: BookingTerms?
        var phase: RidePhase
        var vehicleId: String?
        var vehicle: VehicleDetails
        var driver: Driver?
        var location: VehicleLocation.Durable?
        var lastFixAcceptedAt: Date?
        var startedAt: Date
        var sequence: Int
        /// Absent before shape 4, which wrote the state with every status: the ceiling is the sequence.
        var sequenceCeiling: Int?
        /// Absent before shape 5: the ride had one owner, epoch 1.
        var epoch: UInt64?
        var lastIssuedAt: Date?
        var completion: CompletionStatus?
        var completedAt: Date?
        var pickupArrivedAt: Date?
        var estimatedPickupEndDate: Date?
        var ongoingSince: Date?
        var drivenMetres: Double
        var smoothedSpeed: Double?
        /// Absent before shape 7: the ride starts from `rides.typicalStopShare`.
        var stopShare: Double?
        /// Absent before shape 8 (and before the car moved): the new owner starts the cruise again.
        var cruiseMetres: Double?
        var cruiseSeconds: Double?
        /// Absent before shape 8, or when the area had learned no speed: the new owner's learned one.
        var cruisePrior: Double?
        var estimatedPickupDate: Date
        var estimatedDropOffDate: Date?
        var lastValid: LastValidStatus.Durable?
        /// The first releases kept the whole last valid status (read, never written).
        var lastValidStatus: LastValidStatus.FirstRelease?
        /// Derived from the booking; the first release did not keep it.
        var legMetres: Double?
        /// Absent before shape 6: the new owner gives the ride its area's factor.
        var detourFactor: Double?
        /// E2: absent without a route.
        var route: DurableRoute?
        var routeAlong: Double?
        var routeMisses: Int?
        var navigating: Bool?
    }

    /// E2: a route as the durable state keeps it.
    private struct DurableRoute: Decodable {
        var polyline: String
        var distance: Double?
        var duration: Double?
        var version: String?
        var receivedAt: Date
        var startAlong: Double?
        var departedAt: Date?
    }

    public init(from decoder: any Decoder) throws {
        let durable = try Durable(from: decoder)
        guard let booking = durable.bookingBox ?? durable.booking else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "no booking: neither bookingBox nor booking"))
        }
        // A2: a stored value that is not a distance is derived again rather than trusted.
        let legMetres =
            durable.legMetres.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
            ?? booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate)
        self.init(
            terms: Shared(booking), phase: durable.phase,
            crew: Shared(Crew(vehicle: durable.vehicle, driver: durable.driver)), startedAt: durable.startedAt,
            sequence: durable.sequence, drivenMetres: durable.drivenMetres,
            estimatedPickupDate: durable.estimatedPickupDate, legMetres: legMetres)
        sequenceCeiling = durable.sequenceCeiling ?? durable.sequence
        epoch = durable.epoch ?? 1
        vehicleId = durable.vehicleId
        location = durable.location?.value
        lastFixAcceptedAt = durable.lastFixAcceptedAt
        lastIssuedAt = durable.lastIssuedAt
        completionBox = durable.completion.map(Shared.init)
        completedAt = durable.completedAt
        pickupArrivedAt = durable.pickupArrivedAt
        estimatedPickupEndDate = durable.estimatedPickupEndDate
        ongoingSince = durable.ongoingSince
        smoothedSpeed = durable.smoothedSpeed
        stopShare = durable.stopShare
        cruiseMetres = Float(durable.cruiseMetres ?? 0)
        cruiseSeconds = Float(durable.cruiseSeconds ?? 0)
        cruisePrior = durable.cruisePrior
        estimatedDropOffDate = durable.estimatedDropOffDate
        detourFactor = durable.detourFactor ?? 0
        lastValid = nil
        if let last = durable.lastValid ?? durable.lastValidStatus?.snapshot {
            lastValid = snapshot(last)
        }
        if let stored = durable.route {
            // A2: checked as a route that came on `assign` would be.
            let points: [Coordinate]
            do {
                points = try RouteTrack.points(
                    of: Route(
                        polyline: stored.polyline, precision: 6, distance: stored.distance, duration: stored.duration,
                        version: stored.version))
            } catch {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "route: \(error.detail)"))
            }
            let track = RouteTrack(
                points: points, distance: stored.distance, duration: stored.duration, version: stored.version,
                receivedAt: stored.receivedAt, pickup: booking.pickupLocation.coordinate,
                dropOff: booking.dropOffLocation.coordinate, car: nil, startAlong: stored.startAlong ?? 0,
                departedAt: stored.departedAt)
            var terms = booking
            terms.route = track
            self.terms = Shared(terms)
            routeAlong = Float(durable.routeAlong ?? track.startAlong)
            routeMisses = UInt8(clamping: max(0, durable.routeMisses ?? 0))
        }
        navigating = durable.navigating ?? false
    }
}

extension LastValidStatus {
    /// The snapshot's durable shape (L5).
    struct Durable: Decodable {
        var phase: RidePhase
        var completionStatus: CompletionStatus?
        var vehicleLocation: VehicleLocation?
        var vehicle: VehicleDetails
        var driver: Driver?
        var optionPickupDate: Date
        var estimatedPickupDate: Date?
        var estimatedPickupEndDate: Date?
        var estimatedDropOffDate: Date?
        /// Absent before shape 7 (E1's range).
        var estimatedPickupDateLatest: Date?
        var estimatedDropOffDateLatest: Date?
        var sequence: Int
        var issuedAt: Date
        var stale: Bool

        private enum CodingKeys: String, CodingKey {
            case phase, completionStatus, vehicleLocation, vehicle, driver, optionPickupDate, estimatedPickupDate
            case estimatedPickupEndDate, estimatedDropOffDate, estimatedPickupDateLatest, estimatedDropOffDateLatest
            case sequence, issuedAt, stale
        }
    }

    /// The whole last valid status the first releases kept (`lastValidStatus`, read, never written): what of it
    /// a snapshot needs.
    struct FirstRelease: Decodable {
        private struct Option: Decodable { var estimatedPickupDate: Date }

        var phase: RidePhase
        var completionStatus: CompletionStatus?
        var vehicleLocation: VehicleLocation.Durable?
        var vehicle: VehicleDetails
        var driver: Driver?
        private var rideOption: Option
        var estimatedPickupDate: Date?
        var estimatedPickupEndDate: Date?
        var estimatedDropOffDate: Date?
        var sequence: Int
        var issuedAt: Date
        var stale: Bool

        var snapshot: Durable {
            Durable(
                phase: phase, completionStatus: completionStatus, vehicleLocation: vehicleLocation?.value,
                vehicle: vehicle, driver: driver, optionPickupDate: rideOption.estimatedPickupDate,
                estimatedPickupDate: estimatedPickupDate, estimatedPickupEndDate: estimatedPickupEndDate,
                estimatedDropOffDate: estimatedDropOffDate, estimatedPickupDateLatest: nil,
                estimatedDropOffDateLatest: nil, sequence: sequence, issuedAt: issuedAt, stale: stale)
        }
    }
}

extension LastValidStatus.Durable {
    // In an extension, so that the memberwise initializer stays the synthesized one (`docs/research/struct-init-copies.md`).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func date(_ key: CodingKeys) throws -> Date? { try container.decodeIfPresent(Date.self, forKey: key) }
        self.init(
            phase: try container.decode(RidePhase.self, forKey: .phase),
            completionStatus: try container.decodeIfPresent(CompletionStatus.self, forKey: .completionStatus),
            vehicleLocation: try container.decodeIfPresent(VehicleLocation.Durable.self, forKey: .vehicleLocation)?
                .value,
            vehicle: try container.decode(VehicleDetails.self, forKey: .vehicle),
            driver: try container.decodeIfPresent(Driver.self, forKey: .driver),
            optionPickupDate: try container.decode(Date.self, forKey: .optionPickupDate),
            estimatedPickupDate: try date(.estimatedPickupDate),
            estimatedPickupEndDate: try date(.estimatedPickupEndDate),
            estimatedDropOffDate: try date(.estimatedDropOffDate),
            estimatedPickupDateLatest: try date(.estimatedPickupDateLatest),
            estimatedDropOffDateLatest: try date(.estimatedDropOffDateLatest),
            sequence: try container.decode(Int.self, forKey: .sequence),
            issuedAt: try container.decode(Date.self, forKey: .issuedAt),
            stale: try container.decode(Bool.self, forKey: .stale))
    }
}
