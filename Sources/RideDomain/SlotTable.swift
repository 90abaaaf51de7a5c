/// Values keyed by identifier, stored in an array and reached by an integer slot: the identifier is hashed
/// once (at the edge, from a topic), and hot paths then work on slots, in place, without hashing or copying
/// the value. Slots of removed values are reused.
struct SlotTable<Value> {
    private var slots: [String: Int] = [:]
    private var values: [Value?] = []
    private var identifiers: [String] = []
    private var free: [Int] = []

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }
    var keys: Dictionary<String, Int>.Keys { slots.keys }

    func slot(of identifier: String) -> Int? { slots[identifier] }

    func contains(_ identifier: String) -> Bool { slots[identifier] != nil }

    subscript(identifier: String) -> Value? {
        slots[identifier].flatMap { values[$0] }
    }

    /// The value in a slot that holds one; mutated in place.
    subscript(slot slot: Int) -> Value {
        get { values[slot]! }
        _modify { yield &values[slot]! }
    }

    func identifier(at slot: Int) -> String { identifiers[slot] }

    /// Adds a value for a new identifier; returns its slot.
    @discardableResult
    mutating func insert(_ value: Value, for identifier: String) -> Int {
        precondition(slots[identifier] == nil, "\(identifier) is already present")
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            values[slot] = value
            identifiers[slot] = identifier
        } else {
            slot = values.count
            values.append(value)
            identifiers.append(identifier)
        }
        slots[identifier] = slot
        return slot
    }

    @discardableResult
    mutating func remove(_ identifier: String) -> Value? {
        guard let slot = slots.removeValue(forKey: identifier) else { return nil }
        let value = values[slot]
        values[slot] = nil
        identifiers[slot] = ""
        free.append(slot)
        return value
    }

    /// Every identifier with its value.
    var dictionary: [String: Value] { slots.mapValues { values[$0]! } }
}

extension SlotTable: Sendable where Value: Sendable {}
