public import Foundation

import struct RideStatusKit.Money

/// The ride options the service offers (3.4): names with their localized forms, capacity, fare tables per
/// service area, and the areas themselves. Loaded from `config/ride-options.yaml` by the service; pure data
/// and rules here.
public struct RideOptionCatalog: Sendable, Equatable {
    public var quotes: QuoteSettings
    public var areas: [ServiceArea]
    public var options: [CatalogOption]

    public init(quotes: QuoteSettings = QuoteSettings(), areas: [ServiceArea], options: [CatalogOption]) {
        self.quotes = quotes
        self.areas = areas
        self.options = options
    }

    /// The first service area that contains `coordinate`, in catalog order.
    public func area(containing coordinate: Coordinate) -> ServiceArea? {
        areas.first { $0.contains(coordinate) }
    }

    /// Booking by name (3.4): the option whose default or localized name is `name`, ignoring case and
    /// diacritics. Names are unique across the catalog (checked by ``problems()``), so at most one matches.
    public func option(named name: String) -> CatalogOption? {
        let key = Self.nameKey(name)
        return options.first { option in option.allNames.contains { Self.nameKey($0) == key } }
    }

    static func nameKey(_ name: String) -> String {
        name.trimmingCharacters(in: .whitespaces).folding(
            options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }

    /// Every problem with the catalog, each naming its entry; empty when the catalog can be used.
    public func problems() -> [String] {
        var problems = quotes.problems()
        if areas.isEmpty { problems.append("areas: at least one service area is required") }
        if options.isEmpty { problems.append("options: at least one ride option is required") }
        var areaNames = Set<String>()
        for (index, area) in areas.enumerated() {
            let entry = "areas[\(index)] (\(area.name))"
            if isBlank(area.name) { problems.append("\(entry): name is blank") }
            if !areaNames.insert(area.name).inserted { problems.append("\(entry): name is used twice") }
            if !Money.isValidCurrencyCode(area.currencyCode) {
                problems.append("\(entry): currencyCode '\(area.currencyCode)' is not an ISO 4217 code")
            }
            problems += area.problems().map { "\(entry): \($0)" }
        }
        var names: [String: String] = [:]
        for (index, option) in options.enumerated() {
            let entry = "options[\(index)] (\(option.name))"
            for name in option.allNames {
                if isBlank(name) {
                    problems.append("\(entry): a name is blank")
                    continue
                }
                if let other = names[Self.nameKey(name)], other != option.name {
                    problems.append("\(entry): name '\(name)' is also a name of \(other) (names must be unique)")
                }
                names[Self.nameKey(name)] = option.name
            }
            problems += option.problems(knownAreas: areaNames).map { "\(entry): \($0)" }
        }
        return problems
    }
}

/// How quotes are made; every value has a default and is documented in `config/ride-options.yaml`.
public struct QuoteSettings: Sendable, Equatable {
    /// Seconds a quote stays valid (`expirationDate`).
    public var timeToLive: Double = 120
    /// Seconds to the pickup when no available vehicle of the class is known.
    public var defaultPickupWait: Double = 600
    /// m/s used for the ride time of a quote.
    public var averageSpeed: Double = 8.3
    /// The price range covers the ride time this share shorter and longer (0.25 = ±25 %).
    public var durationUncertainty: Double = 0.25
    /// Seconds an availability position counts for pickup estimates.
    public var availabilityMaxAge: Double = 300
    /// Metres the nearest-vehicle search looks around the pickup.
    public var searchRadius: Double = 20_000
    /// How many of the nearest available vehicles are considered for the pickup estimate.
    public var nearestVehicles: Int = 3
    /// The locale of the default names (a request's `locale` picks localized names).
    public var defaultLocale = "en"

    public init() {}

    func problems() -> [String] {
        var problems: [String] = []
        if !(timeToLive >= 1 && timeToLive <= 3600) { problems.append("quotes.timeToLive must be 1...3600 seconds") }
        if !(defaultPickupWait >= 0 && defaultPickupWait <= 7200) {
            problems.append("quotes.defaultPickupWait must be 0...7200 seconds")
        }
        if !(averageSpeed >= 0.5 && averageSpeed <= 70) { problems.append("quotes.averageSpeed must be 0.5...70 m/s") }
        if !(durationUncertainty >= 0 && durationUncertainty < 1) {
            problems.append("quotes.durationUncertainty must be at least 0 and below 1")
        }
        if !(availabilityMaxAge >= 1) { problems.append("quotes.availabilityMaxAge must be at least 1 second") }
        if !(searchRadius >= 100 && searchRadius <= 200_000) {
            problems.append("quotes.searchRadius must be 100...200000 metres")
        }
        if !(1...20).contains(nearestVehicles) { problems.append("quotes.nearestVehicles must be 1...20") }
        return problems
    }
}

/// One ride option of the catalog.
public struct CatalogOption: Sendable, Equatable {
    public enum Pricing: String, Sendable, Equatable {
        /// The fare is metered: the price range covers the uncertainty of the ride time.
        case metered
        /// The quoted price is the price (Apple's Compact example): minimum equals maximum.
        case fixed
    }

