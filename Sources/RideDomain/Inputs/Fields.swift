import Foundation
import RideStatusKit

extension InputDecoder {
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
        guard let amount = DecimalText.parse(text) else {
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
