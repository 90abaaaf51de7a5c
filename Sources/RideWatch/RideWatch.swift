import ArgumentParser
import BrokerOptions
import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain

#if canImport(Glibc)
    import Glibc
#endif

/// `ride-watch`: a live view of every active ride from `rides/+/status`: phase, ETA as a progress bar,
/// staleness and the last cadence gap. Redraws in place on a terminal; prints plain lines otherwise.
@main
struct RideWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ride-watch", abstract: "Live view of ride statuses.")

    @OptionGroup var access: BrokerOptions
    @Option(help: "Rides shown at most on a terminal.") var rows = 30
    @Flag(help: "Plain lines even on a terminal.") var plain = false

    struct RideRow {
        var phase = ""
        var stale = false
        var sequence = 0
        var eta: Date?
        var firstEta: Double?
        var receivedAt = Date()
        var gap: Double?
        var etaKey: String?
        /// G2: the worker that published the ride's last status (its `worker` user property; MQTT 5 only).
        var worker: String?
    }

    func run() async throws {
        var logger = Logger(label: "ride-watch")
        logger.logLevel = .warning
        let client = try MQTTClient(
            configuration: try access.configuration(clientID: "ride-watch-\(UInt32.random(in: 0...UInt32.max))"),
            logger: logger)
        client.start()
        let topics = Topics()
        try await client.subscribe(topics.statusFilter, qos: .atLeastOnce)
        // L8: who produces the statuses; the view says so when no worker is online.
        try await client.subscribe(topics.presence(worker: "+"), qos: .atLeastOnce)
        let terminal = isatty(STDOUT_FILENO) == 1 && !plain
        let rows = Rows()
        let renderer = Task {
            while !Task.isCancelled && terminal {
                render(rows.snapshot(), workers: rows.workers)
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        defer { renderer.cancel() }
        if !client.isConnected { print("waiting for the broker at \(access.broker)…") }
        for await message in client.messages {
            if case .some(let worker) = Self.presenceWorker(message.topic, topics: topics) {
                let json = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any]
                let state = json?["state"] as? String ?? "offline"
                rows.setWorker(worker, online: state == "online")
                if !terminal { print("worker \(worker) \(state)") }
                continue
            }
            let ride = message.topic.split(separator: "/").dropFirst().first.map(String.init) ?? "?"
            if message.payload.isEmpty {
                rows.remove(ride)
                if !terminal { print("\(ride) ended") }
                continue
            }
            guard let json = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any] else {
                continue
            }
            let worker = message.properties.userProperties.last { $0.0 == "worker" }?.1
            let row = rows.update(ride, json: json, retained: message.retain, worker: worker)
            if !terminal {
                let eta = row.eta.map { " eta \(Int($0.timeIntervalSinceNow))s" } ?? ""
                let gap = row.gap.map { String(format: " gap %.1fs", $0) } ?? ""
                let owner = row.worker.map { " by \($0)" } ?? ""
                print("\(ride) \(row.phase) seq \(row.sequence)\(eta)\(gap)\(row.stale ? " STALE" : "")\(owner)")
                fflush(nil)
            }
        }
    }

    /// The worker id of a presence topic (`ridestatus/workers/{id}`), if `topic` is one.
    static func presenceWorker(_ topic: String, topics: Topics) -> String? {
        let prefix = topics.presence(worker: "")
        guard topic.hasPrefix(prefix) else { return nil }
        let worker = topic.dropFirst(prefix.count)
        return worker.isEmpty || worker.contains("/") ? nil : String(worker)
    }

    func render(_ snapshot: [(String, RideRow)], workers: [String: Bool]) {
        var screen = "\u{1B}[H\u{1B}[2J"
        let online = workers.filter(\.value).keys.sorted()
        if online.isEmpty {
            screen +=
                "\u{1B}[1;31mNO WORKER ONLINE: statuses are not being produced (see var/log/worker.log)\u{1B}[0m\n"
        } else {
            // G1: how many of the rides shown each worker publishes.
            let owned = Dictionary(grouping: snapshot.compactMap(\.1.worker), by: { $0 }).mapValues(\.count)
            screen += "workers online: \(online.map { "\($0) (\(owned[$0] ?? 0) rides)" }.joined(separator: ", "))\n"
        }
        let counts = Dictionary(grouping: snapshot, by: { $0.1.phase }).mapValues(\.count)
        screen += "ride-watch — \(snapshot.count) active rides   "
        screen +=
            ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"]
            .map { "\($0): \(counts[$0] ?? 0)" }.joined(separator: "  ") + "\n\n"
        screen += "RIDE         PHASE              ETA                         AGE   GAP   SEQ  WORKER\n"
        for (ride, row) in snapshot.prefix(rows) {
            let remaining = row.eta.map { max(0, $0.timeIntervalSinceNow) }
            let total = max(row.firstEta ?? 1, 1)
            let filled = remaining.map { Int((1 - min(1, $0 / total)) * 20) } ?? 0
            let bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled) + "]"
            let eta = remaining.map { String(format: "%4ds", Int($0)) } ?? "    -"
            let age = Date().timeIntervalSince(row.receivedAt)
            let gap = row.gap.map { String(format: "%4.1fs", $0) } ?? "   - "
            let phase = row.phase.padding(toLength: 18, withPad: " ", startingAt: 0)
            let name = ride.padding(toLength: 12, withPad: " ", startingAt: 0)
            screen +=
                "\(name) \(phase) \(bar) \(eta) \(String(format: "%4.0fs", age)) \(gap) \(row.sequence)  \(row.worker ?? "-")\(row.stale ? "  STALE" : "")\n"
        }
        if snapshot.count > rows { screen += "… and \(snapshot.count - rows) more\n" }
        screen += "\nCtrl-C to quit"
        print(screen)
        fflush(nil)
    }
}

