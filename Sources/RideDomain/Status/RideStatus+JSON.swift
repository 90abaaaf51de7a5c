public import Foundation

public import enum RideStatusKit.DecimalText
public import struct RideStatusKit.Money
public import struct RideStatusKit.PriceRange
public import enum RideStatusKit.RidePhase

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
        if let vehicleLocation { vehicleLocation.write(to: &writer) } else { writer.null() }
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
        writer.endObject()
    }
}

extension CompletionStatus {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("completed")
        writer.bool(completed)
        writer.key("canceled")
        writer.bool(canceled)
        writer.key("missedPickup")
        writer.bool(missedPickup)
        writer.key("outstanding")
        writer.bool(outstanding)
        writer.key("canceledBy")
        if let canceledBy { writer.string(canceledBy.rawValue) } else { writer.null() }
        writer.key("paymentAmount")
        if let paymentAmount { paymentAmount.write(to: &writer) } else { writer.null() }
        writer.key("feedbackType")
        writer.beginArray()
        for type in feedbackType { writer.string(type) }
        writer.endArray()
        writer.key("defaultTippingOptions")
        writer.beginArray()
        for option in defaultTippingOptions { writer.string(DecimalText.format(option, scale: 2)) }
        writer.endArray()
        writer.endObject()
    }
}

extension Money {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("amount")
        writer.string(amountString)
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.endObject()
    }
}

extension VehicleLocation {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("latitude")
        writer.number(coordinate.latitude)
        writer.key("longitude")
        writer.number(coordinate.longitude)
        writer.key("course")
        if let course { writer.number(course) } else { writer.null() }
        writer.key("speed")
        if let speed { writer.number(speed) } else { writer.null() }
        writer.key("horizontalAccuracy")
        if let horizontalAccuracy { writer.number(horizontalAccuracy) } else { writer.null() }
        writer.date("timestamp", timestamp)
        writer.endObject()
    }
}

extension Place {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("latitude")
        writer.number(coordinate.latitude)
        writer.key("longitude")
        writer.number(coordinate.longitude)
        writer.ifPresent("name", name)
        writer.ifPresent("address", address)
        writer.endObject()
    }
}

extension PriceRange {
    public func write(to writer: inout JSONWriter) {
        let scale = DecimalText.minorUnits(of: currencyCode)
        writer.beginObject()
        writer.key("minimumPrice")
        writer.string(DecimalText.format(minimumPrice, scale: scale))
        writer.key("maximumPrice")
        writer.string(DecimalText.format(maximumPrice, scale: scale))
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.endObject()
    }
}

extension RideOption {
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("name")
        writer.string(name)
        writer.ifPresent("localizedName", localizedName)
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.key("priceRange")
        if let priceRange { priceRange.write(to: &writer) } else { writer.null() }
        writer.optional("disclaimerMessage", disclaimerMessage)
        writer.key("fareLineItems")
        writer.beginArray()
        for item in fareLineItems {
            writer.beginObject()
            writer.key("title")
            writer.string(item.title)
            writer.key("price")
            writer.string(DecimalText.format(item.price, scale: DecimalText.minorUnits(of: item.currencyCode)))
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
            for option in availablePartySizeOptions {
                writer.beginObject()
                writer.key("partySizeRange")
                writer.beginObject()
                writer.key("location")
                writer.integer(option.location)
                writer.key("length")
                writer.integer(option.length)
                writer.endObject()
                writer.key("sizeDescription")
                writer.string(option.sizeDescription)
                writer.key("priceRange")
                if let range = option.priceRange { range.write(to: &writer) } else { writer.null() }
                writer.endObject()
            }
            writer.endArray()
        }
        if let prompt = availablePartySizeOptionsSelectionPrompt {
            writer.key("availablePartySizeOptionsSelectionPrompt")
            writer.string(prompt)
        }
        if let expirationDate {
            writer.date("expirationDate", expirationDate)
        }
        writer.endObject()
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
