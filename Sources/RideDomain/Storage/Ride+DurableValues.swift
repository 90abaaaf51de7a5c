import Foundation

import struct RideStatusKit.Driver
import struct RideStatusKit.PriceRange

// MARK: - Durable state (L5): the values inside it

// The nested values as their `Codable` shapes have always been: absent optionals left out, money as JSON
// numbers (exact decimal digits), coordinates nested.

extension BookingTerms {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("rideIdentifier")
        writer.string(rideIdentifier)
        writer.key("rideOption")
        rideOption.write(to: &writer, shape: .durable)
        writer.key("pickupLocation")
        pickupLocation.write(to: &writer, shape: .durable)
        writer.key("dropOffLocation")
        dropOffLocation.write(to: &writer, shape: .durable)
        writer.key("waypoints")
        writer.beginArray()
        for waypoint in waypoints { waypoint.write(to: &writer, shape: .durable) }
        writer.endArray()
        if let scheduledPickupTime {
            writer.key("scheduledPickupTime")
            writer.beginObject()
            writer.date("startDate", scheduledPickupTime.startDate)
            writer.date("endDate", scheduledPickupTime.endDate)
            writer.endObject()
        }
        if let partySize {
            writer.key("partySize")
            writer.integer(partySize)
        }
        if let fare {
            writer.key("fare")
            writer.beginObject()
            writer.decimal("baseCharge", fare.baseCharge)
            writer.decimal("perKilometer", fare.perKilometer)
            writer.decimal("perMinute", fare.perMinute)
            writer.key("currencyCode")
            writer.string(fare.currencyCode)
            if let catalog = fare.catalog {
                writer.key("catalog")
                catalog.writeDurable(to: &writer)
            }
            writer.endObject()
        }
        writer.endObject()
    }
}

extension FareTerms.CatalogPricing {
    /// As its `Codable` shape: `partySizes` as `Swift.ClosedRange`'s two-element array.
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.decimal("minimumFare", minimumFare)
        writer.key("surcharges")
        writer.beginArray()
        for surcharge in surcharges {
            writer.beginObject()
            writer.key("title")
            writer.string(surcharge.title)
            writer.decimal("amount", surcharge.amount)
            writer.endObject()
        }
        writer.endArray()
        writer.key("discounts")
        writer.beginArray()
        for discount in discounts {
            writer.beginObject()
            writer.key("title")
            writer.string(discount.title)
            if let percent = discount.percent { writer.decimal("percent", percent) }
            if let amount = discount.amount { writer.decimal("amount", amount) }
            writer.endObject()
        }
        writer.endArray()
        writer.key("partySizes")
        writer.beginArray()
        writer.integer(partySizes.lowerBound)
        writer.integer(partySizes.upperBound)
        writer.endArray()
        writer.decimal("partySurcharge", partySurcharge)
        if let fixedTrip {
            writer.key("fixedTrip")
            writer.beginObject()
            writer.key("metres")
            writer.number(fixedTrip.metres)
            writer.key("seconds")
            writer.number(fixedTrip.seconds)
            writer.endObject()
        }
        writer.endObject()
    }
}

extension VehicleDetails {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.ifPresent("registrationPlate", registrationPlate)
        writer.ifPresent("manufacturer", manufacturer)
        writer.ifPresent("model", model)
        writer.ifPresent("mapAnnotationImage", mapAnnotationImage)
        writer.endObject()
    }
}

extension Driver {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.ifPresent("displayName", displayName)
        writer.ifPresent("phoneNumber", phoneNumber)
        writer.ifPresent("rating", rating)
        writer.endObject()
    }
}

extension JSONWriter {
    /// `"key": "2026-11-22T09:50:01.250Z"`, or nothing at all when the time is absent.
    mutating func dateIfPresent(_ name: StaticString, _ value: Date?) {
        guard let value else { return }
        date(name, value)
    }

    /// `"key": 12.5`: an amount as a JSON number with its exact decimal digits.
    mutating func decimal(_ name: StaticString, _ value: Decimal) {
        key(name)
        decimal(value)
    }

    /// An amount as a JSON number with its exact decimal digits; `null` for NaN (which no input yields).
    mutating func decimal(_ value: Decimal) {
        if value.isNaN {
            null()
        } else {
            raw(DecimalDigits.digits(value))
        }
    }
}
