import Foundation

/// Decodes the raw bytes of every input of the contract into domain values, applying I1-I3 and the
/// syntactic part of T1 and T6. Every failure is a ``Rejection`` with a stable reason.
public struct InputDecoder: Sendable {
    public var maxPayloadBytes: Int

    public init(maxPayloadBytes: Int = RideConfiguration().maxPayloadBytes) {
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// I2: size, UTF-8, JSON, object. `emptyAsObject` lets an empty payload count as `{}` (stop, status/get).
    public func object(_ payload: [UInt8], emptyAsObject: Bool = false) throws(Rejection) -> JSONValue {
        guard payload.count <= maxPayloadBytes else {
            throw Rejection(.payloadTooLarge, "\(payload.count) bytes is over maxPayloadBytes \(maxPayloadBytes) (I2)")
        }
        if payload.isEmpty {
            if emptyAsObject { return .object([:]) }
            throw Rejection(.malformedJSON, "empty payload where a JSON object is required (I2)")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(payload)
        } catch {
            throw Rejection(.malformedJSON, "not JSON: \(error.message) at byte \(error.offset) (I2)")
        }
        guard case .object = value else { throw Rejection(.malformedJSON, "not a JSON object (I2)") }
        return value
    }

    // MARK: Telemetry (3.1)

    /// A fix from a native or OwnTracks payload; `nil` for OwnTracks messages that are not locations.
    public func telemetry(vehicleId: String, payload: [UInt8]) throws(Rejection) -> TelemetryFix? {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        if payload.count <= maxPayloadBytes,
            case .some(let fix) = TelemetryFastPath.decode(vehicleId: vehicleId, payload: payload)
        {
            return fix
        }
        return try generalTelemetry(vehicleId: vehicleId, payload: payload)
    }

    /// The general decoder for every telemetry payload; ``telemetry(vehicleId:payload:)`` tries the fast path first.
    public func generalTelemetry(vehicleId: String, payload: [UInt8]) throws(Rejection) -> TelemetryFix? {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        let json = try object(payload)
        let fields = Fields(json)
        if let type = json["_type"] {
            guard type.stringValue == "location" else { return nil }
            return try ownTracks(vehicleId: vehicleId, fields: fields)
        }
        if let payloadVehicle = try fields.optionalString("vehicleId") {
            _ = try Identifier.validated(payloadVehicle, field: "vehicleId")
            guard payloadVehicle == vehicleId else {
                throw Rejection(.identifierMismatch, "vehicleId '\(payloadVehicle)' differs from the topic's (I3)")
            }
        }
        let timestamp = try fields.date("timestamp")
        let coordinate = try fields.coordinate(latitude: "latitude", longitude: "longitude")
        return TelemetryFix(
            vehicleId: vehicleId, timestamp: timestamp, coordinate: coordinate,
            speed: try fields.optionalNumber("speed").flatMap(Self.usableSpeed),
            course: try fields.optionalNumber("course").flatMap(Self.usableCourse),
            horizontalAccuracy: try fields.optionalNumber("horizontalAccuracy"),
            sequence: try fields.optionalNumber("sequence").map { Int(exactly: $0.rounded()) ?? 0 })
    }

    private func ownTracks(vehicleId: String, fields: Fields) throws(Rejection) -> TelemetryFix {
        let timestamp = try fields.date("tst")
        let coordinate = try fields.coordinate(latitude: "lat", longitude: "lon")
        let kmh = try fields.optionalNumber("vel")
        return TelemetryFix(
            vehicleId: vehicleId, timestamp: timestamp, coordinate: coordinate,
            speed: kmh.map { $0 / 3.6 }.flatMap(Self.usableSpeed),
            course: try fields.optionalNumber("cog").flatMap(Self.usableCourse),
            horizontalAccuracy: try fields.optionalNumber("acc"))
    }

    /// T6: a negative speed is treated as absent.
    static func usableSpeed(_ speed: Double) -> Double? { speed.isFinite && speed >= 0 ? speed : nil }
    /// T6: a course outside [0, 360) is treated as absent.
    static func usableCourse(_ course: Double) -> Double? {
        course.isFinite && course >= 0 && course < 360 ? course : nil
    }

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
        var scheduled: ScheduledTime? = nil
        if let window = try fields.optionalObject("scheduledPickupTime") {
            scheduled = ScheduledTime(startDate: try window.date("startDate"), endDate: try window.date("endDate"))
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
            vehicle: vehicle ?? VehicleDetails(), vehicleLocation: location, driver: driver, partySize: partySize,
            fare: fare)
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
        return Assignment(vehicleId: vehicleId, vehicle: vehicle, vehicleLocation: location, driver: driver)
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
        return DriverEvent(kind: kind, timestamp: timestamp)
    }

