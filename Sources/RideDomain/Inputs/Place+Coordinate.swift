public import Foundation

public import struct RideStatusKit.Place
public import struct RideStatusKit.TelemetryFix
public import struct RideStatusKit.Vehicle
public import struct RideStatusKit.VehicleLocation

// The contract's places and vehicle positions are RideStatusKit's (flat `latitude` and `longitude`, as the wire
// carries them); the worker's geometry works on a `Coordinate`.

/// A contract value with a flat `latitude` and `longitude`, read and written as one `Coordinate`.
public protocol Positioned {
    var latitude: Double { get set }
    var longitude: Double { get set }
}

extension Positioned {
    public var coordinate: Coordinate {
        get { Coordinate(latitude: latitude, longitude: longitude) }
        set {
            latitude = newValue.latitude
            longitude = newValue.longitude
        }
    }
}

extension Place: Positioned {}
extension VehicleLocation: Positioned {}
extension TelemetryFix: Positioned {}

extension Place {
    public init(coordinate: Coordinate, name: String? = nil, address: String? = nil) {
        self.init(latitude: coordinate.latitude, longitude: coordinate.longitude, name: name, address: address)
    }
}

extension VehicleLocation {
    public init(coordinate: Coordinate, course: Double?, speed: Double?, horizontalAccuracy: Double?, timestamp: Date) {
        self.init(
            latitude: coordinate.latitude, longitude: coordinate.longitude, course: course, speed: speed,
            horizontalAccuracy: horizontalAccuracy, timestamp: timestamp)
    }
}

extension Vehicle {
    /// A vehicle as a status or an `assign` carries it: what a ride keeps of its car, at `location`.
    public init(_ details: VehicleDetails, location: VehicleLocation?) {
        self.init(
            location: location, registrationPlate: details.registrationPlate, manufacturer: details.manufacturer,
            model: details.model, mapAnnotationImage: details.mapAnnotationImage)
    }

    /// What a ride keeps of the car: all but its position, which the ride keeps apart.
    public var details: VehicleDetails {
        VehicleDetails(
            registrationPlate: registrationPlate, manufacturer: manufacturer, model: model,
            mapAnnotationImage: mapAnnotationImage)
    }
}

extension TelemetryFix {
    /// A fix as the worker reads it (3.1, or converted from OwnTracks): always with the topic's vehicle (I3).
    public init(
        vehicleId: String, timestamp: Date, coordinate: Coordinate, speed: Double? = nil, course: Double? = nil,
        horizontalAccuracy: Double? = nil, sequence: Int? = nil,
        navigation: (distance: Double, duration: Double)? = nil
    ) {
        self.init(
            vehicleId: vehicleId, timestamp: timestamp, latitude: coordinate.latitude, longitude: coordinate.longitude,
            speed: speed, course: course, horizontalAccuracy: horizontalAccuracy, sequence: sequence,
            remainingDistance: navigation?.distance, remainingDuration: navigation?.duration)
    }
}
