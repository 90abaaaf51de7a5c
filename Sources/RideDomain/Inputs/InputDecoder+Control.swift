public import Foundation
public import RideStatusKit

extension InputDecoder {
    // MARK: Control messages (3.2 and section 2)

    public func booking(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> Booking {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        let payloadRide = try fields.string("rideIdentifier")
        _ = try Identifier.validated(payloadRide, field: "rideIdentifier")
        guard payloadRide == rideIdentifier else {
            throw Rejection(.identifierMismatch, "rideIdentifier '\(payloadRide)' differs from the topic's (I3)")
        }
        let vehicleId = try fields.optionalString("vehicleId")
        if let vehicleId { _ = try Identifier.validated(vehicleId, field: "vehicleId") }
        var phase: RidePhase? = nil
        if let text = try fields.optionalString("phase") {
            guard let parsed = RidePhase(rawValue: text) else {
                throw Rejection(.invalidField, "phase '\(text)' is unknown")
            }
            phase = parsed
        }
        let optionFields = try fields.object("rideOption")
        let rideOption = try Self.rideOption(optionFields)
        let pickup = try fields.place("pickupLocation")
        let dropOff = try fields.place("dropOffLocation")
        var waypoints: [Place] = []
        for element in try fields.optionalArray("waypoints") ?? [] {
            waypoints.append(try Fields.place(element, field: "waypoints[]"))
        }
        var scheduled: ScheduledPickupTime? = nil
        if let window = try fields.optionalObject("scheduledPickupTime") {
            scheduled = ScheduledPickupTime(
                startDate: try window.date("startDate"), endDate: try window.date("endDate"))
        }
        let vehicleFields = try fields.optionalObject("vehicle")
        let vehicle = try vehicleFields.map { (fields) throws(Rejection) in try Self.vehicle(fields) }
        let location = try vehicleFields.map { (fields) throws(Rejection) in try Self.location(fields) } ?? nil
        let driverFields = try fields.optionalObject("driver")
        let driver = try driverFields.map { (fields) throws(Rejection) in try Self.driver(fields) }
        var partySize: Int? = nil
        if let size = try fields.optionalNumber("partySize") {
            guard size >= 1, size <= 100, size == size.rounded() else {
                throw Rejection(.invalidField, "partySize must be a whole number from 1")
            }
            partySize = Int(size)
        }
        var fare: Fare? = nil
        if let fareFields = try fields.optionalObject("fare") {
            let currency = try fareFields.currency("currencyCode")
            fare = Fare(
                baseCharge: try fareFields.amount("baseCharge", prefix: "fare.", nonNegative: true),
                perKilometer: try fareFields.amount("perKilometer", prefix: "fare.", nonNegative: true),
                perMinute: try fareFields.amount("perMinute", prefix: "fare.", nonNegative: true),
                currencyCode: currency)
        }
        let booking = Booking(
            rideIdentifier: rideIdentifier, vehicleId: vehicleId, phase: phase, rideOption: rideOption,
            pickupLocation: pickup, dropOffLocation: dropOff, waypoints: waypoints, scheduledPickupTime: scheduled,
            vehicle: vehicle.map { Vehicle($0, location: location) }, driver: driver, partySize: partySize, fare: fare)
        try Self.checkConsistency(booking)
        return booking
    }

    /// `invalidBooking`: well-formed JSON that cannot describe a ride.
    static func checkConsistency(_ booking: Booking) throws(Rejection) {
        if booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate) < 1 {
            throw Rejection(.invalidBooking, "dropOffLocation equals pickupLocation")
        }
        if let phase = booking.phase, phase != .received && phase != .confirmed {
            throw Rejection(.invalidBooking, "a booking starts in phase received or confirmed, not \(phase.rawValue)")
        }
        if let range = booking.rideOption.priceRange, range.minimumPrice > range.maximumPrice {
            throw Rejection(.invalidBooking, "rideOption.priceRange minimumPrice is above maximumPrice")
        }
        if let window = booking.scheduledPickupTime, window.endDate < window.startDate {
            throw Rejection(.invalidBooking, "scheduledPickupTime ends before it starts")
        }
    }

