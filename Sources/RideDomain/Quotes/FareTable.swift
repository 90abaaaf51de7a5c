public import Foundation

/// A fare table in one area's currency. Amounts are `Decimal` (V6).
public struct FareTable: Sendable, Equatable {
    public var baseCharge: Decimal
    public var perKilometer: Decimal
    public var perMinute: Decimal
    public var minimumFare: Decimal
    public var surcharges: [Surcharge]
    public var discounts: [Discount]
    /// Extra-passenger tiers in increasing party size; empty when party size does not change the price.
    public var partyTiers: [PartyTier]

    public init(
        baseCharge: Decimal, perKilometer: Decimal, perMinute: Decimal, minimumFare: Decimal = 0,
        surcharges: [Surcharge] = [], discounts: [Discount] = [], partyTiers: [PartyTier] = []
    ) {
        self.baseCharge = baseCharge
        self.perKilometer = perKilometer
        self.perMinute = perMinute
        self.minimumFare = minimumFare
        self.surcharges = surcharges
        self.discounts = discounts
        self.partyTiers = partyTiers
    }

    public struct Surcharge: Sendable, Equatable, Codable {
        public var title: String
        public var amount: Decimal
        /// The title by locale (quotes only: a ride's final breakdown uses `title`).
        public var localizedTitles: [String: String]?
        public init(title: String, amount: Decimal, localizedTitles: [String: String]? = nil) {
            self.title = title
            self.amount = amount
            self.localizedTitles = localizedTitles
        }
    }

    /// A discount: a share of the fare in percent, or a fixed amount.
    public struct Discount: Sendable, Equatable, Codable {
        public var title: String
        public var percent: Decimal?
        public var amount: Decimal?
        /// The title by locale (quotes only).
        public var localizedTitles: [String: String]?
        public init(
            title: String, percent: Decimal? = nil, amount: Decimal? = nil, localizedTitles: [String: String]? = nil
        ) {
            self.title = title
            self.percent = percent
            self.amount = amount
            self.localizedTitles = localizedTitles
        }
    }

    /// Parties up to `upTo` people (from the previous tier's `upTo` + 1) pay `surcharge` on top.
    public struct PartyTier: Sendable, Equatable {
        public var upTo: Int
        public var surcharge: Decimal
        public init(upTo: Int, surcharge: Decimal) {
            self.upTo = upTo
            self.surcharge = surcharge
        }
    }

    /// The tiers with their first party size; one tier of the whole capacity when none are configured.
    public func tiers(capacity: Int) -> [(sizes: ClosedRange<Int>, surcharge: Decimal)] {
        guard !partyTiers.isEmpty else { return [(1...capacity, 0)] }
        var lower = 1
        return partyTiers.map { tier in
            defer { lower = tier.upTo + 1 }
            return (lower...max(lower, tier.upTo), tier.surcharge)
        }
    }

    func problems(capacity: Int) -> [String] {
        var problems: [String] = []
        for (name, value) in [
            ("baseCharge", baseCharge), ("perKilometer", perKilometer), ("perMinute", perMinute),
            ("minimumFare", minimumFare),
        ] where value < 0 {
            problems.append("\(name) must not be negative")
        }
        for surcharge in surcharges where surcharge.amount < 0 || surcharge.title.isEmpty {
            problems.append("surcharge '\(surcharge.title)' needs a title and a non-negative amount")
        }
        for discount in discounts {
            switch (discount.percent, discount.amount) {
            case (let percent?, nil) where percent >= 0 && percent <= 100: break
            case (nil, let amount?) where amount >= 0: break
            default:
                problems.append(
                    "discount '\(discount.title)' needs either a percent of 0...100 or a non-negative amount")
            }
        }
        var previous: PartyTier?
        for tier in partyTiers {
            if let previous, tier.upTo <= previous.upTo {
                problems.append("partyTiers: upTo must increase (\(tier.upTo) after \(previous.upTo))")
            }
            if let previous, tier.surcharge < previous.surcharge {
                problems.append("partyTiers: prices must not decrease with party size (tier up to \(tier.upTo))")
            }
            if tier.surcharge < 0 { problems.append("partyTiers: surcharge must not be negative") }
            previous = tier
        }
        if let last = partyTiers.last, last.upTo != capacity {
            problems.append("partyTiers: the last tier must end at the capacity \(capacity), not \(last.upTo)")
        }
        return problems
    }
}
