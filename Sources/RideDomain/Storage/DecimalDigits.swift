import Foundation
import Locking

/// The digits of an amount for the durable state, as `Decimal.description` writes them, remembered by the
/// value's bytes. `Decimal.description` took about 2,400 instructions a call and made three quarters of the
/// extra cost of a ride booked from the catalog (`make bench-instructions`, the status with `--catalog`: 37,038
/// against 33,043 instructions): its fare's amounts are written with every durable state, and they are few
/// distinct values (a catalog's). Decimal's digits are not public on Linux, so the memo is keyed by the bytes of
/// the value: equal bytes are an equal value, so a hit is always right; a value written two ways (2.5, 2.50)
/// takes two entries. Bounded: past ``limit`` distinct values it formats without remembering.
enum DecimalDigits {
    static let limit = 4096

    private struct Bytes: Hashable {
        var low: UInt64
        var middle: UInt64
        var high: UInt32
    }

    private static let memo = Locked([Bytes: [UInt8]]())

    static func digits(_ value: Decimal) -> [UInt8] {
        guard let key = bytes(of: value) else { return Array(value.description.utf8) }
        if let known = memo.withLock({ $0[key] }) { return known }
        let digits = Array(value.description.utf8)
        memo.withLock { memo in
            if memo.count < limit { memo[key] = digits }
        }
        return digits
    }

    /// The value's 20 bytes, or nil on a platform where a Decimal is not 20 bytes (then nothing is remembered).
    private static func bytes(of value: Decimal) -> Bytes? {
        guard MemoryLayout<Decimal>.size == 20 else { return nil }
        return withUnsafeBytes(of: value) { raw in
            Bytes(
                low: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                middle: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                high: raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        }
    }
}
