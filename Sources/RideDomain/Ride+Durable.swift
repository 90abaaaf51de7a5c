import Foundation

// MARK: - Durable state (L5): written by JSONWriter, read by JSONDecoder

// This release writes shape 3: the field names and nesting that every release used (other tools read them),
// with RFC 3339 UTC times (milliseconds, as on the wire) and a `version`. It is written on every status, so
// it goes through the allocation-free JSONWriter rather than `JSONEncoder`; it is read only at recovery
// (L5) and when another client changes it (A2), where `JSONDecoder` is fast enough and reads every older
// shape: times as seconds since 2001 (shapes 1 and 2) as well as RFC 3339.

extension Ride {
    /// The shape of the durable state this release writes.
    public static let durableStateVersion = 3

    /// The durable state (L5): the retained payload of `ridestatus/state/{rideId}`.
    public func durableState() -> [UInt8] {
        var writer = JSONWriter(capacity: 2048)
        writer.beginObject()
        writer.key("version")
        writer.integer(Self.durableStateVersion)
        writer.key("bookingBox")
        booking.writeDurable(to: &writer)
        writer.key("phase")
        writer.string(phase.rawValue)
        writer.ifPresent("vehicleId", vehicleId)
        writer.key("vehicle")
        vehicle.writeDurable(to: &writer)
        if let driver {
            writer.key("driver")
            driver.writeDurable(to: &writer)
        }
        if let location {
            writer.key("location")
            location.writeDurable(to: &writer)
        }
        writer.dateIfPresent("lastFixAcceptedAt", lastFixAcceptedAt)
        writer.date("startedAt", startedAt)
        writer.key("sequence")
        writer.integer(sequence)
        writer.dateIfPresent("lastIssuedAt", lastIssuedAt)
        if let completion {
            writer.key("completion")
            completion.writeDurable(to: &writer)
        }
        writer.dateIfPresent("completedAt", completedAt)
        writer.dateIfPresent("pickupArrivedAt", pickupArrivedAt)
        writer.dateIfPresent("estimatedPickupEndDate", estimatedPickupEndDate)
        writer.dateIfPresent("ongoingSince", ongoingSince)
        writer.key("drivenMetres")
        writer.number(drivenMetres)
        if let smoothedSpeed {
            writer.key("smoothedSpeed")
            writer.number(smoothedSpeed)
        }
        writer.date("estimatedPickupDate", estimatedPickupDate)
        writer.dateIfPresent("estimatedDropOffDate", estimatedDropOffDate)
        if let last = lastValid?.value {
            writer.key("lastValid")
            last.writeDurable(to: &writer)
        }
        writer.key("legMetres")
        writer.number(legMetres)
        writer.endObject()
        return writer.bytes
    }

    /// A ride from its durable state, in any shape a release wrote (no checks: ``restored(topicRide:payload:now:configuration:)``
    /// adds A2's).
    public static func decodeDurableState(_ payload: [UInt8]) throws -> Ride {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                guard let date = Timestamps.parse(text) else {
                    throw DecodingError.dataCorruptedError(
                        in: container, debugDescription: "'\(text)' is not an RFC 3339 time")
                }
                return date
            }
            // Shapes 1 and 2: seconds since 2001-01-01, as `JSONEncoder` wrote them.
            return Date(timeIntervalSinceReferenceDate: try container.decode(Double.self))
        }
        return try decoder.decode(Ride.self, from: Data(payload))
    }
}

extension LastValidStatus {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("phase")
        writer.string(phase.rawValue)
        if let completion = completion?.value {
            writer.key("completionStatus")
            completion.writeDurable(to: &writer)
        }
        if let vehicleLocation {
            writer.key("vehicleLocation")
            vehicleLocation.writeDurable(to: &writer)
        }
        writer.key("vehicle")
        crew.value.vehicle.writeDurable(to: &writer)
        if let driver = crew.value.driver {
            writer.key("driver")
            driver.writeDurable(to: &writer)
        }
        writer.date("optionPickupDate", optionPickupDate)
        writer.dateIfPresent("estimatedPickupDate", estimatedPickupDate)
        writer.dateIfPresent("estimatedPickupEndDate", estimatedPickupEndDate)
        writer.dateIfPresent("estimatedDropOffDate", estimatedDropOffDate)
        writer.key("sequence")
        writer.integer(sequence)
        writer.date("issuedAt", issuedAt)
        writer.key("stale")
        writer.bool(stale)
        writer.endObject()
    }
}

