import ArgumentParser
import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain
import WorkerGroup

#if canImport(Glibc)
    import Glibc
#endif

/// `ride-bench chaos` (`make chaos`): the release worker against a real mosquitto while faults hit it:
/// SIGKILL of the worker, broker restarts (one losing its data), the broker frozen, the worker's connection
/// cut at the socket. Vehicles report at 1 Hz and dispatch sends events, cancels and stops throughout. It
/// counts what a subscriber would see go wrong and exits non-zero unless every count is 0.
struct ChaosSuite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chaos", abstract: "Faults against the worker and a real mosquitto; counts violations.")

    @Option(help: "Active rides, each with its own vehicle reporting at 1 Hz.") var rides = 200
    @Option(help: "The worker's update interval in seconds (C1).") var interval = 2.0
    @Option(help: "Worker SIGKILLs.") var kills = 5
    @Option(help: "Broker restarts; the last one loses the broker's data (SIGKILL).") var restarts = 3
    @Option(help: "Seconds the broker stays frozen (SIGSTOP); 0 for no freeze.") var freeze = 8.0
    @Option(help: "Cuts of the worker's connection at the socket (ss -K).") var cuts = 1
    @Option(help: "Seconds between faults.") var spacing = 12.0
    @Option(help: "Seed of the fault order and the dispatch schedule.") var seed: UInt64 = 1

    /// A fault and the window during which statuses may legitimately pause.
    enum Fault: String {
        case killWorker, restartBroker, restartBrokerLosingData, freezeBroker, cutConnection
    }

    struct Control {
        var at: Double
        var ride: Int
        var kind: String
        var payload: String
    }

    func run() async throws {
        let logger = Logger(label: "chaos", factory: { _ in SwiftLogNoOpLogHandler() })
        var random = SeededRandom(seed: seed)
        let broker = try await TestBroker(TestBroker.Options(persistence: true))
        print("chaos: \(rides) rides at 1 Hz, update interval \(interval) s, broker \(broker.url)")
        let worker = try ChaosWorker(broker: broker, interval: interval)
        try await worker.start()
        try await waitFor("the worker's readiness", timeout: 30) {
            httpGet(port: worker.metricsPort, path: "/readyz")?.status == 200
        }

        let observer = try await StatusLog(broker: broker, logger: logger)
        let dispatch = try await connect(broker, "chaos-dispatch", logger)
        let fleet = try await connect(broker, "chaos-fleet", logger)
        let origin = Coordinate(latitude: 52.52, longitude: 13.40)
        for ride in 0..<rides {
            try await dispatch.publish(
                topic: "rides/c-\(ride)/start", payload: ChaosTraffic.booking(ride), qos: .atLeastOnce)
        }
        try await waitFor("a status of every ride", timeout: 30) { observer.ridesSeen >= rides }
        let vehicles = Task { await ChaosTraffic.reportPositions(fleet, origin: origin, count: rides) }
        defer { vehicles.cancel() }

        // The faults in a seeded order, one every `spacing` seconds.
        var faults: [Fault] = Array(repeating: .killWorker, count: kills)
        faults += Array(repeating: .restartBroker, count: max(0, restarts - 1))
        if restarts > 0 { faults.append(.restartBrokerLosingData) }
        if freeze > 0 { faults.append(.freezeBroker) }
        faults += Array(repeating: .cutConnection, count: cuts)
        faults.shuffle(using: &random)
        let started = Date()
        let chaosSeconds = spacing * Double(faults.count + 1)
        let controls = schedule(over: chaosSeconds - spacing / 2, random: &random)
        let sender = ControlSender(dispatch: dispatch, controls: controls, started: started)
        let sending = Task { await sender.run() }

        var outages: [(Date, Date)] = []
        for (index, fault) in faults.enumerated() {
            let due = started.addingTimeInterval(spacing * Double(index + 1))
            try await Task.sleep(for: .seconds(max(0, due.timeIntervalSinceNow)))
            if fault == .restartBrokerLosingData {
                // What the broker acknowledged and then lost with its data is the broker's loss, not the worker's:
                // dispatch pauses, and the broker saves (autosave_interval 1), before the broker is killed.
                await sender.pause()
                try await Task.sleep(for: .milliseconds(2_500))
            }
            let from = Date()
            try await inflict(fault, broker: broker, worker: worker, random: &random)
            await sender.resume()
            // Statuses may pause until the worker is back, connected and has republished (C4), plus 2 s.
            try await waitFor("the worker back after \(fault.rawValue)", timeout: 60) {
                httpGet(port: worker.metricsPort, path: "/readyz")?.status == 200
            }
            outages.append((from, Date().addingTimeInterval(2 + interval)))
            print(String(format: "  %5.1f s  ", from.timeIntervalSince(started)) + fault.rawValue)
        }
        await sending.value
        // Stops for a tenth of the rides (L2), then a quiet end.
        let stopped = Set((0..<rides).filter { $0 % 10 == 9 })
        for ride in stopped.sorted() {
            try await dispatch.publish(topic: "rides/c-\(ride)/stop", payload: Array("{}".utf8), qos: .atLeastOnce)
        }
        let end = Date().addingTimeInterval(max(10, 3 * interval))
        try await Task.sleep(for: .seconds(end.timeIntervalSinceNow))
        let lastFaultEnd = outages.map(\.1).max() ?? started

        // MARK: Counts
        let statuses = observer.snapshot()
        var newest: [String: (sequence: Int, at: Date, json: JSONValue)] = [:]
        var regressions = 0
        var duplicates = 0
        var invalid = 0
        var invalidExamples: [String] = []
        var largestGap = 0.0
        var largestGapRide = ""
        var previous: [String: Date] = [:]
        for entry in statuses where !entry.retained && !entry.payload.isEmpty {
            guard let json = try? JSONParser.parse(entry.payload) else {
                invalid += 1
                continue
            }
            if let problem = Self.problem(with: json, ride: entry.ride) {
                invalid += 1
                if invalidExamples.count < 3 { invalidExamples.append("\(entry.ride): \(problem)") }
            }
            let sequence = json.intValue("sequence") ?? 0
            if let seen = newest[entry.ride] {
                if sequence < seen.sequence { regressions += 1 }
                if sequence == seen.sequence { duplicates += 1 }
            }
            if sequence >= newest[entry.ride]?.sequence ?? 0 { newest[entry.ride] = (sequence, entry.at, json) }
            if let before = previous[entry.ride],
                !outages.contains(where: { $0.0 <= entry.at && $0.1 >= before })
            {
                let gap = entry.at.timeIntervalSince(before)
                if gap > largestGap { (largestGap, largestGapRide) = (gap, entry.ride) }
            }
            previous[entry.ride] = entry.at
        }
        let active = (0..<rides).filter { !stopped.contains($0) }.map { "c-\($0)" }
        let neverResumed = active.filter { (newest[$0]?.at ?? .distantPast) < lastFaultEnd }
        // A new subscriber gets the retained status: it must be the newest seen (C5), and none for a stopped ride.
        let late = try await StatusLog(broker: broker, logger: logger, persistent: false)
        try await Task.sleep(for: .seconds(2))
        let retained = Dictionary(
            late.snapshot().filter(\.retained).map { ($0.ride, $0.payload) }, uniquingKeysWith: { $1 })
        var retainedStale = 0
        for ride in active {
            let sequence = retained[ride].flatMap { try? JSONParser.parse($0) }?.intValue("sequence") ?? -1
            if sequence < (newest[ride]?.sequence ?? 0) { retainedStale += 1 }
        }
        // Control messages: every ride's last status must show what dispatch last asked for.
        var lost = 0
        var lostExamples: [String] = []
        for ride in 0..<rides {
            let name = "c-\(ride)"
            if stopped.contains(ride) {
                if !(retained[name]?.isEmpty ?? true) {
                    lost += 1
                    lostExamples.append("\(name): stop not carried out")
                }
                continue
            }
            guard let last = newest[name]?.json else { continue }
            let expected = sender.expectedOutcome(ride)
            let phase = last["phase"]?.stringValue ?? ""
            let completion = last["completionStatus"]
            let actual =
                phase == "completed"
                ? (completion?["canceled"] == .bool(true) ? "canceled" : "completed") : phase
            if actual != expected {
                lost += 1
                if lostExamples.count < 3 { lostExamples.append("\(name): expected \(expected), saw \(actual)") }
            }
        }
        await late.stop()
        await observer.stop()
        await dispatch.disconnect()
        await fleet.disconnect()
        let exit = worker.stop()

        print("")
        print("chaos counts (each must be 0):")
        let counts: [(String, Int)] = [
            ("rides never resumed", neverResumed.count),
            ("sequence regressions in receive order", regressions),
            ("retained status not the newest at the end", retainedStale),
            ("invalid statuses", invalid),
            ("control messages lost", lost),
        ]
        for (name, count) in counts {
            print("  " + name.padding(toLength: 44, withPad: " ", startingAt: 0) + " \(count)")
        }
        print("")
        print("  statuses received: \(statuses.count); QoS 1 duplicates (same sequence again): \(duplicates)")
        print(
            String(format: "  largest gap outside outages: %.2f s (", largestGap) + largestGapRide
                + String(format: "), update interval %.1f s", interval))
        print("  worker exit on SIGTERM at the end: \(exit.map(String.init) ?? "none")")
        for example in invalidExamples + lostExamples + neverResumed.prefix(3).map({ "\($0): never resumed" }) {
            print("  e.g. \(example)")
        }
        if counts.contains(where: { $0.1 > 0 }) || exit != 0 {
            // The broker's folder goes with it: keep the logs for a look.
            let keep = URL(fileURLWithPath: ".build-chaos/logs")
            try? FileManager.default.removeItem(at: keep)
            try? FileManager.default.createDirectory(at: keep, withIntermediateDirectories: true)
            for file in (try? FileManager.default.contentsOfDirectory(atPath: broker.directory.path)) ?? []
            where file.hasSuffix(".log") {
                try? FileManager.default.copyItem(
                    at: broker.directory.appendingPathComponent(file), to: keep.appendingPathComponent(file))
            }
            print("chaos: FAILED (worker and broker logs in \(keep.path))")
            throw ExitCode.failure
        }
        print("chaos: passed")
    }

    // MARK: Faults

    func inflict(_ fault: Fault, broker: TestBroker, worker: ChaosWorker, random: inout SeededRandom) async throws {
        switch fault {
        case .killWorker:
            worker.kill()
            // Down for 0.5 to 3 s at a random moment of its cadence.
            try await Task.sleep(for: .milliseconds(500 + Int(random.next() % 2_500)))
            try await worker.start()
        case .restartBroker:
            try await broker.restart()
        case .restartBrokerLosingData:
            try await broker.restartLosingData()
        case .freezeBroker:
            broker.freeze()
            try await Task.sleep(for: .seconds(freeze))
            broker.thaw()
        case .cutConnection:
            await worker.cutConnection(brokerPort: broker.port)
        }
    }

    // MARK: Traffic

    /// Every ride: arrivedAtPickup, then passengerOnBoard, then (70 %) arrivedAtDropOff or (15 %) a cancel.
    func schedule(over seconds: Double, random: inout SeededRandom) -> [Control] {
        var controls: [Control] = []
        func at(_ low: Double, _ high: Double) -> Double { low + (high - low) * Double(random.next() % 1_000) / 1_000 }
        for ride in 0..<rides {
            // Drop-offs and cancels come late, so that no ride completes more than completedLinger (120 s)
            // before the end and is stopped by the worker (L4).
            let pickup = at(2, seconds * 0.4)
            let onBoard = at(pickup + 1, seconds * 0.7)
            let finish = at(max(onBoard + 1, seconds * 0.75), seconds)
            controls.append(Control(at: pickup, ride: ride, kind: "event", payload: #"{"type":"arrivedAtPickup"}"#))
            controls.append(Control(at: onBoard, ride: ride, kind: "event", payload: #"{"type":"passengerOnBoard"}"#))
            let roll = random.next() % 100
            if roll < 70 {
                controls.append(
                    Control(at: finish, ride: ride, kind: "event", payload: #"{"type":"arrivedAtDropOff"}"#))
            } else if roll < 85 {
                controls.append(Control(at: finish, ride: ride, kind: "cancel", payload: #"{"canceledBy":"user"}"#))
            }
        }
        return controls.sorted { $0.at < $1.at }
    }

    // MARK: Checks

    /// The status rules a subscriber can check on the wire (V1-V6 in their checkable part); nil when valid.
    static func problem(with json: JSONValue, ride: String) -> String? {
        guard json["rideIdentifier"]?.stringValue == ride else { return "V1: rideIdentifier is not the topic's" }
        let phases = ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"]
        guard let phase = json["phase"]?.stringValue, phases.contains(phase) else { return "V2: phase" }
        let completion = json["completionStatus"].flatMap { $0.isNull ? nil : $0 }
        guard (phase == "completed") == (completion != nil) else { return "V3: completionStatus iff completed" }
        if let completion, (completion["completed"] == .bool(true)) == (completion["canceled"] == .bool(true)) {
            return "V3: exactly one of completed and canceled"
        }
        guard let name = json["rideOption"]?["name"]?.stringValue, !name.isEmpty else { return "V4: option name" }
        if phase != "received", (json["vehicle"]?["mapAnnotationImage"]?.stringValue ?? "").isEmpty {
            return "V5: mapAnnotationImage"
        }
        guard (json.intValue("sequence") ?? 0) > 0, let issued = json["issuedAt"]?.stringValue,
            Timestamps.parse(issued) != nil
        else { return "C5: sequence or issuedAt" }
        return nil
    }

}