    public func cancellation(rideIdentifier: String, payload: [UInt8]) throws(Rejection) -> Cancellation {
        _ = try Identifier.validated(rideIdentifier, field: "rideIdentifier in topic")
        let fields = Fields(try object(payload))
        try fields.checkRide(rideIdentifier)
        let by = try fields.string("canceledBy")
        guard let canceledBy = Cancellation.CanceledBy(rawValue: by) else {
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

    // MARK: Nested shapes

    static func rideOption(_ fields: Fields) throws(Rejection) -> RideOption {
        let name = try fields.string("name", prefix: "rideOption.")
        guard !isBlank(name) else {
            throw Rejection(.invalidField, "rideOption.name is blank")
        }
        var option = RideOption(
            name: name, estimatedPickupDate: try fields.date("estimatedPickupDate", prefix: "rideOption."))
        if let range = try fields.optionalObject("priceRange") {
            let currency = try range.currency("currencyCode")
            option.priceRange = PriceRange(
                minimumPrice: try range.amount("minimumPrice", prefix: "rideOption.priceRange.", nonNegative: true),
                maximumPrice: try range.amount("maximumPrice", prefix: "rideOption.priceRange.", nonNegative: true),
                currencyCode: currency)
        }
        option.disclaimerMessage = try fields.optionalString("disclaimerMessage")
        option.specialPricing = try fields.optionalString("specialPricing")
        if case .bool(let metered)? = fields.json["usesMeteredFare"] { option.usesMeteredFare = metered }
        for item in try fields.optionalArray("fareLineItems") ?? [] {
            let itemFields = Fields(item)
            guard case .object = item else { throw Rejection(.invalidField, "fareLineItems[] must be objects") }
            option.fareLineItems.append(
                FareLineItem(
                    title: try itemFields.string("title"), price: try itemFields.amount("price"),
                    currencyCode: try itemFields.currency("currencyCode")))
        }
        return option
    }

    static func vehicle(_ fields: Fields) throws(Rejection) -> VehicleDetails {
        VehicleDetails(
            registrationPlate: try fields.optionalString("registrationPlate"),
            manufacturer: try fields.optionalString("manufacturer"), model: try fields.optionalString("model"),
            mapAnnotationImage: try fields.optionalString("mapAnnotationImage"))
    }

    static func location(_ fields: Fields) throws(Rejection) -> VehicleLocation? {
        guard let location = try fields.optionalObject("location") else { return nil }
        return VehicleLocation(
            coordinate: try location.coordinate(latitude: "latitude", longitude: "longitude"),
            course: try location.optionalNumber("course").flatMap(usableCourse),
            speed: try location.optionalNumber("speed").flatMap(usableSpeed),
            horizontalAccuracy: try location.optionalNumber("horizontalAccuracy"),
            timestamp: location.has("timestamp") ? try location.date("timestamp") : Date(timeIntervalSince1970: 0))
    }

    static func driver(_ fields: Fields) throws(Rejection) -> Driver {
        Driver(
            displayName: try fields.optionalString("displayName"),
            phoneNumber: try fields.optionalString("phoneNumber"),
            rating: try fields.optionalString("rating"))
    }
}

/// Typed access to the members of one JSON object, with rejections that name the field.
struct Fields {
    let json: JSONValue

    init(_ json: JSONValue) { self.json = json }

    func has(_ key: String) -> Bool { json[key].map { !$0.isNull } ?? false }

    func checkRide(_ rideIdentifier: String) throws(Rejection) {
        guard let value = json["rideIdentifier"], !value.isNull else { return }
        guard let text = value.stringValue else { throw Rejection(.invalidField, "rideIdentifier must be a string") }
        _ = try Identifier.validated(text, field: "rideIdentifier")
        guard text == rideIdentifier else {
            throw Rejection(.identifierMismatch, "rideIdentifier '\(text)' differs from the topic's (I3)")
        }
    }

    func string(_ key: String, prefix: String = "") throws(Rejection) -> String {
        guard let value = json[key], !value.isNull else {
            throw Rejection(.missingField, "\(prefix)\(key) is required")
        }
        guard let text = value.stringValue else { throw Rejection(.invalidField, "\(prefix)\(key) must be a string") }
        return text
    }

    func optionalString(_ key: String) throws(Rejection) -> String? {
        guard let value = json[key], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw Rejection(.invalidField, "\(key) must be a string") }
        return text
    }

    func number(_ key: String) throws(Rejection) -> Double {
        guard let value = json[key], !value.isNull else { throw Rejection(.missingField, "\(key) is required") }
        guard let number = value.doubleValue else { throw Rejection(.invalidField, "\(key) must be a number") }
        return number
    }

    func optionalNumber(_ key: String) throws(Rejection) -> Double? {
        guard let value = json[key], !value.isNull else { return nil }
        guard let number = value.doubleValue else { throw Rejection(.invalidField, "\(key) must be a number") }
        return number
    }

    func date(_ key: String, prefix: String = "") throws(Rejection) -> Date {
        guard let value = json[key], !value.isNull else {
            throw Rejection(.missingField, "\(prefix)\(key) is required")
        }
        guard let date = Timestamps.parse(value) else {
            throw Rejection(.invalidField, "\(prefix)\(key) is not an RFC 3339 time or epoch seconds")
        }
        return date
    }

    /// T1: both present, numbers, finite, in range, not (0, 0).
    func coordinate(latitude: String, longitude: String) throws(Rejection) -> Coordinate {
        let lat = try number(latitude)
        let lon = try number(longitude)
        let coordinate = Coordinate(latitude: lat, longitude: lon)
        guard coordinate.isValid else {
            throw Rejection(.invalidCoordinates, "\(latitude) \(lat), \(longitude) \(lon) out of range (T1)")
        }
        guard lat != 0 || lon != 0 else { throw Rejection(.nullIsland, "position (0, 0) is not a real fix (T1)") }
        return coordinate
    }

    /// Money amounts are decimal strings (3.5: a JSON number is `invalidField`).
    /// - Parameter nonNegative: V6: prices, fares and fees are never negative (only a fare line item may be,
    ///   as a discount); a negative one is refused here, at intake, rather than by every status of the ride.
    func amount(_ key: String, prefix: String = "", nonNegative: Bool = false) throws(Rejection) -> Decimal {
        guard let value = json[key], !value.isNull else {
            throw Rejection(.missingField, "\(prefix)\(key) is required")
        }
        guard let text = value.stringValue else {
            throw Rejection(.invalidField, "\(prefix)\(key) must be a decimal string, not a JSON number")
        }
        guard let amount = Money.parseAmount(text) else {
            throw Rejection(.invalidField, "\(prefix)\(key) '\(text)' is not a decimal")
        }
        if nonNegative && amount < 0 {
            throw Rejection(.invalidField, "\(prefix)\(key) '\(text)' is negative (V6)")
        }
        return amount
    }

    func currency(_ key: String) throws(Rejection) -> String {
        let code = try string(key)
        guard Money.isValidCurrencyCode(code) else {
            throw Rejection(.invalidField, "\(key) '\(code)' is not ISO 4217")
        }
        return code
    }

    func object(_ key: String) throws(Rejection) -> Fields {
        guard let value = json[key], !value.isNull else { throw Rejection(.missingField, "\(key) is required") }
        guard case .object = value else { throw Rejection(.invalidField, "\(key) must be an object") }
        return Fields(value)
    }

    func optionalObject(_ key: String) throws(Rejection) -> Fields? {
        guard let value = json[key], !value.isNull else { return nil }
        guard case .object = value else { throw Rejection(.invalidField, "\(key) must be an object") }
        return Fields(value)
    }

    func optionalArray(_ key: String) throws(Rejection) -> [JSONValue]? {
        guard let value = json[key], !value.isNull else { return nil }
        guard case .array(let elements) = value else { throw Rejection(.invalidField, "\(key) must be an array") }
        return elements
    }

    func place(_ key: String) throws(Rejection) -> Place {
        guard let value = json[key], !value.isNull else { throw Rejection(.missingField, "\(key) is required") }
        return try Self.place(value, field: key)
    }

    static func place(_ value: JSONValue, field: String) throws(Rejection) -> Place {
        guard case .object = value else { throw Rejection(.invalidField, "\(field) must be an object") }
        let fields = Fields(value)
        return Place(
            coordinate: try fields.coordinate(latitude: "latitude", longitude: "longitude"),
            name: try fields.optionalString("name"), address: try fields.optionalString("address"))
    }
}
