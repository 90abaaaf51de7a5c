import Foundation
import Testing

/// The service reads no clock of its own: every time it uses comes from its ``WorkerTime`` (a clock and a wall
/// time, injected), so that tests drive it with a manual clock. This reads the module's sources and fails on a
/// direct clock read anywhere but `WorkerTime.swift`, naming the file and line.
@Suite("One clock: the service reads no clock of its own")
struct ClockLintTests {
    /// What reads a clock directly: the wall time, a Swift clock, a sleep, or the system's tick counters (each
    /// a whole name: `nextDueDate()` is not `Date()`).
    static let forbidden = [
        "Date()", "Date.now", "Date(timeIntervalSinceNow", "timeIntervalSinceNow", "ContinuousClock",
        "SuspendingClock", "Task.sleep", "DispatchTime.now", "systemUptime", "clock_gettime", "gettimeofday",
        "CFAbsoluteTimeGetCurrent",
    ]

    /// Whether `line` holds `pattern` as a whole name (not the end of a longer one).
    static func reads(_ line: some StringProtocol, _ pattern: String) -> Bool {
        var rest = line[...]
        while let range = rest.range(of: pattern) {
            let before = range.lowerBound == line.startIndex ? nil : line[line.index(before: range.lowerBound)]
            if !(before.map { $0.isLetter || $0.isNumber || $0 == "_" } ?? false) { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }

    static var sources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/RideStatusService")
    }

    @Test("The service's sources read time only through WorkerTime")
    func noClockReads() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path)
            .filter { $0.hasSuffix(".swift") && $0 != "WorkerTime.swift" }
        #expect(files.count > 10, "the module's sources were found")
        var found: [String] = []
        for file in files.sorted() {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.trimmingCharacters(in: .whitespaces)
                guard !code.hasPrefix("//") else { continue }
                for pattern in Self.forbidden where Self.reads(code, pattern) {
                    found.append("\(file):\(number + 1): \(pattern)")
                }
            }
        }
        #expect(found.isEmpty, "read the clock through the service's `time` instead: \(found)")
    }

    @Test("The lint finds a clock read where there is one")
    func lintFindsReads() {
        #expect(Self.forbidden.contains { Self.reads("        let now = Date()", $0) })
        #expect(Self.forbidden.contains { Self.reads("try await Task.sleep(for: .seconds(1))", $0) })
        #expect(Self.forbidden.contains { Self.reads("max(0, due.timeIntervalSinceNow)", $0) })
        #expect(!Self.forbidden.contains { Self.reads("        let now = time.now", $0) })
        #expect(!Self.forbidden.contains { Self.reads("let due = core.engine.nextDueDate()", $0) })
    }
}
