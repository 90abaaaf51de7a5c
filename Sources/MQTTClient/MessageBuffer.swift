import Foundation
import Locking

/// The bounded hand-over between libmosquitto's network thread (one producer) and the task that iterates
/// ``MQTTClient/messages`` (one consumer).
///
/// The producer never suspends a Swift task: it either appends, resumes the waiting consumer directly,
/// waits on a condition variable (``MQTTConfiguration/BufferPolicy/suspendNetwork``) or drops and counts.
///
/// At most `capacity` messages wait here; the batch the consumer has taken and not read yet holds at most as
/// many again, so memory stays bounded by twice the capacity.
///
/// A waiting consumer is woken once per burst, not once per message: the network thread pushes what it reads
/// and calls ``endOfBurst()`` when the socket has nothing more (or ``burstLimit`` messages wait). Measured on the
/// drain of `make bench-scale` (151,000 queued QoS 1 messages, 2 cores): waking per message cost a futex wake
/// and a thread switch for most messages, and the worker drained at 64 % to 67 % of a bare `mosquitto_sub`.
final class MessageBuffer: @unchecked Sendable {
    // Safe because every stored property below is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var items: [MQTTMessage] = []
    private var head = 0
    private var waiter: CheckedContinuation<MQTTMessage?, Never>?
    private var finished = false
    private var droppedCount = 0
    private let capacity: Int
    private let policy: MQTTConfiguration.BufferPolicy
    /// Messages that may wait for the end of a burst before the consumer is woken.
    static let burstLimit = 64

    init(capacity: Int, policy: MQTTConfiguration.BufferPolicy) {
        self.capacity = max(1, capacity)
        self.policy = policy
        items.reserveCapacity(min(self.capacity, 4096))
    }

    /// Whether a consumer waits for the next message (tests).
    var hasWaiter: Bool {
        condition.lock()
        defer { condition.unlock() }
        return waiter != nil
    }

    var dropped: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedCount
    }

    /// Called on the network thread for every received message. `beforeWaiting` runs (unlocked) once, before
    /// the thread first waits for room under ``MQTTConfiguration/BufferPolicy/suspendNetwork``.
    func push(_ message: MQTTMessage, beforeWaiting: () -> Void = {}) {
        var ranBeforeWaiting = false
        condition.lock()
        if finished {
            condition.unlock()
            return
        }
        while items.count - head >= capacity {
            switch policy {
            case .dropNewest:
                droppedCount += 1
                condition.unlock()
                return
            case .dropOldest:
                head += 1
                droppedCount += 1
            case .suspendNetwork:
                if !ranBeforeWaiting {
                    ranBeforeWaiting = true
                    condition.unlock()
                    beforeWaiting()
                    condition.lock()
                    continue
                }
                _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
                if finished {
                    condition.unlock()
                    return
                }
            }
        }
        items.append(message)
        // A consumer waits only while nothing is buffered; it is woken at the end of the burst, or now when
        // the burst is long.
        if waiter != nil && items.count - head >= min(Self.burstLimit, capacity) {
            resumeWaiterLocked()
        } else {
            condition.unlock()
        }
    }

    /// The network thread read everything the socket had: a waiting consumer gets what was pushed since.
    func endOfBurst() {
        condition.lock()
        if waiter != nil && head < items.count {
            resumeWaiterLocked()
        } else {
            condition.unlock()
        }
    }

    /// Hands the oldest message to the waiting consumer; call with `condition` locked and a waiter set.
    /// Unlocks before resuming.
    private func resumeWaiterLocked() {
        let waiter = self.waiter
        self.waiter = nil
        let message = popLocked()
        condition.unlock()
        waiter?.resume(returning: message)
    }

    /// Ends the sequence: the consumer gets the buffered messages, then `nil`.
    func finish() {
        condition.lock()
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        // Pushed but not yet handed over (the burst had not ended): the consumer still gets them first.
        let message = waiter == nil ? nil : popLocked()
        condition.broadcast()
        condition.unlock()
        waiter?.resume(returning: message)
    }

    /// The next buffered message without suspending, or nil when none is buffered: the consumer's fast path,
    /// which under load spares a continuation per message. It takes everything buffered at once into the
    /// consumer's own batch, so under load the consumer does not contend with the network thread for
    /// `condition` on every message (a futex wait and wake for many of them, measured by `strace`).
    func tryNext() -> MQTTMessage? {
        taken.withLock { taken in
            if taken.index < taken.messages.count {
                defer { taken.index += 1 }
                return taken.messages[taken.index]
            }
            condition.lock()
            defer { condition.unlock() }
            guard head < items.count else { return nil }
            taken.messages.removeAll(keepingCapacity: true)
            swap(&taken.messages, &items)
            taken.index = head + 1
            head = 0
            condition.signal()
            return taken.messages[taken.index - 1]
        }
    }

    /// Messages the consumer took from `items` in one go and has not read yet; only the consumer uses it.
    private struct Batch {
        var messages: [MQTTMessage] = []
        var index = 0
    }
    private let taken = Locked(Batch())

    /// Takes the oldest buffered message; call with `condition` locked. Wakes a producer held back by
    /// `suspendNetwork`.
    private func popLocked() -> MQTTMessage? {
        guard head < items.count else { return nil }
        let message = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        condition.signal()
        return message
    }

    func next() async -> MQTTMessage? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<MQTTMessage?, Never>) in
                condition.lock()
                if let message = popLocked() {
                    condition.unlock()
                    continuation.resume(returning: message)
                } else if finished || Task.isCancelled {
                    condition.unlock()
                    continuation.resume(returning: nil)
                } else {
                    waiter = continuation
                    condition.unlock()
                }
            }
        } onCancel: {
            condition.lock()
            let waiter = self.waiter
            self.waiter = nil
            condition.unlock()
            waiter?.resume(returning: nil)
        }
    }
}

/// The messages a client receives, in the order the broker sent them. Iterate it from one task only.
public struct MQTTMessageSequence: AsyncSequence, Sendable {
    public typealias Element = MQTTMessage
    let buffer: MessageBuffer

    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: MessageBuffer
        /// Suspends only when nothing is buffered; holds no messages itself, so iterators can come and go.
        public mutating func next() async -> MQTTMessage? {
            if let message = buffer.tryNext() { return message }
            return await buffer.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(buffer: buffer) }
}