    public func assignment(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> Assignment {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        try fields.checkRide(rideIdentifier)
        let vehicleId = try Identifier.validated(try fields.string("vehicleId"), field: "vehicleId")
        let vehicleFields = try fields.optionalObject("vehicle")
        let vehicle = try vehicleFields.map { (fields) throws(Rejection) in try Self.vehicle(fields) }
        let location = try vehicleFields.map { (fields) throws(Rejection) in try Self.location(fields) } ?? nil
        let driverFields = try fields.optionalObject("driver")
        let driver = try driverFields.map { (fields) throws(Rejection) in try Self.driver(fields) }
        let route = try fields.optionalObject("route").map { (fields) throws(Rejection) in try Self.route(fields) }
        return Assignment(
            vehicleId: vehicleId, vehicle: vehicle.map { Vehicle($0, location: location) }, driver: driver,
            route: route)
    }

    /// E2: `rides/{ride}/route`, a new route after a reroute: the route object itself.
    public func route(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> Route {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        try fields.checkRide(rideIdentifier)
        return try Self.route(fields)
    }

    /// E2: a route's members, each of its type (``RouteTrack/points(of:)`` checks what they describe).
    static func route(_ fields: Fields) throws(Rejection) -> Route {
        var geometry: Route.LineString? = nil
        if let line = try fields.optionalObject("geometry") {
            guard let type = try line.optionalString("type") else {
                throw Rejection(.missingField, "route.geometry.type is required (E2)")
            }
            var coordinates: [[Double]] = []
            for position in try line.optionalArray("coordinates") ?? [] {
                guard case .array(let numbers) = position else {
                    throw Rejection(.invalidField, "route.geometry.coordinates holds [longitude, latitude] pairs (E2)")
                }
                var pair: [Double] = []
                for number in numbers {
                    guard let value = number.doubleValue else {
                        throw Rejection(.invalidField, "route.geometry.coordinates holds numbers (E2)")
                    }
                    pair.append(value)
                }
                coordinates.append(pair)
            }
            geometry = Route.LineString(coordinates: coordinates)
            geometry?.type = type
        }
        var precision: Int? = nil
        if let number = try fields.optionalNumber("precision") {
            guard number == 5 || number == 6 else {
                throw Rejection(.invalidField, "route.precision must be 5 or 6 (E2)")
            }
            precision = Int(number)
        }
        return Route(
            polyline: try fields.optionalString("polyline"), precision: precision, geometry: geometry,
            distance: try fields.optionalNumber("distance"), duration: try fields.optionalNumber("duration"),
            version: try fields.optionalString("version"))
    }

    public func event(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> DriverEvent {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        try fields.checkRide(rideIdentifier)
        let type = try fields.string("type")
        guard let kind = DriverEvent.Kind(rawValue: type) else {
            throw Rejection(
                .invalidField, "type '\(type)' is not arrivedAtPickup, passengerOnBoard or arrivedAtDropOff")
        }
        let timestamp = fields.has("timestamp") ? try fields.date("timestamp") : nil
        return DriverEvent(type: kind, timestamp: timestamp)
    }

    /// A3: a driver event on `fleet/vehicles/{vehicleId}/event`: `{"rideIdentifier", "type", "timestamp"?}`,
    /// the ride named in the payload (the topic names the vehicle).
    public func vehicleEvent(vehicleId: String, payload: [UInt8]) throws(Rejection) -> (
        ride: String, event: DriverEvent
    ) {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        let ride = try vehicleEventRide(payload)
        return (ride, try event(rideIdentifier: ride, payload: payload))
    }

    /// A3: the ride a vehicle's driver event names (what a group routes it by, before anything else is read).
    public func vehicleEventRide(_ payload: [UInt8]) throws(Rejection) -> String {
        let fields = Fields(try object(payload))
        return try Identifier.validated(try fields.string("rideIdentifier"), field: "rideIdentifier")
    }

    public func cancellation(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> Cancellation {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        try fields.checkRide(rideIdentifier)
        let by = try fields.string("canceledBy")
        guard let canceledBy = CompletionStatus.CanceledBy(rawValue: by) else {
            throw Rejection(.invalidField, "canceledBy '\(by)' is not user or service")
        }
        var fee: Money? = nil
        if let feeFields = try fields.optionalObject("cancellationFee") {
            let currency = try feeFields.currency("currencyCode")
            let amount = try feeFields.amount("amount", prefix: "cancellationFee.", nonNegative: true)
            fee = Money(amount: amount, currencyCode: currency).rounded
        }
        return Cancellation(canceledBy: canceledBy, cancellationFee: fee, reason: try fields.optionalString("reason"))
    }

    /// `stop`: `{}`, `{"reason": ...}` or empty. Returns the reason, if any.
    public func stop(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> String? {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload, emptyAsObject: true))
        try fields.checkRide(rideIdentifier)
        return try fields.optionalString("reason")
    }

    // MARK: Ride options (3.4) and availability

    /// `ride-options/request`: pickup and drop-off places, an optional party size and locale.
    public func rideOptionsRequest(payload: [UInt8]) throws(Rejection) -> RideOptionsRequest {
        let fields = Fields(try object(payload))
        var partySize: Int? = nil
        if let size = try fields.optionalNumber("partySize") {
            guard size >= 1, size <= 100, size == size.rounded() else {
                throw Rejection(.invalidField, "partySize must be a whole number from 1 to 100")
            }
            partySize = Int(size)
        }
        return RideOptionsRequest(
            pickupLocation: try fields.place("pickupLocation"), dropOffLocation: try fields.place("dropOffLocation"),
            partySize: partySize, locale: try fields.optionalString("locale"))
    }

    /// `fleet/vehicles/{vehicleId}/availability`: `{"available": true, "rideOptionName": "Compact",
    /// "location": {...}}`; the location's timestamp defaults to `receivedAt`.
    public func availability(payload: [UInt8], receivedAt: Date) throws(Rejection) -> Availability {
        let fields = Fields(try object(payload))
        guard let value = fields.json["available"], !value.isNull else {
            throw Rejection(.missingField, "available is required")
        }
        guard case .bool(let available) = value else {
            throw Rejection(.invalidField, "available must be true or false")
        }
        var location = try Self.location(fields)
        let stampedByVehicle = try fields.optionalObject("location")?.has("timestamp") ?? false
        if let stamped = location, !stampedByVehicle {
            location = VehicleLocation(
                coordinate: stamped.coordinate, course: stamped.course, speed: stamped.speed,
                horizontalAccuracy: stamped.horizontalAccuracy, timestamp: receivedAt)
        }
        return Availability(
            available: available, rideOptionName: try fields.optionalString("rideOptionName"), location: location)
    }
}
