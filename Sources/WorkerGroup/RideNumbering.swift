/// C5: every decision on the numbers a ride carries across its owners, in one pure type. A ride's statuses
/// carry a `sequence` that only grows; its durable state carries the owner's `epoch` (G2) and the `ceiling` up
/// to which the owner reserved numbers before publishing them. The handover machine (``Handover``) decides
/// *when* a ride starts, is lifted or is fenced; this type decides *which numbers* follow, and the service and
/// the ride only apply them.
///
/// - **Start** (``start(_:basis:floor:reserved:)``): a worker serving a ride it recovered, took over or was
///   granted. Broker-only (G5): the epoch grows by one above every epoch seen, and the ride continues above
///   every number seen, published or reserved: its own copy, the previous owner's release notice
///   (``SequenceFloor``), what this worker had reserved before it was fenced off, and, outside a recovery, the
///   ride's age times ``takeoverNumbersPerSecond``, so that two takers of one read (views split on a clustered
///   broker) number apart. With an authority (G6) the epoch is the grant's and the numbers its range
///   (``SequenceNumbering``): nothing else is consulted.
/// - **Lift** (``lift(_:to:)``, ``takerLift(_:to:)``): a ride held here under its epoch that another worker
///   reserved higher (views split) numbers above that worker's ceiling. A ceiling past half the numbers is no
///   taker's (``takerCeilingLimit``): a forged copy would leave the ride no number to go on with.
/// - **Fence** (``reservation(of:)``): what a worker had reserved for a ride taken from it, kept to be numbered
///   above if the ride comes back.
public enum RideNumbering {
    /// A ride's numbers: its owner's epoch, the ceiling reserved up to, and its last sequence.
    public typealias Numbers = StateVersion

    /// The largest sequence: 2^53 − 1, the largest integer every JSON reader keeps exactly.
    public static let maxSequence = SequenceNumbering.maxSequence
    /// No taker reserves past it (the clock ceiling stops there): a copy that does is forged or broken.
    public static let takerCeilingLimit = maxSequence / 2
    /// How many numbers a ride's owners may use per second of its life at most, so that a taker later by a
    /// tenth of a second numbers above one earlier. A ride publishes every `rides.updateInterval` and at its
    /// changes: far fewer.
    public static let takeoverNumbersPerSecond = 10.0

    /// Why a worker starts serving a ride.
    public enum Basis: Sendable, Equatable {
        /// A worker alone in its first view (L5): just above the ceiling; the retained status read with the state
        /// brings the last sequence the broker kept. (A worker that starts alone after its peers died takes their
        /// rides this way: a status of theirs that a clustered broker still holds can then arrive with a number it
        /// reuses. On one broker it cannot: the broker delivered it before the worker's recovery read.)
        case recovery
        /// A takeover in broker-only mode (G3): a `block` above, and at least the ride's `age` (seconds) times
        /// ``takeoverNumbersPerSecond``.
        case takeover(block: Int, age: Double)
        /// G6: the bucket's grant under this epoch.
        case grant(UInt64)
    }

    /// What the ride is numbered with next, or why it is not served.
    public enum Start: Sendable, Equatable {
        case numbers(Numbers)
        /// G6: the grant cannot number the ride (``SequenceNumbering/Outcome``): publish nothing.
        case refused(SequenceNumbering.Outcome)
    }

    /// C5, G3, G6: the numbers a ride starts with when served here.
    /// - Parameters:
    ///   - floor: the previous owner's release notice's floor for the ride's bucket (broker-only).
    ///   - reserved: what this worker had reserved for the ride before it was fenced off here (broker-only).
    public static func start(
        _ numbers: Numbers, basis: Basis, floor: SequenceFloor? = nil, reserved: SequenceFloor? = nil
    ) -> Start {
        switch basis {
        case .grant(let epoch):
            // The next status adds one; its state write reserves the block above first (C5, L5).
            let outcome = SequenceNumbering.next(after: highest(numbers), epoch: epoch)
            guard case .next(let next) = outcome else { return .refused(outcome) }
            return .numbers(Numbers(epoch: epoch, ceiling: next - 1, sequence: next - 1))
        case .recovery:
            return .numbers(takeOver(numbers, block: 0, floor: merge(floor, reserved)))
        case .takeover(let block, let age):
            let clock = SequenceFloor(epoch: 0, ceiling: clockCeiling(age: age))
            return .numbers(takeOver(numbers, block: block, floor: merge(merge(floor, reserved), clock)))
        }
    }

