import Foundation

/// Wall-clock seconds of `body`, on the continuous clock.
func measure(_ body: () -> Void) -> Double {
    let start = ContinuousClock.now
    body()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    /// The duration in seconds, as a Double.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// This process's resident memory in bytes (`/proc/self/statm`), 0 where that file does not exist.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}
