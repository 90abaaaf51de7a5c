import Foundation

/// The quote's own words (3.4): line-item titles, party sizes and capacity disclaimers, in the
/// catalog's locales, with English as the fallback. What the catalog itself says (surcharge and discount
/// titles, disclaimers, selection prompts) is localized in the catalog (`localizedTitles`,
/// `localizedDisclaimers`, `localizedSelectionPrompts`). Templates name their values in braces.
public struct QuoteTexts: Sendable, Equatable {
    public var baseFare: String
    /// `{km}`: kilometres with one decimal in the locale's separator.
    public var distance: String
    /// `{min}`: whole minutes.
    public var time: String
    /// `{sizes}`: a party size description.
    public var extraPassengers: String
    public var minimumFare: String
    public var onePerson: String
    /// `{n}`.
    public var people: String
    /// `{from}`, `{to}`.
    public var peopleRange: String
    public var onlyOnePassenger: String
    /// `{n}`.
    public var upToPassengers: String
    /// The party-size selection prompt when the catalog gives none for the locale.
    public var choosePartySize: String
    public var decimalSeparator: String

    public static let english = QuoteTexts(
        baseFare: "Base fare", distance: "Distance ({km} km)", time: "Time ({min} min)",
        extraPassengers: "Extra passengers ({sizes})", minimumFare: "Minimum fare", onePerson: "1 person",
        people: "{n} people", peopleRange: "{from}-{to} people",
        onlyOnePassenger: "Vehicle can carry only 1 passenger.",
        upToPassengers: "Vehicle can carry up to {n} passengers.", choosePartySize: "Choose a party size",
        decimalSeparator: ".")

    public static let german = QuoteTexts(
        baseFare: "Grundpreis", distance: "Strecke ({km} km)", time: "Zeit ({min} Min.)",
        extraPassengers: "Weitere Fahrgäste ({sizes})", minimumFare: "Mindestpreis", onePerson: "1 Person",
        people: "{n} Personen", peopleRange: "{from}–{to} Personen",
        onlyOnePassenger: "Das Fahrzeug befördert nur 1 Fahrgast.",
        upToPassengers: "Das Fahrzeug befördert bis zu {n} Fahrgäste.", choosePartySize: "Personenzahl wählen",
        decimalSeparator: ",")

    public static let french = QuoteTexts(
        baseFare: "Prise en charge", distance: "Distance ({km} km)", time: "Durée ({min} min)",
        extraPassengers: "Passagers supplémentaires ({sizes})", minimumFare: "Tarif minimum", onePerson: "1 personne",
        people: "{n} personnes", peopleRange: "{from} à {to} personnes",
        onlyOnePassenger: "Le véhicule ne transporte qu’un passager.",
        upToPassengers: "Le véhicule transporte jusqu’à {n} passagers.",
        choosePartySize: "Choisissez le nombre de personnes", decimalSeparator: ",")

    /// The built-in texts by language.
    public static let builtIn: [String: QuoteTexts] = ["en": english, "de": german, "fr": french]

    /// The texts for `locale` (`de`, `de-CH`, `fr_FR`): its language's, else English.
    public static func texts(for locale: String?) -> QuoteTexts {
        Localized.pick(builtIn, for: locale) ?? english
    }

    func distance(metres: Double) -> String {
        let tenths = Int((max(0, metres) / 100).rounded())
        return distance.replacingOccurrences(of: "{km}", with: "\(tenths / 10)\(decimalSeparator)\(tenths % 10)")
    }

    func time(seconds: Double) -> String {
        time.replacingOccurrences(of: "{min}", with: "\(Int((max(0, seconds) / 60).rounded(.up)))")
    }

    func sizes(_ sizes: ClosedRange<Int>) -> String {
        if sizes.count == 1 {
            return sizes.lowerBound == 1
                ? onePerson : people.replacingOccurrences(of: "{n}", with: "\(sizes.lowerBound)")
        }
        return peopleRange.replacingOccurrences(of: "{from}", with: "\(sizes.lowerBound)")
            .replacingOccurrences(of: "{to}", with: "\(sizes.upperBound)")
    }

    func extraPassengers(_ sizes: ClosedRange<Int>) -> String {
        extraPassengers.replacingOccurrences(of: "{sizes}", with: self.sizes(sizes))
    }

    func capacity(_ capacity: Int) -> String {
        capacity == 1 ? onlyOnePassenger : upToPassengers.replacingOccurrences(of: "{n}", with: "\(capacity)")
    }
}

/// Picking a localized value: the locale exactly (`fr-CH`, with `_` read as `-`), then its language (`fr`).
public enum Localized {
    public static func pick<Value>(_ values: [String: Value], for locale: String?) -> Value? {
        guard let locale, !locale.isEmpty, !values.isEmpty else { return nil }
        let normalized = locale.replacingOccurrences(of: "_", with: "-")
        if let exact = values[normalized] { return exact }
        return values[String(normalized.prefix { $0 != "-" })]
    }
}
