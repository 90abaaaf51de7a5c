public import Foundation

public import struct RideStatusKit.Place
public import struct RideStatusKit.VehicleLocation

// The contract's places and vehicle positions are RideStatusKit's (flat `latitude` and `longitude`, as the wire
// carries them); the worker's geometry works on a `Coordinate`.

extension Place {
    public init(coordinate: Coordinate, name: String? = nil, address: String? = nil) {
        self.init(latitude: coordinate.latitude, longitude: coordinate.longitude, name: name, address: address)
    }

    public var coordinate: Coordinate {
        get { Coordinate(latitude: latitude, longitude: longitude) }
        set {
            latitude = newValue.latitude
            longitude = newValue.longitude
        }
    }
}

extension VehicleLocation {
    public init(coordinate: Coordinate, course: Double?, speed: Double?, horizontalAccuracy: Double?, timestamp: Date) {
        self.init(
            latitude: coordinate.latitude, longitude: coordinate.longitude, course: course, speed: speed,
            horizontalAccuracy: horizontalAccuracy, timestamp: timestamp)
    }

    public var coordinate: Coordinate {
        get { Coordinate(latitude: latitude, longitude: longitude) }
        set {
            latitude = newValue.latitude
            longitude = newValue.longitude
        }
    }
}
