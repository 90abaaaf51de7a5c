import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing
import WorkerGroup

/// G5, G6, G3 and C5 under a partition, with real processes: three workers take their buckets from a real 3-member
/// etcd on a real mosquitto; one of them reaches the broker and every etcd member through relays (``TCPRelay``),
/// which the test cuts (SIGSTOP: nothing forwarded either way, the connections left open, as a partition leaves
/// them) from the broker only, from etcd only, or from both, for 12 s (20 s for a cut from the broker: past the
/// new holders' wait for its will), then heals. A recording subscriber checks
/// every ride's stream in the order it arrived. `make test-cuts` repeats each case (`CUT_RUNS`, default 20 there,
/// 1 here).
@Suite(
    "A worker cut off from the broker, from etcd, or from both (G5, G6, G3, C5)", .serialized, .timeLimit(.minutes(8)))
struct CutEndToEndTests {
    static let runs = Int(ProcessInfo.processInfo.environment["CUT_RUNS"] ?? "") ?? 1

    typealias Cut = PartitionCut

    /// What one run saw.
    struct Outcome: CustomStringConvertible {
        var regressions: [String] = []
        var retainedBehind: [String] = []
        /// Statuses of a ride under its lost grant after it went on under a newer one, before the heal.
        var dualPublished: [String] = []
        var lost: [String] = []
        var largestGap = 0.0
        /// From the cut to the last of the cut-off worker's rides published under a newer grant.
        var takeover = 0.0
        /// From the end of the run until every node's retained statuses were the highest received.
        var retainedLag = 0.0
        /// G5, G6: the others' grants that waited for the cut-off worker (offline, or its release notice), and the
        /// waits that ran out (served without either).
        var releaseWaits = 0
        var releaseWaitsExpired = 0
        var description: String {
            "regressions \(regressions.count), retained behind \(retainedBehind.count), dual published \(dualPublished.count), lost \(lost.count), takeover \(String(format: "%.2f", takeover)) s, largest gap \(String(format: "%.2f", largestGap)) s, retained lag \(String(format: "%.2f", retainedLag)) s, release waits \(releaseWaits) (\(releaseWaitsExpired) ran out)"
        }
    }

    /// `ridestatus_active_rides` of a worker.
    static func activeRides(_ worker: WorkerProcess) -> Int? {
        httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body
            .split(separator: "\n").first { $0.hasPrefix("ridestatus_active_rides ") }
            .flatMap { Double($0.split(separator: " ")[1]) }.map { Int($0) }
    }

    static func arguments(etcd endpoints: [String]) -> [String] {
        [
            "--set", "group.authority=etcd", "--set", "group.etcdEndpoints=\(endpoints.joined(separator: ","))",
            "--set", "group.etcdLeaseTTL=\(Int(GroupEtcdTests.leaseTTL))",
        ]
    }

    /// Where the run's broker is: one mosquitto, or a 3-node NATS cluster (MQTT 3.1.1: no user properties, so
    /// the checks read each status's grant from its sequence's epoch, G6).
    struct Broker {
        var ports: [Int]
        var directory: URL
        var v311: Bool
    }

    static func run(_ cut: Cut, nats: Bool = false) async throws -> Outcome {
        let etcd = try await EtcdCluster()
        defer { etcd.stop() }
        if nats {
            let cluster = try await NATSCluster.start()
            defer { cluster.stop() }
            return try await run(
                cut, on: Broker(ports: cluster.nodes.map(\.mqttPort), directory: cluster.directory, v311: true),
                etcd: etcd)
        }
        return try await withTestBroker { broker in
            try await run(cut, on: Broker(ports: [broker.port], directory: broker.directory, v311: false), etcd: etcd)
        }
    }

