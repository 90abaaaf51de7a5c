import Foundation
import RideDomain
import RideJSON

import enum RideStatusKit.RidePhase

/// The read API under `/v1`, as `docs/openapi.json` describes it: from a reader and a query to a status code
/// and a JSON body, with no HTTP types, so that paging and filters are tested without a server.
struct ReadAPI: Sendable {
    let reader: any FleetReader

    static let defaultLimit = 100
    static let maximumLimit = 1000

    struct Reply: Sendable, Equatable {
        var status: Int
        var body: [UInt8]

        static func ok(_ body: [UInt8]) -> Reply { Reply(status: 200, body: body) }

        /// A refused query: `{"reason": ..., "detail": ...}` (the OpenAPI document's `Problem`).
        static func problem(_ status: Int, _ reason: String, _ detail: String) -> Reply {
            var writer = JSONWriter(capacity: 128)
            writer.beginObject()
            writer.key("reason")
            writer.string(reason)
            writer.key("detail")
            writer.string(detail)
            writer.endObject()
            return Reply(status: status, body: writer.bytes)
        }
    }

    // MARK: Rides

    /// `GET /v1/rides?phase=&cursor=&limit=`: active rides by identifier, a page at a time. `cursor` is the
    /// `nextCursor` of the page before (the last identifier it held), so a page never repeats or skips a ride
    /// that stays active while a client pages.
    /// `only`: the one ride a share token opens (the list holds it when it is active here).
    func rides(phase: String?, cursor: String?, limit: String?, only: String? = nil) -> Reply {
        var wanted: RidePhase?
        if let phase {
            guard let parsed = RidePhase(rawValue: phase) else {
                return .problem(400, "invalidQuery", "phase must be one of \(Self.phases)")
            }
            wanted = parsed
        }
        var count = Self.defaultLimit
        if let limit {
            guard let parsed = Int(limit), (1...Self.maximumLimit).contains(parsed) else {
                return .problem(400, "invalidQuery", "limit must be a whole number in 1...\(Self.maximumLimit)")
            }
            count = parsed
        }
        var identifiers = reader.rideIdentifiers(in: wanted)
        if let only { identifiers = identifiers.contains(only) ? [only] : [] }
        let page = Self.page(of: identifiers, after: cursor.flatMap { $0.isEmpty ? nil : $0 }, limit: count)
        let summaries = reader.summaries(of: page.identifiers)
        var writer = JSONWriter(capacity: 256 + summaries.count * 512)
        writer.beginObject()
        writer.key("rides")
        writer.beginArray()
        for summary in summaries { summary.write(to: &writer) }
        writer.endArray()
        writer.key("total")
        writer.integer(identifiers.count)
        writer.optional("nextCursor", page.next)
        writer.endObject()
        return .ok(writer.bytes)
    }

    static var phases: String {
        RidePhase.allCases.map(\.rawValue).joined(separator: ", ")
    }

    /// A page of `identifiers` in identifier order: those after `after`, at most `limit`, and the cursor of
    /// the next page (nil on the last).
    static func page(of identifiers: [String], after: String?, limit: Int) -> (identifiers: [String], next: String?) {
        let sorted = identifiers.sorted()
        var start = 0
        if let after {
            // The first identifier greater than the cursor (binary search).
            var high = sorted.count
            while start < high {
                let middle = (start + high) / 2
                if sorted[middle] <= after { start = middle + 1 } else { high = middle }
            }
        }
        let end = min(sorted.count, start + limit)
        let chosen = Array(sorted[start..<end])
        return (chosen, end < sorted.count ? chosen.last : nil)
    }

    /// `GET /v1/rides/{id}`: the ride's current status (L7), exactly as its status topic carries it.
    func ride(_ identifier: String) -> Reply {
        guard let status = reader.currentStatus(of: identifier) else { return Self.unknownRide(identifier) }
        return .ok(status)
    }

