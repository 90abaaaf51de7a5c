import MQTTClient
import Testing

@testable import RideStatusService

/// The queue between the engine's subscription changes and the task that makes them (L3).
@Suite("SubscriptionQueue: batches in order")
struct SubscriptionQueueTests {
    @Test("L3: runs of subscriptions with the same options become one batch; nothing overtakes anything")
    func steps() {
        let plain = MQTTSubscribeOptions()
        let watch = MQTTSubscribeOptions(noLocal: true, retainHandling: .never)
        let steps = SubscriptionQueue.steps([
            .subscribe("a", options: plain), .subscribe("b", options: plain), .subscribe("s", options: watch),
            .subscribe("c", options: plain), .unsubscribe("a"), .subscribe("a", options: plain), .ready,
            .subscribe("d", options: plain),
        ])
        #expect(
            steps == [
                .subscribe(["a", "b"], options: plain), .subscribe(["s"], options: watch),
                .subscribe(["c"], options: plain), .unsubscribe("a"), .subscribe(["a"], options: plain), .ready,
                .subscribe(["d"], options: plain),
            ])
    }

    @Test("L3: what is queued before the task asks comes out as one batch; finish ends it once empty")
    func drains() async {
        let queue = SubscriptionQueue()
        for index in 0..<1000 { queue.subscribe("fleet/vehicles/v-\(index)/position") }
        queue.ready()
        queue.finish()
        let first = await queue.next()
        #expect(first?.count == 2)
        if case .subscribe(let filters, _) = first?.first {
            #expect(filters.count == 1000)
        } else {
            Issue.record("expected one batch of subscriptions, got \(String(describing: first))")
        }
        #expect(first?.last == .ready)
        #expect(await queue.next() == nil)
    }
}
