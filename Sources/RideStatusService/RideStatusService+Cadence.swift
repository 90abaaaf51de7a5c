import CoreMetrics
import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain
import WorkerGroup

// MARK: - Cadence (C1): statuses on time, and metrics that stay current whatever the load

extension RideStatusService {
    /// Sleeps until the next ride is due (or the next report), not polling: an input that makes a ride due
    /// earlier wakes it (``planWake(_:)``). Due rides go in slices of 16 with the lock released between
    /// slices, so a message (a phase change) waits for at most one slice, not a whole burst (C2).
    ///
    /// Only into the room the connection has (``WorkerTransport/publishRoom``): while the broker is down or
    /// falls behind, due rides simply stay due, so nothing piles up in memory; when it takes messages again
    /// each publishes once, its newest status (the coalescing happens at the source), oldest due first.
    func runCadence() async {
        var nextReport = time.instant + reportInterval
        var waitingSince: Duration?
        while !Task.isCancelled {
            var more = true
            var blocked = false
            while more && !Task.isCancelled {
                // A status is at most two messages (its state, then itself); the cadence leaves the last
                // `Self.inputReserve` places of the window to statuses that inputs cause (C2).
                let limit = min(16, (transport.publishRoom - Self.inputReserve) / 2)
                blocked = limit <= 0
                if blocked { break }
                more = core.withLock { core in
                    // L8, G3: a worker leaving publishes no more statuses: its rides' new owners take over.
                    guard core.lifecycle.recovered, core.lifecycle.state != .draining else { return false }
                    let now = time.now
                    executor.execute(core.engine.tick(now: now, limit: limit), engine: &core.engine, now: now)
                    return core.engine.hasDue(now: now)
                }
                if time.instant >= nextReport {
                    nextReport = time.instant + reportInterval
                    report()
                }
                if more { await Task.yield() }
            }
            waitingSince = noteBackpressure(blocked: blocked, since: waitingSince)
            if time.instant >= nextReport {
                nextReport = time.instant + reportInterval
                report()
            }
            let untilReport = nextReport - time.instant
            let untilDue: Duration? = core.withLock { core in
                planWake(&core)
                guard core.lifecycle.recovered, let due = core.engine.nextDueDate() else { return nil }
                return .milliseconds(Int64(max(0, due.timeIntervalSince(time.now)) * 1000) + 1)
            }
            // Waiting for room: look again shortly (acknowledgements make room; no signal reaches this loop).
            let wait = blocked ? .milliseconds(10) : (untilDue ?? untilReport)
            await wakeup.wait(upTo: min(untilReport, wait))
        }
    }

    /// Places of the publish window (``WorkerTransport/publishRoom``) the cadence leaves to statuses caused by
    /// inputs, so that a phase change (C2) leaves at once even while the cadence keeps the broker busy: 100 is
    /// a tenth of the client's default window of 1,000 (``MQTTConfiguration/maxInFlight``), 50 phase changes.
    public static var inputReserve: Int { 100 }

    /// Logs when the cadence starts waiting for the broker (after a second of it, so a brief full window is
    /// not news) and when it stops; returns since when it has been waiting.
    private func noteBackpressure(blocked: Bool, since: Duration?) -> Duration? {
        let now = time.instant
        guard blocked else {
            if let since, now - since >= .seconds(1) {
                logger.notice(
                    "broker takes statuses again; due rides publish their newest status (C1)",
                    metadata: ["waited.seconds": "\((now - since).components.seconds)"])
            }
            return nil
        }
        guard let since else { return now }
        if now - since >= .seconds(1), now - since < .seconds(1) + .milliseconds(11) {
            logger.warning(
                "broker not taking statuses (disconnected or behind); rides wait, coalesced, nothing piles up (C1)")
        }
        return since
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
        metrics.ready.record(isReady ? 1 : 0)
        core.withLock { core in
            metrics.report(core.engine.counters, previous: core.reportedCounters, engine: core.engine)
            core.reportedCounters = core.engine.counters
            metrics.groupMembers.record(core.group.members.count)
            let now = time.now
            heartbeat(now: now, core: &core)
            sharePriors(now: now, core: &core)
            handoverTick(now: now, core: &core)
            leaseTick(now: now, core: &core)
            let counts = core.handover.counts
            let reported = core.handover.reported
            metrics.ridesGained.increment(by: counts.gained - reported.gained)
            metrics.ridesReleased.increment(by: counts.released - reported.released)
            metrics.ridesFenced.increment(by: counts.fenced - reported.fenced)
            metrics.ridesLifted.increment(by: counts.lifted - reported.lifted)
            core.handover.reported = counts
            metrics.bucketsArriving.record(core.handover.machine.pendingCount)
            metrics.bucketsServed.record(core.handover.machine.servingCount)
            let (machine, grants) = (core.handover.machine, core.authority?.grants)
            core.handover.recent.settle(
                mayArrive: { mayArrive($0, machine: machine, grants: grants) }, now: now.timeIntervalSince1970)
            metrics.controlsKept.record(core.handover.recent.count)
            if core.quoter != nil {
                // Positions older than availabilityMaxAge no longer count: memory follows the live fleet.
                core.quoter!.pruneFleet(now: now)
                metrics.availableVehicles.record(core.quoter!.fleet.count)
            }
        }
        metrics.reconnects.record(transport.reconnectCount)
        metrics.droppedMessages.record(transport.droppedMessages)
        metrics.publishRoom.record(transport.publishRoom)
        metrics.ioInterposed.record(transport.ioInterposition == .installed ? 1 : 0)
    }
}

/// A wake-up call for one sleeping task: ``signal()`` ends the current ``wait(upTo:)`` early, or the next
/// one at once if nobody is waiting (a signal is never lost, and several collapse into one).
///
/// The timed sleep of a wait is a task of its own that ``signal()`` cancels at once, before the waiter runs
/// again: while it stayed asleep on the clock until the waiter got round to cancelling it, a manual clock
/// counted the woken loop as still asleep, and a test's advance raced past every status due in between to the
/// old deadline (the lost wake-up of `docs/architecture.md`, "Time"). On a real clock that gap cost only the
/// waiter's scheduling delay.
package final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        var timer: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let time: WorkerTime

    package init(time: WorkerTime) { self.time = time }

    package func signal() {
        let (waiter, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            guard let waiter = state.waiter else {
                state.pending = true
                return (nil, nil)
            }
            defer { (state.waiter, state.timer) = (nil, nil) }
            return (waiter, state.timer)
        }
        timer?.cancel()
        waiter?.resume()
    }

    /// Returns after `duration`, at a signal, or when the task is cancelled, whichever comes first.
    package func wait(upTo duration: Duration) async {
        guard duration > .zero else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    state.timer = Task { [time] in
                        // Cancelled by a signal: no signal of its own.
                        guard (try? await time.sleep(for: duration)) != nil else { return }
                        self.signal()
                    }
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.signal()
        }
        // A timer that fired as a signal came may have signalled after the wait ended: it is not a real one.
        state.withLock { $0.pending = false }
    }
}