    static func run(_ cut: Cut, on broker: Broker, etcd: EtcdCluster, rides count: Int = 30) async throws -> Outcome {
        let interval = 1.0
        var brokerRelays: [TCPRelay] = []
        for port in broker.ports { brokerRelays.append(try await TCPRelay(to: port)) }
        var etcdRelays: [TCPRelay] = []
        for member in etcd.members { etcdRelays.append(try await TCPRelay(to: member.clientPort)) }
        defer { for relay in brokerRelays + etcdRelays { relay.stop() } }
        let protocolArguments = broker.v311 ? ["--set", "broker.protocol=3.1.1"] : []
        let ids = ["w-c0", "w-c1", "w-c2"]
        // Worker i starts on node i and fails over to the others in turn; the first reaches them through relays.
        func urls(_ index: Int, _ ports: [Int]) -> String {
            (0..<ports.count).map { "mqtt://127.0.0.1:\(ports[(index + $0) % ports.count])" }.joined(separator: ",")
        }
        let cutOff = try WorkerProcess(
            url: urls(0, brokerRelays.map(\.port)), directory: broker.directory, workerID: ids[0], interval: interval,
            extra: protocolArguments + arguments(etcd: etcdRelays.map { "http://127.0.0.1:\($0.port)" }))
        let others = try (1..<ids.count).map {
            try WorkerProcess(
                url: urls($0, broker.ports), directory: broker.directory, workerID: ids[$0], interval: interval,
                extra: protocolArguments + arguments(etcd: etcd.endpoints))
        }
        let workers = [cutOff] + others
        for worker in workers { try await worker.start(timeout: 60) }
        defer { for worker in workers { worker.process?.signal(SIGKILL) } }

        let version: MQTTConfiguration.ProtocolVersion = broker.v311 ? .v311 : .v5
        let observer = try await Observer(
            host: "127.0.0.1", port: broker.ports[0], filters: ["rides/+/status"], protocolVersion: version)
        let feeder = try await Observer(
            host: "127.0.0.1", port: broker.ports[broker.ports.count - 1], filters: [], protocolVersion: version)
        let rides = (0..<count).map { "r-cut\($0)" }
        for ride in rides {
            try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
        }
        let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
        defer { feeding.cancel() }
        let held = rides.filter { Ownership(members: ids).owner(ofRide: $0) == cutOff.workerID }
        func seen() -> [GroupEndToEndTests.Seen] {
            GroupEndToEndTests.seen(observer.timedMessages).filter { $0.sequence != nil }
        }
        func epoch(_ status: GroupEndToEndTests.Seen) -> UInt64 { SequenceNumbering.epoch(of: status.sequence!) }
        // Every ride published, and each worker running its share by the rendezvous of the three.
        do {
            try await observer.waitFor("a status of every ride", timeout: 30) { _ in
                rides.allSatisfy { !observer.statuses($0).isEmpty }
            }
        } catch {
            print("rides without a status: \(rides.filter { observer.statuses($0).isEmpty })")
            for worker in workers {
                let lines = worker.logText.split(separator: "\n").filter {
                    !$0.contains("buckets granted") && !$0.contains("rides taken over")
                }
                print(
                    "--- \(worker.workerID), \(Self.activeRides(worker) ?? -1) rides:\n\(lines.suffix(40).joined(separator: "\n"))"
                )
            }
            throw error
        }
        let shares = Dictionary(grouping: rides) { Ownership(members: ids).owner(ofRide: $0)! }.mapValues(\.count)
        let settled = Date().addingTimeInterval(30)
        while !workers.allSatisfy({ Self.activeRides($0) == shares[$0.workerID] ?? 0 }), Date() < settled {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(workers.allSatisfy { Self.activeRides($0) == shares[$0.workerID] ?? 0 }, "every worker runs its share")
        try await Task.sleep(for: .seconds(2 * interval))
        let before = Dictionary(grouping: seen(), by: \.ride).mapValues { $0.map(epoch).max() ?? 0 }

        switch cut {
        case .broker: for relay in brokerRelays { relay.cut() }
        case .etcd: for relay in etcdRelays { relay.cut() }
        case .both: for relay in brokerRelays + etcdRelays { relay.cut() }
        }
        let cutAt = Date()
        // G3: the others take the cut-off worker's rides, under newer grants.
        func movedOn(after start: Date, above epochs: [String: UInt64]) -> Bool {
            let after = seen().filter { $0.at > start }
            return held.allSatisfy { ride in after.contains { $0.ride == ride && epoch($0) > epochs[ride] ?? 0 } }
        }
        try await observer.waitFor("the cut-off worker's rides under newer grants", timeout: cut.seconds) { _ in
            movedOn(after: cutAt, above: before)
        }
        try await Task.sleep(for: .seconds(max(0, cut.seconds - Date().timeIntervalSince(cutAt))))
        let during = Dictionary(grouping: seen(), by: \.ride).mapValues { $0.map(epoch).max() ?? 0 }
        for relay in brokerRelays + etcdRelays { relay.heal() }
        let healedAt = Date()
        // It rejoins, and its rides come back to it under newer grants again.
        try await observer.waitFor("the cut-off worker's rides back after the heal", timeout: 45) { _ in
            movedOn(after: healedAt, above: during)
        }
        try await Task.sleep(for: .seconds(2 * interval))
        feeding.cancel()

        var outcome = Outcome()
        for worker in workers where worker.workerID != cutOff.workerID {
            outcome.releaseWaits += worker.logText.components(separatedBy: "served once their last holder").count - 1
            outcome.releaseWaitsExpired +=
                worker.logText.components(separatedBy: "within the wait: served now").count - 1
        }
        let statuses = seen()
        for ride in rides {
            let stream = statuses.filter { $0.ride == ride }
            // C5, G6: as received, the sequence (its grant's epoch in the high bits) strictly grows.
            for (earlier, later) in zip(stream, stream.dropFirst()) where later.sequence! <= earlier.sequence! {
                outcome.regressions.append(
                    "\(ride): \(later.worker ?? "?") \(later.sequence!) at +\(String(format: "%.2f", later.at.timeIntervalSince(cutAt))) s after \(earlier.worker ?? "?") \(earlier.sequence!) (healed at +\(String(format: "%.2f", healedAt.timeIntervalSince(cutAt))) s)"
                )
            }
            for (earlier, later) in zip(stream, stream.dropFirst()) {
                outcome.largestGap = max(outcome.largestGap, later.at.timeIntervalSince(earlier.at))
            }
            if let last = stream.last, Date().timeIntervalSince(last.at) > 10 { outcome.lost.append(ride) }
            if stream.isEmpty { outcome.lost.append(ride) }
            guard held.contains(ride) else { continue }
            let taken = stream.first { $0.at > cutAt && epoch($0) > before[ride] ?? 0 }
            let takenAt = taken?.at ?? .distantFuture
            outcome.takeover = max(outcome.takeover, takenAt.timeIntervalSince(cutAt))
            // G1, G6: once the ride went on under a newer grant, nothing under the lost one until the heal.
            for status in stream
            where status.at > takenAt && status.at < healedAt && epoch(status) <= before[ride] ?? 0 {
                outcome.dualPublished.append(
                    "\(ride): \(status.sequence!) at +\(status.at.timeIntervalSince(cutAt)) s")
            }
        }
        // C5: the retained status, read fresh from every node, is the highest received (on NATS, once the
        // nodes' copies caught up: the time it took is the run's retained lag).
        let highest = Dictionary(grouping: statuses, by: \.ride).mapValues { $0.compactMap(\.sequence).max() ?? 0 }
        let endedAt = Date()
        for port in broker.ports {
            let reader = try await Observer(
                host: "127.0.0.1", port: port, filters: ["rides/+/status"], protocolVersion: version)
            do {
                try await reader.waitFor("every retained status at its highest", timeout: broker.v311 ? 20 : 3) { _ in
                    rides.allSatisfy { (reader.statuses($0).last?.sequence ?? -1) >= highest[$0] ?? 0 }
                }
                outcome.retainedLag = max(outcome.retainedLag, Date().timeIntervalSince(endedAt))
            } catch {
                for ride in rides where (reader.statuses(ride).last?.sequence ?? -1) < highest[ride] ?? 0 {
                    outcome.retainedBehind.append(
                        "\(ride) on :\(port): retained \(reader.statuses(ride).last?.sequence ?? -1) < \(highest[ride] ?? 0)"
                    )
                }
            }
            await reader.stop()
        }
        // Waits that ran out are worth reading in every run: whom they waited for, and when.
        for worker in workers {
            let expired = worker.logText.split(separator: "\n").filter {
                $0.contains("within the wait: served now") || $0.contains("served once their last holder")
            }
            if expired.contains(where: { $0.contains("within the wait") }) {
                print(
                    "--- release waits of \(worker.workerID) (cut at \(cutAt)):\n\(expired.suffix(60).joined(separator: "\n"))"
                )
            }
        }
        if !outcome.regressions.isEmpty || !outcome.dualPublished.isEmpty {
            // What the cut-off worker did about its connection and its grants (not each bucket's grant).
            let lines = cutOff.logText.split(separator: "\n").filter {
                !$0.contains("buckets granted") && !$0.contains("rides taken over") && !$0.contains("ride ended")
            }
            print(
                "--- \(cutOff.workerID), cut at \(cutAt), healed at \(healedAt):\n\(lines.suffix(80).joined(separator: "\n"))"
            )
            let brokerLog =
                (try? String(contentsOf: broker.directory.appendingPathComponent("mosquitto.log"), encoding: .utf8))
                ?? ""
            print(
                "--- the broker on \(cutOff.workerID):\n\(brokerLog.split(separator: "\n").filter { $0.contains(cutOff.workerID) }.suffix(30).joined(separator: "\n"))"
            )
        }
        await observer.stop()
        await feeder.stop()
        for worker in workers { _ = await worker.terminate() }
        return outcome
    }

    /// What every run of a cut must show, on either broker.
    static func check(_ outcome: Outcome, cut: PartitionCut, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(outcome.regressions.isEmpty, "C5: \(outcome.regressions.prefix(5))", sourceLocation: sourceLocation)
        #expect(
            outcome.retainedBehind.isEmpty, "C5: \(outcome.retainedBehind.prefix(5))", sourceLocation: sourceLocation)
        #expect(
            outcome.dualPublished.isEmpty, "G1, G6: \(outcome.dualPublished.prefix(5))", sourceLocation: sourceLocation)
        #expect(outcome.lost.isEmpty, "no ride lost: \(outcome.lost.prefix(5))", sourceLocation: sourceLocation)
        #expect(
            outcome.takeover <= cut.takeoverBound,
            "G3, G5, G6: the rides move within \(cut.takeoverBound) s (\(cut.takeoverReason))",
            sourceLocation: sourceLocation)
        #expect(outcome.largestGap <= 20, "C1: at most 20 s between statuses", sourceLocation: sourceLocation)
    }

    @Test(
        "G5, G6, G3, C5: a worker cut off from the broker, from etcd or from both: its rides move within 10 s + interval, it publishes none of them meanwhile, nothing goes back",
        .serialized, arguments: PartitionCut.selected)
    func cutOff(_ cut: Cut) async throws {
        for index in 1...Self.runs {
            let outcome = try await Self.run(cut)
            print("cut from \(cut), run \(index) of \(Self.runs): \(outcome)")
            Self.check(outcome, cut: cut)
        }
    }
}

