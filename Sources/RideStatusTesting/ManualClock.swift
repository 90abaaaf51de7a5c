public import Foundation
import Locking
public import RideStatusService

/// A clock that moves only when a test says so, the wall time moving with it: the worker's cadence,
/// heartbeat, handover ticks and timestamps in unit tests, without real sleeps (``WorkerTime``).
///
/// ``advance(by:)`` moves both times, wakes every sleeper due by then, and waits until the clock is idle
/// again: as many tasks sleep on it as before (the worker's loops did what was due and went back to sleep), or
/// the count stays put a moment (a woken task ended its timed wait). It never hangs: ``NotIdle`` after 10 s.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    /// The clock did not become idle after an advance: a task woken by it neither slept again nor ended.
    public struct NotIdle: Error, CustomStringConvertible {
        public let sleeping: Int
        public let expected: Int
        public var description: String { "\(sleeping) tasks sleep on the clock after the advance, \(expected) before" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var next = 0
        /// How many tasks slept on the clock when it was last idle.
        var resting = 0
    }

    private let state = Locked(State())
    /// The wall time at the clock's zero.
    public let origin: Date

    /// - Parameter origin: the wall time at zero; the real time now by default, so that payloads a test stamps
    ///   with the real time read as fresh.
    public init(origin: Date = Date()) { self.origin = origin }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The wall time now: the origin plus the time advanced.
    public var wallTime: Date {
        let offset = now.offset.components
        return origin.addingTimeInterval(Double(offset.seconds) + Double(offset.attoseconds) / 1e18)
    }

    /// The worker's time on this clock.
    public var workerTime: WorkerTime { WorkerTime(clock: self, wall: { [self] in wallTime }) }

    /// The deadlines of the tasks that sleep now, from the clock's zero (for a failing test's message).
    public var deadlines: [Duration] { state.withLock { $0.sleepers.values.map(\.deadline.offset).sorted() } }

    /// How many tasks sleep on the clock now.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool in
                    if Task.isCancelled || deadline <= state.now { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Waits until the tasks woken went back to sleep (as many sleep as `before`), or, for one that stopped
    /// sleeping on the clock (a retry that succeeded), until the count has not changed for `settle` (nil: never;
    /// on a loaded machine a woken loop may take longer than any such pause to sleep again).
    private func idle(
        before: Int, settle: Duration? = .milliseconds(50), timeout: Duration = .seconds(10)
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var last = sleeping
        var since = ContinuousClock.now
        while last < before {
            guard ContinuousClock.now < deadline else { throw NotIdle(sleeping: last, expected: before) }
            try await Task.sleep(for: .milliseconds(1))
            let count = sleeping
            if count != last {
                last = count
                since = ContinuousClock.now
            } else if let settle, ContinuousClock.now - since >= settle {
                return
            }
        }
    }

    /// Moves the clock (and the wall time) on by `duration`, stopping at each sleeper's deadline on the way (so
    /// periodic work runs at each of its times, exactly) and at most `step` apart: at each stop it wakes what is
    /// due and waits until the clock is idle again.
    /// - Parameter settle: how long an unchanged count of sleepers below the count before means idle (a task that
    ///   stopped sleeping); nil waits until every task woken sleeps again, for tests whose tasks always do.
    public func advance(
        by duration: Duration, step: Duration = .milliseconds(100), settle: Duration? = .milliseconds(50)
    ) async throws {
        let end = now.advanced(by: duration)
        // Strict waits longer: in a full parallel run other suites can hold the cooperative pool for seconds.
        let patience: Duration = settle == nil ? .seconds(60) : .seconds(10)
        while now < end {
            // Whatever woke meanwhile (a message, a signal) goes back to sleep before the time moves: else it would
            // take its next deadline from the time after the move.
            try await idle(before: state.withLock { $0.resting }, settle: settle, timeout: patience)
            let before = sleeping
            let due = state.withLock { state -> [Sleeper] in
                let next = state.sleepers.values.map(\.deadline).filter { $0 > state.now }.min()
                state.now = min(end, state.now.advanced(by: step), next ?? end)
                let now = state.now
                let due = state.sleepers.filter { $0.value.deadline <= now }
                for id in due.keys { state.sleepers[id] = nil }
                return due.values.sorted { $0.deadline < $1.deadline }
            }
            for sleeper in due { sleeper.continuation.resume() }
            if !due.isEmpty { try await idle(before: before, settle: settle, timeout: patience) }
            let resting = sleeping
            state.withLock { $0.resting = resting }
        }
    }
}
