public import Foundation

// MARK: - The ride status (3.3), as `rides/{rideIdentifier}/status` carries it

/// The phase of a ride (P1-P8): `INRidePhase` without `unknown`, which the contract never sends. Ordered as a ride
/// moves through it, never backwards.
public enum RidePhase: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case received, confirmed, approachingPickup, pickup, ongoing, completed

    @usableFromInline
    var order: Int {
        switch self {
        case .received: return 0
        case .confirmed: return 1
        case .approachingPickup: return 2
        case .pickup: return 3
        case .ongoing: return 4
        case .completed: return 5
        }
    }

    @inlinable
    public static func < (lhs: RidePhase, rhs: RidePhase) -> Bool { lhs.order < rhs.order }
}

/// E2: the source of a status's ETAs.
public enum EstimateSource: String, Sendable, Hashable, Codable, CaseIterable {
    /// The remaining road distance along the ride's route (from `assign` or `rides/{ride}/route`).
    case route
    /// The remaining distance and duration the driver's navigation app put in its fixes.
    case navigation
    /// E1: the great-circle distance times the detour factor, at the smoothed speed.
    case estimate
}

/// One ride status: retained on `rides/{rideIdentifier}/status`, at least every `updateInterval` seconds
/// (C1) and at once on a change of phase or completion (C2). Decoding accepts exactly what
/// `docs/schema/ride-status.schema.json` allows; encoding writes every key, null where there is no value.
public struct RideStatus: Sendable, Hashable, Codable {
    // The stored properties are declared in another order than the public initializer's parameters, so the
    // compiler's memberwise initializer has labels of its own and the public one (in the extension below) can build
    // the status through it. A written initializer sets each field of a `self` held in memory and then copies it
    // out, and a status is too large for the optimizer to remove that copy: building the worker's status through
    // one cost 14 % more instructions per status (callgrind, `make bench-instructions`;
    // `docs/research/struct-init-copies.md`). Keep the two orders different: if they match, the public
    // initializer calls itself and the build fails on that warning.
    public var rideIdentifier: String
    /// Grows by one with every status of the ride (C5): a subscriber drops anything not newer than what it has.
    public var sequence: Int
    public var issuedAt: Date
    public var phase: RidePhase
    /// Set exactly when `phase` is `completed` (V3).
    public var completionStatus: CompletionStatus?
    public var vehicle: Vehicle
    public var driver: Driver?
    public var rideOption: RideOption
    public var estimatedPickupDate: Date?
    public var estimatedPickupEndDate: Date?
    public var estimatedDropOffDate: Date?
    /// The 90th percentile of the arrival at the pickup (before `pickup`) and at the drop-off (before
    /// `completed`), from how late the worker's cars came (beyond `INRideStatus`); never before the
    /// estimate. Nil from a worker that gives no range.
    public var estimatedPickupDateLatest: Date?
    public var estimatedDropOffDateLatest: Date?
    public var pickupLocation: Place
    public var dropOffLocation: Place
    public var waypoints: [Place]
    public var scheduledPickupTime: ScheduledPickupTime?
    /// No accepted fix for `staleAfter` seconds (C3).
    public var stale: Bool
    /// E2: what made the ETAs: the ride's route, the driver's navigation app, or E1's estimate. Nil from a worker
    /// older than E2.
    public var estimateSource: EstimateSource?

