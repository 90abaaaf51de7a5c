import Foundation

/// A value behind a pthread mutex (through `NSLock`): the one lock type of the package.
///
/// Not `Synchronization.Mutex`: on Linux it is built on a raw futex that ThreadSanitizer cannot see, so
/// `make test-tsan` reported every access to a `Mutex`-guarded value from two threads as a race (measured:
/// 5 reports in one run of the client and in-memory service tests with `Mutex`, none with this).
/// `MessageBuffer` keeps an `NSCondition`: it needs a condition variable as well.
public final class Locked<Value>: @unchecked Sendable {
    // Safe because `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
