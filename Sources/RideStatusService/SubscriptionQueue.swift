import MQTTClient

/// Subscription changes in the order the engine asked for them. Subscribing waits for the broker's
/// acknowledgement, which must not happen under the engine's lock: the changes go through this queue to one
/// task that makes them in turn (L3: a vehicle's subscription follows its ride).
struct SubscriptionQueue: Sendable {
    enum Change: Sendable {
        case subscribe(String, options: MQTTSubscribeOptions)
        case unsubscribe(String)
        /// Every change queued before it has been acknowledged: the worker is ready (`/readyz`).
        case ready
    }

    let changes: AsyncStream<Change>
    private let sink: AsyncStream<Change>.Continuation

    init() { (changes, sink) = AsyncStream<Change>.makeStream() }

    func subscribe(_ filter: String, options: MQTTSubscribeOptions = MQTTSubscribeOptions()) {
        sink.yield(.subscribe(filter, options: options))
    }

    func unsubscribe(_ filter: String) { sink.yield(.unsubscribe(filter)) }

    /// Marks the point after which the worker is ready.
    func ready() { sink.yield(.ready) }

    func finish() { sink.finish() }
}