    enum CodingKeys: String, CodingKey {
        case rideIdentifier, phase, completionStatus, vehicle, driver, rideOption, estimatedPickupDate
        case estimatedPickupEndDate, estimatedDropOffDate, estimatedPickupDateLatest, estimatedDropOffDateLatest
        case pickupLocation, dropOffLocation, waypoints
        case scheduledPickupTime, sequence, issuedAt, stale, estimateSource
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(rideIdentifier, forKey: .rideIdentifier)
        try container.encode(phase, forKey: .phase)
        try container.encodeOrNull(completionStatus, forKey: .completionStatus)
        try container.encode(vehicle, forKey: .vehicle)
        try container.encodeOrNull(driver, forKey: .driver)
        try container.encode(rideOption, forKey: .rideOption)
        try container.encodeOrNull(estimatedPickupDate, forKey: .estimatedPickupDate)
        try container.encodeOrNull(estimatedPickupEndDate, forKey: .estimatedPickupEndDate)
        try container.encodeOrNull(estimatedDropOffDate, forKey: .estimatedDropOffDate)
        try container.encodeOrNull(estimatedPickupDateLatest, forKey: .estimatedPickupDateLatest)
        try container.encodeOrNull(estimatedDropOffDateLatest, forKey: .estimatedDropOffDateLatest)
        try container.encode(pickupLocation, forKey: .pickupLocation)
        try container.encode(dropOffLocation, forKey: .dropOffLocation)
        try container.encode(waypoints, forKey: .waypoints)
        try container.encodeOrNull(scheduledPickupTime, forKey: .scheduledPickupTime)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(issuedAt, forKey: .issuedAt)
        try container.encode(stale, forKey: .stale)
        try container.encodeOrNull(estimateSource, forKey: .estimateSource)
    }

    /// Whether this status replaces `other` for a subscriber (C5): same ride, higher sequence.
    public func supersedes(_ other: RideStatus) -> Bool {
        rideIdentifier == other.rideIdentifier && sequence > other.sequence
    }
}

extension RideStatus {
    public init(
        rideIdentifier: String, phase: RidePhase, completionStatus: CompletionStatus? = nil, vehicle: Vehicle,
        driver: Driver? = nil, rideOption: RideOption, estimatedPickupDate: Date? = nil,
        estimatedPickupEndDate: Date? = nil, estimatedDropOffDate: Date? = nil, estimatedPickupDateLatest: Date? = nil,
        estimatedDropOffDateLatest: Date? = nil, pickupLocation: Place,
        dropOffLocation: Place, waypoints: [Place] = [], scheduledPickupTime: ScheduledPickupTime? = nil,
        sequence: Int, issuedAt: Date, stale: Bool = false, estimateSource: EstimateSource? = nil
    ) {
        self.init(
            rideIdentifier: rideIdentifier, sequence: sequence, issuedAt: issuedAt, phase: phase,
            completionStatus: completionStatus, vehicle: vehicle, driver: driver, rideOption: rideOption,
            estimatedPickupDate: estimatedPickupDate, estimatedPickupEndDate: estimatedPickupEndDate,
            estimatedDropOffDate: estimatedDropOffDate, estimatedPickupDateLatest: estimatedPickupDateLatest,
            estimatedDropOffDateLatest: estimatedDropOffDateLatest, pickupLocation: pickupLocation,
            dropOffLocation: dropOffLocation, waypoints: waypoints, scheduledPickupTime: scheduledPickupTime,
            stale: stale, estimateSource: estimateSource)
    }
}

/// `INRideCompletionStatus`: how a completed ride ended (P5-P7).
public struct CompletionStatus: Sendable, Hashable, Codable {
    public var completed: Bool
    public var canceled: Bool
    public var missedPickup: Bool
    /// Payment still due (`completed(outstanding:)`).
    public var outstanding: Bool
    public var canceledBy: CanceledBy?
    public var paymentAmount: Money?
    public var feedbackType: [FeedbackType]
    public var defaultTippingOptions: [Decimal]

    public enum CanceledBy: String, Sendable, Hashable, Codable { case user, service }
    public enum FeedbackType: String, Sendable, Hashable, Codable, CaseIterable { case rate, tip }

    public init(
        completed: Bool, canceled: Bool = false, missedPickup: Bool = false, outstanding: Bool = false,
        canceledBy: CanceledBy? = nil, paymentAmount: Money? = nil, feedbackType: [FeedbackType] = [],
        defaultTippingOptions: [Decimal] = []
    ) {
        self.completed = completed
        self.canceled = canceled
        self.missedPickup = missedPickup
        self.outstanding = outstanding
        self.canceledBy = canceledBy
        self.paymentAmount = paymentAmount
        self.feedbackType = feedbackType
        self.defaultTippingOptions = defaultTippingOptions
    }

