public import RideDomain
import RideJSON
public import WorkerGroup

/// A city's drivable streets, as `scripts/roads.sh` prepares them from an OpenStreetMap extract (GeoJSON
/// LineStrings with `highway` and `drive`): where fleet-sim puts its cars, pickups and drop-offs, so that every place
/// lies on a street the routing engine reaches and leaves (`drive: true`), and none on a service way.
public struct StreetMap: Sendable {
    struct Segment: Sendable {
        var from: Coordinate
        var to: Coordinate
        /// Metres of the segments before this one and this one's, for a draw weighted by length.
        var end: Double
    }

    let segments: [Segment]
    /// Metres of street places are drawn from.
    public var length: Double { segments.last?.end ?? 0 }
    /// The middle of the streets' bounding box.
    public let center: Coordinate

    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    /// Reads `scripts/roads.sh`'s `streets.geojson`.
    public init(geoJSON bytes: [UInt8]) throws {
        let collection: JSONValue
        do { collection = try JSONParser.parse(bytes) } catch {
            throw Problem(description: "the streets are not JSON: \(error.message) at byte \(error.offset)")
        }
        guard case .array(let features)? = collection["features"] else {
            throw Problem(description: "the streets are not a GeoJSON FeatureCollection")
        }
        var segments: [Segment] = []
        var total = 0.0
        var (south, north, west, east) = (90.0, -90.0, 180.0, -180.0)
        for feature in features {
            guard feature["geometry"]?["type"]?.stringValue == "LineString",
                case .array(let points)? = feature["geometry"]?["coordinates"]
            else { continue }
            let properties = feature["properties"]
            guard properties?["drive"] != .bool(false), properties?["highway"]?.stringValue != "service" else {
                continue
            }
            var previous: Coordinate?
            for point in points {
                guard case .array(let pair) = point, pair.count >= 2, let longitude = pair[0].doubleValue,
                    let latitude = pair[1].doubleValue, abs(latitude) <= 90, abs(longitude) <= 180
                else { throw Problem(description: "a street has a position that is not [longitude, latitude]") }
                let here = Coordinate(latitude: latitude, longitude: longitude)
                (south, north) = (min(south, latitude), max(north, latitude))
                (west, east) = (min(west, longitude), max(east, longitude))
                if let previous, previous.distance(to: here) > 0.1 {
                    total += previous.distance(to: here)
                    segments.append(Segment(from: previous, to: here, end: total))
                }
                previous = here
            }
        }
        guard total > 0 else { throw Problem(description: "the streets have no drivable street (drive: true)") }
        self.segments = segments
        center = Coordinate(latitude: (south + north) / 2, longitude: (west + east) / 2)
    }

    /// A place on a street, drawn uniformly along the streets' length.
    public func place(random: inout SeededRandom) -> Coordinate {
        let at = Double.random(in: 0..<length, using: &random)
        var low = 0
        var high = segments.count - 1
        while low < high {
            let middle = (low + high) / 2
            if segments[middle].end > at { high = middle } else { low = middle + 1 }
        }
        let segment = segments[low]
        let start = segment.end - segment.from.distance(to: segment.to)
        let share = max(0, min(1, (at - start) / max(segment.end - start, 1e-9)))
        return segment.from.moved(
            metres: segment.from.distance(to: segment.to) * share, bearing: segment.from.bearing(to: segment.to))
    }

    /// A place on a street `metres` (a range) from `origin` as the crow flies, if one of `tries` draws is; else the
    /// draw nearest the range.
    public func place(
        from origin: Coordinate, metres: ClosedRange<Double>, tries: Int = 40, random: inout SeededRandom
    ) -> Coordinate {
        var best = place(random: &random)
        var bestMiss = Double.infinity
        for _ in 0..<tries {
            let candidate = place(random: &random)
            let distance = origin.distance(to: candidate)
            let miss =
                distance < metres.lowerBound ? metres.lowerBound - distance : max(0, distance - metres.upperBound)
            if miss == 0 { return candidate }
            if miss < bestMiss { (best, bestMiss) = (candidate, miss) }
        }
        return best
    }
}

/// A route from a routing engine (OSRM's `/route/v1/driving`, asked for `overview=full&geometries=polyline6`):
/// what fleet-sim's car drives and what its dispatch sends with the assignment (E2).
public struct EngineRoute: Sendable, Equatable {
    /// The geometry as the engine encoded it (polyline, precision 6).
    public var polyline: String
    /// The geometry, decoded: the car drives along it.
    public var points: [Coordinate]
    /// The engine's metres and seconds for the whole route.
    public var distance: Double
    public var duration: Double

    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// The engine's path for a route from `from` to `to`, as OSRM's HTTP API takes it (longitude first).
    public static func path(from: Coordinate, to: Coordinate) -> String {
        "/route/v1/driving/\(from.longitude),\(from.latitude);\(to.longitude),\(to.latitude)"
            + "?overview=full&geometries=polyline6&steps=false"
    }

    /// Reads OSRM's answer. An answer without a route (`NoRoute`, `NoSegment`) is a problem naming its code.
    public init(osrm bytes: [UInt8]) throws(Problem) {
        let answer: JSONValue
        do { answer = try JSONParser.parse(bytes) } catch {
            throw Problem(description: "the engine's answer is not JSON: \(error.message)")
        }
        guard answer["code"]?.stringValue == "Ok" else {
            throw Problem(
                description: "the engine found no route: \(answer["code"]?.stringValue ?? "no code")"
                    + (answer["message"]?.stringValue.map { " (\($0))" } ?? ""))
        }
        guard case .array(let routes)? = answer["routes"], let route = routes.first,
            let polyline = route["geometry"]?.stringValue, let distance = route["distance"]?.doubleValue,
            let duration = route["duration"]?.doubleValue, distance >= 0, duration >= 0
        else { throw Problem(description: "the engine's answer has no route with geometry, distance and duration") }
        guard let points = Polyline.decode(polyline, precision: 6), points.count >= 2 else {
            throw Problem(description: "the engine's geometry is not a polyline of precision 6 with two points")
        }
        self.polyline = polyline
        self.points = points
        self.distance = distance
        self.duration = duration
    }

    /// The route shortened by `metres` at its end (a driver who pulls in before the place): its points up to there.
    public func points(stoppingShortBy metres: Double) -> [Coordinate] {
        guard metres > 0 else { return points }
        let total = zip(points, points.dropFirst()).reduce(0) { $0 + $1.0.distance(to: $1.1) }
        guard total > metres + 1 else { return [points[0], points[0]] }
        var left = total - metres
        var kept = [points[0]]
        for (from, to) in zip(points, points.dropFirst()) {
            let step = from.distance(to: to)
            if step >= left {
                kept.append(from.moved(metres: left, bearing: from.bearing(to: to)))
                return kept
            }
            left -= step
            kept.append(to)
        }
        return kept
    }

    /// The route object of `assign` and `rides/{ride}/route` (E2): the engine's own geometry, distance and duration.
    public func message(version: String) -> String {
        // A polyline's characters are ASCII 63 to 126: of them only the backslash needs escaping in JSON.
        let line = String(polyline.flatMap { $0 == "\\" ? ["\\", "\\"] : [$0] })
        return
            #"{"polyline":"\#(line)","precision":6,"distance":\#(Int(distance.rounded())),"duration":\#(Int(duration.rounded())),"version":"\#(version)"}"#
    }
}
