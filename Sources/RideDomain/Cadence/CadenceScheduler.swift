/// One scheduler for every ride's cadence (C6): a binary min-heap keyed by due time, with lazy deletion.
///
/// Rides are named by a small non-negative integer key (the engine's slot of the ride), so that the heap
/// holds 16-byte entries and liveness is an array lookup, not a hash of the ride's identifier.
/// `schedule` is O(log n), `cancel` O(1), `popDue` O(log n) per entry. A key has at most one live entry;
/// superseded entries are skipped when they reach the top, and the heap is compacted when they outnumber
/// live ones, so memory stays proportional to active rides.
public struct CadenceScheduler: Sendable {
    struct Entry: Sendable {
        var due: Double
        var key: UInt32
        var generation: UInt32
    }

    private var heap: [Entry] = []
    /// Per key: its latest generation shifted left by one, with bit 0 set while that generation is live.
    /// A key's generation only ever grows (also across cancel, pop and reuse by another ride), so an entry
    /// superseded before its key was popped or cancelled can never come back to life.
    private var marks: [UInt32] = []
    /// Keys with a live entry.
    public private(set) var count = 0

    public init() {}

    /// Entries held, live and superseded (for memory measurements).
    package var storedEntries: Int { heap.count }

    /// The earliest due time among live entries, in the caller's time base (seconds).
    public mutating func nextDue() -> Double? {
        dropSuperseded()
        return heap.first?.due
    }

    /// (Re)schedules `key` at `due`, replacing any earlier entry of it.
    public mutating func schedule(_ key: Int, at due: Double) {
        precondition(key >= 0 && key < Int(UInt32.max), "scheduler keys are slots: 0 ..< 2^32 - 1")
        if key >= marks.count { marks.append(contentsOf: repeatElement(0, count: key + 1 - marks.count)) }
        let mark = marks[key]
        if mark & 1 == 0 { count += 1 }
        let generation = ((mark >> 1) &+ 1) & 0x7FFF_FFFF
        marks[key] = generation << 1 | 1
        push(Entry(due: due, key: UInt32(key), generation: generation))
        if heap.count > 2 * count + 1024 { compact() }
    }

    package mutating func cancel(_ key: Int) {
        guard isScheduled(key) else { return }
        marks[key] &= ~1
        count -= 1
    }

    public func isScheduled(_ key: Int) -> Bool { key >= 0 && key < marks.count && marks[key] & 1 == 1 }

    /// Removes and returns the keys due at or before `now`, earliest first. Their entries are consumed: the
    /// caller schedules them again.
    public mutating func popDue(now: Double, limit: Int = .max) -> [Int] {
        var due: [Int] = []
        while due.count < limit, let top = heap.first, top.due <= now {
            popTop()
            if isLive(top) {
                marks[Int(top.key)] &= ~1
                count -= 1
                due.append(Int(top.key))
            }
        }
        return due
    }

    private func isLive(_ entry: Entry) -> Bool { Self.isLive(entry, marks: marks) }

    private static func isLive(_ entry: Entry, marks: [UInt32]) -> Bool {
        marks[Int(entry.key)] == entry.generation << 1 | 1
    }

    private mutating func dropSuperseded() {
        while let top = heap.first, !isLive(top) { popTop() }
    }

    private mutating func compact() {
        let marks = marks
        heap.removeAll { !Self.isLive($0, marks: marks) }
        // Heapify bottom-up.
        var index = heap.count / 2 - 1
        while index >= 0 {
            siftDown(index)
            index -= 1
        }
    }

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let count = heap.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            if left + 1 < count && heap[left + 1].due < heap[left].due { smallest = left + 1 }
            guard heap[smallest].due < heap[parent].due else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
