/// Keeps the order of publishes across a reconnect (the worker's C5: a subscriber must never receive an
/// older status after a newer one).
///
/// libmosquitto resends the QoS 1 messages that were in flight at a disconnect only after the CONNACK
/// callback has returned (`handle__connack` calls `message__retry_check` last), while a message published
/// meanwhile from another thread is written at once (`message__release_to_inflight`). A status published on
/// reconnecting therefore overtook the older one being resent, and the broker kept the older one retained.
///
/// So new publishes are held here from the moment the connection drops until, after the next CONNACK,
/// every message that libmosquitto had in flight has been acknowledged; then they leave in the order they
/// were published. While held, a retained publish replaces an older held one to the same topic (only the
/// newest retained message of a topic matters to the broker and its subscribers), so a broker that is down
/// for long holds one message per retained topic instead of one per publish. Non-retained publishes are held
/// up to `nonRetainedLimit`; beyond that the newest are dropped and counted.
///
/// The same holding bounds what a slow or frozen broker can cost while the connection stays up: the client
/// hands libmosquitto at most `MQTTConfiguration.maxInFlight` unacknowledged messages (``holdForWindow()``),
/// the rest wait here, coalesced per retained topic, and leave in order as acknowledgements make room
/// (``release(room:)``).
///
/// A plain state machine: the client calls it under its lock and carries out what it returns.
struct OrderedResend {
    struct Publish {
        var topic: String
        var payload: [UInt8]
        var qos: MQTTQoS
        var retain: Bool
        var properties: MQTTProperties
        var waiter: CheckedContinuation<Void, any Error>?
        /// G6: the token of the gate it was made under, 0 for none (``PublishGate``).
        var gate: UInt64 = 0
    }

    /// Held publishes in order from `head`; a slot is nil once a newer retained publish to its topic took its
    /// place, or once it was released.
    private var held: [Publish?] = []
    private var head = 0
    /// Index in `held` of the newest held retained publish per topic.
    private var retainedSlot: [String: Int] = [:]
    private var nonRetained = 0
    /// Messages in flight when the connection came back: new publishes wait until all are acknowledged.
    private var barrier: Set<Int32> = []
    private(set) var isHolding: Bool
    private(set) var heldCount = 0
    private(set) var coalesced = 0
    private(set) var dropped = 0
    let nonRetainedLimit: Int

    /// - Parameter holding: whether to hold from the start (before the first connection: libmosquitto would
    ///   otherwise send a message published between CONNECT and CONNACK ahead of the ones queued earlier).
    init(holding: Bool = true, nonRetainedLimit: Int = 10_000) {
        isHolding = holding
        self.nonRetainedLimit = nonRetainedLimit
    }

    /// The connection dropped: hold new publishes.
    mutating func disconnected() {
        isHolding = true
        barrier = []
    }

    /// A CONNACK arrived; `inFlight` are the messages libmosquitto will resend. Returns whether the held
    /// messages may leave now (nothing to resend).
    mutating func connected(inFlight: Set<Int32>) -> Bool {
        barrier = inFlight
        return isHolding && barrier.isEmpty
    }

    /// A message was acknowledged. Returns whether the held messages may leave now.
    mutating func acknowledged(_ mid: Int32, connected: Bool) -> Bool {
        guard barrier.remove(mid) != nil else { return false }
        return isHolding && connected && barrier.isEmpty
    }

    /// Held messages that libmosquitto has not resent yet after `connected`: the barrier could not clear
    /// (for example a message the broker never acknowledges). The caller decides to release anyway.
    var outstandingResends: Int { barrier.count }

    /// The window of unacknowledged messages is full: hold new publishes until ``release(room:)``.
    mutating func holdForWindow() {
        isHolding = true
    }

    /// Whether held messages may leave as the window makes room: connected, and no resend outstanding.
    var mayReleaseIntoWindow: Bool { isHolding && barrier.isEmpty }

    mutating func hold(_ message: Publish) {
        if message.retain, message.waiter == nil, let slot = retainedSlot[message.topic] {
            // Superseded before it left: the newer one takes its place in the order.
            held[slot] = message
            coalesced += 1
            return
        }
        if !message.retain {
            guard nonRetained < nonRetainedLimit else {
                dropped += 1
                message.waiter?.resume(throwing: MQTTError.shutDown)
                return
            }
            nonRetained += 1
        } else if message.waiter == nil {
            retainedSlot[message.topic] = held.count
        } else {
            // One with a waiter is never replaced; a later one must not replace an earlier one ahead of it.
            retainedSlot[message.topic] = nil
        }
        held.append(message)
        heldCount += 1
    }

    /// The client stops for good: everything still held, for its waiters to be failed. Holds from now on.
    mutating func drain() -> [Publish] { takeAll(holding: true) }

    /// Stops holding and returns what was held, in order.
    mutating func release() -> [Publish] { release(room: .max) }

    /// The oldest held messages, at most `room`, in order; holding stops once none is left (new publishes
    /// then go straight out again). The resend barrier is over: the caller releases only when it is.
    mutating func release(room: Int) -> [Publish] {
        barrier = []
        var messages: [Publish] = []
        while head < held.count, messages.count < room {
            if let message = held[head] {
                messages.append(message)
                if message.retain, retainedSlot[message.topic] == head { retainedSlot[message.topic] = nil }
                if !message.retain { nonRetained -= 1 }
                held[head] = nil
            }
            head += 1
        }
        heldCount -= messages.count
        if head == held.count {
            held = []
            head = 0
            retainedSlot = [:]
            nonRetained = 0
            heldCount = 0
            isHolding = false
        } else if head > 4096, head * 2 > held.count {
            // Compact: what is left moves to the front, and the retained slots with it.
            held.removeFirst(head)
            retainedSlot = retainedSlot.mapValues { $0 - head }
            head = 0
        }
        return messages
    }

    private mutating func takeAll(holding: Bool) -> [Publish] {
        let messages = held[head...].compactMap { $0 }
        held = []
        head = 0
        retainedSlot = [:]
        nonRetained = 0
        heldCount = 0
        barrier = []
        isHolding = holding
        return messages
    }
}
