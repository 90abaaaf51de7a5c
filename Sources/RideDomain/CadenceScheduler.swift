/// One scheduler for every ride's cadence (C6): a binary min-heap keyed by due time, with lazy deletion.
///
/// `schedule` and `cancel` are O(log n) and O(1); `popDue` is O(log n) per entry. A ride has at most one live
/// entry (its generation); superseded entries are skipped when they reach the top and the heap is compacted
/// when they outnumber live ones, so memory stays proportional to active rides.
public struct CadenceScheduler: Sendable {
    struct Entry: Sendable {
        var due: Double
        var ride: String
        var generation: UInt64
    }

    private var heap: [Entry] = []
    private var generations: [String: UInt64] = [:]
    /// One counter for all rides: a generation is never reused, so an entry superseded before its ride was
    /// popped or cancelled can never come back to life when the ride is scheduled again.
    private var lastGeneration: UInt64 = 0

    public init() {}

    /// Rides with a live entry.
    public var count: Int { generations.count }
    /// Entries held, live and superseded (for memory measurements).
    public var storedEntries: Int { heap.count }

    /// The earliest due time among live entries, in the caller's time base (seconds).
    public mutating func nextDue() -> Double? {
        dropSuperseded()
        return heap.first?.due
    }

    /// (Re)schedules `ride` at `due`, replacing any earlier entry of it.
    public mutating func schedule(_ ride: String, at due: Double) {
        lastGeneration &+= 1
        let generation = lastGeneration
        generations[ride] = generation
        push(Entry(due: due, ride: ride, generation: generation))
        if heap.count > 2 * generations.count + 1024 { compact() }
    }

    public mutating func cancel(_ ride: String) {
        generations[ride] = nil
    }

    public func isScheduled(_ ride: String) -> Bool { generations[ride] != nil }

    /// Removes and returns the rides due at or before `now`, earliest first. Their entries are consumed:
    /// the caller schedules them again.
    public mutating func popDue(now: Double, limit: Int = .max) -> [String] {
        var due: [String] = []
        while due.count < limit, let top = heap.first, top.due <= now {
            popTop()
            if generations[top.ride] == top.generation {
                generations[top.ride] = nil
                due.append(top.ride)
            }
        }
        return due
    }

    private mutating func dropSuperseded() {
        while let top = heap.first, generations[top.ride] != top.generation { popTop() }
    }

    private mutating func compact() {
        heap.removeAll { generations[$0.ride] != $0.generation }
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
