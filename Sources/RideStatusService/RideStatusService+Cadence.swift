import CoreMetrics
import Foundation
import Locking
import RideDomain

// MARK: - Cadence (C1): statuses on time, and metrics that stay current whatever the load

extension RideStatusService {
    /// Sleeps until the next ride is due (or the next report), not polling: an input that makes a ride due
    /// earlier wakes it (``planWake(_:)``). Due rides go in slices of 16 with the lock released between
    /// slices, so a message (a phase change) waits for at most one slice, not a whole burst (C2).
    func runCadence() async {
        var nextReport = ContinuousClock.now + reportInterval
        while !Task.isCancelled {
            var more = true
            while more && !Task.isCancelled {
                more = core.withLock { core in
                    guard core.lifecycle.recovered else { return false }
                    let now = Date()
                    executor.execute(core.engine.tick(now: now, limit: 16))
                    return core.engine.hasDue(now: now)
                }
                if ContinuousClock.now >= nextReport {
                    nextReport = ContinuousClock.now + reportInterval
                    report()
                }
                if more { await Task.yield() }
            }
            let untilReport = nextReport - ContinuousClock.now
            let untilDue: Duration? = core.withLock { core in
                planWake(&core)
                guard core.lifecycle.recovered, let due = core.engine.nextDueDate() else { return nil }
                return .milliseconds(Int64(max(0, due.timeIntervalSinceNow) * 1000) + 1)
            }
            await wakeup.wait(upTo: min(untilReport, untilDue ?? untilReport))
        }
    }

    /// Records when the cadence loop should wake; wakes it now if a ride came due before that. Called under
    /// the lock after every input that may schedule a status.
    func planWake(_ core: inout Core) {
        // Before recovery ends the loop sleeps until its next report whatever is due: the plan says so, so
        // that the first rides due after recovery wake it (never a plan earlier than the real wake).
        let due = core.lifecycle.recovered ? (core.engine.nextDueDate() ?? .distantFuture) : .distantFuture
        if due < core.plannedWake { wakeup.signal() }
        core.plannedWake = due
    }

    private func report() {
        core.withLock { core in
            metrics.report(core.engine.counters, previous: core.reportedCounters, engine: core.engine)
            core.reportedCounters = core.engine.counters
            if core.quoter != nil {
                // Positions older than availabilityMaxAge no longer count: memory follows the live fleet.
                core.quoter!.pruneFleet(now: Date())
                metrics.availableVehicles.record(core.quoter!.fleet.count)
            }
        }
        metrics.reconnects.record(transport.reconnectCount)
        metrics.droppedMessages.record(transport.droppedMessages)
    }
}

/// A wake-up call for one sleeping task: ``signal()`` ends the current ``wait(upTo:)`` early, or the next
/// one at once if nobody is waiting (a signal is never lost, and several collapse into one).
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns after `duration`, at a signal, or when the task is cancelled, whichever comes first.
    func wait(upTo duration: Duration) async {
        guard duration > .zero else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await Task.sleep(for: duration)
                    self.signal()
                } catch {}
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let resumeNow = state.withLock { state -> Bool in
                        if state.pending {
                            state.pending = false
                            return true
                        }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                self.signal()
            }
            group.cancelAll()
        }
        // The sleeper's own signal may have come after the wait ended: it is not a real one.
        state.withLock { $0.pending = false }
    }
}