    /// G2, G3 in broker-only mode: the epoch grows by one above the ride's and the floor's (64 bits: it never
    /// wraps), so that the old owner, seeing a state under a higher epoch, stops publishing the ride (G4); and the
    /// ceiling rises by one `block` above everything reserved (C5). The state read may lag the old owner's last
    /// write by one (a clustered broker delivered its statuses while its retained copy was older,
    /// `GroupNATSClusterTests`): one write reserves at most one block, so skipping a block keeps the numbering
    /// strictly increasing; the floor bounds a read that lags further.
    public static func takeOver(_ numbers: Numbers, block: Int, floor: SequenceFloor?) -> Numbers {
        var taken = numbers
        if let floor { taken.epoch = max(taken.epoch, floor.epoch) }
        if taken.epoch < .max { taken.epoch += 1 }
        let reserved = min(max(highest(numbers), floor?.ceiling ?? 0), maxSequence)
        taken.ceiling = reserved + min(max(block, 0), maxSequence - reserved)
        return taken
    }

    /// C5 across owners whose views split: the lowest ceiling a taker of a ride `age` seconds old reserves from.
    /// Counted from the ride's start on each taker's clock, a later taker starts above an earlier one by 10
    /// numbers a second between them, more than the earlier issues at the cadence (what it does not cover:
    /// docs/CONTRACT-NOTES.md, "C5 across a NATS node's loss"). Up to 216,000 numbers for a ride six hours old.
    public static func clockCeiling(age: Double) -> Int {
        guard age.isFinite, age > 0 else { return 0 }
        return Int(min(age * takeoverNumbersPerSecond, Double(takerCeilingLimit)))
    }

    /// C5: the sequence a ride numbered at `sequence` is lifted to so that its next status goes above `ceiling`,
    /// another worker's reservation under the same epoch; nil when it already numbers at or above it.
    public static func lift(_ sequence: Int, to ceiling: Int) -> Int? {
        ceiling > sequence ? min(ceiling, maxSequence) : nil
    }

    /// What a ride held here does with a copy of its state under its own epoch that another taker reserved up to
    /// `ceiling`.
    public enum TakerLift: Sendable, Equatable {
        /// Its next status numbers above this sequence.
        case to(Int)
        /// It numbers above already.
        case none
        /// A2: the ceiling is past any taker's (``takerCeilingLimit``): the copy is written over instead.
        case rewrite
    }

    /// C5, A2: the lift of a ride numbered at `sequence` past a same-epoch taker's `ceiling`.
    public static func takerLift(_ sequence: Int, to ceiling: Int) -> TakerLift {
        guard ceiling <= takerCeilingLimit else { return .rewrite }
        return lift(sequence, to: ceiling).map(TakerLift.to) ?? TakerLift.none
    }

    /// G4, C5: what a worker had reserved for a ride taken from it under a newer epoch: if the ride comes back,
    /// it continues above this (the taker's copy is above it as a rule, but not after a lift).
    public static func reservation(of held: some HandoverVersion) -> SequenceFloor {
        SequenceFloor(epoch: 0, ceiling: held.ceiling)
    }

    /// C5, G3: the floor a ride's numbers set for its bucket in a release notice.
    public static func floor(of numbers: Numbers) -> SequenceFloor {
        SequenceFloor(epoch: numbers.epoch, ceiling: highest(numbers))
    }

    /// The highest number a ride published or reserved.
    static func highest(_ numbers: Numbers) -> Int { max(numbers.sequence, numbers.ceiling) }

    private static func merge(_ first: SequenceFloor?, _ second: SequenceFloor?) -> SequenceFloor? {
        guard let first else { return second }
        return second.map(first.merged) ?? first
    }
}

/// C5, G2, G3: a lower bound for the rides of one bucket that a worker stopped serving, carried in its release
/// notice: the highest epoch and the highest reserved sequence among them. A new owner continues above it
/// whatever state it reads: a clustered broker's retained copy can lag many writes behind the last one (a NATS
/// node whose retained-message cache stopped following its stream after another node's loss served a state 14 s
/// old, `GroupNATSClusterTests`), while a notice travels live. Epochs and sequences only grow, so a floor never
/// becomes wrong; at worst it skips numbers, which C5 allows.
public struct SequenceFloor: Sendable, Hashable, CustomStringConvertible {
    public var epoch: UInt64
    public var ceiling: Int

    public init(epoch: UInt64, ceiling: Int) {
        self.epoch = epoch
        self.ceiling = ceiling
    }

    /// The bound under both: each part the higher of the two.
    public func merged(with other: SequenceFloor) -> SequenceFloor {
        SequenceFloor(epoch: max(epoch, other.epoch), ceiling: max(ceiling, other.ceiling))
    }

    public var description: String { "\(epoch)/\(ceiling)" }
}