    enum CodingKeys: String, CodingKey {
        case completed, canceled, missedPickup, outstanding, canceledBy, paymentAmount, feedbackType
        case defaultTippingOptions
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        completed = try container.decode(Bool.self, forKey: .completed)
        canceled = try container.decode(Bool.self, forKey: .canceled)
        missedPickup = try container.decode(Bool.self, forKey: .missedPickup)
        outstanding = try container.decode(Bool.self, forKey: .outstanding)
        canceledBy = try container.decodeIfPresent(CanceledBy.self, forKey: .canceledBy)
        paymentAmount = try container.decodeIfPresent(Money.self, forKey: .paymentAmount)
        feedbackType = try container.decode([FeedbackType].self, forKey: .feedbackType)
        defaultTippingOptions = try container.decode([Tip].self, forKey: .defaultTippingOptions).map(\.value)
    }

    /// A tipping option: a decimal string (`"2.00"`), or a JSON number as money is accepted elsewhere.
    private struct Tip: Decodable {
        var value: Decimal

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            guard let text = try? container.decode(String.self) else {
                value = try container.decode(Decimal.self)
                return
            }
            guard let value = DecimalText.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not a decimal")
            }
            self.value = value
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(completed, forKey: .completed)
        try container.encode(canceled, forKey: .canceled)
        try container.encode(missedPickup, forKey: .missedPickup)
        try container.encode(outstanding, forKey: .outstanding)
        try container.encodeOrNull(canceledBy, forKey: .canceledBy)
        try container.encodeOrNull(paymentAmount, forKey: .paymentAmount)
        try container.encode(feedbackType, forKey: .feedbackType)
        try container.encode(
            defaultTippingOptions.map { DecimalText.format($0, scale: 2) }, forKey: .defaultTippingOptions)
    }
}

/// `INRideVehicle`: where the car is (its course turns the map annotation), and what it looks like.
public struct Vehicle: Sendable, Hashable, Codable {
    public var location: VehicleLocation?
    public var registrationPlate: String?
    public var manufacturer: String?
    public var model: String?
    /// A URL of the image Maps shows for the car, turned to its course.
    public var mapAnnotationImage: String?

    public init(
        location: VehicleLocation? = nil, registrationPlate: String? = nil, manufacturer: String? = nil,
        model: String? = nil, mapAnnotationImage: String? = nil
    ) {
        self.location = location
        self.registrationPlate = registrationPlate
        self.manufacturer = manufacturer
        self.model = model
        self.mapAnnotationImage = mapAnnotationImage
    }

    enum CodingKeys: String, CodingKey { case location, registrationPlate, manufacturer, model, mapAnnotationImage }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeOrNull(location, forKey: .location)
        try container.encodeOrNull(registrationPlate, forKey: .registrationPlate)
        try container.encodeOrNull(manufacturer, forKey: .manufacturer)
        try container.encodeOrNull(model, forKey: .model)
        try container.encodeOrNull(mapAnnotationImage, forKey: .mapAnnotationImage)
    }
}

/// A `CLLocation` as the status carries it.
public struct VehicleLocation: Sendable, Hashable, Codable {
    public var latitude: Double
    public var longitude: Double
    /// Degrees clockwise from true north, 0 ..< 360.
    public var course: Double?
    /// Metres per second.
    public var speed: Double?
    /// Metres.
    public var horizontalAccuracy: Double?
    public var timestamp: Date

    public init(
        latitude: Double, longitude: Double, course: Double? = nil, speed: Double? = nil,
        horizontalAccuracy: Double? = nil, timestamp: Date
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.course = course
        self.speed = speed
        self.horizontalAccuracy = horizontalAccuracy
        self.timestamp = timestamp
    }

    enum CodingKeys: String, CodingKey { case latitude, longitude, course, speed, horizontalAccuracy, timestamp }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(latitude, forKey: .latitude)
        try container.encode(longitude, forKey: .longitude)
        try container.encodeOrNull(course, forKey: .course)
        try container.encodeOrNull(speed, forKey: .speed)
        try container.encodeOrNull(horizontalAccuracy, forKey: .horizontalAccuracy)
        try container.encode(timestamp, forKey: .timestamp)
    }
}

