public import Foundation

public import struct RideStatusKit.CompletionStatus
public import enum RideStatusKit.DecimalText
public import struct RideStatusKit.Money
public import struct RideStatusKit.PartySizeOption
public import struct RideStatusKit.Place
public import struct RideStatusKit.PriceRange
public import struct RideStatusKit.RideOption
public import enum RideStatusKit.RidePhase
public import struct RideStatusKit.RideStatus
public import struct RideStatusKit.VehicleLocation

// MARK: - JSON exactly as in section 3.3

extension RideStatus {
    /// The status as the wire carries it: field names of 3.3, RFC 3339 UTC with milliseconds, money as decimal
    /// strings, `null` where the example shows it.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 1536)
        write(to: &writer)
        return writer.bytes
    }

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("rideIdentifier")
        writer.string(rideIdentifier)
        writer.key("phase")
        writer.string(phase.rawValue)
        writer.key("completionStatus")
        if let completionStatus { completionStatus.write(to: &writer) } else { writer.null() }
        writer.key("vehicle")
        writer.beginObject()
        writer.key("location")
        if let location = vehicle.location { location.write(to: &writer) } else { writer.null() }
        writer.optional("registrationPlate", vehicle.registrationPlate)
        writer.optional("manufacturer", vehicle.manufacturer)
        writer.optional("model", vehicle.model)
        writer.optional("mapAnnotationImage", vehicle.mapAnnotationImage)
        writer.endObject()
        writer.key("driver")
        if let driver {
            writer.beginObject()
            writer.optional("displayName", driver.displayName)
            writer.optional("phoneNumber", driver.phoneNumber)
            writer.optional("rating", driver.rating)
            writer.endObject()
        } else {
            writer.null()
        }
        writer.key("rideOption")
        rideOption.write(to: &writer)
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.date("estimatedPickupEndDate", estimatedPickupEndDate)
        writer.date("estimatedDropOffDate", estimatedDropOffDate)
        writer.date("estimatedPickupDateLatest", estimatedPickupDateLatest)
        writer.date("estimatedDropOffDateLatest", estimatedDropOffDateLatest)
        writer.key("pickupLocation")
        pickupLocation.write(to: &writer)
        writer.key("dropOffLocation")
        dropOffLocation.write(to: &writer)
        writer.key("waypoints")
        writer.beginArray()
        for waypoint in waypoints { waypoint.write(to: &writer) }
        writer.endArray()
        writer.key("scheduledPickupTime")
        if let scheduledPickupTime {
            writer.beginObject()
            writer.date("startDate", scheduledPickupTime.startDate)
            writer.date("endDate", scheduledPickupTime.endDate)
            writer.endObject()
        } else {
            writer.null()
        }
        writer.key("sequence")
        writer.integer(sequence)
        writer.date("issuedAt", issuedAt)
        writer.key("stale")
        writer.bool(stale)
        writer.key("estimateSource")
        if let estimateSource { writer.string(estimateSource.rawValue) } else { writer.null() }
        writer.endObject()
    }
}

extension CompletionStatus {
    /// The one writer of a completion, for the status and the durable state.
    func write(to writer: inout JSONWriter, shape: JSONShape = .wire) {
        writer.beginObject()
        writer.key("completed")
        writer.bool(completed)
        writer.key("canceled")
        writer.bool(canceled)
        writer.key("missedPickup")
        writer.bool(missedPickup)
        writer.key("outstanding")
        writer.bool(outstanding)
        writer.nullable("canceledBy", canceledBy?.rawValue, shape: shape)
        writer.object("paymentAmount", paymentAmount, shape: shape) { $0.write(to: &$1, shape: shape) }
        writer.key("feedbackType")
        writer.beginArray()
        for type in feedbackType { writer.string(type.rawValue) }
        writer.endArray()
        writer.key("defaultTippingOptions")
        writer.beginArray()
        for option in defaultTippingOptions {
            switch shape {
            case .wire: writer.string(DecimalText.format(option, scale: 2))
            case .durable: writer.decimal(option)
            }
        }
        writer.endArray()
        writer.endObject()
    }
}

extension Money {
    public func write(to writer: inout JSONWriter) { write(to: &writer, shape: .wire) }

    package func write(to writer: inout JSONWriter, shape: JSONShape) {
        writer.beginObject()
        writer.amount("amount", amount, currency: currencyCode, shape: shape)
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.endObject()
    }
}

/// Which of a value's two JSON shapes one writer writes: the wire's (3.3, 3.4: amounts as V6's decimal strings,
/// every key of the status, null where there is no value, flat coordinates, party sizes nested as
/// `INRidePartySizeOption`), or the durable state's (L5: absent values left out, amounts as JSON numbers with their
/// exact digits, coordinates nested, party sizes flat), which every release since the first reads, so an older
/// worker taking a ride over in a rolling upgrade reads it.
package enum JSONShape: Sendable {
    case wire, durable
}

extension VehicleLocation {
    /// The one writer of a vehicle's position: flat with nulls on the wire, the coordinate nested without nulls in
    /// the durable state (L5).
    func write(to writer: inout JSONWriter, shape: JSONShape = .wire) {
        writer.beginObject()
        writer.coordinate(latitude: latitude, longitude: longitude, shape: shape)
        writer.number("course", course, shape: shape)
        writer.number("speed", speed, shape: shape)
        writer.number("horizontalAccuracy", horizontalAccuracy, shape: shape)
        writer.date("timestamp", timestamp)
        writer.endObject()
    }
}

extension Place {
    public func write(to writer: inout JSONWriter) { write(to: &writer, shape: .wire) }

