public import Foundation

public import struct RideStatusKit.Driver
public import struct RideStatusKit.Fare
public import struct RideStatusKit.FareLineItem
public import struct RideStatusKit.Money
public import struct RideStatusKit.Place
public import struct RideStatusKit.PriceRange
public import struct RideStatusKit.RideOption
public import enum RideStatusKit.RidePhase
public import struct RideStatusKit.ScheduledPickupTime
public import struct RideStatusKit.Vehicle
public import struct RideStatusKit.VehicleLocation

// MARK: - Shared shapes of section 1 and 3

/// `INRideVehicle` without its location.
public struct VehicleDetails: Sendable, Equatable, Codable {
    public var registrationPlate: String?
    public var manufacturer: String?
    public var model: String?
    public var mapAnnotationImage: String?
    public init(
        registrationPlate: String? = nil, manufacturer: String? = nil, model: String? = nil,
        mapAnnotationImage: String? = nil
    ) {
        self.registrationPlate = registrationPlate
        self.manufacturer = manufacturer
        self.model = model
        self.mapAnnotationImage = mapAnnotationImage
    }

    /// Whether `vehicle` is this car, wherever it is.
    func describes(_ vehicle: borrowing Vehicle) -> Bool {
        registrationPlate == vehicle.registrationPlate && manufacturer == vehicle.manufacturer
            && model == vehicle.model && mapAnnotationImage == vehicle.mapAnnotationImage
    }
}

/// The ride's fare (P5): the metered terms a booking brings (the contract's `Fare`), or a catalog option's full
/// pricing, fixed when the ride was booked.
public struct FareTerms: Sendable, Equatable, Codable {
    public var baseCharge: Decimal
    public var perKilometer: Decimal
    public var perMinute: Decimal
    public var currencyCode: String
    /// A booking by a catalog option's name: the rest of the option's pricing in the pickup's area,
    /// so the rider pays what the quote said. Nil for a fare the booking brought (P5 as before).
    public var catalog: CatalogPricing?

    public init(
        baseCharge: Decimal, perKilometer: Decimal, perMinute: Decimal, currencyCode: String,
        catalog: CatalogPricing? = nil
    ) {
        self.baseCharge = baseCharge
        self.perKilometer = perKilometer
        self.perMinute = perMinute
        self.currencyCode = currencyCode
        self.catalog = catalog
    }

    /// The metered terms a booking brings.
    public init(_ fare: Fare) {
        self.init(
            baseCharge: fare.baseCharge, perKilometer: fare.perKilometer, perMinute: fare.perMinute,
            currencyCode: fare.currencyCode)
    }

    /// What a catalog fare adds to the metered terms: the quote's minimum fare, surcharges, discounts and the
    /// party's tier, and for a fixed-price option the price itself.
    public struct CatalogPricing: Sendable, Equatable, Codable {
        public var minimumFare: Decimal
        public var surcharges: [FareTable.Surcharge]
        public var discounts: [FareTable.Discount]
        /// The party's tier: its sizes (`1-4 people`) and surcharge (0: none).
        public var partySizes: ClosedRange<Int>
        public var partySurcharge: Decimal
        /// A fixed-price option: the trip its quote priced (road metres, seconds), kept instead of the line
        /// items (16 bytes a ride, not 200: `make bench-scale` holds 100,000); the rider pays the quote of this
        /// trip whatever is driven.
        public var fixedTrip: Trip?

        public struct Trip: Sendable, Equatable, Codable {
            public var metres: Double
            public var seconds: Double
        }
    }

    /// A fixed price's line items (the quote of the booked trip), nil for a metered fare.
    public var fixedLineItems: [FareLineItem]? {
        guard let catalog, let trip = catalog.fixedTrip else { return nil }
        return table.quote(
            metres: trip.metres, seconds: trip.seconds, party: (catalog.partySizes, catalog.partySurcharge),
            currency: currencyCode
        ).lineItems
    }

    /// P5: the price of the ride driven, and its line items when the fare is a catalog one (their sum is the
    /// price, exactly). A fare the booking brought: base + per km of driven distance + per minute of ride
    /// time, rounded to the currency's minor unit, without line items.
    package func price(drivenMetres: Double, rideSeconds: Double) -> (money: Money, lineItems: [FareLineItem]?) {
        guard let catalog else {
            let kilometres = Money.thousandths(max(0, drivenMetres) / 1000)
            let minutes = Money.thousandths(max(0, rideSeconds) / 60)
            let amount = baseCharge + perKilometer * kilometres + perMinute * minutes
            return (Money(amount: amount, currencyCode: currencyCode).rounded, nil)
        }
        let trip = catalog.fixedTrip ?? CatalogPricing.Trip(metres: drivenMetres, seconds: rideSeconds)
        let quote = table.quote(
            metres: trip.metres, seconds: trip.seconds, party: (catalog.partySizes, catalog.partySurcharge),
            currency: currencyCode)
        return (Money(amount: quote.total, currencyCode: currencyCode), quote.lineItems)
    }

    /// The fare table these terms came from.
    var table: FareTable {
        FareTable(
            baseCharge: baseCharge, perKilometer: perKilometer, perMinute: perMinute,
            minimumFare: catalog?.minimumFare ?? 0, surcharges: catalog?.surcharges ?? [],
            discounts: catalog?.discounts ?? [])
    }
}
