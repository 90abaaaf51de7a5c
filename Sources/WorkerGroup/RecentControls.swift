/// G3: control messages for rides this worker does not serve, kept for a while, so that none is lost across a
/// handover. Control messages reach every member; only the owner acts on one. Members see a change of the group
/// a few milliseconds apart, and a dead owner is noticed seconds after it stopped acting, so a message can reach
/// the old owner after it stopped serving and the new owner before it started. The new owner therefore replays,
/// in order, what it kept for the rides of a bucket when it starts serving the bucket. A message the old owner
/// had applied already is a redelivered duplicate, which changes nothing (L6), and a suffix of a ride's
/// messages replayed in order ends in the same ride.
///
/// Two keeps, so that a busy fleet cannot grow a worker and a bucket on its way here loses nothing:
/// - A message for a bucket served elsewhere is bounded by age (``window``, seconds, longer than the failure
///   detection time of the group) and by count (``capacity``; past it the oldest go first).
/// - A message for a bucket that may come here (its grant or its load is under way, or the worker does not yet
///   know the group) is kept until the bucket is served here (``take(buckets:now:)``) or is known to go
///   elsewhere (``settle(mayArrive:now:)``, after which it ages as the others do). A lone worker granted its
///   buckets by etcd while 30,000 bookings arrived lost 5,046 of them to the first keep's capacity before this
///   keep existed (`ride-bench group --rides 30000 --etcd`). Its own bound, ``arrivingCapacity``, is far larger:
///   it only stops a flood.
///
/// A message dropped before its time from either keep is counted in ``evictedEarly``. What a bucket replays is always
/// an unbroken tail of what it received: a message older than one dropped is not replayed either (a gap would replay
/// a ride's driver event without its assignment).
public struct RecentControls<Message: Sendable>: Sendable {
    struct Entry: Sendable {
        var at: Double
        var bucket: Int
        /// The order of arrival across both keeps: a bucket's messages are replayed in it.
        var order: Int
        var bytes: Int
        var message: Message?
    }

    public let window: Double
    public let capacity: Int
    public let arrivingCapacity: Int
    /// The second keep's bound in payload bytes (a flood of 16 KiB messages would otherwise take gigabytes).
    public let arrivingByteLimit: Int
    private var arrivingBytes = 0
    /// For each bucket, the order of the newest of its messages dropped before its time: older ones are not replayed.
    private var droppedThrough: [Int: Int] = [:]
    private var entries: [Entry] = []
    /// Entries before this index are gone (taken or expired): trimmed in bulk, not one by one.
    private var head = 0
    /// Messages for buckets that may come here, oldest first; those before ``arrivingHead`` are dropped.
    private var arriving: [Entry] = []
    private var arrivingHead = 0
    private var nextOrder = 0
    /// Messages dropped before their time because a keep's capacity was reached.
    public private(set) var evictedEarly = 0

    public init(
        window: Double = 30, capacity: Int = 20_000, arrivingCapacity: Int = 250_000,
        arrivingByteLimit: Int = 64 << 20
    ) {
        self.window = window
        self.capacity = capacity
        self.arrivingCapacity = arrivingCapacity
        self.arrivingByteLimit = arrivingByteLimit
    }

    /// Messages kept now.
    public var count: Int {
        entries[head...].reduce(arriving.count - arrivingHead) { $0 + ($1.message == nil ? 0 : 1) }
    }

    /// Keeps `message` (`bytes` long) for the ride of `bucket`, received at `now` (seconds); `mayArrive` when the
    /// bucket's grant or load is under way here, or the worker does not know yet who serves it.
    public mutating func append(_ message: Message, bucket: Int, now: Double, bytes: Int = 0, mayArrive: Bool = false) {
        let entry = Entry(at: now, bucket: bucket, order: nextOrder, bytes: bytes, message: message)
        nextOrder += 1
        if mayArrive {
            arriving.append(entry)
            arrivingBytes += bytes
            while arriving.count - arrivingHead > arrivingCapacity || arrivingBytes > arrivingByteLimit {
                drop(arriving[arrivingHead])
                arrivingBytes -= arriving[arrivingHead].bytes
                arrivingHead += 1
            }
            if arrivingHead > 1024, arrivingHead * 2 > arriving.count { trimArriving() }
            return
        }
        expire(now: now)
        if entries.count - head >= capacity {
            if entries[head].message != nil { drop(entries[head]) }
            head += 1
        }
        entries.append(entry)
        compact()
    }

    /// The messages kept for these buckets, oldest first; they are no longer kept.
    public mutating func take(buckets: Set<Int>, now: Double) -> [Message] {
        expire(now: now)
        var taken: [Entry] = []
        for index in head..<entries.count where buckets.contains(entries[index].bucket) {
            if entries[index].message != nil {
                taken.append(entries[index])
                entries[index].message = nil
            }
        }
        if arriving.count > arrivingHead {
            trimArriving()
            let before = taken.count
            arriving.removeAll { entry in
                guard buckets.contains(entry.bucket) else { return false }
                taken.append(entry)
                return true
            }
            arrivingBytes -= taken[before...].reduce(0) { $0 + $1.bytes }
            // Each keep is in order; a bucket that became one on its way here has messages in both.
            if before > 0, taken.count > before { taken.sort { $0.order < $1.order } }
        }
        guard !droppedThrough.isEmpty else { return taken.compactMap(\.message) }
        let tails = taken.filter { $0.order > droppedThrough[$0.bucket] ?? -1 }
        for bucket in buckets { droppedThrough[bucket] = nil }
        return tails.compactMap(\.message)
    }

    /// Messages of buckets that can no longer come here (another worker serves them) age as the others do: those
    /// older than ``window`` are gone. Called now and then (each is looked at), not per message.
    public mutating func settle(mayArrive: (Int) -> Bool, now: Double) {
        trimArriving()
        var gone: [Entry] = []
        arriving.removeAll { entry in
            guard now - entry.at > window, !mayArrive(entry.bucket) else { return false }
            gone.append(entry)
            return true
        }
        for entry in gone {
            arrivingBytes -= entry.bytes
            noteGone(entry)
        }
    }

    /// Counts a message dropped before its time.
    private mutating func drop(_ entry: Entry) {
        evictedEarly += 1
        noteGone(entry)
    }

    /// Keeps the bucket of a message gone unreplayed from replaying anything older (one entry per bucket at most).
    private mutating func noteGone(_ entry: Entry) {
        droppedThrough[entry.bucket] = max(droppedThrough[entry.bucket] ?? -1, entry.order)
    }

    private mutating func trimArriving() {
        arriving.removeFirst(arrivingHead)
        arrivingHead = 0
    }

    private mutating func expire(now: Double) {
        while head < entries.count, now - entries[head].at > window {
            if entries[head].message != nil { noteGone(entries[head]) }
            head += 1
        }
    }

    private mutating func compact() {
        guard head > 1024, head * 2 > entries.count else { return }
        entries.removeFirst(head)
        head = 0
    }
}
