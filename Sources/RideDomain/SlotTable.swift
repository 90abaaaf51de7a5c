/// Values keyed by identifier, stored in pages and reached by an integer slot: the identifier is hashed
/// once (at the edge, from a topic), and hot paths then work on slots, in place, without hashing or copying
/// the value. Slots of removed values are reused. Pages of fixed size grow the table without the slack of
/// a doubling array (up to half its memory unused, just after a doubling).
struct SlotTable<Value> {
    private static var pageBits: Int { 10 }
    private static var pageSize: Int { 1 << pageBits }
    private var slots: [String: Int] = [:]
    private var pages: [[Value?]] = []
    private var used = 0
    private var identifiers: [String] = []
    private var free: [Int] = []

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }
    var keys: Dictionary<String, Int>.Keys { slots.keys }

    func slot(of identifier: String) -> Int? { slots[identifier] }

    func contains(_ identifier: String) -> Bool { slots[identifier] != nil }

    subscript(identifier: String) -> Value? {
        slots[identifier].flatMap { self[stored: $0] }
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
        precondition(slots[identifier] == nil, "\(identifier) is already present")
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
        slots[identifier] = slot
        return slot
    }

    @discardableResult
    mutating func remove(_ identifier: String) -> Value? {
        guard let slot = slots.removeValue(forKey: identifier) else { return nil }
        let value = self[stored: slot]
        self[stored: slot] = nil
        identifiers[slot] = ""
        free.append(slot)
        return value
    }

    /// Every identifier with its value.
    var dictionary: [String: Value] { slots.mapValues { self[stored: $0]! } }
}

extension SlotTable: Sendable where Value: Sendable {}
