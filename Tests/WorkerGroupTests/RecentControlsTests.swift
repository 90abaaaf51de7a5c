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

    @Test(
        "G3, G6: messages of buckets that may come here outlive the window and the capacity until served; a flood is still bounded"
    )
    func arriving() {
        // The loss `ride-bench group --rides 30000 --etcd` measured: a lone worker kept its bookings while etcd
        // granted its buckets, and the keep's capacity dropped a fifth of them.
        var recent = RecentControls<Int>(window: 10, capacity: 3, arrivingCapacity: 1_000)
        for index in 0..<500 { recent.append(index, bucket: index % 4, now: Double(index) / 10, mayArrive: true) }
        for index in 500..<510 { recent.append(index, bucket: 9, now: 50) }
        #expect(recent.evictedEarly == 7, "only the keep of buckets served elsewhere is bounded by 3")
        #expect(recent.count == 503)
        recent.settle(mayArrive: { _ in true }, now: 100)
        #expect(recent.take(buckets: [1], now: 100) == Array(stride(from: 1, to: 500, by: 4)))

        var flood = RecentControls<Int>(window: 10, capacity: 3, arrivingCapacity: 100)
        for index in 0..<5_000 { flood.append(index, bucket: 0, now: 0, mayArrive: true) }
        #expect(flood.count == 100)
        #expect(flood.evictedEarly == 4_900)
        #expect(flood.take(buckets: [0], now: 0) == Array(4_900..<5_000))
    }

    @Test("G3: a bucket that went elsewhere ages out as the others do; one still on its way is kept")
    func settle() {
        var recent = RecentControls<String>(window: 10, capacity: 100)
        recent.append("a1", bucket: 1, now: 0, mayArrive: true)
        recent.append("b1", bucket: 2, now: 0, mayArrive: true)
        recent.append("a2", bucket: 1, now: 8, mayArrive: true)
        recent.settle(mayArrive: { $0 == 2 }, now: 9)
        #expect(recent.count == 3, "younger than the window: kept whatever happens to the bucket")
        recent.settle(mayArrive: { $0 == 2 }, now: 15)
        #expect(recent.take(buckets: [1, 2], now: 15) == ["b1", "a2"])
    }

    @Test("G3: a bucket whose messages are in both keeps replays them in the order they came")
    func bothKeepsInOrder() {
        var recent = RecentControls<String>(window: 30, capacity: 100)
        recent.append("a1", bucket: 1, now: 0)
        recent.append("a2", bucket: 1, now: 1, mayArrive: true)
        recent.append("a3", bucket: 1, now: 2)
        recent.append("b1", bucket: 2, now: 3, mayArrive: true)
        #expect(recent.take(buckets: [1], now: 4) == ["a1", "a2", "a3"])
        #expect(recent.take(buckets: [2], now: 4) == ["b1"])
    }

    @Test("G3: a bucket replays an unbroken tail: a message older than one dropped is not replayed either")
    func noGap() {
        // m1 kept while the group was unknown, m2 in the aged keep, m3 once the bucket was wanted here: m2 ages
        // out during a grant longer than the window. Replaying m1 then m3 would apply a driver event without its
        // assignment; the tail is m3 alone.
        var recent = RecentControls<String>(window: 30, capacity: 100)
        recent.append("m1", bucket: 4, now: 0, mayArrive: true)
        recent.append("m2", bucket: 4, now: 1)
        recent.append("m3", bucket: 4, now: 2, mayArrive: true)
        recent.append("other", bucket: 5, now: 40)
        #expect(recent.take(buckets: [4], now: 40) == ["m3"])
        // Once served, the bucket's later messages are handled where they arrive; a later keep replays whole.
        recent.append("m4", bucket: 4, now: 41, mayArrive: true)
        #expect(recent.take(buckets: [4], now: 42) == ["m4"])
    }

    @Test("G3: the keep of buckets on their way here is bounded in bytes too; what a flood pushes out is counted")
    func arrivingBytes() {
        var recent = RecentControls<Int>(window: 30, capacity: 10, arrivingCapacity: 1_000, arrivingByteLimit: 64_000)
        for index in 0..<100 { recent.append(index, bucket: 1, now: 0, bytes: 16_000, mayArrive: true) }
        #expect(recent.count == 4)
        #expect(recent.evictedEarly == 96)
        #expect(recent.take(buckets: [1], now: 0) == [96, 97, 98, 99])
        recent.append(100, bucket: 1, now: 0, bytes: 64_000, mayArrive: true)
        #expect(recent.take(buckets: [1], now: 0) == [100], "the budget is free again once taken")
    }
}
