import MQTTClient
import Testing

@testable import RideStatusService

/// The queue between the engine's subscription changes and the task that makes them (L3).
@Suite("SubscriptionQueue: batches in order")
struct SubscriptionQueueTests {
    @Test("L3: runs of subscriptions with the same QoS and options become one batch; nothing overtakes anything")
    func steps() {
        let plain = MQTTSubscribeOptions()
        let watch = MQTTSubscribeOptions(noLocal: true, retainHandling: .never)
        let one = MQTTQoS.atLeastOnce
        let steps = SubscriptionQueue.steps([
            .subscribe("a", qos: one, options: plain), .subscribe("b", qos: one, options: plain),
            .subscribe("s", qos: one, options: watch), .subscribe("c", qos: one, options: plain), .unsubscribe("a"),
            .unsubscribe("x"), .subscribe("a", qos: one, options: plain), .publish("k", [2]),
            .subscribe("d", qos: one, options: plain),
            .subscribe("e", qos: .atMostOnce, options: plain), .publish("m", [1]),
        ])
        #expect(
            steps == [
                .subscribe(["a", "b"], qos: one, options: plain), .subscribe(["s"], qos: one, options: watch),
                .subscribe(["c"], qos: one, options: plain), .unsubscribe(["a", "x"]),
                .subscribe(["a"], qos: one, options: plain), .publish("k", [2]),
                .subscribe(["d"], qos: one, options: plain),
                .subscribe(["e"], qos: .atMostOnce, options: plain), .publish("m", [1]),
            ])
    }

    @Test("L3: what is queued before the task asks comes out as one batch; finish ends it once empty")
    func drains() async {
        let queue = SubscriptionQueue()
        for index in 0..<1000 { queue.subscribe("fleet/vehicles/v-\(index)/position") }
        queue.publish("marker", [1])
        queue.finish()
        let first = await queue.next()
        #expect(first?.count == 2)
        if case .subscribe(let filters, _, _) = first?.first {
            #expect(filters.count == 1000)
        } else {
            Issue.record("expected one batch of subscriptions, got \(String(describing: first))")
        }
        #expect(first?.last == .publish("marker", [1]))
        #expect(await queue.next() == nil)
    }
}