    /// The one writer of a place: flat on the wire, the coordinate nested in the durable state (L5).
    package func write(to writer: inout JSONWriter, shape: JSONShape) {
        writer.beginObject()
        writer.coordinate(latitude: latitude, longitude: longitude, shape: shape)
        writer.ifPresent("name", name)
        writer.ifPresent("address", address)
        writer.endObject()
    }
}

extension Coordinate {
    /// `{"latitude": .., "longitude": ..}`.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.coordinateMembers(latitude: latitude, longitude: longitude)
        writer.endObject()
    }
}

extension JSONWriter {
    /// `"latitude": .., "longitude": ..` on the wire; `"coordinate": {..}` durably, as every release stored it.
    mutating func coordinate(latitude: Double, longitude: Double, shape: JSONShape) {
        switch shape {
        case .wire: coordinateMembers(latitude: latitude, longitude: longitude)
        case .durable:
            key("coordinate")
            beginObject()
            coordinateMembers(latitude: latitude, longitude: longitude)
            endObject()
        }
    }

    mutating func coordinateMembers(latitude: Double, longitude: Double) {
        key("latitude")
        number(latitude)
        key("longitude")
        number(longitude)
    }

    /// `"key": amount`: a decimal string in the currency's minor units on the wire, an exact JSON number durably.
    mutating func amount(_ name: StaticString, _ value: Decimal, currency: String, shape: JSONShape) {
        switch shape {
        case .wire:
            key(name)
            string(DecimalText.format(value, currency: currency))
        case .durable: decimal(name, value)
        }
    }

    /// `"key": value` on the wire and in the durable state, `"key": null` on the wire only.
    mutating func nullable(_ name: StaticString, _ value: String?, shape: JSONShape) {
        if shape == .wire { optional(name, value) } else { ifPresent(name, value) }
    }

    /// `"key": {..}` as `write` writes it; when absent, `"key": null` on the wire and nothing durably.
    mutating func object<Value>(
        _ name: StaticString, _ value: Value?, shape: JSONShape, _ write: (Value, inout JSONWriter) -> Void
    ) {
        if let value {
            key(name)
            write(value, &self)
        } else if shape == .wire {
            key(name)
            null()
        }
    }

    /// `"key": number`; when absent, `"key": null` on the wire and nothing durably.
    mutating func number(_ name: StaticString, _ value: Double?, shape: JSONShape) {
        if let value {
            key(name)
            number(value)
        } else if shape == .wire {
            key(name)
            null()
        }
    }
}

extension PriceRange {
    public func write(to writer: inout JSONWriter) { write(to: &writer, shape: .wire) }

    package func write(to writer: inout JSONWriter, shape: JSONShape) {
        writer.beginObject()
        writer.amount("minimumPrice", minimumPrice, currency: currencyCode, shape: shape)
        writer.amount("maximumPrice", maximumPrice, currency: currencyCode, shape: shape)
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.endObject()
    }
}

extension RideOption {
    public func write(to writer: inout JSONWriter) { write(to: &writer, shape: .wire) }

    /// The one writer of an option, for the status, the quote reply and the durable state.
    package func write(to writer: inout JSONWriter, shape: JSONShape) {
        writer.beginObject()
        writer.key("name")
        writer.string(name)
        writer.ifPresent("localizedName", localizedName)
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.object("priceRange", priceRange, shape: shape) { $0.write(to: &$1, shape: shape) }
        writer.nullable("disclaimerMessage", disclaimerMessage, shape: shape)
        writer.key("fareLineItems")
        writer.beginArray()
        for item in fareLineItems {
            writer.beginObject()
            writer.key("title")
            writer.string(item.title)
            writer.amount("price", item.price, currency: item.currencyCode, shape: shape)
            writer.key("currencyCode")
            writer.string(item.currencyCode)
            writer.endObject()
        }
        writer.endArray()
        if let usesMeteredFare {
            writer.key("usesMeteredFare")
            writer.bool(usesMeteredFare)
        }
        writer.ifPresent("specialPricing", specialPricing)
        if let availablePartySizeOptions {
            writer.key("availablePartySizeOptions")
            writer.beginArray()
            for option in availablePartySizeOptions { option.write(to: &writer, shape: shape) }
            writer.endArray()
        }
        writer.ifPresent("availablePartySizeOptionsSelectionPrompt", availablePartySizeOptionsSelectionPrompt)
        writer.dateIfPresent("expirationDate", expirationDate)
        writer.endObject()
    }
}

extension PartySizeOption {
    func write(to writer: inout JSONWriter, shape: JSONShape) {
        writer.beginObject()
        switch shape {
        case .wire:
            writer.key("partySizeRange")
            writer.beginObject()
            writeRange(to: &writer)
            writer.endObject()
        case .durable: writeRange(to: &writer)
        }
        writer.key("sizeDescription")
        writer.string(sizeDescription)
        writer.object("priceRange", priceRange, shape: shape) { $0.write(to: &$1, shape: shape) }
        writer.endObject()
    }

    private func writeRange(to writer: inout JSONWriter) {
        writer.key("location")
        writer.integer(partySizeRange.location)
        writer.key("length")
        writer.integer(partySizeRange.length)
    }
}

extension JSONWriter {
    /// `"key": value` or `"key": null`.
    public mutating func optional(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }

    /// `"key": value`, or nothing at all when the value is absent.
    public mutating func ifPresent(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// `"key": "2026-11-22T09:50:01.250Z"` or `"key": null`.
    public mutating func date(_ name: StaticString, _ value: Date?) {
        key(name)
        if let value { time(value) } else { null() }
    }
}
