public import Foundation
public import RideStatusKit

/// The reply to a ride-options request (3.4), as the worker writes it.
extension RideOptionsReply {
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 512 + rideOptions.count * 1024)
        writer.beginObject()
        writer.key("code")
        writer.string(code.rawValue)
        writer.ifPresent("reason", reason)
        writer.ifPresent("detail", detail)
        writer.key("rideOptions")
        writer.beginArray()
        for option in rideOptions { option.write(to: &writer) }
        writer.endArray()
        writer.dateIfPresent("expirationDate", expirationDate)
        writer.endObject()
        return writer.bytes
    }
}

/// Answers ride-option requests (3.4) from the catalog and the live fleet. Pure: time comes in as `now`.
public struct RideOptionQuoter: Sendable {
    public let catalog: RideOptionCatalog
    public let estimator: Estimator
    public let detourFactor: Double
    public let futureTolerance: Double
    public private(set) var fleet = FleetIndex()

    public init(catalog: RideOptionCatalog, configuration: RideConfiguration = RideConfiguration()) {
        self.catalog = catalog
        estimator = Estimator(detourFactor: configuration.detourFactor, speedFloor: configuration.speedFloor)
        detourFactor = configuration.detourFactor
        futureTolerance = configuration.futureTolerance
    }

    // MARK: The live fleet

    /// Applies one availability message: available vehicles with a position enter the index, others leave it.
    /// A zero-length payload (the retained message cleared) removes the vehicle.
    public mutating func receiveAvailability(vehicleId: String, payload: [UInt8], decoder: InputDecoder, now: Date)
        throws(Rejection)
    {
        _ = try Identifier.validated(vehicleId, field: "vehicleId in topic")
        guard !payload.isEmpty else {
            fleet.remove(vehicleId: vehicleId)
            return
        }
        let availability = try decoder.availability(payload: payload, receivedAt: now)
        guard availability.available, let location = availability.location else {
            fleet.remove(vehicleId: vehicleId)
            return
        }
        guard let name = availability.rideOptionName, let option = catalog.option(named: name) else {
            fleet.remove(vehicleId: vehicleId)
            throw Rejection(
                .invalidField, "rideOptionName '\(availability.rideOptionName ?? "")' is not in the ride-option catalog"
            )
        }
        guard location.timestamp.timeIntervalSince(now) <= futureTolerance else {
            throw Rejection(.timestampInFuture, "location.timestamp is more than \(Int(futureTolerance)) s ahead (T2)")
        }
        fleet.update(
            vehicleId: vehicleId, vehicleClass: option.vehicleClass, coordinate: location.coordinate,
            speed: location.speed, at: location.timestamp)
    }

    /// Replaces the live fleet wholesale (benchmarks and tools that build an index elsewhere).
    package mutating func replaceFleet(_ index: FleetIndex) { fleet = index }

    /// Forgets positions older than the catalog's `availabilityMaxAge`; memory stays bounded by the live fleet.
    @discardableResult
    public mutating func pruneFleet(now: Date) -> Int {
        fleet.removeUpdated(before: now.addingTimeInterval(-catalog.quotes.availabilityMaxAge))
    }

    // MARK: Quotes

    /// The reply to `request` at `now`.
    public func quote(_ request: RideOptionsRequest, now: Date) -> RideOptionsReply {
        let settings = catalog.quotes
        let expiration = now.addingTimeInterval(settings.timeToLive)
        let pickup = request.pickupLocation.coordinate
        guard let area = catalog.area(containing: pickup) else {
            return RideOptionsReply(
                code: .failureNoServiceInArea, expirationDate: expiration, reason: "noServiceInArea",
                detail: "the pickup \(pickup.latitude),\(pickup.longitude) is outside every service area")
        }
        let partySize = request.partySize ?? 1
        let served = catalog.options.filter { $0.fares[area.name] != nil }
        let fitting = served.filter { $0.capacity >= partySize }
        guard !fitting.isEmpty else {
            let largest = served.map(\.capacity).max() ?? 0
            return RideOptionsReply(
                code: .failure, expirationDate: expiration, reason: "partySizeTooLarge",
                detail: "no ride option in \(area.name) carries \(partySize) passengers; the largest carries \(largest)"
            )
        }
        let (metres, seconds) = Self.trip(
            from: pickup, to: request.dropOffLocation.coordinate, detourFactor: detourFactor,
            averageSpeed: settings.averageSpeed)
        let options = fitting.map { option in
            rideOption(
                option, table: option.fares[area.name]!, currency: area.currencyCode, metres: metres, seconds: seconds,
                request: request, now: now, expiration: expiration)
        }
        return RideOptionsReply(code: .success, rideOptions: options, expirationDate: expiration)
    }

