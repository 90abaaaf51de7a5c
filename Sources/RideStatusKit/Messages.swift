public import Foundation
import RideJSON

// MARK: - What vehicles and dispatch publish (3.1, 3.2)

/// A telemetry fix in the native form (3.1), on `fleet/vehicles/{vehicleId}/position`.
public struct TelemetryFix: Sendable, Hashable {
    // Declared in another order than the public initializer's parameters, which calls the memberwise initializer
    // through its own labels (as `RideStatus` does; `docs/research/struct-init-copies.md`).
    public var timestamp: Date
    /// When present, it must equal the topic's vehicle (I3).
    public var vehicleId: String?
    public var latitude: Double
    public var longitude: Double
    public var speed: Double?
    public var course: Double?
    public var horizontalAccuracy: Double?
    public var sequence: Int?
    /// E2: the driver's navigation app's progress to where the ride goes next (the pickup, then the drop-off).
    /// One optional pair rather than two optionals: with two, a fix took 129 bytes, one over the 128 that a copy
    /// makes without calling `memcpy`, and the worker's fix path cost 3.9 % more instructions (callgrind,
    /// `make bench-instructions`).
    public var navigation: Navigation?

    /// E2: metres and seconds left, both or neither (a fix with one of them has none).
    public struct Navigation: Sendable, Hashable {
        public var remainingDistance: Double
        public var remainingDuration: Double

        public init(remainingDistance: Double, remainingDuration: Double) {
            self.remainingDistance = remainingDistance
            self.remainingDuration = remainingDuration
        }
    }

    /// E2: the navigation app's metres left, as `remainingDistance` on the wire.
    public var remainingDistance: Double? { navigation?.remainingDistance }
    /// E2: the navigation app's seconds left, as `remainingDuration` on the wire.
    public var remainingDuration: Double? { navigation?.remainingDuration }
}

// In an extension, so that the memberwise initializer stays the synthesized one (`RideStatus` says why).
extension TelemetryFix: Codable {
    enum CodingKeys: String, CodingKey {
        case timestamp, vehicleId, latitude, longitude, speed, course, horizontalAccuracy, sequence
        case remainingDistance, remainingDuration
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let distance = try container.decodeIfPresent(Double.self, forKey: .remainingDistance)
        let duration = try container.decodeIfPresent(Double.self, forKey: .remainingDuration)
        self.init(
            timestamp: try container.decode(Date.self, forKey: .timestamp),
            vehicleId: try container.decodeIfPresent(String.self, forKey: .vehicleId),
            latitude: try container.decode(Double.self, forKey: .latitude),
            longitude: try container.decode(Double.self, forKey: .longitude),
            speed: try container.decodeIfPresent(Double.self, forKey: .speed),
            course: try container.decodeIfPresent(Double.self, forKey: .course),
            horizontalAccuracy: try container.decodeIfPresent(Double.self, forKey: .horizontalAccuracy),
            sequence: try container.decodeIfPresent(Int.self, forKey: .sequence),
            navigation: Navigation(distance, duration))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(timestamp, forKey: .timestamp)
        try container.encodeIfPresent(vehicleId, forKey: .vehicleId)
        try container.encode(latitude, forKey: .latitude)
        try container.encode(longitude, forKey: .longitude)
        try container.encodeIfPresent(speed, forKey: .speed)
        try container.encodeIfPresent(course, forKey: .course)
        try container.encodeIfPresent(horizontalAccuracy, forKey: .horizontalAccuracy)
        try container.encodeIfPresent(sequence, forKey: .sequence)
        try container.encodeIfPresent(navigation?.remainingDistance, forKey: .remainingDistance)
        try container.encodeIfPresent(navigation?.remainingDuration, forKey: .remainingDuration)
    }
}

extension TelemetryFix.Navigation {
    /// Both, or none.
    init?(_ distance: Double?, _ duration: Double?) {
        guard let distance, let duration else { return nil }
        self.init(remainingDistance: distance, remainingDuration: duration)
    }
}

extension TelemetryFix {
    public init(
        vehicleId: String? = nil, timestamp: Date, latitude: Double, longitude: Double, speed: Double? = nil,
        course: Double? = nil, horizontalAccuracy: Double? = nil, sequence: Int? = nil,
        remainingDistance: Double? = nil, remainingDuration: Double? = nil
    ) {
        self.init(
            timestamp: timestamp, vehicleId: vehicleId, latitude: latitude, longitude: longitude, speed: speed,
            course: course, horizontalAccuracy: horizontalAccuracy, sequence: sequence,
            navigation: Navigation(remainingDistance, remainingDuration))
    }
}

