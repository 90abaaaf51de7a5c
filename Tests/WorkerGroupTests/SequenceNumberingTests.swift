import Testing
import WorkerGroup

/// C5, G6: the epoch in the sequence's high bits, so that keeping the highest sequence is the fence.
@Suite("SequenceNumbering: the grant's epoch inside sequence (C5, G6)")
struct SequenceNumberingTests {
    @Test("G6: a ride taken under a grant starts at its epoch's first number, above every number of before G6")
    func firstNumberAboveLegacy() {
        #expect(SequenceNumbering.first(of: 1) == 1_048_576)
        // A ride six hours old numbered 216,000 before G6 (C5's clock ceiling): the first grant is above it.
        #expect(SequenceNumbering.next(after: 216_000, epoch: 1) == .next(1_048_576))
        #expect(SequenceNumbering.next(after: 0, epoch: 42) == .next(42 << 20))
    }

    @Test("C5: under one epoch the numbers go on by one; a newer epoch always numbers above an older one")
    func growsAcrossEpochs() {
        #expect(SequenceNumbering.next(after: (7 << 20) + 5, epoch: 7) == .next((7 << 20) + 6))
        #expect(SequenceNumbering.next(after: (7 << 20) + 5, epoch: 9) == .next(9 << 20))
        for last in [0, 5, (3 << 20) + 1_000, (8 << 20) - 1] {
            for epoch: UInt64 in [3, 8, 12] {
                if case .next(let next) = SequenceNumbering.next(after: last, epoch: epoch) {
                    #expect(next > last)
                    #expect(SequenceNumbering.epoch(of: next) == epoch)
                }
            }
        }
    }

    @Test("G6: a ride last numbered under a newer epoch is fenced: the older grant numbers nothing")
    func fenced() {
        #expect(SequenceNumbering.next(after: (9 << 20) + 3, epoch: 7) == .fenced(newer: 9))
    }

    @Test("C5: the 2^20 numbers of one grant used up: no number crosses into the next epoch's range")
    func exhausted() {
        #expect(SequenceNumbering.next(after: (7 << 20) + (1 << 20) - 2, epoch: 7) == .next((8 << 20) - 1))
        #expect(SequenceNumbering.next(after: (8 << 20) - 1, epoch: 7) == .exhausted)
    }

    @Test("C5: every sequence stays below 2^53; a larger epoch is refused")
    func bounds() {
        let top = SequenceNumbering.maxEpoch
        #expect(SequenceNumbering.first(of: top)! + (1 << 20) - 1 == SequenceNumbering.maxSequence)
        #expect(SequenceNumbering.next(after: 0, epoch: top + 1) == .epochTooLarge)
        #expect(SequenceNumbering.maxSequence == 9_007_199_254_740_991)
    }
}
