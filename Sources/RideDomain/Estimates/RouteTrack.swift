package import Foundation

package import struct RideStatusKit.Route

/// E2: a ride's route as the worker follows it: the points as metres east and north of the first one (a local
/// flat projection, good to 0.1 % within tens of kilometres), each point's road distance from the start, and the
/// routing engine's distance and duration. Immutable: a reroute brings a new one. The ride keeps how far along it
/// the car is (``Ride/routeAlong``).
///
/// Memory: 12 bytes a point (three `Float`s). A measured OSRM route has 60 to 80 points a kilometre, so a 5 km route
/// takes about 5 KB; the longest a route may be (``maximumEncodedLength``) at most 6,144 points, 74 KB.
package final class RouteTrack: Sendable, Equatable {
    /// The longest route, as polyline6 characters, that the worker keeps. It goes into the ride's durable state
    /// (L5), which I2 caps at 16 KiB with the rest of the ride (about 2 KB): 12,288 characters are 35 to 50 km
    /// of city route (250 to 350 characters a km measured on OSRM's routes).
    package static let maximumEncodedLength = 12_288
    /// How far from the route a fix may be and still be on it: a phone's fix in a city is off by 5 to 20 m, and a
    /// routing engine's geometry is simplified by a few metres, so 50 m is off the road the route takes, not
    /// noise on it.
    package static let offRouteMetres: Float = 50
    /// Fixes off the route in a row before the worker gives the route up (E2: "after a few fixes"): one wild fix
    /// (a tunnel's, a reflection's) does not end a route; three, 3 to 45 s of driving at fleets' fix rates, do.
    package static let offRouteFixes: UInt8 = 3
    /// The longest duration a route or a navigation app may give: a day. Beyond it every ETA would fail V6, and the
    /// ride would show its last valid status (V7) until the route is dropped.
    package static let maximumDuration = 86_400.0

    let originLatitude: Double
    let originLongitude: Double
    let metresPerDegreeLongitude: Double
    /// x, y of each point, interleaved, in metres from the first.
    let xy: [Float]
    /// Road metres from the start to each point.
    let along: [Float]
    /// The engine's duration for the whole route, seconds; nil when the route came without one.
    package let duration: Double?
    /// The engine's distance, metres (the geometry's own length when the route came without one).
    package let distance: Double
    package let version: String?
    /// When the worker received the route, and how far along it the car was then (the base of the car's pace).
    package let receivedAt: Date
    package let startAlong: Double
    /// When the car left ``startAlong`` (set once, by the first fix 30 m on): its pace counts from then, not from
    /// when the route came, so a wait at the start is not taken for slow driving.
    package let departedAt: Date?
    /// Where the ride's pickup and drop-off lie along the route, when they are within ``offRouteMetres`` of it
    /// (a route to the pickup only has no drop-off).
    package let pickupAlong: Double?
    package let dropOffAlong: Double?
    /// The route as polyline6, as the durable state keeps it: encoded once, not at every state write (encoding a
    /// 5 km route for each write cost the status path more than the rest of E2, `make bench-instructions`).
    package let encoded: String

    static let metresPerDegree = 6_371_008.8 * .pi / 180

    /// The geometry's length in metres.
    package var length: Double { Double(along.last ?? 0) }

    /// - Parameters:
    ///   - points: at least two, valid coordinates.
    ///   - car: where the car is now, if known: the route's progress starts from its place on it.
    ///   - startAlong: where the car was on it when it came, as a durable state kept it (instead of `car`).
    package init(
        points: [Coordinate], distance: Double?, duration: Double?, version: String?, receivedAt: Date,
        pickup: Coordinate, dropOff: Coordinate, car: Coordinate?, startAlong: Double? = nil, departedAt: Date? = nil
    ) {
        self.departedAt = departedAt
        let origin = points[0]
        originLatitude = origin.latitude
        originLongitude = origin.longitude
        let metresPerDegreeLongitude = Self.metresPerDegree * cos(origin.latitude * .pi / 180)
        self.metresPerDegreeLongitude = metresPerDegreeLongitude
        var xy: [Float] = []
        xy.reserveCapacity(points.count * 2)
        var along: [Float] = []
        along.reserveCapacity(points.count)
        var total = 0.0
        var last: (Double, Double)?
        for point in points {
            var east = point.longitude - origin.longitude
            if east > 180 { east -= 360 } else if east < -180 { east += 360 }
            let x = east * metresPerDegreeLongitude
            let y = (point.latitude - origin.latitude) * Self.metresPerDegree
            if let (lx, ly) = last { total += ((x - lx) * (x - lx) + (y - ly) * (y - ly)).squareRoot() }
            last = (x, y)
            xy.append(Float(x))
            xy.append(Float(y))
            along.append(Float(total))
        }
        self.xy = xy
        self.along = along
        self.distance = distance ?? total
        self.duration = duration
        self.version = version
        self.receivedAt = receivedAt
        // The targets are placed on the whole route; the pickup before the drop-off.
        let pickupPlace = Self.nearest(
            xy: xy, along: along, point: Self.local(pickup, origin, metresPerDegreeLongitude))
        let pickupAlong = pickupPlace.offset <= Self.offRouteMetres ? Double(pickupPlace.along) : nil
        let dropOffPlace = Self.nearest(
            xy: xy, along: along, point: Self.local(dropOff, origin, metresPerDegreeLongitude),
            from: Float(pickupAlong ?? 0))
        self.pickupAlong = pickupAlong
        self.dropOffAlong = dropOffPlace.offset <= Self.offRouteMetres ? Double(dropOffPlace.along) : nil
        encoded = Polyline.encode(points, precision: 6)
        var start = startAlong ?? 0
        if startAlong == nil, let car {
            let place = Self.nearest(xy: xy, along: along, point: Self.local(car, origin, metresPerDegreeLongitude))
            if place.offset <= Self.offRouteMetres { start = Double(place.along) }
        }
        self.startAlong = start
    }

    /// The same route, the car having left its start at `date` (or starting again from `start`, not yet left): the
    /// points are shared, not copied.
    private init(_ track: RouteTrack, departedAt date: Date?, startAlong start: Double? = nil) {
        originLatitude = track.originLatitude
        originLongitude = track.originLongitude
        metresPerDegreeLongitude = track.metresPerDegreeLongitude
        xy = track.xy
        along = track.along
        duration = track.duration
        distance = track.distance
        version = track.version
        receivedAt = track.receivedAt
        startAlong = start ?? track.startAlong
        departedAt = date
        pickupAlong = track.pickupAlong
        dropOffAlong = track.dropOffAlong
        encoded = track.encoded
    }

    package func departed(at date: Date) -> RouteTrack { RouteTrack(self, departedAt: date) }

    /// The car's pace counts again from `along`, once it leaves it.
    package func restarted(from along: Double) -> RouteTrack { RouteTrack(self, departedAt: nil, startAlong: along) }

    package static func == (lhs: RouteTrack, rhs: RouteTrack) -> Bool {
        lhs === rhs
            || (lhs.xy == rhs.xy && lhs.duration == rhs.duration && lhs.distance == rhs.distance
                && lhs.version == rhs.version && lhs.receivedAt == rhs.receivedAt && lhs.startAlong == rhs.startAlong
                && lhs.departedAt == rhs.departedAt)
    }

    static func local(_ point: Coordinate, _ origin: Coordinate, _ perLongitude: Double) -> (Float, Float) {
        var east = point.longitude - origin.longitude
        if east > 180 { east -= 360 } else if east < -180 { east += 360 }
        return (Float(east * perLongitude), Float((point.latitude - origin.latitude) * metresPerDegree))
    }

    /// Where `point` lies on the route: how far along, and how far off it.
    /// - Parameters:
    ///   - from: look only at the road from this far along (progress only goes forward)...
    ///   - upTo: ...to this far along (how far the car can have driven since).
    static func nearest(
        xy: [Float], along: [Float], point: (Float, Float), from: Float = 0, upTo: Float = .infinity
    ) -> (along: Float, offset: Float) {
        // Through unsafe buffers: the bounds checks of four array reads a segment cost half of a routed fix's
        // projection (`make bench-instructions`, fix with --route).
        xy.withUnsafeBufferPointer { xy in
            along.withUnsafeBufferPointer { along in
                nearest(xy: xy, along: along, point: point, from: from, upTo: upTo)
            }
        }
    }

    private static func nearest(
        xy: UnsafeBufferPointer<Float>, along: UnsafeBufferPointer<Float>, point: (Float, Float), from: Float,
        upTo: Float
    ) -> (along: Float, offset: Float) {
        let (px, py) = point
        let count = along.count
        guard count > 1 else {
            let ex = xy[0] - px
            let ey = xy[1] - py
            return (0, (ex * ex + ey * ey).squareRoot())
        }
        // The first segment that ends past `from` (binary search: the points are in road order).
        var low = 0
        var high = count - 1
        while low < high {
            let middle = (low + high) / 2
            if along[middle + 1] <= from { low = middle + 1 } else { high = middle }
        }
        // The nearest point. (On a route back along the same street within one fix's reach, that may be the way back:
        // a penalty on the distance along lagged the car on Porto's fixes 15 s apart, docs/routes.md.)
        var best: (along: Float, squared: Float) = (from, .infinity)
        var index = low
        while index < count - 1, along[index] <= upTo {
            let ax = xy[2 &* index]
            let ay = xy[2 &* index &+ 1]
            let dx = xy[2 &* index &+ 2] - ax
            let dy = xy[2 &* index &+ 3] - ay
            let length = dx * dx + dy * dy
            var t = length > 0 ? ((px - ax) * dx + (py - ay) * dy) / length : 0
            t = min(1, max(0, t))
            let ex = ax + t * dx - px
            let ey = ay + t * dy - py
            let squared = ex * ex + ey * ey
            let position = along[index] + t * (along[index &+ 1] - along[index])
            if squared < best.squared, position >= from { best = (position, squared) }
            index &+= 1
        }
        return (best.along, best.squared.squareRoot())
    }

    /// Where the car at `point` is on the route, searching forward from `from` (the car's last place on it) up to
    /// `reach` metres on: how far along, and how far off the road.
    package func place(of point: Coordinate, from: Double, reach: Double) -> (along: Double, offset: Double) {
        let origin = Coordinate(latitude: originLatitude, longitude: originLongitude)
        // A little behind too: a fix's error can put the car a few metres back.
        let start = Float(max(0, from - 30))
        let found = Self.nearest(
            xy: xy, along: along, point: Self.local(point, origin, metresPerDegreeLongitude), from: start,
            upTo: Float(from + reach))
        return (Double(found.along), Double(found.offset))
    }

    /// E2: seconds to drive from `fromAlong` to `toAlong` at the engine's pace for the route, scaled by how the part
    /// already driven compared with the engine's prediction for it; nil without the engine's duration.
    /// - Parameters:
    ///   - carAlong: where the car is on the route now...
    ///   - elapsed: ...`elapsed` seconds after it left ``startAlong``.
    package func engineSeconds(fromAlong: Double, toAlong: Double, carAlong: Double, elapsed: Double) -> Double? {
        guard let duration, length > 0 else { return nil }
        let perMetre = duration / length
        let predicted = perMetre * max(0, toAlong - fromAlong)
        let driven = max(0, carAlong - startAlong)
        guard driven > 0, elapsed > 0 else { return predicted }
        // How the car's pace so far compares with the engine's, weighed in slowly as the car drives: over the first
        // kilometres a red light says more about the light than about the road.
        let ratio = min(3, max(0.5, elapsed / (perMetre * driven)))
        let weight = driven / (driven + Self.paceWeightMetres)
        return predicted * (1 + weight * (ratio - 1))
    }

    /// How far the car drives before its own pace weighs as much as the engine's (``engineSeconds``). Chosen on
    /// Porto's recorded fares (`make bench-eta`, pickup at 60-120 / 120-240 s, cold): 250 m 47.1 / 98.3 s, 1 km
    /// 41.6 / 83.8 s, 4 km 38.2 / 75.5 s, the engine alone 38.0 / 74.3 s. A fare's pace so far says little of the
    /// rest (a slow start, lights), so the engine leads; 4 km rather than never, for an engine wrong in one
    /// direction all day (traffic), which a random error per trip does not show.
    package static let paceWeightMetres = 4_000.0
}

