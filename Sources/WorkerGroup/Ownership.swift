/// Which live worker owns which ride (G1): rendezvous (highest-random-weight) hashing of a fixed number of
/// buckets over the live members.
///
/// A ride belongs to one bucket for ever (a stable hash of its id); a bucket belongs to the member whose
/// weight for it is highest. A join or a leave therefore moves only the buckets the joining or leaving member
/// wins or held, about 1/N of them, and never moves a bucket between two members that both stay. Every worker
/// computes the same table from the same member list, with no coordination.
///
/// Buckets rather than rides: the durable state is kept per bucket (`ridestatus/state/{bucket}/{ride}`), so a
/// new owner subscribes to the buckets it gains and reads only their rides' states (G3), not the fleet's.
/// 8,192 buckets: with 10 members a member's share of buckets then deviates from the mean by about 3.3 % (one
/// standard deviation), so ±15 % is four and a half deviations away; with 1,024 buckets it was one and a half. A
/// member's share of rides strays more (3.95 % with 20,000 rides), since rides fall into buckets by chance too.
public struct Ownership: Sendable, Equatable {
    /// The number of buckets: part of the state topics' layout, so it never changes.
    public static let bucketCount = 8192

    /// The live members, sorted (the table depends on the set, not on the order they were seen in).
    public let members: [String]
    /// The owner of each bucket, as an index into `members`; empty with no members.
    private let owners: [UInt16]

    public init(members: some Sequence<String>) {
        let sorted = Array(Set(members)).sorted()
        precondition(sorted.count <= Int(UInt16.max), "more members than a bucket table can name")
        self.members = sorted
        let hashes = sorted.map { Self.stableHash($0.utf8) }
        guard !sorted.isEmpty else {
            owners = []
            return
        }
        owners = (0..<Self.bucketCount).map { bucket in
            var best = 0
            var bestWeight: UInt64 = 0
            for (index, hash) in hashes.enumerated() {
                let weight = Self.weight(memberHash: hash, bucket: bucket)
                // Ties (astronomically rare) go to the smaller id, the same on every worker.
                if index == 0 || weight > bestWeight {
                    best = index
                    bestWeight = weight
                }
            }
            return UInt16(best)
        }
    }

    /// The bucket of a ride: the same on every worker, in every release.
    public static func bucket(of ride: String) -> Int {
        Int(mix(stableHash(ride.utf8)) % UInt64(bucketCount))
    }

    /// The bucket as it appears in a topic level: four lower-case hex digits (`0000` to `1fff`).
    public static func bucketName(_ bucket: Int) -> String {
        let hex = String(bucket, radix: 16)
        return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// A topic level back to its bucket, or nil when it is not one.
    public static func bucket(named name: Substring) -> Int? {
        guard name.utf8.count == 4, let value = Int(name, radix: 16), value < bucketCount,
            bucketName(value) == name
        else { return nil }
        return value
    }

    /// The owner of a bucket; nil when there is no live member.
    public func owner(ofBucket bucket: Int) -> String? {
        owners.isEmpty ? nil : members[Int(owners[bucket])]
    }

    /// The owner of a ride; nil when there is no live member.
    public func owner(ofRide ride: String) -> String? { owner(ofBucket: Self.bucket(of: ride)) }

    /// The buckets `member` owns, ascending.
    public func buckets(of member: String) -> [Int] {
        guard let index = members.firstIndex(of: member) else { return [] }
        let wanted = UInt16(index)
        return owners.indices.filter { owners[$0] == wanted }
    }

    // MARK: - Hashing (stable across processes and releases: Swift's Hasher is seeded per process)

    /// FNV-1a, 64 bits.
    static func stableHash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// SplitMix64's first output for `value`: every input bit moves every output bit. It decides bucket owners
    /// across versions of the worker, so it never changes (`OwnershipTests` pins its values).
    static func mix(_ value: UInt64) -> UInt64 { SeededRandom.mix(value) }

    static func weight(memberHash: UInt64, bucket: Int) -> UInt64 {
        mix(memberHash ^ mix(UInt64(bucket)))
    }
}
