import Foundation

/// A value behind a pthread mutex (through `NSLock`).
///
/// Used instead of `Synchronization.Mutex` because on Linux `Mutex` is built on a raw futex that
/// ThreadSanitizer cannot see, so every access from the network thread would be reported as a race.
final class Locked<Value>: @unchecked Sendable {
    // Safe because `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
