import Foundation
public import RideDomain
import Yams

import enum RideStatusKit.DecimalText

extension RideOptionCatalog {
    /// A catalog that cannot be used; the message names the entry (`options[1] (SUV): fares.berlin: ...`).
    public struct FileProblem: Error, CustomStringConvertible, Equatable {
        public var path: String
        public var problems: [String]
        public var description: String {
            "ride-option catalog \(path) is invalid:\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
        }
    }

    /// Reads `config/ride-options.yaml`: `quotes`, `areas` (GeoJSON geometry) and `options`. Amounts are read
    /// from the YAML text as written, never through a binary float.
    public static func load(path: String) throws -> RideOptionCatalog {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw FileProblem(path: path, problems: ["cannot be read: \(error.localizedDescription)"])
        }
        return try parse(yaml: text, path: path)
    }

    public static func parse(yaml text: String, path: String = "<catalog>") throws -> RideOptionCatalog {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text), node.mapping != nil else {
                throw FileProblem(path: path, problems: ["is not a YAML mapping"])
            }
            root = node
        } catch let problem as FileProblem {
            throw problem
        } catch {
            throw FileProblem(path: path, problems: ["is not valid YAML: \(error)"])
        }
        var reader = CatalogReader()
        let catalog = reader.catalog(root)
        let problems = reader.problems + (reader.problems.isEmpty ? catalog.problems() : [])
        guard problems.isEmpty else { throw FileProblem(path: path, problems: problems) }
        return catalog
    }
}

/// Reads the YAML tree, collecting every problem with the entry it belongs to rather than stopping at the first.
private struct CatalogReader {
    var problems: [String] = []

    mutating func catalog(_ root: Node) -> RideOptionCatalog {
        var quotes = QuoteSettings()
        if let node = root["quotes"] {
            quotes.timeToLive = number(node["timeToLive"], "quotes.timeToLive") ?? quotes.timeToLive
            quotes.defaultPickupWait =
                number(node["defaultPickupWait"], "quotes.defaultPickupWait") ?? quotes.defaultPickupWait
            quotes.averageSpeed = number(node["averageSpeed"], "quotes.averageSpeed") ?? quotes.averageSpeed
            quotes.durationUncertainty =
                number(node["durationUncertainty"], "quotes.durationUncertainty") ?? quotes.durationUncertainty
            quotes.availabilityMaxAge =
                number(node["availabilityMaxAge"], "quotes.availabilityMaxAge") ?? quotes.availabilityMaxAge
            quotes.searchRadius = number(node["searchRadius"], "quotes.searchRadius") ?? quotes.searchRadius
            quotes.nearestVehicles =
                number(node["nearestVehicles"], "quotes.nearestVehicles").map { Int($0) } ?? quotes.nearestVehicles
            quotes.defaultLocale = node["defaultLocale"]?.string ?? quotes.defaultLocale
        }
        let areas = list(root["areas"], "areas").enumerated().map { area($1, "areas[\($0)]") }
        let options = list(root["options"], "options").enumerated().map { option($1, "options[\($0)]") }
        return RideOptionCatalog(quotes: quotes, areas: areas, options: options)
    }

    mutating func area(_ node: Node, _ entry: String) -> ServiceArea {
        let name = node["name"]?.string ?? ""
        let entry = "\(entry) (\(name))"
        if name.isEmpty { problems.append("\(entry): name is required") }
        let currency = node["currencyCode"]?.string ?? ""
        if currency.isEmpty { problems.append("\(entry): currencyCode is required") }
        var polygons: [[[Coordinate]]] = []
        if let geometry = node["geometry"] {
            let coordinates = geometry["coordinates"]
            switch geometry["type"]?.string {
            case "Polygon": polygons = [rings(coordinates, "\(entry): geometry")]
            case "MultiPolygon":
                polygons = list(coordinates, "\(entry): geometry.coordinates").map {
                    rings($0, "\(entry): geometry")
                }
            default: problems.append("\(entry): geometry.type must be Polygon or MultiPolygon (GeoJSON)")
            }
        } else {
            problems.append("\(entry): geometry is required (a GeoJSON Polygon or MultiPolygon)")
        }
        let detour = node["detourFactor"].flatMap { number($0, "\(entry): detourFactor") }
        if let detour, !(1...5).contains(detour) { problems.append("\(entry): detourFactor \(detour) must be 1...5") }
        var zone: TimeZone?
        if let text = node["timeZone"]?.string {
            zone = TimeZone(identifier: text)
            if zone == nil { problems.append("\(entry): timeZone '\(text)' is not an IANA time zone (Europe/Berlin)") }
        }
        return ServiceArea(
            name: name, currencyCode: currency, polygons: polygons, detourFactor: detour, timeZone: zone)
    }

    /// GeoJSON rings: arrays of `[longitude, latitude]`.
    mutating func rings(_ node: Node?, _ entry: String) -> [[Coordinate]] {
        list(node, "\(entry).coordinates").map { ring in
            list(ring, "\(entry).coordinates[]").compactMap { position -> Coordinate? in
                let pair = position.sequence.map { Array($0) } ?? []
                guard pair.count >= 2, let lon = pair[0].string.flatMap(Double.init),
                    let lat = pair[1].string.flatMap(Double.init)
                else {
                    problems.append("\(entry): a position is not [longitude, latitude]")
                    return nil
                }
                return Coordinate(latitude: lat, longitude: lon)
            }
        }
    }

