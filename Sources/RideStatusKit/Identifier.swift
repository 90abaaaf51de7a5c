/// I1: identifiers (`rideIdentifier`, `vehicleId`, worker and key ids) are 1 to 64 of `A-Z a-z 0-9 . _ : -`, the
/// first alphanumeric. The one statement of the rule: the worker, ride-push, the share links and (by a test) the
/// broker's account scripts check names with it.
public enum Identifier {
    /// Whether `text` is an identifier. Inlinable: the worker checks every fix's vehicle id.
    @inlinable
    public static func isValid(_ text: some StringProtocol) -> Bool {
        // A native string's bytes in place, not its iterator.
        if let valid = text.utf8.withContiguousStorageIfAvailable(isValid(bytes:)) { return valid }
        return isValid(bytes: Array(text.utf8))
    }

    /// Whether `bytes`, as UTF-8, are an identifier.
    @inlinable
    public static func isValid(bytes: some Collection<UInt8>) -> Bool {
        guard (1...64).contains(bytes.count), let first = bytes.first, isAlphanumeric(first) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x3A || $0 == 0x2D }
    }

    @inlinable
    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }
}
