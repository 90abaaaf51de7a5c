/// SplitMix64 (Steele, Lea and Flood 2014): a small, fast generator that gives the same sequence on every
/// platform, so a seed always gives the same simulated fleet, benchmark data, property-test case or ride-push
/// jitter. The one generator of the project, in its lowest module, so that the domain and ride-push reach it
/// (`SeededRandomTests` checks it against the reference implementation's first outputs).
public struct SeededRandom: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= Self.gamma
        return Self.finalized(state)
    }

    /// The golden-ratio increment.
    static let gamma: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// The output function: every input bit moves every output bit.
    static func finalized(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The first output of a generator seeded with `value`: a hash of one 64-bit value.
    public static func mix(_ value: UInt64) -> UInt64 { finalized(value &+ gamma) }
}