/// A booking (3.2), on `rides/{rideIdentifier}/start`.
public struct Booking: Sendable, Hashable, Codable {
    public var rideIdentifier: String
    public var vehicleId: String?
    /// `received` or `confirmed` (P1); without it the worker decides from `vehicleId`.
    public var phase: RidePhase?
    public var rideOption: RideOption
    public var pickupLocation: Place
    public var dropOffLocation: Place
    public var waypoints: [Place]?
    public var scheduledPickupTime: ScheduledPickupTime?
    public var vehicle: Vehicle?
    public var driver: Driver?
    public var partySize: Int?
    /// The booking's own metered fare; without it a catalog option's pricing applies (P5).
    public var fare: Fare?

    public init(
        rideIdentifier: String, vehicleId: String? = nil, phase: RidePhase? = nil, rideOption: RideOption,
        pickupLocation: Place, dropOffLocation: Place, waypoints: [Place]? = nil,
        scheduledPickupTime: ScheduledPickupTime? = nil, vehicle: Vehicle? = nil, driver: Driver? = nil,
        partySize: Int? = nil, fare: Fare? = nil
    ) {
        self.rideIdentifier = rideIdentifier
        self.vehicleId = vehicleId
        self.phase = phase
        self.rideOption = rideOption
        self.pickupLocation = pickupLocation
        self.dropOffLocation = dropOffLocation
        self.waypoints = waypoints
        self.scheduledPickupTime = scheduledPickupTime
        self.vehicle = vehicle
        self.driver = driver
        self.partySize = partySize
        self.fare = fare
    }

    enum CodingKeys: String, CodingKey {
        case rideIdentifier, vehicleId, phase, rideOption, pickupLocation, dropOffLocation, waypoints
        case scheduledPickupTime, vehicle, driver, partySize, fare
    }

    // Optional keys are left out when absent: a booking names only what it has.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(rideIdentifier, forKey: .rideIdentifier)
        try container.encodeIfPresent(vehicleId, forKey: .vehicleId)
        try container.encodeIfPresent(phase, forKey: .phase)
        try container.encode(rideOption, forKey: .rideOption)
        try container.encode(pickupLocation, forKey: .pickupLocation)
        try container.encode(dropOffLocation, forKey: .dropOffLocation)
        try container.encodeIfPresent(waypoints, forKey: .waypoints)
        try container.encodeIfPresent(scheduledPickupTime, forKey: .scheduledPickupTime)
        try container.encodeIfPresent(vehicle.map(InputVehicle.init), forKey: .vehicle)
        try container.encodeIfPresent(driver.map(InputDriver.init), forKey: .driver)
        try container.encodeIfPresent(partySize, forKey: .partySize)
        try container.encodeIfPresent(fare, forKey: .fare)
    }
}

/// A metered fare: base, per kilometre driven and per minute (P5).
public struct Fare: Sendable, Hashable, Codable {
    public var baseCharge: Decimal
    public var perKilometer: Decimal
    public var perMinute: Decimal
    public var currencyCode: String

    public init(baseCharge: Decimal, perKilometer: Decimal, perMinute: Decimal, currencyCode: String) {
        self.baseCharge = baseCharge
        self.perKilometer = perKilometer
        self.perMinute = perMinute
        self.currencyCode = currencyCode
    }

    enum CodingKeys: String, CodingKey { case baseCharge, perKilometer, perMinute, currencyCode }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        baseCharge = try DecimalText.decode(container, .baseCharge)
        perKilometer = try DecimalText.decode(container, .perKilometer)
        perMinute = try DecimalText.decode(container, .perMinute)
        currencyCode = try container.decode(String.self, forKey: .currencyCode)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        // Rates keep their own precision (a per-minute rate may have more digits than the currency).
        try container.encode("\(baseCharge)", forKey: .baseCharge)
        try container.encode("\(perKilometer)", forKey: .perKilometer)
        try container.encode("\(perMinute)", forKey: .perMinute)
        try container.encode(currencyCode, forKey: .currencyCode)
    }
}

/// A vehicle and driver for a ride (`assign`, P1, L3).
public struct Assignment: Sendable, Hashable, Codable {
    public var vehicleId: String
    public var vehicle: Vehicle?
    public var driver: Driver?
    /// E2: the vehicle's route, when dispatch has one.
    public var route: Route?

    public init(vehicleId: String, vehicle: Vehicle? = nil, driver: Driver? = nil, route: Route? = nil) {
        self.vehicleId = vehicleId
        self.vehicle = vehicle
        self.driver = driver
        self.route = route
    }

    enum CodingKeys: String, CodingKey { case vehicleId, vehicle, driver, route }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(vehicleId, forKey: .vehicleId)
        try container.encodeIfPresent(vehicle.map(InputVehicle.init), forKey: .vehicle)
        try container.encodeIfPresent(driver.map(InputDriver.init), forKey: .driver)
        try container.encodeIfPresent(route, forKey: .route)
    }
}

