public import Foundation

/// The time a worker runs on: a clock for its waits and intervals (the cadence, the heartbeat, the handover's
/// ticks, retries, durations), and the wall time for what it stamps and compares with timestamps from outside
/// (`issuedAt`, presences, fixes' ages). Swift's `Clock` has no wall time, so the two come together here.
///
/// The service reads no clock of its own (a test, `ClockLintTests`, keeps it so): production runs on
/// ``system`` (`ContinuousClock` and `Date()`); tests drive a manual clock that moves both at once, so that a
/// test of the cadence advances time instead of sleeping. The MQTT client stays on real time: its keep-alive
/// and reconnect pauses are the broker's business, not the contract's.
public struct WorkerTime: Sendable {
    private let wall: @Sendable () -> Date
    private let monotonic: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    /// A worker's time on `clock`, with `wall` giving the wall time that goes with it.
    public init<C: Clock & Sendable>(clock: C, wall: @escaping @Sendable () -> Date) where C.Duration == Duration {
        let origin = clock.now
        self.wall = wall
        monotonic = { origin.duration(to: clock.now) }
        sleeper = { try await clock.sleep(until: clock.now.advanced(by: $0), tolerance: nil) }
    }

    /// Real time: `ContinuousClock` (it keeps counting while the machine sleeps, as the broker's clock does)
    /// and the system's wall clock.
    public static var system: WorkerTime { WorkerTime(clock: ContinuousClock(), wall: { Date() }) }

    /// The wall time now.
    public var now: Date { wall() }

    /// The time on the clock now, from an arbitrary origin: for intervals only.
    public var instant: Duration { monotonic() }

    /// ``instant`` in seconds: the clock of the pure machines that take time as a number (G6's grants).
    public var seconds: Double {
        let (whole, attoseconds) = monotonic().components
        return Double(whole) + Double(attoseconds) * 1e-18
    }

    /// Returns after `duration` on the clock; throws `CancellationError` if the task is cancelled first.
    public func sleep(for duration: Duration) async throws { try await sleeper(duration) }
}
