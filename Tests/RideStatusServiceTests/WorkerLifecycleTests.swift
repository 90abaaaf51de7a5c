import Testing

@testable import RideStatusService

/// The worker's lifecycle alone, without a broker: events in, actions out (L5, L6, C4, L8).
@Suite("WorkerLifecycle: connecting, recovering, ready, draining")
struct WorkerLifecycleTests {
    typealias Lifecycle = WorkerLifecycle<String>

    func stashed(_ action: Lifecycle.Action) -> [String]? {
        if case .finishRecovery(let stashed) = action { return stashed }
        return nil
    }

    @Test("L5: the first CONNACK starts a recovery; states restore; the marker with the nonce finishes it")
    func recovery() {
        var lifecycle = Lifecycle()
        guard case .startRecovery(let nonce) = lifecycle.connected(nonce: "n-1") else {
            Issue.record("the first connection must start a recovery")
            return
        }
        #expect(nonce == "n-1" && lifecycle.state == .recovering)
        guard case .restore(let state) = lifecycle.received(.rideState, "state r-1") else {
            Issue.record("a retained state is restored while recovering")
            return
        }
        #expect(state == "state r-1")
        // G1: retained presences are taken in before the marker, so the first view of the group is complete.
        guard case .restore(let presence) = lifecycle.received(.presence, "presence w-2") else {
            Issue.record("a presence is taken in while recovering, not stashed")
            return
        }
        #expect(presence == "presence w-2")
        // G1: the view marker closes the read of the presences; the recovery goes on.
        guard case .formView(let viewNonce) = lifecycle.received(.recoveryMarker("n-1/view"), "view marker") else {
            Issue.record("the view marker forms the first view")
            return
        }
        #expect(viewNonce == "n-1" && lifecycle.state == .recovering && !lifecycle.recovered)
        if case .formView = lifecycle.received(.recoveryMarker("n-0/view"), "old view marker") {
            Issue.record("a view marker of an earlier attempt is ignored")
        }
        // A marker of an earlier attempt (another nonce) does not finish this one.
        if case .finishRecovery = lifecycle.received(.recoveryMarker("n-0"), "old marker") {
            Issue.record("a stale marker must not finish the recovery")
        }
        #expect(stashed(lifecycle.received(.recoveryMarker("n-1"), "marker")) == [])
        #expect(lifecycle.state == .ready && lifecycle.recovered)
    }

    @Test("L6: control messages during recovery are kept in order and handed over; fixes are skipped")
    func stashDuringRecovery() {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n")
        for message in ["start r-1", "event r-1", "stop r-2"] {
            if case .handle = lifecycle.received(.other, message) { Issue.record("handled before recovery") }
        }
        _ = lifecycle.received(.fix, "fix v-1")
        #expect(lifecycle.fixesSkipped == 1 && lifecycle.stashedCount == 3)
        #expect(stashed(lifecycle.received(.recoveryMarker("n"), "marker")) == ["start r-1", "event r-1", "stop r-2"])
        #expect(lifecycle.stashedCount == 0)
        guard case .handle(let message) = lifecycle.received(.other, "start r-3") else {
            Issue.record("after recovery a message is handled at once")
            return
        }
        #expect(message == "start r-3")
    }

    @Test("L6: past the stash limit control messages are dropped and counted, never kept without bound")
    func boundedStash() {
        var lifecycle = Lifecycle(stashLimit: 3)
        _ = lifecycle.connected(nonce: "n")
        for index in 0..<5 { _ = lifecycle.received(.other, "m\(index)") }
        #expect(lifecycle.stashedCount == 3 && lifecycle.stashOverflow == 2)
        #expect(stashed(lifecycle.received(.recoveryMarker("n"), "marker")) == ["m0", "m1", "m2"])
    }

    @Test("C4: a reconnect after recovery republishes every ride instead of recovering again")
    func reconnect() {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n")
        _ = lifecycle.received(.recoveryMarker("n"), "marker")
        lifecycle.disconnected()
        #expect(lifecycle.state == .connecting)
        // Messages while reconnecting (the client's buffer) are still handled: the rides are in memory.
        guard case .handle = lifecycle.received(.other, "event") else {
            Issue.record("handled while reconnecting after recovery")
            return
        }
        guard case .republishAll = lifecycle.connected(nonce: "n-2") else {
            Issue.record("C4: republish on reconnect")
            return
        }
        #expect(lifecycle.state == .ready)
    }