/// `INRideDriver`.
public struct Driver: Sendable, Hashable, Codable {
    public var displayName: String?
    public var phoneNumber: String?
    /// A rating as the app shows it ("4.9").
    public var rating: String?

    public init(displayName: String? = nil, phoneNumber: String? = nil, rating: String? = nil) {
        self.displayName = displayName
        self.phoneNumber = phoneNumber
        self.rating = rating
    }

    enum CodingKeys: String, CodingKey { case displayName, phoneNumber, rating }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeOrNull(displayName, forKey: .displayName)
        try container.encodeOrNull(phoneNumber, forKey: .phoneNumber)
        try container.encodeOrNull(rating, forKey: .rating)
    }
}

/// A place: a coordinate with an optional name and address (`CLPlacemark` in SiriKit).
public struct Place: Sendable, Hashable, Codable {
    public var latitude: Double
    public var longitude: Double
    public var name: String?
    public var address: String?

    public init(latitude: Double, longitude: Double, name: String? = nil, address: String? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.name = name
        self.address = address
    }
}

/// A window for a scheduled pickup.
public struct ScheduledPickupTime: Sendable, Hashable, Codable {
    public var startDate: Date
    public var endDate: Date

    public init(startDate: Date, endDate: Date) {
        self.startDate = startDate
        self.endDate = endDate
    }
}

// MARK: - Ride options (3.4) and fares

/// `INRideOption`: a kind of ride (in a status, the one booked; in a quote, one offered).
public struct RideOption: Sendable, Hashable, Codable {
    /// For an option of the worker's catalog, the catalog's canonical name (V4).
    public var name: String
    /// The booking's own spelling of a catalog option's name, when it differs (project addition).
    public var localizedName: String?
    public var estimatedPickupDate: Date
    public var priceRange: PriceRange?
    public var disclaimerMessage: String?
    public var fareLineItems: [FareLineItem]
    public var usesMeteredFare: Bool?
    public var specialPricing: String?
    public var availablePartySizeOptions: [PartySizeOption]?
    public var availablePartySizeOptionsSelectionPrompt: String?
    public var expirationDate: Date?

    public init(
        name: String, localizedName: String? = nil, estimatedPickupDate: Date, priceRange: PriceRange? = nil,
        disclaimerMessage: String? = nil, fareLineItems: [FareLineItem] = [], usesMeteredFare: Bool? = nil,
        specialPricing: String? = nil, availablePartySizeOptions: [PartySizeOption]? = nil,
        availablePartySizeOptionsSelectionPrompt: String? = nil, expirationDate: Date? = nil
    ) {
        self.name = name
        self.localizedName = localizedName
        self.estimatedPickupDate = estimatedPickupDate
        self.priceRange = priceRange
        self.disclaimerMessage = disclaimerMessage
        self.fareLineItems = fareLineItems
        self.usesMeteredFare = usesMeteredFare
        self.specialPricing = specialPricing
        self.availablePartySizeOptions = availablePartySizeOptions
        self.availablePartySizeOptionsSelectionPrompt = availablePartySizeOptionsSelectionPrompt
        self.expirationDate = expirationDate
    }

