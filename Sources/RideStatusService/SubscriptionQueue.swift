import Locking
import MQTTClient

/// Subscription changes in the order the engine asked for them. Subscribing waits for the broker's
/// acknowledgement, which must not happen under the engine's lock: the changes queue here for one task that
/// makes them (L3: a vehicle's subscription follows its ride). That task takes everything queued at once and
/// sends a run of subscriptions with the same options as one batch (packets of many filters, every packet
/// sent before any acknowledgement is awaited): a SUBSCRIBE and a wait per vehicle in turn kept 100,000
/// booked rides from becoming active within minutes.
final class SubscriptionQueue: Sendable {
    enum Change: Sendable, Equatable {
        case subscribe(String, qos: MQTTQoS, options: MQTTSubscribeOptions)
        case unsubscribe(String)
        /// Publish to the worker itself once every change before has been acknowledged: a marker that comes
        /// back after the retained messages of the subscriptions before it (G3: a bucket's load).
        case publish(String, [UInt8])
    }

    /// What the applying task does with one batch.
    enum Step: Equatable {
        case subscribe([String], qos: MQTTQoS, options: MQTTSubscribeOptions)
        case unsubscribe([String])
        case publish(String, [UInt8])
    }

    private let queue = Locked((changes: [Change](), finished: false))
    /// Waits without a deadline (its waits are for changes, never for time): no clock is needed.
    private let wakeup = Wakeup(time: .system)

    func subscribe(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions()
    ) {
        append(.subscribe(filter, qos: qos, options: options))
    }

    func unsubscribe(_ filter: String) { append(.unsubscribe(filter)) }

    /// A marker to publish after every change queued before it is acknowledged.
    func publish(_ topic: String, _ payload: [UInt8]) { append(.publish(topic, payload)) }

    /// No more changes: the applying task ends once the queue is empty.
    func finish() {
        queue.withLock { $0.finished = true }
        wakeup.signal()
    }

    private func append(_ change: Change) {
        queue.withLock { $0.changes.append(change) }
        wakeup.signal()
    }

    /// The next batch in order, waiting for one; nil once finished and empty (or cancelled).
    func next() async -> [Step]? {
        while !Task.isCancelled {
            let (changes, finished) = queue.withLock { queue in
                defer { queue.changes = [] }
                return (queue.changes, queue.finished)
            }
            if !changes.isEmpty { return Self.steps(changes) }
            if finished { return nil }
            await wakeup.wait(upTo: .seconds(60))
        }
        return nil
    }

    /// Runs of subscriptions with the same QoS and options become one step, and runs of unsubscribes one; order is kept (an unsubscribe of a filter
    /// never overtakes its subscription, and a marker's publish comes after everything before it).
    static func steps(_ changes: [Change]) -> [Step] {
        // Runs are gathered in local arrays and appended once: rewriting the last step per filter copied the
        // run each time, quadratic in its length (a load of 4,000 buckets took seconds, `make bench-group`).
        var steps: [Step] = []
        var run: (filters: [String], qos: MQTTQoS, options: MQTTSubscribeOptions)?
        var unsubscribes: [String] = []
        func flush() {
            if let current = run {
                steps.append(.subscribe(current.filters, qos: current.qos, options: current.options))
            }
            if !unsubscribes.isEmpty { steps.append(.unsubscribe(unsubscribes)) }
            run = nil
            unsubscribes = []
        }
        for change in changes {
            switch change {
            case .subscribe(let filter, let qos, let options):
                if run != nil, run!.qos == qos, run!.options == options {
                    run!.filters.append(filter)
                } else {
                    flush()
                    run = ([filter], qos, options)
                }
            case .unsubscribe(let filter):
                if run != nil { flush() }
                unsubscribes.append(filter)
            case .publish(let topic, let payload):
                flush()
                steps.append(.publish(topic, payload))
            }
        }
        flush()
        return steps
    }
}