/// E2: a route for the ride's assigned vehicle, on `assign` or, after a reroute, on `rides/{rideIdentifier}/route`:
/// its geometry as an encoded polyline (with its precision, 5 or 6) or as a GeoJSON LineString, with the routing
/// engine's distance (metres) and duration (seconds) when it gave them, and a version. It runs from the vehicle
/// to where the ride goes: the pickup, the drop-off, or both in turn.
public struct Route: Sendable, Hashable, Codable {
    /// Google's encoded polyline algorithm, latitude first.
    public var polyline: String?
    /// The polyline's decimal places: 5 or 6.
    public var precision: Int?
    /// A GeoJSON LineString (`coordinates` as `[longitude, latitude]`), when there is no polyline.
    public var geometry: LineString?
    public var distance: Double?
    public var duration: Double?
    public var version: String?

    public struct LineString: Sendable, Hashable, Codable {
        public var type: String
        public var coordinates: [[Double]]

        public init(coordinates: [[Double]]) {
            self.type = "LineString"
            self.coordinates = coordinates
        }
    }

    public init(
        polyline: String? = nil, precision: Int? = nil, geometry: LineString? = nil, distance: Double? = nil,
        duration: Double? = nil, version: String? = nil
    ) {
        self.polyline = polyline
        self.precision = precision
        self.geometry = geometry
        self.distance = distance
        self.duration = duration
        self.version = version
    }
}

/// A vehicle as dispatch sends it: only the fields it has (a status writes every field, null when absent).
private struct InputVehicle: Encodable {
    let vehicle: Vehicle

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Vehicle.CodingKeys.self)
        try container.encodeIfPresent(vehicle.location, forKey: .location)
        try container.encodeIfPresent(vehicle.registrationPlate, forKey: .registrationPlate)
        try container.encodeIfPresent(vehicle.manufacturer, forKey: .manufacturer)
        try container.encodeIfPresent(vehicle.model, forKey: .model)
        try container.encodeIfPresent(vehicle.mapAnnotationImage, forKey: .mapAnnotationImage)
    }
}

/// A driver as dispatch sends it: only the fields it has.
private struct InputDriver: Encodable {
    let driver: Driver

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Driver.CodingKeys.self)
        try container.encodeIfPresent(driver.displayName, forKey: .displayName)
        try container.encodeIfPresent(driver.phoneNumber, forKey: .phoneNumber)
        try container.encodeIfPresent(driver.rating, forKey: .rating)
    }
}

/// What the driver says happened (`event`, P3-P5).
public struct DriverEvent: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case arrivedAtPickup, passengerOnBoard, arrivedAtDropOff
    }

    public var type: Kind
    public var timestamp: Date?

    public init(type: Kind, timestamp: Date? = nil) {
        self.type = type
        self.timestamp = timestamp
    }
}

/// A3: what a vehicle's driver app sends on `fleet/vehicles/{vehicleId}/event`: a driver event and the ride it
/// is for (the topic names the vehicle, not the ride).
public struct VehicleEvent: Sendable, Hashable, Codable {
    public var rideIdentifier: String
    public var type: DriverEvent.Kind
    public var timestamp: Date?

    public init(rideIdentifier: String, type: DriverEvent.Kind, timestamp: Date? = nil) {
        self.rideIdentifier = rideIdentifier
        self.type = type
        self.timestamp = timestamp
    }
}

/// A cancellation (`cancel`, P6, P7).
public struct Cancellation: Sendable, Hashable, Codable {
    public var canceledBy: CompletionStatus.CanceledBy
    public var cancellationFee: Money?
    public var reason: String?

    public init(canceledBy: CompletionStatus.CanceledBy, cancellationFee: Money? = nil, reason: String? = nil) {
        self.canceledBy = canceledBy
        self.cancellationFee = cancellationFee
        self.reason = reason
    }
}

/// The end of a ride's updates (`stop`, L2): the worker clears the retained status and forgets the ride.
public struct Stop: Sendable, Hashable, Codable {
    public var reason: String?

    public init(reason: String? = nil) { self.reason = reason }
}

/// A vehicle's availability for new rides (3.4), retained on `fleet/vehicles/{vehicleId}/availability`.
public struct Availability: Sendable, Hashable, Codable {
    public var available: Bool
    public var rideOptionName: String?
    public var location: VehicleLocation?

    public init(available: Bool, rideOptionName: String? = nil, location: VehicleLocation? = nil) {
        self.available = available
        self.rideOptionName = rideOptionName
        self.location = location
    }
}

// MARK: - What the worker publishes besides statuses (3.4, 3.5, G1)

