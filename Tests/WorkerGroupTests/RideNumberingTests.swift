import Testing

@testable import WorkerGroup

@Suite("RideNumbering: C5's numbers across owners, decided in one type")
struct RideNumberingTests {
    typealias Numbers = RideNumbering.Numbers

    @Test("C5, L5: a recovery continues just above everything reserved, under the next epoch")
    func recovery() {
        let start = RideNumbering.start(Numbers(epoch: 3, ceiling: 52, sequence: 40), basis: .recovery)
        #expect(start == .numbers(Numbers(epoch: 4, ceiling: 52, sequence: 40)))
        let fencedBack = RideNumbering.start(
            Numbers(epoch: 3, ceiling: 52, sequence: 40), basis: .recovery,
            reserved: SequenceFloor(epoch: 0, ceiling: 70))
        #expect(fencedBack == .numbers(Numbers(epoch: 4, ceiling: 70, sequence: 40)), "G4: above its own reservation")
    }

    @Test(
        "C5, G3: a takeover goes a block above the highest of the copy, the notice's floor, the reservation and the clock"
    )
    func takeover() {
        let numbers = Numbers(epoch: 3, ceiling: 52, sequence: 40)
        let plain = RideNumbering.start(numbers, basis: .takeover(block: 12, age: 1))
        #expect(plain == .numbers(Numbers(epoch: 4, ceiling: 64, sequence: 40)))
        let floored = RideNumbering.start(
            numbers, basis: .takeover(block: 12, age: 1), floor: SequenceFloor(epoch: 7, ceiling: 90),
            reserved: SequenceFloor(epoch: 0, ceiling: 80))
        #expect(floored == .numbers(Numbers(epoch: 8, ceiling: 102, sequence: 40)), "G2: above the floor's epoch too")
        // Two takers of one read (views split), 0.5 s apart: the later numbers above the earlier's whole block.
        let earlier = RideNumbering.start(numbers, basis: .takeover(block: 12, age: 600))
        let later = RideNumbering.start(numbers, basis: .takeover(block: 12, age: 602))
        guard case .numbers(let first) = earlier, case .numbers(let second) = later else {
            Issue.record("a takeover is never refused")
            return
        }
        #expect(first.ceiling == 6_012)
        #expect(second.ceiling - 12 > first.ceiling, "the later taker's first number is above the earlier's block")
    }

    @Test("C5: a takeover of a ride at the largest sequence stays within 2^53 - 1, and the epoch never wraps")
    func bounds() {
        let top = Numbers(epoch: .max, ceiling: RideNumbering.maxSequence, sequence: RideNumbering.maxSequence)
        #expect(
            RideNumbering.start(top, basis: .takeover(block: 12, age: .infinity))
                == .numbers(
                    Numbers(epoch: .max, ceiling: RideNumbering.maxSequence, sequence: RideNumbering.maxSequence)))
        #expect(RideNumbering.clockCeiling(age: -5) == 0)
        #expect(RideNumbering.clockCeiling(age: .nan) == 0)
        #expect(RideNumbering.clockCeiling(age: 1e300) == RideNumbering.takerCeilingLimit)
    }

    @Test("G6, C5: a grant numbers in its epoch's range, ignoring floors; a newer epoch in the ride refuses it")
    func grant() {
        let first = SequenceNumbering.first(of: 5)!
        let legacy = Numbers(epoch: 9, ceiling: 216_012, sequence: 216_000)
        #expect(
            RideNumbering.start(legacy, basis: .grant(5), floor: SequenceFloor(epoch: 99, ceiling: .max / 4))
                == .numbers(Numbers(epoch: 5, ceiling: first - 1, sequence: first - 1)))
        let granted = Numbers(epoch: 5, ceiling: first + 36, sequence: first + 30)
        #expect(
            RideNumbering.start(granted, basis: .grant(5))
                == .numbers(Numbers(epoch: 5, ceiling: first + 36, sequence: first + 36)), "above what it reserved")
        let fenced = Numbers(epoch: 6, ceiling: 0, sequence: SequenceNumbering.first(of: 6)!)
        #expect(RideNumbering.start(fenced, basis: .grant(5)) == .refused(.fenced(newer: 6)))
        #expect(
            RideNumbering.start(legacy, basis: .grant(SequenceNumbering.maxEpoch + 1)) == .refused(.epochTooLarge))
    }

    @Test("C5, A2: a same-epoch taker's ceiling lifts the ride above it; past half the numbers it is written over")
    func lifts() {
        #expect(RideNumbering.takerLift(40, to: 64) == .to(64))
        #expect(RideNumbering.takerLift(64, to: 64) == .none)
        #expect(RideNumbering.takerLift(70, to: 64) == .none)
        #expect(RideNumbering.takerLift(40, to: RideNumbering.takerCeilingLimit + 1) == .rewrite)
        #expect(RideNumbering.lift(40, to: .max) == RideNumbering.maxSequence, "a notice's floor is clamped")
        #expect(RideNumbering.lift(40, to: 40) == nil)
    }

    @Test(
        "C5, G3, G4: a fence keeps the reserved ceiling; a release notice's floor is the epoch and the highest reserved"
    )
    func floors() {
        #expect(
            RideNumbering.reservation(of: StateVersion(epoch: 4, ceiling: 64, sequence: 50))
                == SequenceFloor(epoch: 0, ceiling: 64))
        #expect(
            RideNumbering.floor(of: Numbers(epoch: 4, ceiling: 64, sequence: 70))
                == SequenceFloor(epoch: 4, ceiling: 70))
    }
}
