/// One scheduler for every ride's cadence (C6): a binary min-heap keyed by due time, with lazy deletion.
///
/// Rides are named by a small non-negative integer key (the engine's slot of the ride), so that the heap
/// holds 16-byte entries and liveness is an array lookup, not a hash of the ride's identifier.
/// `schedule` is O(log n), `cancel` O(1), `popDue` O(log n) per entry. A key has at most one live entry;
/// superseded entries are skipped when they reach the top, and the heap is compacted when they outnumber
/// live ones, so memory stays proportional to active rides.
///
/// Levelling (C1, C6): ``schedule(_:at:levellingWithin:)`` may bring a ride's next status forward, never
/// back, into a less crowded tenth of a second within `lead` before it is due. Rides keep the place in the
/// interval at which they first published, so a burst of bookings stays a burst at every interval after it:
/// with 100,000 rides booked at 5,000 a second, `make bench-scale` measured 12,800 statuses in one second and
/// 24,900 in another, the peak at the broker's limit on this machine (about 25,000 messages a second), where a
/// status waits for room and its ride's gap passes the interval. Only a tenth holding more than
/// ``levellingFloor`` entries sends rides forward, and only into one that holds a tenth fewer, so rides that
/// are already spread (and small fleets) keep their due times exactly, and no ride publishes more often than it
/// needs once the load is even.
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
    /// Live entries per tenth of a second of due time, in a ring of ``ringSize`` tenths (51.2 s, more than the
    /// longest interval of C1), and each live key's place in it (-1: none).
    private var load: [UInt32] = []
    private var placeOfKey: [Int32] = []

    static let bucketWidth = 0.1
    static let ringSize = 512
    /// Below this many statuses due in one tenth of a second (640 a second) levelling is not worth a change of
    /// due time.
    public static let levellingFloor: UInt32 = 64

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
        if key >= marks.count {
            marks.append(contentsOf: repeatElement(0, count: key + 1 - marks.count))
            placeOfKey.append(contentsOf: repeatElement(-1, count: key + 1 - placeOfKey.count))
        }
        let mark = marks[key]
        if mark & 1 == 0 { count += 1 } else { unplace(key) }
        let generation = ((mark >> 1) &+ 1) & 0x7FFF_FFFF
        marks[key] = generation << 1 | 1
        place(key, due: due)
        push(Entry(due: due, key: UInt32(key), generation: generation))
        if heap.count > 2 * count + 1024 { compact() }
    }

    /// (Re)schedules `key` at `due`, or up to `lead` seconds earlier when its tenth of a second is crowded:
    /// into the least crowded tenth before it, if that holds a tenth fewer. Returns the due time chosen.
    @discardableResult
    public mutating func schedule(_ key: Int, at due: Double, levellingWithin lead: Double) -> Double {
        guard !load.isEmpty else {
            schedule(key, at: due)
            return due
        }
        // Its own entry, if any, is not crowding anybody: it leaves for the new one.
        let own = isScheduled(key) ? Int(placeOfKey[key]) : -1
        let target = Self.bucket(due)
        let here = load[Self.ring(target)] - (Self.ring(target) == own ? 1 : 0)
        var chosen = due
        // To the least crowded tenth before it when that holds a tenth fewer: crowds spread forward, tenth by
        // tenth, while an even load (whose tenths differ by a few percent) moves nothing.
        if here >= Self.levellingFloor {
            var best = (bucket: target, load: here)
            for bucket in stride(from: target - 1, through: Self.bucket(due - lead) + 1, by: -1) {
                let place = Self.ring(bucket)
                let other = load[place] - (place == own ? 1 : 0)
                if other < best.load { best = (bucket, other) }
            }
            if Double(best.load) < 0.9 * Double(here) {
                chosen = min(due, (Double(best.bucket) + 0.5) * Self.bucketWidth)
            }
        }
        schedule(key, at: chosen)
        return chosen
    }

    package mutating func cancel(_ key: Int) {
        guard isScheduled(key) else { return }
        marks[key] &= ~1
        count -= 1
        unplace(key)
    }

    private static func bucket(_ due: Double) -> Int { Int((due / bucketWidth).rounded(.down)) }
    private static func ring(_ bucket: Int) -> Int { bucket & (ringSize - 1) }

    private mutating func place(_ key: Int, due: Double) {
        if load.isEmpty { load = Array(repeating: 0, count: Self.ringSize) }
        let place = Self.ring(Self.bucket(due))
        load[place] += 1
        placeOfKey[key] = Int32(place)
    }

    private mutating func unplace(_ key: Int) {
        let place = Int(placeOfKey[key])
        guard place >= 0 else { return }
        load[place] -= 1
        placeOfKey[key] = -1
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
                unplace(Int(top.key))
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