// MARK: - Reading a route (E2)

extension RouteTrack {
    /// E2: the points of a route as it came (an encoded polyline with its precision, or a GeoJSON LineString), with
    /// the checks a route must pass: at least two points, every one valid (T1), the engine's distance and duration
    /// numbers at least 0, and no longer than ``maximumEncodedLength`` as polyline6.
    package static func points(of route: Route) throws(Rejection) -> [Coordinate] {
        let points: [Coordinate]
        switch (route.polyline, route.geometry) {
        case (let text?, nil):
            guard let precision = route.precision, precision == 5 || precision == 6 else {
                throw Rejection(.invalidField, "route.precision must be 5 or 6 with a polyline (E2)")
            }
            guard let decoded = Polyline.decode(text, precision: precision) else {
                throw Rejection(.invalidField, "route.polyline is not an encoded polyline (E2)")
            }
            points = decoded
        case (nil, let line?):
            guard line.type == "LineString" else {
                throw Rejection(.invalidField, "route.geometry must be a GeoJSON LineString (E2)")
            }
            var decoded: [Coordinate] = []
            decoded.reserveCapacity(line.coordinates.count)
            for pair in line.coordinates {
                guard pair.count == 2 || pair.count == 3 else {
                    throw Rejection(.invalidField, "route.geometry's positions are [longitude, latitude] (E2)")
                }
                decoded.append(Coordinate(latitude: pair[1], longitude: pair[0]))
            }
            points = decoded
        case (nil, nil):
            throw Rejection(.missingField, "route needs a polyline or a geometry (E2)")
        case (_?, _?):
            throw Rejection(.invalidField, "route has both a polyline and a geometry: send one (E2)")
        }
        guard points.count >= 2 else { throw Rejection(.invalidField, "route has fewer than two points (E2)") }
        for point in points where !point.isValid || (point.latitude == 0 && point.longitude == 0) {
            throw Rejection(
                .invalidCoordinates, "route point \(point.latitude), \(point.longitude) is not valid (T1, E2)")
        }
        if let distance = route.distance, !(distance.isFinite && distance >= 0) {
            throw Rejection(.invalidField, "route.distance must be a number at least 0 (E2)")
        }
        if let duration = route.duration, !(duration.isFinite && duration >= 0 && duration <= maximumDuration) {
            throw Rejection(.invalidField, "route.duration must be 0 to \(Int(maximumDuration)) seconds (E2, V6)")
        }
        if let version = route.version, version.count > 128 {
            throw Rejection(.invalidField, "route.version is longer than 128 characters (E2)")
        }
        guard Polyline.encodedLength(points, precision: 6) <= maximumEncodedLength else {
            throw Rejection(
                .invalidField,
                "route is longer than \(maximumEncodedLength) characters as polyline6: the ride's durable state must stay within I2's 16 KiB (E2)"
            )
        }
        return points
    }
}

