public import Foundation

public import struct RideStatusKit.CompletionStatus
public import enum RideStatusKit.RidePhase
public import struct RideStatusKit.TelemetryFix
public import struct RideStatusKit.VehicleLocation

/// What a map or a list shows of one active ride: the read API's `/v1/rides` and the live map's updates.
/// Built on demand from the ride, never kept: it costs nothing while nobody looks.
public struct RideSummary: Sendable, Equatable {
    public var rideIdentifier: String
    public var phase: RidePhase
    /// The completion status's kind (`completed`, `canceled`, `missedPickup`), when the ride has one.
    public var completion: String?
    public var vehicleId: String?
    /// The catalog's canonical name (V4).
    public var rideOption: String
    public var location: VehicleLocation?
    public var pickup: Coordinate
    public var dropOff: Coordinate
    public var estimatedPickupDate: Date?
    public var estimatedDropOffDate: Date?
    public var startedAt: Date
    public var lastFixAt: Date?
    /// C3, as the next status will say it.
    public var stale: Bool
    /// The sequence of the last status numbered (C5).
    public var sequence: Int

    /// The summary as JSON (field names as in the OpenAPI document's `RideSummary`).
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("rideIdentifier")
        writer.string(rideIdentifier)
        writer.key("phase")
        writer.string(phase.rawValue)
        writer.optional("completion", completion)
        writer.optional("vehicleId", vehicleId)
        writer.key("rideOption")
        writer.string(rideOption)
        writer.key("location")
        if let location { location.write(to: &writer) } else { writer.null() }
        writer.key("pickup")
        pickup.write(to: &writer)
        writer.key("dropOff")
        dropOff.write(to: &writer)
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.date("estimatedDropOffDate", estimatedDropOffDate)
        writer.date("startedAt", startedAt)
        writer.date("lastFixAt", lastFixAt)
        writer.key("stale")
        writer.bool(stale)
        writer.key("sequence")
        writer.integer(sequence)
        writer.endObject()
    }
}

extension CompletionStatus {
    /// `completed`, `canceled` or `missedPickup`: the one flag a list shows.
    var kind: String {
        if missedPickup { return "missedPickup" }
        if canceled { return "canceled" }
        return "completed"
    }
}

extension Ride {
    /// The ride as a map or list shows it.
    public func summary(now: Date, configuration: RideConfiguration) -> RideSummary {
        RideSummary(
            rideIdentifier: rideIdentifier, phase: phase, completion: completion?.kind, vehicleId: vehicleId,
            rideOption: booking.rideOption.name, location: location,
            pickup: booking.pickupLocation.coordinate, dropOff: booking.dropOffLocation.coordinate,
            estimatedPickupDate: estimatedPickupDate, estimatedDropOffDate: estimatedDropOffDate, startedAt: startedAt,
            lastFixAt: lastFixAcceptedAt, stale: isStale(now: now, configuration: configuration), sequence: sequence)
    }
}

// MARK: - The engine's views

/// One accepted fix of a vehicle's recent track, compactly: a track point costs 16 bytes.
public struct TrackPoint: Sendable, Equatable {
    var latitude: Float
    var longitude: Float
    var time: Double

    public var coordinate: Coordinate { Coordinate(latitude: Double(latitude), longitude: Double(longitude)) }
    public var timestamp: Date { Date(timeIntervalSince1970: time) }
}

/// The last `capacity` accepted fixes of a vehicle, oldest first once read; no storage until the first fix.
struct RecentTrack: Sendable {
    private var points: [TrackPoint] = []
    private var next = 0

    mutating func record(_ fix: TelemetryFix, capacity: Int) {
        guard capacity > 0 else { return }
        let point = TrackPoint(
            latitude: Float(fix.coordinate.latitude), longitude: Float(fix.coordinate.longitude),
            time: fix.timestamp.timeIntervalSince1970)
        if points.count < capacity {
            if points.isEmpty { points.reserveCapacity(capacity) }
            points.append(point)
        } else {
            points[next] = point
            next = (next + 1) % capacity
        }
    }

    var ordered: [TrackPoint] { Array(points[next...] + points[..<next]) }
}

extension RideEngine {
    /// The identifiers of the active rides, of one phase when given: cheap (no summary is built), so that a
    /// reader can sort and page them without holding up the rides.
    public func rideIdentifiers(in phase: RidePhase?) -> [String] {
        guard let phase else { return rideIdentifiers }
        return rideTable.slots.compactMap { rideTable[slot: $0].phase == phase ? rideTable.identifier(at: $0) : nil }
    }

    /// How many active rides are in each phase (every phase present, 0 when none): O(rides), no allocation
    /// per ride.
    public func phaseCounts() -> [RidePhase: Int] {
        var counts = Dictionary(uniqueKeysWithValues: RidePhase.allCases.map { ($0, 0) })
        var start = 0
        while true {
            let (slots, next) = rideTable.slots(from: start, limit: 4096)
            for slot in slots { counts[rideTable[slot: slot].phase, default: 0] += 1 }
            guard let next else { break }
            start = next
        }
        return counts
    }

    /// The summaries of those of `identifiers` that are active, in their order.
    public func summaries(of identifiers: some Sequence<String>, now: Date) -> [RideSummary] {
        identifiers.compactMap { rideTable[$0]?.summary(now: now, configuration: configuration) }
    }

    /// A piece of a walk over every active ride: up to `limit` summaries from slot `start` on, and where the
    /// next piece starts (nil at the end). The live map walks in pieces so that no one piece holds the rides
    /// up for long.
    public func summaries(from start: Int, limit: Int, now: Date) -> (summaries: [RideSummary], next: Int?) {
        let (slots, next) = rideTable.slots(from: start, limit: limit)
        return (slots.map { rideTable[slot: $0].summary(now: now, configuration: configuration) }, next)
    }

    /// The last accepted fixes of the ride's vehicle (at most `rides.trackLength`), oldest first; nil when the
    /// ride is not active here, empty before its vehicle's first fix.
    public func track(of ride: String) -> [TrackPoint]? {
        guard let ride = rideTable[ride] else { return nil }
        guard let vehicle = ride.vehicleId, let slot = vehicles.slot(of: vehicle) else { return [] }
        return vehicles[slot: slot].recent.ordered
    }
}
