public import Foundation
import RideJSON

// MARK: - The contract's encodings: times and money

/// Times as the contract writes them: RFC 3339 in UTC with milliseconds (`2026-11-22T09:50:01.250Z`). Reading
/// also takes any RFC 3339 time with or without fractions and with an offset, and seconds since 1970 as a
/// number, as inputs may carry them (3.1, 3.2).
public enum ContractTime {
    /// `2026-11-22T09:50:01.250Z`: the nearest whole millisecond, so that a time read from this form writes back
    /// the same (Foundation's format styles truncate the fraction of the nearest `Double`, and write `.694` for
    /// a time read from `.695`). The worker's own writer (RideJSON's `Timestamps`): one definition of the
    /// contract's times. Never traps: a time beyond years 0001-9999 is written at the nearest end, NaN as 1970.
    public static func format(_ date: Date) -> String { Timestamps.format(date) }

    /// An RFC 3339 time, with or without fractional seconds, `Z` or an offset; nil when the text is not one.
    public static func parse(_ text: String) -> Date? { Timestamps.parse(text) }
}

extension JSONDecoder {
    /// A decoder for every payload of the contract: times as RFC 3339 text or seconds since 1970.
    public static var rideStatus: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            if let seconds = try? container.decode(Double.self) { return Date(timeIntervalSince1970: seconds) }
            let text = try container.decode(String.self)
            guard let date = ContractTime.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an RFC 3339 time")
            }
            return date
        }
        return decoder
    }
}

extension JSONEncoder {
    /// An encoder writing times as the contract does (UTC, milliseconds).
    public static var rideStatus: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ContractTime.format(date))
        }
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// An amount in a currency: `{"amount": "12.50", "currencyCode": "EUR"}`, the amount a decimal string, never a
/// binary floating-point number.
public struct Money: Sendable, Hashable, Codable {
    public var amount: Decimal
    /// ISO 4217.
    public var currencyCode: String

    public init(amount: Decimal, currencyCode: String) {
        self.amount = amount
        self.currencyCode = currencyCode
    }

    enum CodingKeys: String, CodingKey { case amount, currencyCode }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        amount = try DecimalText.decode(container, .amount)
        currencyCode = try container.decode(String.self, forKey: .currencyCode)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(DecimalText.format(amount, currency: currencyCode), forKey: .amount)
        try container.encode(currencyCode, forKey: .currencyCode)
    }

    /// Whether `code` has the shape of an ISO 4217 code: three capital ASCII letters (V6).
    public static func isValidCurrencyCode(_ code: String) -> Bool {
        code.utf8.count == 3 && code.utf8.allSatisfy { (0x41...0x5A).contains($0) }
    }
}

/// Decimal amounts as the contract's strings (`"12.50"`), in the currency's minor units.
public enum DecimalText {
    /// Digits after the point for a currency (ISO 4217): 0 for JPY and the like, 3 for the dinars, else 2.
    public static func minorUnits(of currencyCode: String) -> Int {
        switch currencyCode {
        case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF",
            "XOF", "XPF":
            return 0
        case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND": return 3
        default: return 2
        }
    }

    /// `value` rounded half away from zero to `scale` digits, written with exactly that many.
    public static func format(_ value: Decimal, scale: Int) -> String {
        var input = value
        var rounded = Decimal()
        NSDecimalRound(&rounded, &input, scale, .plain)
        // A negative amount that rounds to zero may come back as a signed zero (Decimal's NaN): it is 0.
        if rounded.isNaN || rounded.isZero { rounded = 0 }
        let negative = rounded < 0
        var text = "\(negative ? -rounded : rounded)"
        if scale > 0 {
            if !text.contains(".") { text += "." }
            let decimals =
                text.count - 1 - (text.firstIndex(of: ".").map { text.distance(from: text.startIndex, to: $0) } ?? 0)
            text += String(repeating: "0", count: max(0, scale - decimals))
        }
        return (negative ? "-" : "") + text
    }

    /// `value` with exactly the minor-unit digits of `currency` (`"12.50"`, `"1200"` in JPY).
    public static func format(_ value: Decimal, currency: String) -> String {
        format(value, scale: minorUnits(of: currency))
    }

    /// A decimal from the contract's string form, exactly as the schemas' pattern `^-?[0-9]+(\.[0-9]+)?$` allows:
    /// ASCII digits, an optional leading minus, and a point only between digits (V6). The worker reads every
    /// amount of its inputs with this, so it scans bytes rather than run a regular expression.
    public static func parse(_ text: String) -> Decimal? {
        var digitsBefore = 0
        var digitsAfter = 0
        var sawPoint = false
        for (offset, byte) in text.utf8.enumerated() {
            switch byte {
            case 0x30...0x39:
                if sawPoint { digitsAfter += 1 } else { digitsBefore += 1 }
            case UInt8(ascii: "."):
                guard !sawPoint, digitsBefore > 0 else { return nil }
                sawPoint = true
            case UInt8(ascii: "-") where offset == 0: break
            default: return nil
            }
        }
        guard digitsBefore > 0, !sawPoint || digitsAfter > 0 else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    static func decode<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> Decimal {
        if let text = try? container.decode(String.self, forKey: key) {
            guard let value = parse(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "'\(text)' is not a decimal amount")
            }
            return value
        }
        return try container.decode(Decimal.self, forKey: key)
    }

    static func decodeIfPresent<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> Decimal?
    {
        guard container.contains(key), !(try container.decodeNil(forKey: key)) else { return nil }
        return try decode(container, key)
    }
}

extension KeyedEncodingContainer {
    /// `"key": value` or `"key": null`: the contract's statuses carry every key, null when there is no value.
    mutating func encodeOrNull<Value: Encodable>(_ value: Value?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
}