    mutating func option(_ node: Node, _ entry: String) -> CatalogOption {
        let name = node["name"]?.string ?? ""
        let entry = "\(entry) (\(name))"
        if name.isEmpty { problems.append("\(entry): name is required") }
        let localized = localizedTexts(node["localizedNames"], "\(entry): localizedNames")
        let capacity = number(node["capacity"], "\(entry): capacity").map { Int($0) }
        if capacity == nil { problems.append("\(entry): capacity is required") }
        let pricingText = node["pricing"]?.string ?? "metered"
        let pricing = CatalogOption.Pricing(rawValue: pricingText)
        if pricing == nil { problems.append("\(entry): pricing '\(pricingText)' is not metered or fixed") }
        var fares: [String: FareTable] = [:]
        if let mapping = node["fares"]?.mapping {
            for (key, value) in mapping {
                guard let area = key.string else { continue }
                fares[area] = fareTable(value, "\(entry): fares.\(area)")
            }
        } else {
            problems.append("\(entry): fares is required (a fare table per service area)")
        }
        let image = node["mapAnnotationImage"]?.string ?? ""
        var option = CatalogOption(
            name: name, localizedNames: localized, vehicleClass: node["vehicleClass"]?.string,
            capacity: capacity ?? 1, disclaimer: node["disclaimer"]?.string,
            selectionPrompt: node["selectionPrompt"]?.string ?? QuoteTexts.english.choosePartySize,
            mapAnnotationImage: image, pricing: pricing ?? .metered, fares: fares)
        option.localizedDisclaimers = localizedTexts(node["localizedDisclaimers"], "\(entry): localizedDisclaimers")
        option.localizedSelectionPrompts = localizedTexts(
            node["localizedSelectionPrompts"], "\(entry): localizedSelectionPrompts")
        return option
    }

    /// A mapping from locale (`de`, `fr-CH`) to text; an entry that is not one is a problem named by `entry`.
    mutating func localizedTexts(_ node: Node?, _ entry: String) -> [String: String] {
        guard let node else { return [:] }
        guard let mapping = node.mapping else {
            problems.append("\(entry): must map locales to texts, as {de: …, fr: …}")
            return [:]
        }
        var texts: [String: String] = [:]
        for (key, value) in mapping {
            guard let locale = key.string, !locale.isEmpty, let text = value.string, !text.isEmpty else {
                problems.append("\(entry): every locale needs a text")
                continue
            }
            texts[locale] = text
        }
        return texts
    }

    mutating func fareTable(_ node: Node, _ entry: String) -> FareTable {
        var table = FareTable(
            baseCharge: amount(node["baseCharge"], "\(entry).baseCharge") ?? 0,
            perKilometer: amount(node["perKilometer"], "\(entry).perKilometer") ?? 0,
            perMinute: amount(node["perMinute"], "\(entry).perMinute") ?? 0,
            minimumFare: node["minimumFare"] == nil ? 0 : amount(node["minimumFare"], "\(entry).minimumFare") ?? 0)
        for (index, item) in list(node["surcharges"], "\(entry).surcharges", optional: true).enumerated() {
            let titles = localizedTexts(item["localizedTitles"], "\(entry).surcharges[\(index)].localizedTitles")
            table.surcharges.append(
                .init(
                    title: item["title"]?.string ?? "",
                    amount: amount(item["amount"], "\(entry).surcharges[\(index)].amount") ?? 0,
                    localizedTitles: titles.isEmpty ? nil : titles))
        }
        for (index, item) in list(node["discounts"], "\(entry).discounts", optional: true).enumerated() {
            let percent = item["percent"].flatMap { amount($0, "\(entry).discounts[\(index)].percent") }
            let fixed = item["amount"].flatMap { amount($0, "\(entry).discounts[\(index)].amount") }
            let titles = localizedTexts(item["localizedTitles"], "\(entry).discounts[\(index)].localizedTitles")
            table.discounts.append(
                .init(
                    title: item["title"]?.string ?? "Discount", percent: percent, amount: fixed,
                    localizedTitles: titles.isEmpty ? nil : titles))
        }
        for (index, item) in list(node["partyTiers"], "\(entry).partyTiers", optional: true).enumerated() {
            guard let upTo = number(item["upTo"], "\(entry).partyTiers[\(index)].upTo") else {
                problems.append("\(entry).partyTiers[\(index)]: upTo is required")
                continue
            }
            table.partyTiers.append(
                .init(
                    upTo: Int(upTo),
                    surcharge: amount(item["surcharge"], "\(entry).partyTiers[\(index)].surcharge") ?? 0))
        }
        return table
    }

    // MARK: Scalars

    mutating func list(_ node: Node?, _ entry: String, optional: Bool = false) -> [Node] {
        guard let node else {
            if !optional { problems.append("\(entry) is required") }
            return []
        }
        guard let sequence = node.sequence else {
            problems.append("\(entry) must be a list")
            return []
        }
        return Array(sequence)
    }

    mutating func number(_ node: Node?, _ entry: String) -> Double? {
        guard let node else { return nil }
        guard let text = node.string, let value = Double(text), value.isFinite else {
            problems.append("\(entry): '\(node.string ?? "?")' is not a number")
            return nil
        }
        return value
    }

    /// A decimal amount as written in the file (`2.50`, quoted or not).
    mutating func amount(_ node: Node?, _ entry: String) -> Decimal? {
        guard let node else {
            problems.append("\(entry) is required")
            return nil
        }
        guard let text = node.string, let value = DecimalText.parse(text) else {
            problems.append("\(entry): '\(node.string ?? "?")' is not a decimal amount")
            return nil
        }
        return value
    }
}