    enum CodingKeys: String, CodingKey {
        case name, localizedName, estimatedPickupDate, priceRange, disclaimerMessage, fareLineItems
        case usesMeteredFare, specialPricing, availablePartySizeOptions, availablePartySizeOptionsSelectionPrompt
        case expirationDate
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        localizedName = try container.decodeIfPresent(String.self, forKey: .localizedName)
        estimatedPickupDate = try container.decode(Date.self, forKey: .estimatedPickupDate)
        priceRange = try container.decodeIfPresent(PriceRange.self, forKey: .priceRange)
        disclaimerMessage = try container.decodeIfPresent(String.self, forKey: .disclaimerMessage)
        fareLineItems = try container.decodeIfPresent([FareLineItem].self, forKey: .fareLineItems) ?? []
        usesMeteredFare = try container.decodeIfPresent(Bool.self, forKey: .usesMeteredFare)
        specialPricing = try container.decodeIfPresent(String.self, forKey: .specialPricing)
        availablePartySizeOptions = try container.decodeIfPresent(
            [PartySizeOption].self, forKey: .availablePartySizeOptions)
        availablePartySizeOptionsSelectionPrompt = try container.decodeIfPresent(
            String.self, forKey: .availablePartySizeOptionsSelectionPrompt)
        expirationDate = try container.decodeIfPresent(Date.self, forKey: .expirationDate)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encodeIfPresent(localizedName, forKey: .localizedName)
        try container.encode(estimatedPickupDate, forKey: .estimatedPickupDate)
        try container.encodeOrNull(priceRange, forKey: .priceRange)
        try container.encodeOrNull(disclaimerMessage, forKey: .disclaimerMessage)
        try container.encode(fareLineItems, forKey: .fareLineItems)
        try container.encodeIfPresent(usesMeteredFare, forKey: .usesMeteredFare)
        try container.encodeIfPresent(specialPricing, forKey: .specialPricing)
        try container.encodeIfPresent(availablePartySizeOptions, forKey: .availablePartySizeOptions)
        try container.encodeIfPresent(
            availablePartySizeOptionsSelectionPrompt, forKey: .availablePartySizeOptionsSelectionPrompt)
        try container.encodeIfPresent(expirationDate, forKey: .expirationDate)
    }
}

/// `INPriceRange`.
public struct PriceRange: Sendable, Hashable, Codable {
    public var minimumPrice: Decimal
    public var maximumPrice: Decimal
    public var currencyCode: String

    public init(minimumPrice: Decimal, maximumPrice: Decimal, currencyCode: String) {
        self.minimumPrice = minimumPrice
        self.maximumPrice = maximumPrice
        self.currencyCode = currencyCode
    }

    enum CodingKeys: String, CodingKey { case minimumPrice, maximumPrice, currencyCode }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        minimumPrice = try DecimalText.decode(container, .minimumPrice)
        maximumPrice = try DecimalText.decode(container, .maximumPrice)
        currencyCode = try container.decode(String.self, forKey: .currencyCode)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(DecimalText.format(minimumPrice, currency: currencyCode), forKey: .minimumPrice)
        try container.encode(DecimalText.format(maximumPrice, currency: currencyCode), forKey: .maximumPrice)
        try container.encode(currencyCode, forKey: .currencyCode)
    }
}

/// `INRideFareLineItem`.
public struct FareLineItem: Sendable, Hashable, Codable {
    public var title: String
    public var price: Decimal
    public var currencyCode: String

    public init(title: String, price: Decimal, currencyCode: String) {
        self.title = title
        self.price = price
        self.currencyCode = currencyCode
    }

    enum CodingKeys: String, CodingKey { case title, price, currencyCode }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        title = try container.decode(String.self, forKey: .title)
        price = try DecimalText.decode(container, .price)
        currencyCode = try container.decode(String.self, forKey: .currencyCode)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(title, forKey: .title)
        try container.encode(DecimalText.format(price, currency: currencyCode), forKey: .price)
        try container.encode(currencyCode, forKey: .currencyCode)
    }
}

/// `INRidePartySizeOption`: `location` 1 and `length` 0 is one person; 1 and 2 is one to three.
public struct PartySizeOption: Sendable, Hashable, Codable {
    public struct Range: Sendable, Hashable, Codable {
        public var location: Int
        public var length: Int
        @inlinable
        public init(location: Int, length: Int) {
            self.location = location
            self.length = length
        }
    }

    public var partySizeRange: Range
    public var sizeDescription: String
    public var priceRange: PriceRange?

    public init(partySizeRange: Range, sizeDescription: String, priceRange: PriceRange? = nil) {
        self.partySizeRange = partySizeRange
        self.sizeDescription = sizeDescription
        self.priceRange = priceRange
    }
}
