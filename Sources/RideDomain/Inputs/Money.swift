public import Foundation

public import enum RideStatusKit.DecimalText
public import struct RideStatusKit.Money

// The contract's `Money` is RideStatusKit's (amounts `Decimal`, never binary floating point: V6), and its decimal
// text is the kit's `DecimalText`. The worker adds what its fares compute with.
extension Money {
    /// Rounded half away from zero to the currency's minor unit.
    public var rounded: Money {
        var value = amount
        var result = Decimal()
        NSDecimalRound(&result, &value, DecimalText.minorUnits(of: currencyCode), .plain)
        return Money(amount: result, currencyCode: currencyCode)
    }

    /// The amount as a decimal string with exactly the currency's minor-unit digits (`"12.50"`).
    package var amountString: String { DecimalText.format(amount, currency: currencyCode) }

    /// `value` rounded to thousandths as an exact decimal, without going through text (the quantities fares
    /// multiply: kilometres, minutes).
    public static func thousandths(_ value: Double) -> Decimal {
        guard value.isFinite else { return 0 }
        let scaled = (value * 1000).rounded()
        guard abs(scaled) < 9e15 else { return Decimal(value) }
        return Decimal(sign: scaled < 0 ? .minus : .plus, exponent: -3, significand: Decimal(Int64(abs(scaled))))
    }
}
