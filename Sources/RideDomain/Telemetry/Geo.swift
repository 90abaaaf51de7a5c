import Foundation

/// A WGS 84 position in degrees.
public struct Coordinate: Sendable, Equatable, Codable {
    public var latitude: Double
    public var longitude: Double
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// T1: finite and in range.
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }

    /// Great-circle distance in metres (haversine, mean Earth radius).
    public func distance(to other: Coordinate) -> Double {
        let radius = 6_371_008.8
        let lat1 = latitude * .pi / 180
        let lat2 = other.latitude * .pi / 180
        let dLat = lat2 - lat1
        let dLon = (other.longitude - longitude) * .pi / 180
        let a = sin(dLat / 2) * sin(dLat / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * radius * atan2(sqrt(a), sqrt(max(0, 1 - a)))
    }

    /// Metres to a nearby `other` on the equirectangular projection at their mean latitude: within 0.1 % of
    /// ``distance(to:)`` up to 10 km apart below 80 degrees of latitude, at one cosine and one square root
    /// instead of haversine's nine calls. E1's pace and P5's distance count it on every fix: with haversine
    /// there, a fix without `speed` cost 7 % more instructions than before E1's pace counted by distance (`make bench-instructions`),
    /// over that budget of 5 %.
    public func nearbyDistance(to other: Coordinate) -> Double {
        let radius = 6_371_008.8
        var longitudes = other.longitude - longitude
        if longitudes > 180 { longitudes -= 360 } else if longitudes < -180 { longitudes += 360 }
        let x = longitudes * (.pi / 180) * cos((latitude + other.latitude) * (.pi / 360))
        let y = (other.latitude - latitude) * (.pi / 180)
        return radius * (x * x + y * y).squareRoot()
    }

    /// Initial bearing to `other`, degrees clockwise from true north in [0, 360).
    public func bearing(to other: Coordinate) -> Double {
        let lat1 = latitude * .pi / 180
        let lat2 = other.latitude * .pi / 180
        let dLon = (other.longitude - longitude) * .pi / 180
        let y = sin(dLon) * cos(lat2)
        let x = cos(lat1) * sin(lat2) - sin(lat1) * cos(lat2) * cos(dLon)
        let degrees = atan2(y, x) * 180 / .pi
        let normalized = degrees < 0 ? degrees + 360 : degrees
        return normalized >= 360 ? 0 : normalized
    }

    /// The point `metres` away along `bearing` degrees.
    public func moved(metres: Double, bearing: Double) -> Coordinate {
        let radius = 6_371_008.8
        let angular = metres / radius
        let theta = bearing * .pi / 180
        let lat1 = latitude * .pi / 180
        let lon1 = longitude * .pi / 180
        let lat2 = asin(sin(lat1) * cos(angular) + cos(lat1) * sin(angular) * cos(theta))
        let lon2 = lon1 + atan2(sin(theta) * sin(angular) * cos(lat1), cos(angular) - sin(lat1) * sin(lat2))
        return Coordinate(
            latitude: lat2 * 180 / .pi, longitude: (lon2 * 180 / .pi + 540).truncatingRemainder(dividingBy: 360) - 180)
    }
}
