import Foundation
import Testing

@testable import MQTTClient

/// The hand-over from libmosquitto's network thread to the consumer: in order, nothing lost, and a waiting
/// consumer woken once per burst (at its end, or when it grows long), never left waiting with messages in.
@Suite("MessageBuffer: the network thread's hand-over to the consumer")
struct MessageBufferTests {
    func message(_ index: Int) -> MQTTMessage { MQTTMessage(topic: "t/\(index)", payload: [UInt8(index % 256)]) }

    /// Suspends a consumer on an empty buffer and returns its task once it waits.
    func waitingConsumer(_ buffer: MessageBuffer) async -> Task<MQTTMessage?, Never> {
        let task = Task { await buffer.next() }
        // It registers as the waiter when it finds nothing; a push after that is for it.
        while !buffer.hasWaiter { await Task.yield() }
        return task
    }

    @Test("messages come out in the order they went in, in batches taken by the consumer")
    func order() {
        let buffer = MessageBuffer(capacity: 100, policy: .dropNewest)
        for index in 0..<10 { buffer.push(message(index)) }
        var topics: [String] = []
        while let next = buffer.tryNext() {
            topics.append(next.topic)
            if topics.count == 5 { buffer.push(message(10)) }
        }
        #expect(topics == (0...10).map { "t/\($0)" })
    }

    @Test("a waiting consumer gets the burst at its end, not before")
    func wokenAtEndOfBurst() async {
        let buffer = MessageBuffer(capacity: 100, policy: .dropNewest)
        let consumer = await waitingConsumer(buffer)
        buffer.push(message(1))
        buffer.push(message(2))
        #expect(buffer.hasWaiter, "within a burst the consumer is not woken per message")
        buffer.endOfBurst()
        #expect(await consumer.value?.topic == "t/1")
        #expect(buffer.tryNext()?.topic == "t/2")
        #expect(buffer.tryNext() == nil)
    }

    @Test("a long burst wakes the consumer at the burst limit")
    func wokenAtBurstLimit() async {
        let buffer = MessageBuffer(capacity: 1000, policy: .dropNewest)
        let consumer = await waitingConsumer(buffer)
        for index in 0..<MessageBuffer.burstLimit { buffer.push(message(index)) }
        #expect(await consumer.value?.topic == "t/0")
        var rest = 0
        while buffer.tryNext() != nil { rest += 1 }
        #expect(rest == MessageBuffer.burstLimit - 1)
    }

    @Test("a capacity below the burst limit wakes the consumer when full: suspendNetwork never waits on it")
    func smallCapacity() async {
        let buffer = MessageBuffer(capacity: 3, policy: .suspendNetwork)
        let consumer = await waitingConsumer(buffer)
        for index in 0..<3 { buffer.push(message(index)) }
        #expect(await consumer.value?.topic == "t/0")
    }

    @Test("finishing hands the consumer what was pushed but not yet handed over, then ends")
    func finishDeliversPending() async {
        let buffer = MessageBuffer(capacity: 100, policy: .dropNewest)
        let consumer = await waitingConsumer(buffer)
        buffer.push(message(7))
        buffer.finish()
        #expect(await consumer.value?.topic == "t/7")
        #expect(buffer.tryNext() == nil)
        #expect(await buffer.next() == nil)
    }
}
