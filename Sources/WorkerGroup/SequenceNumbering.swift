/// C5 and G6: how a ride's `sequence` carries its owner's epoch when an authority grants the buckets, so that a
/// subscriber that keeps the highest sequence (C5) drops a fenced owner's statuses with no other field, under
/// MQTT 3.1.1 too (no user properties, so no G2 `epoch` there).
///
/// `sequence = epoch × 2^20 + n`: the high bits are the grant's epoch, the low 20 bits count the statuses
/// published under it. Below 2^53 (C5's integers are exact in JSON), so an epoch is at most 2^33 − 1.
///
/// - 2^20 numbers per grant: about twelve days at one status a second, where a ride publishes every
///   `updateInterval` (default 5 s) and at its changes. When a ride's count under one grant is used up, it is
///   not numbered into the next epoch's range (a later owner would start below it): ``next(after:epoch:)``
///   answers ``Outcome/exhausted``, and the bucket needs a new grant (a rewrite of its key gives a new revision).
/// - A grant's epoch comes from etcd's revision, which grows with every write to the store, plus a base kept in
///   the store (``BucketGrants/Configuration/epochBase``). Live sequences before G6 reach about 216,000 (a ride
///   six hours old, ``Ride.clockCeiling``), below 2^20, so the first epoch's first number is above every one
///   of them.
public enum SequenceNumbering {
    /// The bits of the count under one epoch.
    public static let countBits = 20
    /// Numbers per epoch.
    public static let perEpoch = 1 << countBits
    /// The highest sequence (2^53 − 1: an exact integer in JSON).
    public static let maxSequence = (1 << 53) - 1
    /// The highest epoch a sequence can carry.
    public static let maxEpoch = UInt64(maxSequence >> countBits)

    /// What a worker serving a ride under a grant may number next.
    public enum Outcome: Sendable, Equatable {
        /// The next status's sequence.
        case next(Int)
        /// The ride's last sequence belongs to a newer epoch than the grant: another worker was granted the ride
        /// since (this one is fenced), or the store's base is behind the numbers in use. Publish nothing.
        case fenced(newer: UInt64)
        /// The grant's 2^20 numbers are used up: the bucket needs a new grant first.
        case exhausted
        /// The epoch does not fit a sequence below 2^53.
        case epochTooLarge
    }

    /// The first sequence of `epoch`.
    public static func first(of epoch: UInt64) -> Int? {
        guard epoch <= maxEpoch else { return nil }
        return Int(epoch) << countBits
    }

    /// The epoch a sequence was numbered under (0 for sequences of before G6, below 2^20).
    public static func epoch(of sequence: Int) -> UInt64 { UInt64(max(sequence, 0) >> countBits) }

    /// The sequence after `last` for a ride served under `epoch`: `last + 1` when that is already in the
    /// epoch's range, the epoch's first number when `last` is below it.
    public static func next(after last: Int, epoch: UInt64) -> Outcome {
        guard let first = first(of: epoch) else { return .epochTooLarge }
        let seen = Self.epoch(of: last)
        if seen > epoch { return .fenced(newer: seen) }
        let candidate = max(last + 1, first)
        guard Self.epoch(of: candidate) == epoch else { return .exhausted }
        return .next(candidate)
    }
}