/// What a partition cuts one worker off from.
enum PartitionCut: String, CaseIterable, CustomStringConvertible, Sendable {
    case broker, etcd, both
    var description: String { rawValue }

    /// How long the cut lasts: past the longest takeover, so that the rides move during it, as they would in a
    /// cut that does not heal.
    var seconds: Double { self == .etcd ? 12 : 20 }

    /// The longest the cut-off worker's rides may take to move on, in seconds.
    /// - etcd: its grants end with its etcd lease (4 s here); its connection to the broker is open, so it sends
    ///   its release notice, or its fence resets the connection (its will): G3's 10 s + interval, +1 s of polling.
    /// - the broker (or both): its G5 lease lapses within the broker's deadline (1.5 x keepalive 5 s), and the new
    ///   holders wait for its will until the broker closes the connection, at most `group.etcdReleaseWait`
    ///   (2 x keepalive) after their claim; +1 s of polling. G3's bound is for a death (a closed socket), whose
    ///   will comes at once.
    var takeoverBound: Double { self == .etcd ? 10 + 1 + 1 : 7.5 + 10 + 1 }
    var takeoverReason: String {
        self == .etcd
            ? "G3: 10 s + interval" : "G5, G6: the broker's deadline, then the new holder's wait for the old one's will"
    }

    /// The cases `CUT_CASES` names (space- or comma-separated), every case when it names none.
    static var selected: [PartitionCut] {
        let names = (ProcessInfo.processInfo.environment["CUT_CASES"] ?? "").split { $0 == " " || $0 == "," }
        let chosen = names.compactMap { PartitionCut(rawValue: String($0)) }
        return chosen.isEmpty ? allCases : chosen
    }
}