    /// `GET /v1/rides/{id}/track`: the vehicle's last accepted fixes (at most `rides.trackLength`), oldest first.
    func track(_ identifier: String) -> Reply {
        guard let (vehicle, points) = reader.track(of: identifier) else { return Self.unknownRide(identifier) }
        var writer = JSONWriter(capacity: 128 + points.count * 96)
        writer.beginObject()
        writer.key("rideIdentifier")
        writer.string(identifier)
        writer.optional("vehicleId", vehicle)
        writer.key("fixes")
        writer.beginArray()
        for point in points {
            writer.beginObject()
            writer.key("latitude")
            writer.number(point.coordinate.latitude)
            writer.key("longitude")
            writer.number(point.coordinate.longitude)
            writer.key("timestamp")
            writer.time(point.timestamp)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .ok(writer.bytes)
    }

    private static func unknownRide(_ identifier: String) -> Reply {
        .problem(404, "unknownRide", "no active ride \(identifier) on this worker")
    }

    // MARK: Fleet and workers

    /// `GET /v1/vehicles?limit=`: the available vehicles quotes draw on (3.4).
    func vehicles(limit: String?) -> Reply {
        var count = Self.maximumLimit
        if let limit {
            guard let parsed = Int(limit), (1...Self.maximumLimit).contains(parsed) else {
                return .problem(400, "invalidQuery", "limit must be a whole number in 1...\(Self.maximumLimit)")
            }
            count = parsed
        }
        // Sorted here, outside the worker's lock.
        let vehicles = reader.availableVehicles().sorted { $0.vehicleId < $1.vehicleId }.prefix(count)
        var writer = JSONWriter(capacity: 64 + vehicles.count * 160)
        writer.beginObject()
        writer.key("vehicles")
        writer.beginArray()
        for vehicle in vehicles {
            writer.beginObject()
            writer.key("vehicleId")
            writer.string(vehicle.vehicleId)
            writer.key("rideOption")
            writer.string(vehicle.vehicleClass)
            writer.key("latitude")
            writer.number(vehicle.coordinate.latitude)
            writer.key("longitude")
            writer.number(vehicle.coordinate.longitude)
            writer.key("speed")
            if let speed = vehicle.speed { writer.number(speed) } else { writer.null() }
            writer.key("updated")
            writer.time(vehicle.updated)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .ok(writer.bytes)
    }

    /// `GET /v1/workers`: this worker and the group as it sees it (G1).
    func workers() -> Reply {
        var writer = JSONWriter(capacity: 256)
        Self.write(reader.overview(), to: &writer)
        return .ok(writer.bytes)
    }

    static func write(_ overview: FleetOverview, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("workerId")
        writer.string(overview.workerID)
        writer.key("members")
        writer.beginArray()
        for member in overview.members { writer.string(member) }
        writer.endArray()
        writer.key("ready")
        writer.bool(overview.ready)
        writer.key("activeRides")
        writer.integer(overview.activeRides)
        writer.key("rejectedInputs")
        writer.integer(overview.rejectedInputs)
        writer.key("updateInterval")
        writer.number(overview.updateInterval)
        writer.endObject()
    }

    /// `GET /v1/areas`: the catalog's service areas as a GeoJSON FeatureCollection (RFC 7946: longitude first).
    func areas() -> Reply {
        var writer = JSONWriter(capacity: 1024)
        writer.beginObject()
        writer.key("type")
        writer.string("FeatureCollection")
        writer.key("features")
        writer.beginArray()
        for area in reader.serviceAreas {
            writer.beginObject()
            writer.key("type")
            writer.string("Feature")
            writer.key("properties")
            writer.beginObject()
            writer.key("name")
            writer.string(area.name)
            writer.key("currencyCode")
            writer.string(area.currencyCode)
            writer.endObject()
            writer.key("geometry")
            writer.beginObject()
            writer.key("type")
            writer.string("MultiPolygon")
            writer.key("coordinates")
            writer.beginArray()
            for polygon in area.polygons {
                writer.beginArray()
                for ring in polygon {
                    writer.beginArray()
                    for point in ring {
                        writer.beginArray()
                        writer.number(point.longitude)
                        writer.number(point.latitude)
                        writer.endArray()
                    }
                    writer.endArray()
                }
                writer.endArray()
            }
            writer.endArray()
            writer.endObject()
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .ok(writer.bytes)
    }
}
