import ArgumentParser
import BrokerOptions
import Foundation
import Locking
import Logging
import MQTTClient
import RideStatusKit

#if canImport(Glibc)
    import Glibc
#endif

/// `ride-watch`: a live view of every active ride from `rides/+/status`: phase, ETA as a progress bar,
/// staleness and the last cadence gap, the workers online and the dead letters. Redraws in place on a
/// terminal (stale rides in yellow, rides overdue for a status in red); prints plain lines otherwise. Statuses
/// are read with RideStatusKit, the client library, so this view is also its first user.
@main
struct RideWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ride-watch", abstract: "Live view of ride statuses.")

    @OptionGroup var access: BrokerOptions
    @Option(help: "Rides shown at most on a terminal.") var rows = 30
    @Option(help: "Order of the rides: eta (soonest first), age (oldest status first) or id.") var sort = SortOrder.eta
    @Flag(help: "Plain lines even on a terminal.") var plain = false

    enum SortOrder: String, ExpressibleByArgument, CaseIterable, Sendable {
        case eta, age, id
    }

    /// C1: a ride with no status for longer than this is overdue (the contract's ceiling on the interval).
    static let overdueAfter: TimeInterval = 20

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
        /// E2: what made the ETA: route, nav(igation) or est(imate, E1); "-" from a worker older than E2.
        var source = "-"
    }

    func run() async throws {
        var logger = Logger(label: "ride-watch")
        logger.logLevel = .warning
        let client = try MQTTClient(
            configuration: try access.configuration(clientID: "ride-watch-\(UInt32.random(in: 0...UInt32.max))"),
            logger: logger)
        client.start()
        let topics = RideTopics()
        let decoder = JSONDecoder.rideStatus
        try await client.subscribe(topics.statusFilter, qos: .atLeastOnce)
        // L8: who produces the statuses; the view says so when no worker is online.
        try await client.subscribe(topics.presenceFilter, qos: .atLeastOnce)
        // 3.5: refused inputs, counted by reason (an account without the right to read them sees none).
        let deadLetters = (try? await client.subscribe(topics.deadLetter, qos: .atMostOnce)) != nil
        let terminal = isatty(STDOUT_FILENO) == 1 && !plain
        let rows = Rows()
        let renderer = Task {
            while !Task.isCancelled && terminal {
                render(rows.snapshot(sort), workers: rows.workers, deadLetters: deadLetters ? rows.deadLetters : nil)
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        defer { renderer.cancel() }
        if !client.isConnected { print("waiting for the broker at \(access.brokerURL)…") }
        for await message in client.messages {
            if case .some(let worker) = Self.presenceWorker(message.topic, topics: topics) {
                let presence = try? decoder.decode(Presence.self, from: Data(message.payload))
                let state = presence?.state ?? .offline
                rows.setWorker(worker, online: state == .online)
                if !terminal { print("worker \(worker) \(state.rawValue)") }
                continue
            }
            if message.topic == topics.deadLetter {
                let letter = try? decoder.decode(DeadLetter.self, from: Data(message.payload))
                rows.countDeadLetter(letter?.reason.rawValue ?? "unreadable")
                if !terminal, let letter {
                    print("dead letter \(letter.reason.rawValue) on \(letter.topic): \(letter.detail)")
                }
                continue
            }
            guard let ride = topics.ride(ofStatusTopic: message.topic) else { continue }
            if message.payload.isEmpty {
                rows.remove(ride)
                if !terminal { print("\(ride) ended") }
                continue
            }
            guard let status = try? decoder.decode(RideStatus.self, from: Data(message.payload)) else {
                if !terminal { print("\(ride): a status that does not decode (\(message.payload.count) bytes)") }
                continue
            }
            let worker = message.properties.userProperties.last { $0.0 == "worker" }?.1
            let row = rows.update(ride, status: status, retained: message.retain, worker: worker)
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
    static func presenceWorker(_ topic: String, topics: RideTopics) -> String? {
        let prefix = topics.presence(worker: "")
        guard topic.hasPrefix(prefix) else { return nil }
        let worker = topic.dropFirst(prefix.count)
        return worker.isEmpty || worker.contains("/") ? nil : String(worker)
    }

    static let etaWidth = 32

    /// The ETA column: a bar of the leg so far and the seconds left, P before the pickup, D to the drop-off. At the
    /// pickup the approach is done and the trip not begun: a full bar, not the drop-off's empty one.
    static func etaColumn(phase: String, remaining: Double?, total: Double?) -> String {
        let width = 20
        func bar(_ filled: Int) -> String {
            "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
        }
        let column: String
        if phase == RidePhase.pickup.rawValue {
            column = bar(width) + " at pickup"
        } else if let remaining {
            let filled = Int((1 - min(1, remaining / max(total ?? 1, 1))) * Double(width))
            let leg = ["received", "confirmed", "approachingPickup"].contains(phase) ? "P" : "D"
            column = bar(filled) + " \(leg) " + String(format: "%4ds", Int(remaining))
        } else {
            column = bar(0) + "      -"
        }
        return column.padding(toLength: etaWidth, withPad: " ", startingAt: 0)
    }

    func render(_ snapshot: [(String, RideRow)], workers: [String: Bool], deadLetters: [String: Int]?) {
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
        if let deadLetters {
            let total = deadLetters.values.reduce(0, +)
            let top = deadLetters.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key) \($0.value)" }
            screen +=
                "dead letters since start: \(total)" + (top.isEmpty ? "" : " (\(top.joined(separator: ", ")))") + "\n"
        } else {
            screen += "dead letters: not readable with this account\n"
        }
        let counts = Dictionary(grouping: snapshot, by: { $0.1.phase }).mapValues(\.count)
        screen += "ride-watch — \(snapshot.count) active rides   "
        screen +=
            ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"]
            .map { "\($0): \(counts[$0] ?? 0)" }.joined(separator: "  ") + "\n\n"
        screen +=
            "sorted by \(sort.rawValue); \u{1B}[33mstale\u{1B}[0m, \u{1B}[31mno status for over \(Int(Self.overdueAfter)) s\u{1B}[0m\n"
        screen +=
            "RIDE         PHASE              "
            + "ETA (P pickup, D drop-off)".padding(toLength: Self.etaWidth, withPad: " ", startingAt: 0)
            + "FROM    AGE   GAP   SEQ  WORKER\n"
        for (ride, row) in snapshot.prefix(rows) {
            let eta = Self.etaColumn(
                phase: row.phase, remaining: row.eta.map { max(0, $0.timeIntervalSinceNow) }, total: row.firstEta)
            let age = Date().timeIntervalSince(row.receivedAt)
            let gap = row.gap.map { String(format: "%4.1fs", $0) } ?? "   - "
            let phase = row.phase.padding(toLength: 18, withPad: " ", startingAt: 0)
            let name = ride.padding(toLength: 12, withPad: " ", startingAt: 0)
            let line =
                "\(name) \(phase) \(eta)\(row.source.padding(toLength: 5, withPad: " ", startingAt: 0)) \(String(format: "%4.0fs", age)) \(gap) \(row.sequence)  \(row.worker ?? "-")\(row.stale ? "  STALE" : "")"
            let colour = age > Self.overdueAfter ? "\u{1B}[31m" : row.stale ? "\u{1B}[33m" : ""
            screen += colour.isEmpty ? line + "\n" : colour + line + "\u{1B}[0m\n"
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
        var deadLetters: [String: Int] = [:]
    }

    private let state = Locked(State())

    func remove(_ ride: String) { state.withLock { _ = $0.rows.removeValue(forKey: ride) } }

    /// Every worker seen on the presence topics, and whether it is online.
    var workers: [String: Bool] { state.withLock { $0.workers } }

    func setWorker(_ worker: String, online: Bool) { state.withLock { $0.workers[worker] = online } }

    /// Dead letters seen, by reason code (3.5).
    var deadLetters: [String: Int] { state.withLock { $0.deadLetters } }

    func countDeadLetter(_ reason: String) { state.withLock { $0.deadLetters[reason, default: 0] += 1 } }

    func update(_ ride: String, status: RideStatus, retained: Bool, worker: String?) -> RideWatchCommand.RideRow {
        state.withLock { state in
            var row = state.rows[ride] ?? RideWatchCommand.RideRow()
            row.worker = worker ?? row.worker
            let now = Date()
            if state.rows[ride] != nil && !retained { row.gap = now.timeIntervalSince(row.receivedAt) }
            row.receivedAt = now
            row.phase = status.phase.rawValue
            row.stale = status.stale
            row.sequence = status.sequence
            switch status.estimateSource {
            case .route: row.source = "route"
            case .navigation: row.source = "nav"
            case .estimate: row.source = "est"
            case nil: row.source = "-"
            }
            let beforePickup = [.received, .confirmed, .approachingPickup].contains(status.phase)
            let key = beforePickup ? "estimatedPickupDate" : "estimatedDropOffDate"
            let eta = beforePickup ? status.estimatedPickupDate : status.estimatedDropOffDate
            if status.phase == .completed {
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

    /// The rides in the order asked for: soonest ETA first (rides without one last), oldest status first, or by id.
    func snapshot(_ order: RideWatchCommand.SortOrder) -> [(String, RideWatchCommand.RideRow)] {
        let rows = state.withLock { Array($0.rows) }
        func byID(_ a: (String, RideWatchCommand.RideRow), _ b: (String, RideWatchCommand.RideRow)) -> Bool {
            a.0.localizedStandardCompare(b.0) == .orderedAscending
        }
        switch order {
        case .id: return rows.sorted(by: byID)
        case .age:
            return rows.sorted { $0.1.receivedAt == $1.1.receivedAt ? byID($0, $1) : $0.1.receivedAt < $1.1.receivedAt }
        case .eta:
            return rows.sorted { a, b in
                switch (a.1.eta, b.1.eta) {
                case (let x?, let y?): return x == y ? byID(a, b) : x < y
                case (.some, nil): return true
                case (nil, .some): return false
                case (nil, nil): return byID(a, b)
                }
            }
        }
    }
}