/// Google's encoded polyline algorithm (latitude first, zig-zag deltas in 5-bit groups from `?`).
package enum Polyline {
    /// The points of `text` at `precision` decimal places; nil for text that is not a polyline.
    package static func decode(_ text: String, precision: Int) -> [Coordinate]? {
        let scale = pow(10, Double(precision))
        var points: [Coordinate] = []
        var latitude = 0
        var longitude = 0
        var bytes = text.utf8.makeIterator()
        func next() -> Int?? {
            var result = 0
            var shift = 0
            while true {
                guard let byte = bytes.next() else { return shift == 0 ? .some(nil) : nil }
                guard byte >= 63, byte < 127, shift <= 30 else { return nil }
                let chunk = Int(byte) - 63
                result |= (chunk & 0x1F) << shift
                shift += 5
                if chunk < 0x20 { break }
            }
            return .some((result & 1) != 0 ? ~(result >> 1) : result >> 1)
        }
        while true {
            guard let first = next() else { return nil }
            guard let deltaLatitude = first else { break }
            guard let second = next(), let deltaLongitude = second else { return nil }
            latitude += deltaLatitude
            longitude += deltaLongitude
            points.append(Coordinate(latitude: Double(latitude) / scale, longitude: Double(longitude) / scale))
        }
        return points
    }

    /// `points` encoded at `precision` decimal places.
    package static func encode(_ points: [Coordinate], precision: Int) -> String {
        var bytes: [UInt8] = []
        walk(points, precision: precision) { bytes.append($0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// How many characters ``encode(_:precision:)`` makes of `points`.
    package static func encodedLength(_ points: [Coordinate], precision: Int) -> Int {
        var count = 0
        walk(points, precision: precision) { _ in count += 1 }
        return count
    }

    private static func walk(_ points: [Coordinate], precision: Int, _ emit: (UInt8) -> Void) {
        let scale = pow(10, Double(precision))
        var previous = (0, 0)
        func put(_ value: Int) {
            var rest = value < 0 ? ~(value << 1) : value << 1
            while rest >= 0x20 {
                emit(UInt8((0x20 | (rest & 0x1F)) + 63))
                rest >>= 5
            }
            emit(UInt8(rest + 63))
        }
        for point in points {
            let latitude = Int((point.latitude * scale).rounded())
            let longitude = Int((point.longitude * scale).rounded())
            put(latitude - previous.0)
            put(longitude - previous.1)
            previous = (latitude, longitude)
        }
    }
}
