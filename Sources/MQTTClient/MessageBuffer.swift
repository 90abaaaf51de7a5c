import Foundation

/// The bounded hand-over between libmosquitto's network thread (one producer) and the task that iterates
/// ``MQTTClient/messages`` (one consumer).
///
/// The producer never suspends a Swift task: it either appends, resumes the waiting consumer directly,
/// waits on a condition variable (``MQTTConfiguration/BufferPolicy/suspendNetwork``) or drops and counts.
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

    init(capacity: Int, policy: MQTTConfiguration.BufferPolicy) {
        self.capacity = max(1, capacity)
        self.policy = policy
        items.reserveCapacity(min(self.capacity, 4096))
    }

    var dropped: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedCount
    }

    /// Called on the network thread for every received message.
    func push(_ message: MQTTMessage) {
        condition.lock()
        if finished {
            condition.unlock()
            return
        }
        if let waiter {
            self.waiter = nil
            condition.unlock()
            waiter.resume(returning: message)
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
                _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
                if finished {
                    condition.unlock()
                    return
                }
            }
        }
        items.append(message)
        condition.unlock()
    }

    /// Ends the sequence: the consumer gets the buffered messages, then `nil`.
    func finish() {
        condition.lock()
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        condition.broadcast()
        condition.unlock()
        waiter?.resume(returning: nil)
    }

    /// The next buffered message without suspending, or nil when none is buffered: the consumer's fast path,
    /// which under load spares a continuation per message.
    func tryNext() -> MQTTMessage? {
        condition.lock()
        defer { condition.unlock() }
        return popLocked()
    }

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
