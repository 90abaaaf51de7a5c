import Locking
import Testing

@testable import RideStatusService

/// G6: the publishing side of the etcd lease alone, on a clock the test moves: which gate token a ride's status
/// goes out under, and what the transport is told of the lease's gate (its end, and its close).
@Suite("GrantLease: the gate a granted ride's publishes go out under (G6)")
struct GrantLeaseTests {
    /// A lease and the gates it opened and closed, as the transport saw them.
    final class Probe: Sendable {
        let now = Locked(100.0)
        let gates = Locked<[(token: UInt64, validFor: Duration?)]>([])

        func lease(enabled: Bool = true) -> GrantLease {
            GrantLease(enabled: enabled, clock: { self.now.withLock { $0 } }) { token, validFor in
                self.gates.withLock { $0.append((token, validFor)) }
            }
        }
    }

    @Test("G6: broker-only mode gates nothing: token 0, always live, the transport never told")
    func brokerOnly() {
        let probe = Probe()
        let lease = probe.lease(enabled: false)
        #expect(lease.liveToken == 0)
        #expect(lease.isLive)
        #expect(probe.gates.withLock { $0.isEmpty })
    }

    @Test("G6: a lease opens its gate for what is left of it; past its end by the worker's clock nothing goes out")
    func leaseOpensItsGate() {
        let probe = Probe()
        let lease = probe.lease()
        #expect(lease.liveToken == nil, "no lease yet: nothing of a ride goes out")
        lease.set(lease: (id: 42, validUntil: 103.5))
        #expect(lease.liveToken == 42)
        let opened = probe.gates.withLock { $0 }
        #expect(opened.count == 1 && opened[0].token == 42 && opened[0].validFor == .seconds(3.5))
        // The same lease again (every tick of the grant machine): the transport is not told again.
        lease.set(lease: (id: 42, validUntil: 103.5))
        #expect(probe.gates.withLock { $0.count } == 1)
        probe.now.withLock { $0 = 103.5 }
        #expect(lease.liveToken == nil, "G6: at the lease's end by the worker's clock, nothing goes out")
    }

    @Test("G6: a renewal moves the gate's end; a lapse closes it; a new lease closes the old gate and opens its own")
    func renewalLapseAndNewLease() {
        let probe = Probe()
        let lease = probe.lease()
        lease.set(lease: (id: 42, validUntil: 103))
        lease.set(lease: (id: 42, validUntil: 106))
        lease.set(lease: nil)
        #expect(lease.liveToken == nil)
        lease.set(lease: (id: 43, validUntil: 110))
        lease.set(lease: (id: 44, validUntil: 112))
        let told = probe.gates.withLock { $0 }.map { "\($0.token):\($0.validFor.map { "\($0)" } ?? "closed")" }
        #expect(
            told == [
                "42:3.0 seconds", "42:6.0 seconds", "42:closed", "43:10.0 seconds", "43:closed", "44:12.0 seconds",
            ])
        #expect(lease.liveToken == 44)
    }

    @Test("G6: a lease already past its end when set opens a gate of no time, never a negative one")
    func pastLease() {
        let probe = Probe()
        let lease = probe.lease()
        lease.set(lease: (id: 7, validUntil: 99))
        #expect(probe.gates.withLock { $0 }.first?.validFor == .zero)
        #expect(lease.liveToken == nil)
    }
}
