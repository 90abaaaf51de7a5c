import Testing

@testable import MQTTClient

/// The worker's C5 across reconnects rests on this: held publishes leave in order, only after the resends.
@Suite("OrderedResend: publishes held across a reconnect (C5)")
struct OrderedResendTests {
    func publish(_ topic: String, _ text: String, retain: Bool = true) -> OrderedResend.Publish {
        OrderedResend.Publish(
            topic: topic, payload: Array(text.utf8), qos: .atLeastOnce, retain: retain, properties: MQTTProperties())
    }

    func texts(_ messages: [OrderedResend.Publish]) -> [String] {
        messages.map { String(decoding: $0.payload, as: UTF8.self) }
    }

    @Test("C5: held until every resend is acknowledged, then released in publish order")
    func waitsForResends() {
        var resend = OrderedResend(holding: false)
        #expect(!resend.isHolding)
        resend.disconnected()
        resend.hold(publish("rides/a/status", "a6"))
        resend.hold(publish("ridestatus/deadletter", "d1", retain: false))
        let step1 = resend.connected(inFlight: [7, 8])
        #expect(!step1, "two older messages are resent first")
        let step2 = resend.acknowledged(99, connected: true)
        #expect(!step2, "an unrelated acknowledgement changes nothing")
        let step3 = resend.acknowledged(7, connected: true)
        #expect(!step3)
        let step4 = resend.acknowledged(8, connected: true)
        #expect(step4)
        let released5 = texts(resend.release())
        #expect(released5 == ["a6", "d1"])
        #expect(!resend.isHolding && resend.heldCount == 0)
    }

    @Test("C5: with nothing in flight the held publishes leave at the CONNACK")
    func nothingInFlight() {
        var resend = OrderedResend()
        #expect(resend.isHolding, "before the first connection too")
        resend.hold(publish("t", "x"))
        let step6 = resend.connected(inFlight: [])
        #expect(step6)
        let released7 = texts(resend.release())
        #expect(released7 == ["x"])
    }

    @Test("a newer retained publish to a topic replaces the held one in its place; state stays before status")
    func coalescesRetained() {
        var resend = OrderedResend()
        resend.hold(publish("ridestatus/state/r-1", "state5"))
        resend.hold(publish("rides/r-1/status", "status5"))
        resend.hold(publish("ridestatus/state/r-1", "state6"))
        resend.hold(publish("rides/r-1/status", "status6"))
        resend.hold(publish("rides/r-2/status", "other"))
        #expect(resend.heldCount == 3 && resend.coalesced == 2)
        let step8 = resend.connected(inFlight: [])
        #expect(step8)
        let released9 = texts(resend.release())
        #expect(released9 == ["state6", "status6", "other"])
    }

    @Test("a full window holds publishes, coalesced per retained topic, and releases them in order as room comes")
    func window() {
        var resend = OrderedResend(holding: false)
        resend.holdForWindow()
        #expect(resend.isHolding && resend.mayReleaseIntoWindow)
        for sequence in 1...3 {
            resend.hold(publish("ridestatus/state/r-1", "state\(sequence)"))
            resend.hold(publish("rides/r-1/status", "status\(sequence)"))
            resend.hold(publish("rides/r-2/status", "other\(sequence)"))
        }
        resend.hold(publish("ridestatus/deadletter", "d1", retain: false))
        #expect(resend.heldCount == 4 && resend.coalesced == 6, "one per retained topic, however long the wait")
        let first = texts(resend.release(room: 2))
        #expect(first == ["state3", "status3"])
        #expect(resend.isHolding && resend.heldCount == 2, "the rest waits for more room")
        // A publish to a topic already released is held again behind the rest, never ahead of it.
        resend.hold(publish("rides/r-1/status", "status4"))
        resend.hold(publish("rides/r-2/status", "other4"))
        #expect(resend.heldCount == 3)
        let rest = texts(resend.release(room: 10))
        #expect(rest == ["other4", "d1", "status4"])
        #expect(!resend.isHolding && resend.heldCount == 0, "empty: publishes go straight out again")
    }

    @Test("a long hold compacts as it drains and keeps coalescing into the right slots")
    func windowCompacts() {
        var resend = OrderedResend(holding: false)
        resend.holdForWindow()
        for ride in 0..<10_000 { resend.hold(publish("rides/r-\(ride)/status", "a\(ride)")) }
        #expect(texts(resend.release(room: 6_000)).count == 6_000)
        // After compaction the slots still point at their messages.
        resend.hold(publish("rides/r-9999/status", "b9999"))
        resend.hold(publish("rides/r-0/status", "b0"))
        #expect(resend.heldCount == 4_001)
        let rest = texts(resend.release(room: .max))
        #expect(rest.count == 4_001 && rest.first == "a6000" && rest[3_999] == "b9999" && rest.last == "b0")
    }

    @Test("C5: a held retained publish with a waiter is never overtaken by a later one to its topic")
    func waiterKeepsItsPlace() async throws {
        var released: [String] = []
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            var resend = OrderedResend()
            resend.hold(publish("rides/r-1/status", "r1"))
            var awaited = publish("rides/r-1/status", "r2")
            awaited.waiter = waiter
            resend.hold(awaited)
            resend.hold(publish("rides/r-1/status", "r3"))
            _ = resend.connected(inFlight: [])
            let messages = resend.release()
            released = texts(messages)
            for message in messages { message.waiter?.resume() }
        }
        // r3 may not take r1's place: that would send it before r2, and r2 would end up retained.
        #expect(released == ["r1", "r2", "r3"])
    }

    @Test("non-retained publishes are held up to the limit; the rest are dropped and counted")
    func boundsNonRetained() {
        var resend = OrderedResend(nonRetainedLimit: 3)
        for index in 0..<5 { resend.hold(publish("ridestatus/deadletter", "d\(index)", retain: false)) }
        for index in 0..<5 { resend.hold(publish("rides/r-\(index)/status", "s\(index)")) }
        #expect(resend.heldCount == 8 && resend.dropped == 2)
        let step10 = resend.connected(inFlight: [])
        #expect(step10)
        let released11 = texts(resend.release())
        #expect(released11.prefix(3) == ["d0", "d1", "d2"])
    }

    @Test("a second drop before the resends cleared keeps holding; the next CONNACK sets a new barrier")
    func dropDuringBarrier() {
        var resend = OrderedResend()
        let step12 = resend.connected(inFlight: [1])
        #expect(!step12)
        resend.hold(publish("t", "x"))
        resend.disconnected()
        let step13 = resend.acknowledged(1, connected: false)
        #expect(!step13)
        #expect(resend.isHolding)
        let step14 = resend.connected(inFlight: [1, 2])
        #expect(!step14)
        let step15 = resend.acknowledged(1, connected: true)
        #expect(!step15)
        let step16 = resend.acknowledged(2, connected: true)
        #expect(step16)
        let released17 = texts(resend.release())
        #expect(released17 == ["x"])
    }
}
