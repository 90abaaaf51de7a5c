import MQTTClient
import Testing

/// G5's lease alone, on instants the test makes: no broker, no sleeping.
@Suite("BrokerLease: the broker's deadline by the client's own clock (G5)")
struct BrokerLeaseTests {
    let start = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }

    @Test("G5: keepalive 5: the broker's earliest will at 7 s (whole seconds), the lease 6 s, a ping every 2.5 s")
    func durations() {
        let lease = BrokerLease(keepAlive: 5, margin: .seconds(1))
        #expect(lease.brokerDeadline == .seconds(7))
        #expect(lease.duration == .seconds(6))
        #expect(lease.pingInterval == .milliseconds(2500))
        #expect(BrokerLease(keepAlive: 2, margin: .seconds(1)).duration == .seconds(2))
    }

    @Test("G5: no lease before the first CONNACK; it runs from when CONNECT was sent, not from the CONNACK")
    func fromTheConnectSent() {
        var lease = BrokerLease(keepAlive: 5, margin: .seconds(1))
        #expect(!lease.isLive(at: at(0)) && !lease.hasLapsed(at: at(100)), "nothing held, nothing lapses")
        lease.connecting(at: at(0))
        // The CONNACK comes back 3 s later (a slow broker): the broker's timer started at its receipt, no earlier
        // than the send.
        lease.connected()
        #expect(lease.expiry == at(6))
        #expect(lease.isLive(at: at(5.999)))
        #expect(lease.hasLapsed(at: at(6)))
    }

    @Test("G5: an acknowledgement extends the lease from its packet's send time, never from its own arrival")
    func acknowledgementsExtend() {
        var lease = BrokerLease(keepAlive: 5, margin: .seconds(1))
        lease.connecting(at: at(0))
        lease.connected()
        lease.sent(1, at: at(2))
        lease.sent(2, at: at(4))
        // The PUBACK of packet 2 comes first, at 9 s (after a pause): the lease runs from 4 s, so it lapsed at 10 s
        // whatever the time now.
        lease.acknowledged(2)
        #expect(lease.expiry == at(10))
        // An older packet's later acknowledgement does not move it back.
        lease.acknowledged(1)
        #expect(lease.expiry == at(10))
        // An unknown or repeated acknowledgement changes nothing.
        lease.acknowledged(2)
        lease.acknowledged(77)
        #expect(lease.expiry == at(10))
    }

    @Test("G5: a ping is due half a keepalive after the last packet sent, acknowledged or not yet")
    func pings() {
        var lease = BrokerLease(keepAlive: 5, margin: .seconds(1))
        #expect(!lease.pingDue(at: at(10)), "no ping without a connection")
        lease.connecting(at: at(0))
        lease.connected()
        #expect(!lease.pingDue(at: at(2.4)))
        #expect(lease.pingDue(at: at(2.5)))
        lease.sent(5, at: at(2.5))
        #expect(!lease.pingDue(at: at(4.9)))
        #expect(lease.pingDue(at: at(5)))
    }

    @Test("G5: fenced, the lease is gone; a packet of the old connection acknowledged late extends nothing")
    func fencedForgetsTheOldConnection() {
        var lease = BrokerLease(keepAlive: 5, margin: .seconds(1))
        lease.connecting(at: at(0))
        lease.connected()
        lease.sent(9, at: at(1))
        lease.fenced()
        #expect(lease.expiry == nil && !lease.hasLapsed(at: at(60)) && !lease.isLive(at: at(1)))
        lease.acknowledged(9)
        #expect(lease.expiry == nil)
        lease.connecting(at: at(20))
        lease.connected()
        #expect(lease.expiry == at(26))
    }
}