// The nested values as their `Codable` shapes have always been: absent optionals left out, money as JSON
// numbers (exact decimal digits), coordinates nested.

extension BookingTerms {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("rideIdentifier")
        writer.string(rideIdentifier)
        writer.key("rideOption")
        rideOption.writeDurable(to: &writer)
        writer.key("pickupLocation")
        pickupLocation.writeDurable(to: &writer)
        writer.key("dropOffLocation")
        dropOffLocation.writeDurable(to: &writer)
        writer.key("waypoints")
        writer.beginArray()
        for waypoint in waypoints { waypoint.writeDurable(to: &writer) }
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
            writer.endObject()
        }
        writer.endObject()
    }
}

extension RideOption {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("name")
        writer.string(name)
        writer.ifPresent("localizedName", localizedName)
        writer.date("estimatedPickupDate", estimatedPickupDate)
        if let priceRange {
            writer.key("priceRange")
            priceRange.writeDurable(to: &writer)
        }
        writer.ifPresent("disclaimerMessage", disclaimerMessage)
        writer.key("fareLineItems")
        writer.beginArray()
        for item in fareLineItems {
            writer.beginObject()
            writer.key("title")
            writer.string(item.title)
            writer.decimal("price", item.price)
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
                writer.key("location")
                writer.integer(option.location)
                writer.key("length")
                writer.integer(option.length)
                writer.key("sizeDescription")
                writer.string(option.sizeDescription)
                if let range = option.priceRange {
                    writer.key("priceRange")
                    range.writeDurable(to: &writer)
                }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.ifPresent("availablePartySizeOptionsSelectionPrompt", availablePartySizeOptionsSelectionPrompt)
        writer.dateIfPresent("expirationDate", expirationDate)
        writer.endObject()
    }
}

extension PriceRange {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.decimal("minimumPrice", minimumPrice)
        writer.decimal("maximumPrice", maximumPrice)
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.endObject()
    }
}

extension Place {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("coordinate")
        coordinate.writeDurable(to: &writer)
        writer.ifPresent("name", name)
        writer.ifPresent("address", address)
        writer.endObject()
    }
}

extension Coordinate {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("latitude")
        writer.number(latitude)
        writer.key("longitude")
        writer.number(longitude)
        writer.endObject()
    }
}

extension VehicleLocation {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("coordinate")
        coordinate.writeDurable(to: &writer)
        writer.numberIfPresent("course", course)
        writer.numberIfPresent("speed", speed)
        writer.numberIfPresent("horizontalAccuracy", horizontalAccuracy)
        writer.date("timestamp", timestamp)
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

extension CompletionStatus {
    func writeDurable(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("completed")
        writer.bool(completed)
        writer.key("canceled")
        writer.bool(canceled)
        writer.key("missedPickup")
        writer.bool(missedPickup)
        writer.key("outstanding")
        writer.bool(outstanding)
        writer.ifPresent("canceledBy", canceledBy?.rawValue)
        if let paymentAmount {
            writer.key("paymentAmount")
            writer.beginObject()
            writer.decimal("amount", paymentAmount.amount)
            writer.key("currencyCode")
            writer.string(paymentAmount.currencyCode)
            writer.endObject()
        }
        writer.key("feedbackType")
        writer.beginArray()
        for type in feedbackType { writer.string(type) }
        writer.endArray()
        writer.key("defaultTippingOptions")
        writer.beginArray()
        for option in defaultTippingOptions { writer.decimal(option) }
        writer.endArray()
        writer.endObject()
    }
}

extension JSONWriter {
    /// `"key": "2026-11-22T09:50:01.250Z"`, or nothing at all when the time is absent.
    mutating func dateIfPresent(_ name: StaticString, _ value: Date?) {
        guard let value else { return }
        date(name, value)
    }

    /// `"key": 1.5`, or nothing at all when the value is absent.
    mutating func numberIfPresent(_ name: StaticString, _ value: Double?) {
        guard let value else { return }
        key(name)
        number(value)
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
            raw(Array(value.description.utf8))
        }
    }
}

