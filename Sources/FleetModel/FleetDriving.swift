import RideDomain
public import WorkerGroup

/// How fleet-sim's vehicles drive and report: the old grid city (``StreetTrip``, a fix every tick with
/// `speed`), or the classes of real driving (``DrivingClass``) with the recorded trips' sampling.
public enum FleetDriving: String, CaseIterable, Sendable {
    /// Grid legs on slow and fast streets, red lights; a fix every tick, always with `speed`.
    case grid
    /// Each vehicle drives one class, in the shares of the 22 recorded city trips: 5 arterial, 9 urban, 8
    /// mixed; a fix every 1 to 5 s (the vehicle's own, each jittered), half the vehicles without `speed`.
    case classes
    /// Every vehicle one class, sampled as ``classes``.
    case arterial, urban, mixed

    /// One vehicle's way of driving and reporting.
    public struct Profile: Sendable, Equatable {
        /// Its class; nil drives the grid.
        public var kind: DrivingClass?
        /// Seconds between its fixes; nil sends one every tick.
        public var fixEvery: Double?
        /// Whether its fixes carry `speed` (the recorded trips' had none).
        public var reportsSpeed: Bool

        public init(kind: DrivingClass?, fixEvery: Double?, reportsSpeed: Bool) {
            self.kind = kind
            self.fixEvery = fixEvery
            self.reportsSpeed = reportsSpeed
        }
    }

    /// A vehicle's profile, drawn from `random` (no draw for the grid, so a grid fleet is what it was).
    public func profile(random: inout SeededRandom) -> Profile {
        let kind: DrivingClass
        switch self {
        case .grid: return Profile(kind: nil, fixEvery: nil, reportsSpeed: true)
        case .arterial: kind = .arterial
        case .urban: kind = .urban
        case .mixed: kind = .mixed
        case .classes:
            let draw = Int.random(in: 0..<22, using: &random)
            kind = draw < 5 ? .arterial : draw < 14 ? .urban : .mixed
        }
        return Profile(
            kind: kind, fixEvery: Double(Int.random(in: 1...5, using: &random)),
            reportsSpeed: Bool.random(using: &random))
    }

    /// The seconds to the next fix of a vehicle that sends one every `every` seconds: jittered by up to 30 %, at
    /// least a second; the ETA bench replays its trips' fixes by it too.
    public static func nextFix(every: Double, random: inout SeededRandom) -> Double {
        max(1, (every * Double.random(in: 0.7...1.3, using: &random)).rounded())
    }

    /// The longest ``nextFix(every:random:)`` can draw.
    public static func longestGap(every: Double) -> Double { max(1, (every * 1.3).rounded()) }
}