/// The rides seen so far; the message task writes, the renderer reads.
final class Rows: Sendable {
    private struct State {
        var rows: [String: RideWatchCommand.RideRow] = [:]
        var workers: [String: Bool] = [:]
    }

    private let state = Locked(State())

    func remove(_ ride: String) { state.withLock { _ = $0.rows.removeValue(forKey: ride) } }

    /// Every worker seen on the presence topics, and whether it is online.
    var workers: [String: Bool] { state.withLock { $0.workers } }

    func setWorker(_ worker: String, online: Bool) { state.withLock { $0.workers[worker] = online } }

    func update(_ ride: String, json: [String: Any], retained: Bool, worker: String?) -> RideWatchCommand.RideRow {
        state.withLock { state in
            var row = state.rows[ride] ?? RideWatchCommand.RideRow()
            row.worker = worker ?? row.worker
            let now = Date()
            if state.rows[ride] != nil && !retained { row.gap = now.timeIntervalSince(row.receivedAt) }
            row.receivedAt = now
            row.phase = json["phase"] as? String ?? "?"
            row.stale = json["stale"] as? Bool ?? false
            row.sequence = json["sequence"] as? Int ?? 0
            let key =
                ["received", "confirmed", "approachingPickup"].contains(row.phase)
                ? "estimatedPickupDate" : "estimatedDropOffDate"
            let eta = (json[key] as? String).flatMap { ISO8601DateFormatter.withFraction.date(from: $0) }
            if row.phase == "completed" {
                row.eta = nil
            } else if let eta {
                if row.eta == nil || key != (row.etaKey ?? key) { row.firstEta = eta.timeIntervalSince(now) }
                row.eta = eta
            }
            row.etaKey = key
            state.rows[ride] = row
            return row
        }
    }

    func snapshot() -> [(String, RideWatchCommand.RideRow)] {
        state.withLock { $0.rows.sorted { $0.key.localizedStandardCompare($1.key) == .orderedAscending } }
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let withFraction: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}
