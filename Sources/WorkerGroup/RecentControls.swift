/// G3: control messages for rides this worker does not serve, kept for a while, so that none is lost across a
/// handover. Control messages reach every member; only the owner acts on one. Members see a change of the group
/// a few milliseconds apart, and a dead owner is noticed seconds after it stopped acting, so a message can reach
/// the old owner after it stopped serving and the new owner before it started. The new owner therefore replays,
/// in order, what it kept for the rides of a bucket when it starts serving the bucket. A message the old owner
/// had applied already is a redelivered duplicate, which changes nothing (L6), and a suffix of a ride's
/// messages replayed in order ends in the same ride.
///
/// Bounded twice, so that a busy fleet cannot grow a worker: by age (``window``, seconds, longer than the
/// failure detection time of the group) and by count (``capacity``; past it the oldest go first, counted in
/// ``evictedEarly``).
public struct RecentControls<Message: Sendable>: Sendable {
    struct Entry: Sendable {
        var at: Double
        var bucket: Int
        var message: Message?
    }

    public let window: Double
    public let capacity: Int
    private var entries: [Entry] = []
    /// Entries before this index are gone (taken or expired): trimmed in bulk, not one by one.
    private var head = 0
    /// Messages dropped before their time because ``capacity`` was reached.
    public private(set) var evictedEarly = 0

    public init(window: Double = 30, capacity: Int = 20_000) {
        self.window = window
        self.capacity = capacity
    }

    /// Messages kept now.
    public var count: Int { entries[head...].reduce(0) { $0 + ($1.message == nil ? 0 : 1) } }

    /// Keeps `message` for the ride of `bucket`, received at `now` (seconds).
    public mutating func append(_ message: Message, bucket: Int, now: Double) {
        expire(now: now)
        if entries.count - head >= capacity {
            if entries[head].message != nil { evictedEarly += 1 }
            head += 1
        }
        entries.append(Entry(at: now, bucket: bucket, message: message))
        compact()
    }

    /// The messages kept for these buckets, oldest first; they are no longer kept.
    public mutating func take(buckets: Set<Int>, now: Double) -> [Message] {
        expire(now: now)
        var taken: [Message] = []
        for index in head..<entries.count where buckets.contains(entries[index].bucket) {
            if let message = entries[index].message {
                taken.append(message)
                entries[index].message = nil
            }
        }
        return taken
    }

    private mutating func expire(now: Double) {
        while head < entries.count, now - entries[head].at > window { head += 1 }
    }

    private mutating func compact() {
        guard head > 1024, head * 2 > entries.count else { return }
        entries.removeFirst(head)
        head = 0
    }
}
