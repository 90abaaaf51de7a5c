import RideStatusService
import RideStatusTesting
import Testing

/// The cadence loop's wake-up call (C1, C6): a signal ends the timed sleep at once, on the clock too.
@Suite("Wakeup: the cadence loop's wake-up call")
struct WakeupTests {
    /// Polls (real time) until `condition` holds, for at most 120 s: a timer task starts in milliseconds, but
    /// in a full parallel run the end-to-end suites' synchronous waits can hold the cooperative pool's threads
    /// (two on this machine) for longer than 10 s (a CI run saw it).
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    @Test(
        "C1, C6: a signal takes the loop's timed sleep off the clock before the loop runs again (a manual clock's advance then waits for the woken loop instead of racing to the old deadline)"
    )
    func signalLeavesTheClock() async throws {
        let clock = ManualClock()
        let wakeup = Wakeup(time: clock.workerTime)
        let waiter = Task { await wakeup.wait(upTo: .seconds(60)) }
        #expect(try await Self.eventually { clock.sleeping == 1 }, "the wait sleeps on the clock")
        wakeup.signal()
        // No suspension between the signal and this look: the waiter has not run, its sleep is gone already.
        #expect(clock.sleeping == 0, "\(clock.deadlines)")
        await waiter.value
        #expect(clock.now.offset == .zero, "woken by the signal, not by the clock")
    }

    @Test("C1: a signal sent while nobody waits ends the next wait at once; without one the clock ends it")
    func pendingAndTimeout() async throws {
        let clock = ManualClock()
        let wakeup = Wakeup(time: clock.workerTime)
        wakeup.signal()
        await wakeup.wait(upTo: .seconds(60))
        #expect(clock.sleeping == 0 && clock.now.offset == .zero, "the pending signal ended it")
        let waiter = Task { await wakeup.wait(upTo: .seconds(5)) }
        #expect(try await Self.eventually { clock.sleeping == 1 })
        try await clock.advance(by: .seconds(5))
        await waiter.value
        #expect(clock.now.offset == .seconds(5) && clock.sleeping == 0)
    }
}
