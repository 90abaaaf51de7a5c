import PropertyBased
import Testing
import WorkerGroup

@testable import RideDomain

/// The engine's storage for rides and vehicles (C6, L2, L4: state freed on stop, memory proportional to
/// active rides) against `Dictionary` as the model.
@Suite("SlotTable: the rides' and vehicles' storage")
struct SlotTableTests {
    @Test("L2, L4: inserts, removals and lookups agree with a Dictionary through 1,000 random histories")
    func agreesWithDictionary() async {
        await propertyCheck(count: 1000, input: Gen.int(in: 1...400), Gen.int(in: 0...1_000_000)) { pool, seed in
            var random = SeededRandom(seed: UInt64(seed))
            var table = SlotTable<Int>()
            var model: [String: Int] = [:]
            var slots: [String: Int] = [:]
            for step in 0..<600 {
                let identifier = "r-\(Int.random(in: 0..<pool, using: &random))"
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where model[identifier] == nil:
                    slots[identifier] = table.insert(step, for: identifier)
                    model[identifier] = step
                case 1:
                    #expect(table.remove(identifier) == model.removeValue(forKey: identifier))
                    slots[identifier] = nil
                default:
                    if let slot = slots[identifier] {
                        table[slot: slot] += 1
                        model[identifier]! += 1
                    }
                }
                #expect(table[identifier] == model[identifier])
                #expect(table.slot(of: identifier) == slots[identifier])
            }
            #expect(table.count == model.count)
            #expect(table.dictionary == model)
            #expect(Set(table.keys) == Set(model.keys))
            for (identifier, slot) in slots { #expect(table.identifier(at: slot) == identifier) }
        }
    }

    @Test("L4: slots of removed values are reused, so the table does not grow with ended rides")
    func reusesSlots() {
        var table = SlotTable<String>()
        for round in 0..<50 {
            for index in 0..<100 { table.insert("\(round)", for: "r-\(round)-\(index)") }
            for index in 0..<100 { #expect(table.remove("r-\(round)-\(index)") == "\(round)") }
        }
        #expect(table.isEmpty)
        let slot = table.insert("last", for: "r-last")
        #expect(slot < 100, "a freed slot was reused")
    }
}