    @Test("L5: a connection lost during recovery starts it again with a new nonce; the stash is kept")
    func lostDuringRecovery() {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n-1")
        _ = lifecycle.received(.other, "start r-1")
        lifecycle.disconnected()
        guard case .startRecovery(let nonce) = lifecycle.connected(nonce: "n-2") else {
            Issue.record("recovery starts again")
            return
        }
        #expect(nonce == "n-2")
        if case .finishRecovery = lifecycle.received(.recoveryMarker("n-1"), "late marker of the first attempt") {
            Issue.record("the first attempt's marker must not finish the second")
        }
        #expect(stashed(lifecycle.received(.recoveryMarker("n-2"), "marker")) == ["start r-1"])
    }

    @Test("L8: after shutdown nothing restarts; messages of a recovered worker are still handled")
    func draining() {
        var early = Lifecycle()
        _ = early.connected(nonce: "n")
        early.shutdown()
        if case .startRecovery = early.connected(nonce: "n-2") { Issue.record("no recovery while draining") }
        if case .restore = early.received(.rideState, "state") { Issue.record("no restore while draining") }
        var late = Lifecycle()
        _ = late.connected(nonce: "n")
        _ = late.received(.recoveryMarker("n"), "marker")
        late.shutdown()
        guard case .handle = late.received(.other, "stop r-1") else {
            Issue.record("a recovered worker handles what arrives until it disconnects")
            return
        }
        #expect(late.state == .draining)
    }

    /// A lifecycle that finished its recovery on the connection of incarnation 1.
    func recovered() -> Lifecycle {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n")
        _ = lifecycle.received(.recoveryMarker("n"), "marker")
        return lifecycle
    }

    @Test("L8: online only once the controls are acknowledged and this connection's subscriptions are restored")
    func announcesWhenSubscribed() {
        // The restoration first (the first connection has nothing to restore), the controls' SUBACKs second.
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n")
        #expect(lifecycle.subscriptionsRestored(incarnation: 1, controlsRefused: false) == nil, "still recovering")
        _ = lifecycle.received(.recoveryMarker("n"), "marker")
        #expect(lifecycle.announcedIncarnation == nil, "recovered, but the controls are not acknowledged yet")
        #expect(lifecycle.controlsAcknowledged() == 1)
        #expect(lifecycle.controlsAcknowledged() == nil, "once per connection")
        // A reconnect's restoration before the controls' SUBACKs announces nothing.
        var early = recovered()
        #expect(early.subscriptionsRestored(incarnation: 1, controlsRefused: false) == nil)
        #expect(early.controlsAcknowledged() == 1)
        // The other order: controls acknowledged while the restoration is still under way.
        var other = recovered()
        #expect(other.controlsAcknowledged() == nil)
        #expect(other.subscriptionsRestored(incarnation: 1, controlsRefused: false) == 1)
    }

    @Test("L8: after a reconnect, online waits for the restoration; a refused control waits for its second SUBACK")
    func reconnectWaitsForRestoration() {
        var lifecycle = recovered()
        _ = lifecycle.subscriptionsRestored(incarnation: 1, controlsRefused: false)
        #expect(lifecycle.controlsAcknowledged() == 1)
        lifecycle.disconnected()
        #expect(lifecycle.announcedIncarnation == nil, "a heartbeat repeats no birth while disconnected")
        guard case .republishAll = lifecycle.connected(nonce: "n-2") else {
            Issue.record("a reconnect after recovery republishes")
            return
        }
        #expect(lifecycle.announcedIncarnation == nil, "connected, but not subscribed yet")
        // The broker refused a control filter on restoring: not online until it is subscribed again.
        #expect(lifecycle.subscriptionsRestored(incarnation: 2, controlsRefused: true) == nil)
        #expect(lifecycle.controlsRestored(incarnation: 1) == nil, "a retry for an earlier connection counts nothing")
        #expect(lifecycle.controlsRestored(incarnation: 2) == 2)
        // A retry that comes back after the connection it was for dropped announces nothing.
        lifecycle.disconnected()
        _ = lifecycle.connected(nonce: "n-3")
        #expect(lifecycle.subscriptionsRestored(incarnation: 3, controlsRefused: true) == nil)
        lifecycle.disconnected()
        #expect(lifecycle.controlsRestored(incarnation: 3) == nil)
        _ = lifecycle.connected(nonce: "n-4")
        #expect(lifecycle.subscriptionsRestored(incarnation: 4, controlsRefused: false) == 4)
    }

