public import Foundation

/// An amount of money in a currency. Amounts are `Decimal`, never binary floating point (V6).
public struct Money: Sendable, Equatable, Codable {
    public var amount: Decimal
    public var currencyCode: String

    public init(amount: Decimal, currencyCode: String) {
        self.amount = amount
        self.currencyCode = currencyCode
    }

    /// ISO 4217 minor units for the currencies that do not use two.
    public static func minorUnits(of currencyCode: String) -> Int {
        switch currencyCode {
        case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF",
            "XOF", "XPF":
            return 0
        case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND": return 3
        default: return 2
        }
    }

    public static func isValidCurrencyCode(_ code: String) -> Bool {
        code.utf8.count == 3 && code.utf8.allSatisfy { (0x41...0x5A).contains($0) }
    }

    /// Rounded half-up to the currency's minor unit.
    public var rounded: Money {
        var value = amount
        var result = Decimal()
        NSDecimalRound(&result, &value, Self.minorUnits(of: currencyCode), .plain)
        return Money(amount: result, currencyCode: currencyCode)
    }

    /// The amount as a decimal string with exactly the currency's minor-unit digits (`"12.50"`).
    package var amountString: String { Self.format(amount, scale: Self.minorUnits(of: currencyCode)) }

    public static func format(_ amount: Decimal, scale: Int) -> String {
        var value = amount
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, scale, .plain)
        let negative = rounded < 0
        var magnitude = negative ? -rounded : rounded
        var shifted = Decimal()
        _ = NSDecimalMultiplyByPowerOf10(&shifted, &magnitude, Int16(scale), .plain)
        var digits = NSDecimalNumber(decimal: shifted).stringValue
        if digits.contains(".") { digits = String(digits.prefix(while: { $0 != "." })) }
        if scale > 0 {
            if digits.count <= scale { digits = String(repeating: "0", count: scale - digits.count + 1) + digits }
            digits.insert(".", at: digits.index(digits.endIndex, offsetBy: -scale))
        }
        return (negative ? "-" : "") + digits
    }

    /// `value` rounded to thousandths as an exact decimal, without going through text (the quantities fares
    /// multiply: kilometres, minutes).
    public static func thousandths(_ value: Double) -> Decimal {
        guard value.isFinite else { return 0 }
        let scaled = (value * 1000).rounded()
        guard abs(scaled) < 9e15 else { return Decimal(value) }
        return Decimal(sign: scaled < 0 ? .minus : .plus, exponent: -3, significand: Decimal(Int64(abs(scaled))))
    }

    /// Parses a decimal string strictly: digits, an optional sign and one point (V6: never a JSON number).
    public static func parseAmount(_ text: String) -> Decimal? {
        var sawDigit = false
        var sawPoint = false
        for (offset, byte) in text.utf8.enumerated() {
            switch byte {
            case 0x30...0x39: sawDigit = true
            case UInt8(ascii: "."):
                if sawPoint { return nil }
                sawPoint = true
            case UInt8(ascii: "-") where offset == 0: break
            default: return nil
            }
        }
        guard sawDigit else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }
}
