/// Values keyed by identifier, stored in pages and reached by an integer slot: the identifier is hashed
/// once (at the edge, from a topic), and hot paths then work on slots, in place, without hashing or copying
/// the value. Slots of removed values are reused. Pages of fixed size grow the table without the slack of
/// a doubling array (up to half its memory unused, just after a doubling).
///
/// Each identifier is stored once, in `identifiers`; the hash index holds only 4-byte slots (a
/// `[String: Int]` would keep a second copy of every identifier and take 24 bytes a bucket).
struct SlotTable<Value> {
    private static var pageBits: Int { 10 }
    private static var pageSize: Int { 1 << pageBits }
    private var index = SlotIndex()
    private var pages: [[Value?]] = []
    private var used = 0
    private var identifiers: [String] = []
    private var free: [Int] = []

    var count: Int { index.count }
    var isEmpty: Bool { index.count == 0 }
    /// The identifiers of every value, in slot order.
    var keys: [String] { slots.map { identifiers[$0] } }

    /// Every slot that holds a value, in slot order.
    var slots: [Int] { (0..<used).filter { self[stored: $0] != nil } }

    /// Up to `limit` slots holding a value, from `start` on in slot order, and where to go on (nil at the end):
    /// a long walk in pieces, with other work between them.
    func slots(from start: Int, limit: Int) -> (slots: [Int], next: Int?) {
        var found: [Int] = []
        var slot = max(0, start)
        while slot < used, found.count < limit {
            if self[stored: slot] != nil { found.append(slot) }
            slot += 1
        }
        return (found, slot < used ? slot : nil)
    }

    func slot(of identifier: String) -> Int? { index.slot(of: identifier, in: identifiers) }

    func contains(_ identifier: String) -> Bool { slot(of: identifier) != nil }

    subscript(identifier: String) -> Value? {
        slot(of: identifier).flatMap { self[stored: $0] }
    }

    /// The value in a slot that holds one; mutated in place.
    subscript(slot slot: Int) -> Value {
        get { pages[slot >> Self.pageBits][slot & (Self.pageSize - 1)]! }
        _modify { yield &pages[slot >> Self.pageBits][slot & (Self.pageSize - 1)]! }
    }

    private subscript(stored slot: Int) -> Value? {
        get { pages[slot >> Self.pageBits][slot & (Self.pageSize - 1)] }
        set { pages[slot >> Self.pageBits][slot & (Self.pageSize - 1)] = newValue }
    }

    func identifier(at slot: Int) -> String { identifiers[slot] }

    /// Adds a value for a new identifier; returns its slot.
    @discardableResult
    mutating func insert(_ value: Value, for identifier: String) -> Int {
        precondition(!contains(identifier), "\(identifier) is already present")
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            self[stored: slot] = value
            identifiers[slot] = identifier
        } else {
            slot = used
            used += 1
            if slot >> Self.pageBits == pages.count {
                var page: [Value?] = []
                page.reserveCapacity(Self.pageSize)
                pages.append(page)
            }
            pages[slot >> Self.pageBits].append(value)
            identifiers.append(identifier)
        }
        index.insert(slot, in: identifiers)
        return slot
    }

    @discardableResult
    mutating func remove(_ identifier: String) -> Value? {
        guard let slot = index.remove(identifier, in: identifiers) else { return nil }
        let value = self[stored: slot]
        self[stored: slot] = nil
        identifiers[slot] = ""
        free.append(slot)
        return value
    }

    /// Every identifier with its value.
    var dictionary: [String: Value] {
        Dictionary(uniqueKeysWithValues: keys.map { ($0, self[$0]!) })
    }
}

extension SlotTable: Sendable where Value: Sendable {}

/// A hash index from identifier to slot: open addressing with linear probing over 4-byte buckets, at most
/// half full; the identifiers themselves live in the caller's array, indexed by slot. Removal shifts the
/// following entries back (no tombstones), so lookups never slow down as rides come and go.
struct SlotIndex: Sendable {
    private static var empty: Int32 { -1 }
    private var buckets: [Int32] = Array(repeating: -1, count: 16)
    private(set) var count = 0

    private var mask: Int { buckets.count - 1 }

    private func home(of identifier: String) -> Int { identifier.hashValue & mask }

    func slot(of identifier: String, in identifiers: [String]) -> Int? {
        var bucket = home(of: identifier)
        while true {
            let slot = buckets[bucket]
            if slot == Self.empty { return nil }
            if identifiers[Int(slot)] == identifier { return Int(slot) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Indexes `slot` under `identifiers[slot]`, which must not be indexed yet.
    mutating func insert(_ slot: Int, in identifiers: [String]) {
        precondition(slot >= 0 && slot < Int(Int32.max), "slots must fit 31 bits")
        if 2 * (count + 1) > buckets.count { grow(identifiers) }
        var bucket = home(of: identifiers[slot])
        while buckets[bucket] != Self.empty { bucket = (bucket + 1) & mask }
        buckets[bucket] = Int32(slot)
        count += 1
    }

    /// Removes `identifier`; returns the slot it had.
    mutating func remove(_ identifier: String, in identifiers: [String]) -> Int? {
        var hole = home(of: identifier)
        while true {
            let slot = buckets[hole]
            if slot == Self.empty { return nil }
            if identifiers[Int(slot)] == identifier { break }
            hole = (hole + 1) & mask
        }
        let removed = Int(buckets[hole])
        buckets[hole] = Self.empty
        count -= 1
        // Backward-shift deletion: move each following entry of the cluster into the hole when the hole lies
        // between its home bucket and where it sits (cyclically), so that every entry stays reachable.
        var next = (hole + 1) & mask
        while buckets[next] != Self.empty {
            let home = home(of: identifiers[Int(buckets[next])])
            let distanceToNext = (next - home) & mask
            let distanceToHole = (hole - home) & mask
            if distanceToHole < distanceToNext {
                buckets[hole] = buckets[next]
                buckets[next] = Self.empty
                hole = next
            }
            next = (next + 1) & mask
        }
        return removed
    }

    private mutating func grow(_ identifiers: [String]) {
        let old = buckets
        buckets = Array(repeating: Self.empty, count: old.count * 2)
        for slot in old where slot != Self.empty {
            var bucket = home(of: identifiers[Int(slot)])
            while buckets[bucket] != Self.empty { bucket = (bucket + 1) & mask }
            buckets[bucket] = slot
        }
    }
}
