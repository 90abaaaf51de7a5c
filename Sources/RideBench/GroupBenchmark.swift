import ArgumentParser
import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain

/// `ride-bench group` (`make bench-group`, G1-G4): rides shared by a group of release workers on one
/// mosquitto, each ride's vehicle reporting a fix every `--fix-every` seconds. One worker holds every ride first
/// (the baseline); two more join (rides moved by the joins); the group runs steady (the cost of membership: CPU
/// and broker messages a second, against the baseline, same run); then one worker is SIGKILLed and another
/// SIGTERMed. For the last join, the kill and the SIGTERM it reports over the rides that moved: the time from
/// the signal to each ride's first status from its new owner (p50, p99, max: the time until every moved ride
/// publishes again), the largest status gap, the statuses that showed no location after the ride had shown one
/// (V5 across owners, G3: target 0), and the state writes of the live workers meanwhile.
struct GroupBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group", abstract: "Handover times and the cost of membership of a group of workers.")

    @Option(help: "Active rides.") var rides = 30_000
    @Option(help: "Seconds between two fixes of a vehicle (each ride has its own vehicle).") var fixEvery = 10.0
    @Option(help: "A setting for every worker, as KEY=VALUE (repeatable), e.g. worker.takeoverReadsStatuses=false.")
    var set: [String] = []
    @Option(help: "Seconds between statuses of a ride (C1).") var interval = 5.0
    @Option(
        help:
            "Seconds each steady phase is measured; default one sequence block (12 intervals), so that the durable-state writes (once per block, C5) are counted fairly."
    )
    var steady: Double?
    @Flag(
        help:
            "Ownership granted by etcd (G6): three etcd members on loopback, every worker with group.authority=etcd; without it the group's broker-only mode (G5's lease)."
    )
    var etcd = false
    @Option(help: "Copy the run's directory (each worker's log, the broker's) to this path at the end.")
    var keepLogs: String?

    /// Who published each ride's statuses, and when, as a subscriber saw them.
    final class Owners: Sendable {
        struct Seen {
            var worker: String
            var at: ContinuousClock.Instant
            /// Whether the status showed the vehicle's location (`"vehicle":{"location":null` otherwise).
            var located: Bool
        }

        /// One ride that changed owner: seconds from the signal to its first status from the new owner (nil
        /// while it has none), the largest gap around the handover, and the statuses after the signal that showed
        /// no location although the ride had shown one before it.
        struct Moved {
            var delay: Double?
            var gap: Double
            var blanked: Int
        }

        private let state = Locked([String: [Seen]]())
        private static let unlocated = Array(#""vehicle":{"location":null"#.utf8)

        func record(_ message: MQTTMessage) {
            let levels = message.topic.split(separator: "/")
            guard levels.count == 3, !message.payload.isEmpty,
                let worker = message.properties.userProperties.last(where: { $0.0 == "worker" })?.1
            else { return }
            let located = !Self.contains(Self.unlocated, in: message.payload.prefix(300))
            let seen = Seen(worker: worker, at: .now, located: located)
            state.withLock { $0[String(levels[1]), default: []].append(seen) }
        }

        /// Whether `pattern` occurs in `bytes` (the vehicle comes first in a status, after its id and phase).
        static func contains(_ pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Bool {
            guard bytes.count >= pattern.count else { return false }
            return (bytes.startIndex...(bytes.endIndex - pattern.count)).contains {
                bytes[$0..<($0 + pattern.count)].elementsEqual(pattern)
            }
        }

        /// Each ride's publishing worker as of now.
        var current: [String: String] { state.withLock { $0.compactMapValues { $0.last?.worker } } }

        /// Rides with a status that showed a location.
        var locatedCount: Int { state.withLock { $0.values.filter { $0.contains(where: \.located) }.count } }

        /// The rides published by `worker` before `signal` (any worker when nil) that another worker (`newOwner`
        /// when given) took over after it: ``Moved`` for each; a ride `newOwner` has not published is left out.
        func handover(from worker: String? = nil, to newOwner: String? = nil, at signal: ContinuousClock.Instant)
            -> [Moved]
        {
            state.withLock { all in
                all.values.compactMap { seen -> Moved? in
                    guard let before = seen.last(where: { $0.at <= signal }),
                        worker.map({ before.worker == $0 }) ?? true
                    else { return nil }
                    let next = seen.first { later in
                        later.at > signal && later.worker != before.worker
                            && (newOwner.map { later.worker == $0 } ?? true)
                    }
                    if newOwner != nil, next == nil { return nil }
                    let gap = next.map { ($0.at - before.at).seconds } ?? .infinity
                    let shown = seen.contains { $0.at <= signal && $0.located }
                    let blanked =
                        shown ? seen.filter { $0.at > signal && $0.worker != before.worker && !$0.located }.count : 0
                    return Moved(delay: next.map { ($0.at - signal).seconds }, gap: gap, blanked: blanked)
                }
            }
        }
    }

    struct Worker {
        let id: String
        let process: ChildProcess
        let port: Int

        func metric(_ name: String) -> Double {
            metricSum(name, in: httpGet(port: port, path: "/metrics")?.body ?? "")
        }
    }

    func run() async throws {
        var logger = Logger(label: "ride-bench")
        logger.logLevel = .error
        let broker = try await TestBroker(TestBroker.Options(sysInterval: 1))
        defer {
            // The workers' logs and the broker's, kept for reading after the run.
            if let keepLogs { try? FileManager.default.copyItem(atPath: broker.directory.path, toPath: keepLogs) }
            broker.stop()
        }
        let authority = etcd ? try await EtcdCluster() : nil
        defer { authority?.stop() }
        let settings =
            set
            + (authority.map {
                ["group.authority=etcd", "group.etcdEndpoints=\($0.endpoints.joined(separator: ","))"]
            } ?? [])
        let observer = try await connect(broker, "group-observer", logger, buffer: 200_000)
        let owners = Owners()
        /// `$SYS` counters and when each was last updated (mosquitto publishes them once per `sys_interval`).
        let sys = Locked([String: (value: Double, at: ContinuousClock.Instant)]())
        try await observer.subscribe("rides/+/status", qos: .atLeastOnce)
        try await observer.subscribe("$SYS/broker/messages/+", qos: .atMostOnce)
        let reader = Task {
            for await message in observer.messages {
                if message.topic.hasPrefix("$SYS/") {
                    let value = Double(String(decoding: message.payload, as: UTF8.self)) ?? 0
                    sys.withLock { $0[message.topic] = (value, .now) }
                } else {
                    owners.record(message)
                }
            }
        }
        defer { reader.cancel() }
        /// MQTT packets in and out so far (every kind: publishes and their acknowledgements), and when counted.
        func brokerMessages() -> (Double, ContinuousClock.Instant) {
            sys.withLock {
                let received = $0["$SYS/broker/messages/received"]
                let sent = $0["$SYS/broker/messages/sent"]
                return ((received?.value ?? 0) + (sent?.value ?? 0), received?.at ?? .now)
            }
        }

        print(
            "group: \(rides) rides at a \(interval) s interval, a fix per vehicle every \(fixEvery) s; one worker first, then three; "
                + (etcd ? "ownership from three etcd members (G6)" : "broker-only ownership (G5's lease)")
        )
        var workers = [try await start("w-1", broker, settings: settings)]
        let publisher = try await connect(broker, "group-dispatch", logger)
        let ids = (0..<rides).map { "r-\($0)" }
        try await spread(ids.map { ("rides/\($0)/start", booking($0)) }, with: publisher)
        try await waitFor("every ride's status", timeout: 120) { owners.current.count == rides }
        let fixes = try await connect(broker, "group-vehicles", logger)
        let feeding = feedVehicles(ids, with: fixes)
        defer { feeding.cancel() }
        try await waitFor("every ride's located status", timeout: 120) { owners.locatedCount == rides }
        try await Task.sleep(for: .seconds(2 * interval))
        let alone = try await measureSteady(workers, brokerMessages)
        print(
            String(
                format:
                    "  one worker:    %.3f cores, %.0f MQTT packets/s at the broker (in + out), %.0f statuses/s, %.1f state writes/s",
                alone.cpu, alone.messages, alone.statuses, alone.states))

        // Joins: each moves about 1/N of the rides, only to the newcomer.
        for id in ["w-2", "w-3"] {
            let before = owners.current
            let joined = ContinuousClock.now
            let writesBefore = stateWrites(workers)
            workers.append(try await start(id, broker, settings: settings))
            try await waitFor("the group of \(workers.count)", timeout: 60) {
                workers.allSatisfy { $0.metric("ridestatus_group_members") == Double(workers.count) }
            }
            // Settled: the newcomer's share has not changed for two intervals. (Waiting only for its first ride
            // let the next join start while a third of this one's rides were still moving, so that join's
            // figures held the tail of this one: 28.5 % moved instead of 50 %, then 41.8 % instead of 33.3 %.)
            var share = 0
            var steadySince = ContinuousClock.now
            try await waitFor("the newcomer's share to settle", timeout: 120) {
                let now = ContinuousClock.now
                let count = owners.current.values.count { $0 == id }
                if count != share {
                    share = count
                    steadySince = now
                }
                return count > 0 && now - joined > .seconds(2 * interval)
                    && now - steadySince > .seconds(2 * interval)
            }
            let after = owners.current
            let moved = before.filter { after[$0.key] != $0.value }
            let toNewcomer = moved.filter { after[$0.key] == id }.count
            print(
                "  join of \(id): \(moved.count) rides moved (\(String(format: "%.1f", 100 * Double(moved.count) / Double(rides))) %, "
                    + "1/\(workers.count) = \(String(format: "%.1f", 100 / Double(workers.count))) %), \(toNewcomer) to the newcomer"
            )
            report(
                "join of \(id)", owners.handover(to: id, at: joined), stateWrites: stateWrites(workers) - writesBefore)
        }
        try await Task.sleep(for: .seconds(2 * interval))
        let group = try await measureSteady(workers, brokerMessages)
        print(
            String(
                format:
                    "  three workers: %.3f cores in all, %.0f MQTT packets/s at the broker (in + out), %.0f statuses/s, %.1f state writes/s; membership costs %+.3f cores, %+.0f packets/s",
                group.cpu, group.messages, group.statuses, group.states, group.cpu - alone.cpu,
                group.messages - alone.messages))

        // A death: SIGKILL the busiest worker.
        let counts = Dictionary(grouping: owners.current.values, by: { $0 }).mapValues(\.count)
        let busiest = counts.max { $0.value < $1.value }!.key
        let victim = workers.first { $0.id == busiest }!
        let survivors = workers.filter { $0.id != busiest }
        var writesBefore = stateWrites(survivors)
        let killed = ContinuousClock.now
        victim.process.signal(SIGKILL)
        _ = await victim.process.exited(within: 5)
        workers.removeAll { $0.id == busiest }
        try await waitFor("the killed worker's rides back", timeout: 60) {
            owners.handover(from: busiest, at: killed).allSatisfy { $0.delay != nil }
        }
        try await Task.sleep(for: .seconds(interval))
        report(
            "SIGKILL of \(busiest)", owners.handover(from: busiest, at: killed),
            stateWrites: stateWrites(survivors) - writesBefore)
        try await Task.sleep(for: .seconds(2 * interval))

        // A graceful leave: SIGTERM another.
        let leaver = workers[0]
        let staying = workers.filter { $0.id != leaver.id }
        writesBefore = stateWrites(staying)
        let terminated = ContinuousClock.now
        leaver.process.signal(SIGTERM)
        let exited = await leaver.process.exited(within: 10)
        let exitSeconds = (ContinuousClock.now - terminated).seconds
        workers.removeAll { $0.id == leaver.id }
        try await waitFor("the leaving worker's rides back", timeout: 60) {
            owners.handover(from: leaver.id, at: terminated).allSatisfy { $0.delay != nil }
        }
        try await Task.sleep(for: .seconds(interval))
        report(
            "SIGTERM of \(leaver.id)", owners.handover(from: leaver.id, at: terminated),
            stateWrites: stateWrites(staying) - writesBefore)
        print(
            String(
                format: "  SIGTERM exit: %@ after %.2f s (code %@)", exited ? "exited" : "STILL RUNNING", exitSeconds,
                leaver.process.exitCode.map { "\($0)" } ?? "none"))
        for worker in workers { worker.process.signal(SIGTERM) }
        for worker in workers { _ = await worker.process.exited(within: 10) }
    }

    func report(_ what: String, _ handovers: [Owners.Moved], stateWrites: Double) {
        let delays = handovers.compactMap(\.delay).sorted()
        let gaps = handovers.map(\.gap).sorted()
        func percentile(_ values: [Double], _ p: Double) -> Double {
            values.isEmpty ? .nan : values[min(values.count - 1, Int(Double(values.count) * p))]
        }
        let blanked = handovers.reduce(0) { $0 + $1.blanked }
        let ridesBlanked = handovers.filter { $0.blanked > 0 }.count
        print(
            String(
                format:
                    "  %@: %d rides moved; from the signal to the new owner's first status p50 %.2f s, p99 %.2f s, max %.2f s; largest status gap %.2f s (interval %.1f s); statuses without a location after one was shown: %d (%d rides); state writes of the live workers meanwhile: %.0f (%.2f per moved ride)",
                what, handovers.count, percentile(delays, 0.5), percentile(delays, 0.99), delays.last ?? .nan,
                gaps.last ?? .nan, interval, blanked, ridesBlanked, stateWrites,
                stateWrites / Double(max(handovers.count, 1))))
    }

    /// State writes the workers counted so far (their `ridestatus_state_writes_total`).
    func stateWrites(_ workers: [Worker]) -> Double {
        workers.reduce(0) { $0 + $1.metric("ridestatus_state_writes_total") }
    }

    /// Every ride's vehicle (`v-` and the ride's number) reports a fix every `fixEvery` seconds, QoS 0, spread
    /// over that time, each a little further along its street: the worker subscribes to each (L3), and the
    /// location a rider sees keeps moving, so a new owner that starts from an old state shows it.
    func feedVehicles(_ ids: [String], with client: MQTTClient) -> Task<Void, Never> {
        Task {
            var round = 0
            while !Task.isCancelled {
                let started = ContinuousClock.now
                for (index, id) in ids.enumerated() {
                    let metres = 3000 - 20 * Double(round % 100)
                    let north = 52.52 - metres / 111_320
                    let fix =
                        #"{"vehicleId":"v-\#(id)","timestamp":"\#(Timestamps.format(Date()))","latitude":\#(north),"longitude":13.41,"speed":8}"#
                    try? client.publishWithoutWaiting(
                        topic: "fleet/vehicles/v-\(id)/position", payload: Array(fix.utf8), qos: .atMostOnce)
                    if index % 500 == 499 {
                        let due = started + .seconds(fixEvery * Double(index + 1) / Double(ids.count))
                        if due > .now { try? await Task.sleep(until: due) }
                    }
                }
                round += 1
                let next = started + .seconds(fixEvery)
                if next > .now { try? await Task.sleep(until: next) }
            }
        }
    }

    /// One steady phase: the workers' CPU (cores, summed), broker messages a second (in + out, `$SYS`), and the
    /// statuses and state writes the workers published a second (their own counters).
    struct Steady {
        var cpu: Double
        var messages: Double
        var statuses: Double
        var states: Double
    }

    func measureSteady(_ workers: [Worker], _ brokerMessages: () -> (Double, ContinuousClock.Instant))
        async throws -> Steady
    {
        func published() -> (Double, Double) {
            workers.reduce((0.0, 0.0)) {
                (
                    $0.0 + $1.metric("ridestatus_statuses_published_total"),
                    $0.1 + $1.metric("ridestatus_state_writes_total")
                )
            }
        }
        let cpuBefore = workers.map { cpuSeconds(of: $0.process.pid) }.reduce(0, +)
        let (messagesBefore, _) = brokerMessages()
        let (statusesBefore, statesBefore) = published()
        let started = ContinuousClock.now
        try await Task.sleep(for: .seconds(steady ?? 12 * interval))
        let elapsed = (ContinuousClock.now - started).seconds
        let cpu = (workers.map { cpuSeconds(of: $0.process.pid) }.reduce(0, +) - cpuBefore) / elapsed
        let (statuses, states) = published()
        let (messagesAfter, _) = brokerMessages()
        return Steady(
            cpu: cpu, messages: (messagesAfter - messagesBefore) / elapsed,
            statuses: (statuses - statusesBefore) / elapsed, states: (states - statesBefore) / elapsed)
    }

    func start(_ id: String, _ broker: TestBroker, settings: [String]) async throws -> Worker {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ride-status-worker").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ValidationError("\(executable) is missing: build it with `swift build -c release`")
        }
        let port = try TestBroker.freePort()
        let process = try ChildProcess(
            executable: executable,
            arguments: [
                "--broker", broker.url, "--worker-id", id, "--update-interval", "\(interval)", "--state-dir",
                broker.directory.appendingPathComponent("state-\(id)").path, "--metrics-port", "\(port)",
                "--log-level", "warning",
            ] + settings.flatMap { ["--set", $0] },
            output: broker.directory.appendingPathComponent("\(id).log"))
        try await waitFor("\(id) ready", timeout: 60) { httpGet(port: port, path: "/readyz")?.status == 200 }
        return Worker(id: id, process: process, port: port)
    }

    func booking(_ ride: String) -> [UInt8] {
        let eta = Timestamps.format(Date().addingTimeInterval(3600))
        return Array(
            #"{"rideIdentifier":"\#(ride)","vehicleId":"v-\#(ride)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(eta)"},"pickupLocation":{"latitude":52.52,"longitude":13.41},"dropOffLocation":{"latitude":52.54,"longitude":13.41},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
                .utf8)
    }

    /// QoS 1, at most 5,000 unacknowledged (below the client's bound on held messages).
    func spread(_ messages: [(String, [UInt8])], with client: MQTTClient) async throws {
        for (topic, payload) in messages {
            if client.unacknowledgedCount >= 5000 {
                try await waitFor("the broker to take the bookings", timeout: 60) { client.unacknowledgedCount < 1000 }
            }
            try client.publishWithoutWaiting(topic: topic, payload: payload, qos: .atLeastOnce)
        }
        guard client.droppedWhileHeld == 0 else {
            throw ValidationError("the booking publisher dropped \(client.droppedWhileHeld) messages")
        }
    }
}