    /// The default (unique) name.
    public var name: String
    /// Localized names by locale identifier (`de`, `fr-CH`).
    public var localizedNames: [String: String]
    /// The class of vehicle that serves it; availability messages name it (`rideOptionName`).
    public var vehicleClass: String
    /// Passengers it can carry.
    public var capacity: Int
    public var disclaimer: String?
    public var selectionPrompt: String
    /// The disclaimer and the selection prompt by locale (3.4's `locale`).
    public var localizedDisclaimers: [String: String] = [:]
    public var localizedSelectionPrompts: [String: String] = [:]
    public var mapAnnotationImage: String
    public var pricing: Pricing
    /// The fare table for each service area (by area name) it serves, in that area's currency.
    public var fares: [String: FareTable]

    public init(
        name: String, localizedNames: [String: String] = [:], vehicleClass: String? = nil, capacity: Int,
        disclaimer: String? = nil, selectionPrompt: String = QuoteTexts.english.choosePartySize,
        mapAnnotationImage: String,
        pricing: Pricing = .metered, fares: [String: FareTable]
    ) {
        self.name = name
        self.localizedNames = localizedNames
        self.vehicleClass = vehicleClass ?? name
        self.capacity = capacity
        self.disclaimer = disclaimer
        self.selectionPrompt = selectionPrompt
        self.mapAnnotationImage = mapAnnotationImage
        self.pricing = pricing
        self.fares = fares
    }

    var allNames: [String] { [name] + localizedNames.keys.sorted().compactMap { localizedNames[$0] } }

    /// The name for `locale`: an exact match, then its language (`de` for `de-CH`), else the default name.
    public func name(for locale: String?) -> String { Localized.pick(localizedNames, for: locale) ?? name }

    /// The disclaimer for `locale`, else the default one.
    public func disclaimer(for locale: String?) -> String? {
        Localized.pick(localizedDisclaimers, for: locale) ?? disclaimer
    }

    /// The party-size selection prompt for `locale`: the catalog's for it; else, when the catalog keeps the
    /// default prompt, the built-in one of the locale's language; else the catalog's own.
    public func selectionPrompt(for locale: String?) -> String {
        if let localized = Localized.pick(localizedSelectionPrompts, for: locale) { return localized }
        guard selectionPrompt == QuoteTexts.english.choosePartySize else { return selectionPrompt }
        return QuoteTexts.texts(for: locale).choosePartySize
    }

    func problems(knownAreas: Set<String>) -> [String] {
        var problems: [String] = []
        if !(1...100).contains(capacity) { problems.append("capacity \(capacity) must be 1...100") }
        if isBlank(vehicleClass) { problems.append("vehicleClass is blank") }
        if isBlank(mapAnnotationImage) {
            problems.append("mapAnnotationImage is required (V5)")
        }
        if fares.isEmpty { problems.append("fares: at least one service area is required") }
        for area in fares.keys.sorted() {
            guard let table = fares[area] else { continue }
            if !knownAreas.contains(area) { problems.append("fares.\(area): no service area has this name") }
            problems += table.problems(capacity: capacity).map { "fares.\(area): \($0)" }
        }
        return problems
    }
}

/// A service area: a GeoJSON Polygon or MultiPolygon (outer rings with holes) and its currency.
public struct ServiceArea: Sendable, Equatable {
    public var name: String
    public var currencyCode: String
    /// Polygons; in each, the first ring is the outer boundary and the others are holes. Rings are closed.
    public var polygons: [[[Coordinate]]]

    /// E1: road over great-circle distance here; nil takes `rides.detourFactor`. Completed rides
    /// correct it (``AreaLearning``).
    public var detourFactor: Double?
    /// E1: the time zone of the area's hours of the week (``AreaLearning``); nil takes
    /// `rides.timeZone`.
    public var timeZone: TimeZone?

    public init(
        name: String, currencyCode: String, polygons: [[[Coordinate]]], detourFactor: Double? = nil,
        timeZone: TimeZone? = nil
    ) {
        self.name = name
        self.currencyCode = currencyCode
        self.polygons = polygons
        self.detourFactor = detourFactor
        self.timeZone = timeZone
    }

    /// Inside an outer ring and outside its holes (even-odd ray casting in degrees; areas do not cross ±180°).
    public func contains(_ point: Coordinate) -> Bool {
        polygons.contains { rings in
            guard let outer = rings.first, Self.ring(outer, contains: point) else { return false }
            return !rings.dropFirst().contains { Self.ring($0, contains: point) }
        }
    }

    static func ring(_ ring: [Coordinate], contains point: Coordinate) -> Bool {
        var inside = false
        var previous = ring[ring.count - 1]
        for current in ring {
            if (current.latitude > point.latitude) != (previous.latitude > point.latitude) {
                let crossing =
                    (previous.longitude - current.longitude) * (point.latitude - current.latitude)
                    / (previous.latitude - current.latitude) + current.longitude
                if point.longitude < crossing { inside.toggle() }
            }
            previous = current
        }
        return inside
    }

    func problems() -> [String] {
        var problems: [String] = []
        if polygons.isEmpty { problems.append("geometry has no polygon") }
        for (p, rings) in polygons.enumerated() {
            if rings.isEmpty { problems.append("polygon \(p) has no ring") }
            for (r, ring) in rings.enumerated() {
                if ring.count < 4 { problems.append("polygon \(p) ring \(r) needs at least 4 positions") }
                if ring.first != ring.last { problems.append("polygon \(p) ring \(r) is not closed (GeoJSON)") }
                if let bad = ring.first(where: { !$0.isValid }) {
                    problems.append("polygon \(p) ring \(r) has an invalid position \(bad.longitude),\(bad.latitude)")
                }
            }
        }
        return problems
    }
}