    /// The ride a quote prices (3.4): the road distance (great-circle times the detour factor) and its time at
    /// the catalog's average speed. A fixed-price booking is priced the same way (P5), so it pays its quote.
    public static func trip(
        from pickup: Coordinate, to dropOff: Coordinate, detourFactor: Double, averageSpeed: Double
    ) -> (metres: Double, seconds: Double) {
        let metres = pickup.distance(to: dropOff) * detourFactor
        return (metres, metres / averageSpeed)
    }

    /// Seconds until an available vehicle of the option's class could reach `pickup` (E1), if one is known.
    public func pickupDelay(for option: CatalogOption, at pickup: Coordinate, now: Date) -> Double? {
        let settings = catalog.quotes
        let candidates = fleet.nearest(
            option.vehicleClass, to: pickup, limit: settings.nearestVehicles, maxDistance: settings.searchRadius,
            notBefore: now.addingTimeInterval(-settings.availabilityMaxAge))
        return candidates.map { estimator.travelTime(metres: $0.distance, speed: $0.speed) }.min()
    }

    private func rideOption(
        _ option: CatalogOption, table: FareTable, currency: String, metres: Double, seconds: Double,
        request: RideOptionsRequest, now: Date, expiration: Date
    ) -> RideOption {
        let partySize = request.partySize ?? 1
        let locale = request.locale
        let texts = QuoteTexts.texts(for: locale)
        let uncertainty = option.pricing == .fixed ? 0 : catalog.quotes.durationUncertainty
        let tiers = table.tiers(capacity: option.capacity)
        let partyTier = tiers.first { $0.sizes.contains(partySize) } ?? tiers[tiers.count - 1]
        func range(_ tier: (sizes: ClosedRange<Int>, surcharge: Decimal)) -> PriceRange {
            let low = table.quote(
                metres: metres, seconds: seconds * (1 - uncertainty), party: tier, currency: currency, locale: locale)
            let high = table.quote(
                metres: metres, seconds: seconds * (1 + uncertainty), party: tier, currency: currency, locale: locale)
            return PriceRange(minimumPrice: low.total, maximumPrice: high.total, currencyCode: currency)
        }
        let estimate = table.quote(
            metres: metres, seconds: seconds, party: partyTier, currency: currency, locale: locale)
        let delay = pickupDelay(for: option, at: request.pickupLocation.coordinate, now: now)
        var result = RideOption(
            name: option.name(for: request.locale),
            estimatedPickupDate: now.addingTimeInterval(delay ?? catalog.quotes.defaultPickupWait),
            priceRange: range(partyTier), disclaimerMessage: option.disclaimer(for: locale),
            fareLineItems: estimate.lineItems,
            usesMeteredFare: option.pricing == .metered)
        if tiers.count > 1 {
            // Party size changes the price (Apple's SUV example): one entry per tier that fits the party.
            let listed = tiers.filter { $0.sizes.upperBound >= partySize }
            result.availablePartySizeOptions = listed.map { tier in
                PartySizeOption(
                    partySizeRange: .init(
                        location: tier.sizes.lowerBound, length: tier.sizes.upperBound - tier.sizes.lowerBound),
                    sizeDescription: texts.sizes(tier.sizes), priceRange: range(tier))
            }
            if request.partySize == nil, let first = listed.first, let last = listed.last {
                result.priceRange = PriceRange(
                    minimumPrice: range(first).minimumPrice, maximumPrice: range(last).maximumPrice,
                    currencyCode: currency)
            }
            if Set(listed.map(\.surcharge)).count > 1 {
                result.availablePartySizeOptionsSelectionPrompt = option.selectionPrompt(for: locale)
            }
        } else if result.disclaimerMessage == nil {
            // Capacity is fixed: say so rather than offering party sizes (Apple's Compact example).
            result.disclaimerMessage = texts.capacity(option.capacity)
        }
        result.expirationDate = expiration
        return result
    }

}

