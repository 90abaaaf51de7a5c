import Testing

@testable import WorkerGroup

@Suite("RecentControls: control messages kept for a handover (G3)")
struct RecentControlsTests {
    @Test("G3: a bucket's messages come back in order, once; other buckets' stay")
    func takeInOrder() {
        var recent = RecentControls<String>(window: 30, capacity: 100)
        recent.append("a1", bucket: 1, now: 0)
        recent.append("b1", bucket: 2, now: 1)
        recent.append("a2", bucket: 1, now: 2)
        recent.append("c1", bucket: 3, now: 3)
        #expect(recent.take(buckets: [1, 3], now: 4) == ["a1", "a2", "c1"])
        #expect(recent.take(buckets: [1, 3], now: 4).isEmpty, "taken once")
        #expect(recent.take(buckets: [2], now: 4) == ["b1"])
        #expect(recent.count == 0)
    }

    @Test("G3: messages older than the window are gone; the newest stay")
    func window() {
        var recent = RecentControls<Int>(window: 10, capacity: 100)
        for second in 0..<20 { recent.append(second, bucket: 0, now: Double(second)) }
        #expect(recent.take(buckets: [0], now: 20) == Array(10..<20))
    }

    @Test("G3: past the capacity the oldest go first and are counted; memory stays bounded")
    func capacity() {
        var recent = RecentControls<Int>(window: 1_000, capacity: 3)
        for index in 0..<5_000 { recent.append(index, bucket: index % 2, now: 0) }
        #expect(recent.count == 3)
        #expect(recent.evictedEarly == 4_997)
        #expect(recent.take(buckets: [0, 1], now: 0) == [4_997, 4_998, 4_999])
    }
}