    @Test("L8: a restoration during recovery, a drop before the controls' SUBACK, and draining announce nothing early")
    func neverEarly() {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n")
        _ = lifecycle.subscriptionsRestored(incarnation: 1, controlsRefused: false)
        _ = lifecycle.received(.recoveryMarker("n"), "marker")
        // The controls' SUBSCRIBE died with the connection: the client answers it at the next restoration.
        lifecycle.disconnected()
        _ = lifecycle.connected(nonce: "n-2")
        #expect(lifecycle.controlsAcknowledged() == nil, "acknowledged, but this connection is not restored yet")
        #expect(lifecycle.subscriptionsRestored(incarnation: 2, controlsRefused: false) == 2)
        var draining = recovered()
        draining.shutdown()
        #expect(draining.subscriptionsRestored(incarnation: 1, controlsRefused: false) == nil)
        #expect(draining.controlsAcknowledged() == nil)
    }
}

/// G5: after a lapse of the lease, nothing for the rides until the lease marker comes back.
@Suite("WorkerLifecycle: the lease (G5)")
struct WorkerLifecycleLeaseTests {
    typealias Lifecycle = WorkerLifecycle<String>

    func recovered() -> Lifecycle {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n-0")
        _ = lifecycle.received(.recoveryMarker("n-0"), "marker")
        return lifecycle
    }

    @Test(
        "G5: a lapse, then a CONNACK: the lease marker first; online waits; the marker back republishes and announces")
    func confirmation() {
        var lifecycle = recovered()
        #expect(lifecycle.controlsAcknowledged() == nil, "no restoration yet")
        lifecycle.disconnected()
        guard case .confirmLease(let nonce) = lifecycle.connected(nonce: "n-1", fenced: true) else {
            Issue.record("a reconnect after a lapse must confirm before republishing")
            return
        }
        #expect(nonce == "n-1" && lifecycle.state == .confirming)
        // The restoration is answered before the marker is back: no `online` yet.
        #expect(lifecycle.subscriptionsRestored(incarnation: 7, controlsRefused: false) == nil)
        // Messages the session queued meanwhile are handled as they come (a will of its own among them).
        if case .handle = lifecycle.received(.presence, "own will") {} else { Issue.record("handled in order") }
        // A marker of another confirmation, or a ping, confirms nothing.
        if case .leaseConfirmed = lifecycle.received(.leaseMarker(""), "ping") { Issue.record("a ping confirmed") }
        if case .leaseConfirmed = lifecycle.received(.leaseMarker("n-0"), "old") { Issue.record("a stale marker") }
        guard case .leaseConfirmed(let confirmed, let announce) = lifecycle.received(.leaseMarker("n-1"), "marker")
        else {
            Issue.record("the marker back confirms the lease")
            return
        }
        #expect(confirmed == "n-1" && announce == 7 && lifecycle.state == .ready)
        // The next reconnect without a lapse republishes at once, as before (C4).
        lifecycle.disconnected()
        guard case .republishAll = lifecycle.connected(nonce: "n-2") else {
            Issue.record("a plain reconnect republishes")
            return
        }
    }

    @Test("G5: a connection lost while confirming confirms again on the next, with a new nonce")
    func confirmationInterrupted() {
        var lifecycle = recovered()
        _ = lifecycle.connected(nonce: "n-1", fenced: true)
        lifecycle.disconnected()
        guard case .confirmLease(let nonce) = lifecycle.connected(nonce: "n-2", fenced: true) else {
            Issue.record("still unconfirmed: confirm again")
            return
        }
        #expect(nonce == "n-2")
        if case .leaseConfirmed = lifecycle.received(.leaseMarker("n-1"), "the first") {
            Issue.record("the marker of the lost connection must not confirm the new one")
        }
    }

    @Test("G5: a lapse before the recovery ends changes nothing: the recovery starts again and reads everything")
    func lapseDuringRecovery() {
        var lifecycle = Lifecycle()
        _ = lifecycle.connected(nonce: "n-0")
        lifecycle.disconnected()
        guard case .startRecovery = lifecycle.connected(nonce: "n-1", fenced: true) else {
            Issue.record("the recovery starts again")
            return
        }
    }

    @Test("G5: the client is the one source: a CONNACK not fenced after a confirmation in flight republishes")
    func unfencedWhileConfirming() {
        var lifecycle = recovered()
        _ = lifecycle.connected(nonce: "n-1", fenced: true)
        lifecycle.disconnected()
        guard case .republishAll = lifecycle.connected(nonce: "n-2", fenced: false) else {
            Issue.record("a connection the client does not fence publishes at once")
            return
        }
        #expect(lifecycle.state == .ready)
    }
}