/// A refused input (3.5), on the dead-letter topic: where it came from, why, and its first bytes.
public struct DeadLetter: Sendable, Hashable, Codable {
    /// The stable reason codes of 3.5.
    public enum Reason: String, Sendable, Hashable, Codable, CaseIterable {
        case payloadTooLarge, malformedJSON, missingField, invalidField, invalidIdentifier, identifierMismatch
        case invalidCoordinates, nullIsland, timestampInFuture, timestampTooOld, impossibleSpeed, poorAccuracy
        case unknownRide, eventNotAllowed, invalidBooking
        /// A3: a driver event from a vehicle that is not the ride's assigned vehicle.
        case notAssignedVehicle
    }

    public var topic: String
    public var reason: Reason
    /// A sentence naming the rule broken.
    public var detail: String
    public var receivedAt: Date
    public var payloadBytes: Int
    public var payloadPrefix: String

    public init(
        topic: String, reason: Reason, detail: String, receivedAt: Date, payloadBytes: Int, payloadPrefix: String
    ) {
        self.topic = topic
        self.reason = reason
        self.detail = detail
        self.receivedAt = receivedAt
        self.payloadBytes = payloadBytes
        self.payloadPrefix = payloadPrefix
    }
}

/// A worker's presence (G1, L8), retained on `ridestatus/workers/{workerId}`; the will says offline.
public struct Presence: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable { case online, offline }

    public var state: State
    public var since: Date
    public var version: String
    /// Grows with every connection of the worker (G1).
    public var incarnation: Int?
    /// When this presence was last repeated (the heartbeat).
    public var at: Date?

    public init(state: State, since: Date, version: String, incarnation: Int? = nil, at: Date? = nil) {
        self.state = state
        self.since = since
        self.version = version
        self.incarnation = incarnation
        self.at = at
    }

    /// The payload as a worker publishes it (births, heartbeats, wills): `state`, `since`, `version`, then
    /// `incarnation` and `at` when set, times as the contract writes them. One writer for the worker and for
    /// anyone who publishes a presence; `presence.schema.json` and a golden test keep its bytes.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 160)
        writer.beginObject()
        writer.key("state")
        writer.string(state.rawValue)
        writer.key("since")
        writer.time(since)
        writer.key("version")
        writer.string(version)
        if let incarnation {
            writer.key("incarnation")
            writer.integer(incarnation)
        }
        if let at {
            writer.key("at")
            writer.time(at)
        }
        writer.endObject()
        return writer.bytes
    }
}

/// A quote request (3.4), on `ride-options/request` with an MQTT 5 Response Topic under `replies/`.
public struct RideOptionsRequest: Sendable, Hashable, Codable {
    public var pickupLocation: Place
    public var dropOffLocation: Place
    public var partySize: Int?
    /// The language of the names in the reply (`de`, `fr-CH`): a project addition to 3.4 that older clients omit.
    public var locale: String?

    public init(pickupLocation: Place, dropOffLocation: Place, partySize: Int? = nil, locale: String? = nil) {
        self.pickupLocation = pickupLocation
        self.dropOffLocation = dropOffLocation
        self.partySize = partySize
        self.locale = locale
    }
}

/// The reply to a quote request (3.4): `INListRideOptionsIntentResponse`.
public struct RideOptionsReply: Sendable, Hashable, Codable {
    public enum Code: String, Sendable, Hashable, Codable, CaseIterable {
        case success, failureNoServiceInArea, failureServiceTemporarilyUnavailable, failure
    }

    public var code: Code
    public var rideOptions: [RideOption]
    public var expirationDate: Date?
    /// For a failure: a stable reason code and a sentence for people (project addition).
    public var reason: String?
    public var detail: String?

    public init(
        code: Code, rideOptions: [RideOption] = [], expirationDate: Date? = nil, reason: String? = nil,
        detail: String? = nil
    ) {
        self.code = code
        self.rideOptions = rideOptions
        self.expirationDate = expirationDate
        self.reason = reason
        self.detail = detail
    }
}

/// The reply to `rides/{rideIdentifier}/status/get` (L7): the current status, or this when the ride is unknown.
public enum StatusReply: Sendable, Hashable, Codable {
    case status(RideStatus)
    case unknownRide

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.code) {
            let code = try container.decode(String.self, forKey: .code)
            let reason = try container.decode(String.self, forKey: .reason)
            guard code == "failure", reason == "unknownRide" else {
                throw DecodingError.dataCorruptedError(
                    forKey: .reason, in: container, debugDescription: "unexpected reply \(code)/\(reason)")
            }
            self = .unknownRide
        } else {
            self = .status(try RideStatus(from: decoder))
        }
    }

    enum CodingKeys: String, CodingKey { case code, reason }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .status(let status): try status.encode(to: encoder)
        case .unknownRide:
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode("failure", forKey: .code)
            try container.encode("unknownRide", forKey: .reason)
        }
    }
}