extension FareTable {
    /// A priced ride: line items rounded to the currency's minor unit, and their exact sum.
    public struct Quote: Sendable, Equatable {
        public var lineItems: [FareLineItem]
        public var total: Decimal
    }

    /// Prices a ride of `metres` (road distance) and `seconds` for a party in `party`'s tier: base, distance,
    /// time, surcharges, the party surcharge, a minimum-fare supplement, then discounts. The total is the sum
    /// of the rounded line items, so the items always add up to the quoted price.
    /// - Parameter locale: the titles' locale (3.4's `locale`): the built-in ones from ``QuoteTexts``, the
    ///   catalog's from its `localizedTitles`; English and the catalog's `title` without one.
    public func quote(
        metres: Double, seconds: Double, party: (sizes: ClosedRange<Int>, surcharge: Decimal), currency: String,
        locale: String? = nil
    ) -> Quote {
        let kilometres = Money.thousandths(max(0, metres) / 1000)
        let minutes = Money.thousandths(max(0, seconds) / 60)
        let texts = QuoteTexts.texts(for: locale)
        var items: [FareLineItem] = []
        func add(_ title: String, _ amount: Decimal) {
            items.append(
                FareLineItem(
                    title: title, price: Money(amount: amount, currencyCode: currency).rounded.amount,
                    currencyCode: currency))
        }
        add(texts.baseFare, baseCharge)
        add(texts.distance(metres: metres), perKilometer * kilometres)
        add(texts.time(seconds: seconds), perMinute * minutes)
        for surcharge in surcharges {
            add(Localized.pick(surcharge.localizedTitles ?? [:], for: locale) ?? surcharge.title, surcharge.amount)
        }
        if party.surcharge > 0 {
            add(texts.extraPassengers(party.sizes), party.surcharge)
        }
        var subtotal = items.reduce(Decimal(0)) { $0 + $1.price }
        if subtotal < minimumFare {
            add(texts.minimumFare, minimumFare - subtotal)
            subtotal = minimumFare
        }
        var remaining = subtotal
        for discount in discounts {
            let raw = discount.percent.map { subtotal * $0 / 100 } ?? discount.amount ?? 0
            let amount = min(Money(amount: raw, currencyCode: currency).rounded.amount, remaining)
            guard amount > 0 else { continue }
            add(Localized.pick(discount.localizedTitles ?? [:], for: locale) ?? discount.title, -amount)
            remaining -= amount
        }
        return Quote(lineItems: items, total: items.reduce(Decimal(0)) { $0 + $1.price })
    }

    /// The fare of a ride booked by a catalog option's name (P5): this table's terms for the party's
    /// tier, and for a fixed-price option the price the quote gave for `metres` and `seconds`.
    public func fare(
        currency: String, capacity: Int, partySize: Int, fixedFor trip: (metres: Double, seconds: Double)?
    ) -> FareTerms {
        let tiers = tiers(capacity: capacity)
        let tier = tiers.first { $0.sizes.contains(partySize) } ?? tiers[tiers.count - 1]
        return FareTerms(
            baseCharge: baseCharge, perKilometer: perKilometer, perMinute: perMinute, currencyCode: currency,
            catalog: FareTerms.CatalogPricing(
                minimumFare: minimumFare, surcharges: surcharges, discounts: discounts, partySizes: tier.sizes,
                partySurcharge: tier.surcharge, fixedTrip: trip.map { .init(metres: $0.metres, seconds: $0.seconds) }))
    }
}
