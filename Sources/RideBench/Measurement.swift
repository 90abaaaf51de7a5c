import ArgumentParser
import Foundation
import Logging
import MQTTClient
import MosquittoTesting

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

/// The resident memory of another process (`VmRSS` of `/proc/<pid>/status`), in bytes; 0 when unknown.
func residentBytes(of pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kilobytes * 1024
}

/// CPU seconds (user and system) of this process's children that have exited and been waited for.
func reapedChildrenCPUSeconds() -> Double {
    var usage = rusage()
    guard getrusage(RUSAGE_CHILDREN.rawValue, &usage) == 0 else { return 0 }
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds (user and system) another process has used so far (`/proc/<pid>/stat`); 0 when unknown.
func cpuSeconds(of pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After the command name in parentheses: state is field 3, utime field 14 and stime field 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds the hypervisor took from this machine since boot (`steal` in `/proc/stat`, all cores): time the
/// processes of a benchmark were runnable and did not run, which no change of theirs explains.
func machineStealSeconds() -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
        let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
    else { return 0 }
    // cpu user nice system idle iowait irq softirq steal ...
    let fields = line.split(separator: " ")
    guard fields.count > 8, let steal = Double(fields[8]) else { return 0 }
    return steal / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds of this process (the harness itself: its observer reads every status).
func ownCPUSeconds() -> Double { cpuSeconds(of: getpid()) }

/// Polls `condition` every 100 ms until it holds, or throws naming `what` after `timeout` seconds.
func waitFor(_ what: String, timeout: Double, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        guard Date() < deadline else { throw ValidationError("timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(100))
    }
}

/// A connected client of the harness with a clean session. It sends no Receive Maximum (MQTT 5's default,
/// 65,535): the harness observes every status of 100,000 rides at QoS 1, and with the client's default of 100
/// the broker's fan-out to this one observer held back its acknowledgements to the worker; the largest cadence
/// gap measured 6.1 to 7.3 s with it and 5.49 to 5.55 s without (this machine; 5.17 s with the
/// observer at QoS 0). The harness measures the worker, not one slow subscriber.
func connect(_ broker: TestBroker, _ id: String, _ logger: Logger, buffer: Int = 10_000) async throws -> MQTTClient {
    var configuration = MQTTConfiguration(
        host: broker.host, port: broker.port, clientID: id, cleanStart: true, bufferCapacity: buffer)
    configuration.receiveMaximum = 0
    let client = try MQTTClient(configuration: configuration, logger: logger)
    try await client.connect(timeout: .seconds(10))
    return client
}

/// The sum of every sample of the Prometheus metric `name` (all label sets) in the text of `/metrics`.
func metricSum(_ name: String, in text: String) -> Double {
    text.split(separator: "\n").reduce(0) { sum, line in
        guard line.hasPrefix(name), !line.hasPrefix("#") else { return sum }
        let rest = line.dropFirst(name.count)
        guard rest.first == " " || rest.first == "{" else { return sum }
        return sum + (Double(line.split(separator: " ").last ?? "") ?? 0)
    }
}