// The durable state keeps the shape it had when every field was stored as written here, so that state
// written by older versions decodes and other tools can read it: the compact storage is this process's
// business only. Every earlier shape decodes: the first releases' whole `booking` and whole
// `lastValidStatus` (and the very first's missing `legMetres`), a whole booking in `bookingBox`, and a
// `lastValidBox` field (decoded without a snapshot).
extension Ride: Decodable {
    private struct Durable: Decodable {
        /// The shape's version: absent before 3 (dates as seconds since 2001), 3 for RFC 3339 dates.
        var version: Int?
        var bookingBox: BookingTerms?
        /// The first releases kept the whole booking under this name (read, never written).
        var booking: BookingTerms?
        var phase: RidePhase
        var vehicleId: String?
        var vehicle: VehicleDetails
        var driver: Driver?
        var location: VehicleLocation?
        var lastFixAcceptedAt: Date?
        var startedAt: Date
        var sequence: Int
        var lastIssuedAt: Date?
        var completion: CompletionStatus?
        var completedAt: Date?
        var pickupArrivedAt: Date?
        var estimatedPickupEndDate: Date?
        var ongoingSince: Date?
        var drivenMetres: Double
        var smoothedSpeed: Double?
        var estimatedPickupDate: Date
        var estimatedDropOffDate: Date?
        var lastValid: LastValidStatus.Durable?
        /// The first releases kept the whole last valid status (read, never written).
        var lastValidStatus: RideStatus?
        /// Derived from the booking; the first release did not keep it.
        var legMetres: Double?
    }

    public init(from decoder: any Decoder) throws {
        let durable = try Durable(from: decoder)
        guard let booking = durable.bookingBox ?? durable.booking else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "no booking: neither bookingBox nor booking"))
        }
        // A2: a stored value that is not a distance is derived again rather than trusted.
        let legMetres =
            durable.legMetres.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
            ?? booking.pickupLocation.coordinate.distance(to: booking.dropOffLocation.coordinate)
        self.init(
            terms: Shared(booking), phase: durable.phase,
            crew: Shared(Crew(vehicle: durable.vehicle, driver: durable.driver)), startedAt: durable.startedAt,
            sequence: durable.sequence, drivenMetres: durable.drivenMetres,
            estimatedPickupDate: durable.estimatedPickupDate, legMetres: legMetres)
        vehicleId = durable.vehicleId
        location = durable.location
        lastFixAcceptedAt = durable.lastFixAcceptedAt
        lastIssuedAt = durable.lastIssuedAt
        completionBox = durable.completion.map(Shared.init)
        completedAt = durable.completedAt
        pickupArrivedAt = durable.pickupArrivedAt
        estimatedPickupEndDate = durable.estimatedPickupEndDate
        ongoingSince = durable.ongoingSince
        smoothedSpeed = durable.smoothedSpeed
        estimatedDropOffDate = durable.estimatedDropOffDate
        lastValid = nil
        if let last = durable.lastValid ?? durable.lastValidStatus.map(LastValidStatus.Durable.init) {
            lastValid = snapshot(last)
        }
    }
}

extension LastValidStatus {
    /// The snapshot's durable shape (L5).
    struct Durable: Decodable {

        var phase: RidePhase
        var completionStatus: CompletionStatus?
        var vehicleLocation: VehicleLocation?
        var vehicle: VehicleDetails
        var driver: Driver?
        var optionPickupDate: Date
        var estimatedPickupDate: Date?
        var estimatedPickupEndDate: Date?
        var estimatedDropOffDate: Date?
        var sequence: Int
        var issuedAt: Date
        var stale: Bool
    }
}

extension LastValidStatus.Durable {
    /// What a status says beyond the booking.
    init(_ status: RideStatus) {
        self.init(
            phase: status.phase, completionStatus: status.completionStatus, vehicleLocation: status.vehicleLocation,
            vehicle: status.vehicle, driver: status.driver, optionPickupDate: status.rideOption.estimatedPickupDate,
            estimatedPickupDate: status.estimatedPickupDate, estimatedPickupEndDate: status.estimatedPickupEndDate,
            estimatedDropOffDate: status.estimatedDropOffDate, sequence: status.sequence, issuedAt: status.issuedAt,
            stale: status.stale)
    }
}
