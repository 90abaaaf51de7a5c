import ArgumentParser
import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain

#if canImport(Glibc)
    import Glibc
#endif

/// The suite's rides and vehicles, shared with `ride-bench flood`.
enum ChaosTraffic {
    /// Each vehicle 2 km from its pickup, wandering a little, one fix a second (QoS 1).
    static func reportPositions(_ fleet: MQTTClient, origin: Coordinate, count rides: Int) async {
        var tick = 0
        while !Task.isCancelled {
            let now = Date()
            for ride in 0..<rides {
                let pickup = Self.pickupOf(ride, origin: origin)
                let spot = pickup.moved(metres: 2_000 + Double((tick + ride) % 7) * 5, bearing: 90)
                let fix =
                    #"{"timestamp":"\#(Timestamps.format(now))","latitude":\#(spot.latitude),"longitude":\#(spot.longitude),"speed":5,"horizontalAccuracy":5}"#
                try? fleet.publishWithoutWaiting(
                    topic: "fleet/vehicles/cv-\(ride)/position", payload: Array(fix.utf8), qos: .atLeastOnce)
            }
            tick += 1
            try? await Task.sleep(for: .seconds(1))
        }
    }

    static func pickupOf(_ ride: Int, origin: Coordinate) -> Coordinate {
        Coordinate(
            latitude: origin.latitude + Double(ride % 20) * 0.002,
            longitude: origin.longitude + Double(ride / 20) * 0.002)
    }

    static func booking(_ ride: Int) -> [UInt8] {
        let pickup = pickupOf(ride, origin: Coordinate(latitude: 52.52, longitude: 13.40))
        let eta = Timestamps.format(Date().addingTimeInterval(600))
        return Array(
            #"{"rideIdentifier":"c-\#(ride)","vehicleId":"cv-\#(ride)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(eta)"},"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude)},"dropOffLocation":{"latitude":\#(pickup.latitude + 0.03),"longitude":\#(pickup.longitude)},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"},"fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}}"#
                .utf8)
    }

}

extension JSONValue {
    func intValue(_ key: String) -> Int? { self[key]?.doubleValue.map { Int($0) } }
}

/// The release worker as a child process that the suite kills and starts again with the same identity.
final class ChaosWorker: @unchecked Sendable {
    // Safe because only the suite's own task starts, kills or stops it.
    let broker: TestBroker
    let metricsPort: Int
    let arguments: [String]
    private var process: ChildProcess?
    private var incarnation = 0

    var pid: Int32? { process?.pid }

    init(broker: TestBroker, interval: Double) throws {
        self.broker = broker
        metricsPort = try TestBroker.freePort()
        arguments = [
            "--broker", broker.url, "--worker-id", "chaos", "--update-interval", "\(interval)", "--state-dir",
            broker.directory.appendingPathComponent("state").path, "--metrics-port", "\(metricsPort)",
            "--log-level", "info",
        ]
    }

    func start() async throws {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ride-status-worker").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ValidationError("\(executable) is missing: build it with `swift build -c release`")
        }
        incarnation += 1
        process = try ChildProcess(
            executable: executable, arguments: arguments,
            output: broker.directory.appendingPathComponent("worker-\(incarnation).log"))
    }

    func kill() {
        process?.signal(SIGKILL)
        process?.waitForExit(timeout: 5)
    }

    /// SIGTERM; the exit code (L8: 0).
    func stop() -> Int32? {
        process?.signal(SIGTERM)
        process?.waitForExit(timeout: 10)
        return process?.exitCode
    }

    /// Destroys the worker's TCP connection to the broker under it, as a dead network would (`ss -K`).
    func cutConnection(brokerPort: Int) async {
        guard let pid = process?.pid else { return }
        let sockets = await Self.run("/usr/bin/ss", ["-Htnp", "state", "established", "( dport = :\(brokerPort) )"])
        for line in sockets.split(separator: "\n") where line.contains("pid=\(pid),") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 3, let local = fields[2].split(separator: ":").last else { continue }
            _ = await Self.run("/usr/bin/ss", ["-K", "-Htn", "state", "established", "( sport = :\(local) )"])
        }
    }

    /// What a command printed, or nothing when it could not run.
    static func run(_ executable: String, _ arguments: [String]) async -> String {
        (try? await ChildProcess.run(executable, arguments))?.output ?? ""
    }
}

/// Every status message a subscriber received, with its receive time.
final class StatusLog: Sendable {
    struct Entry {
        var at: Date
        var ride: String
        var retained: Bool
        var payload: [UInt8]
    }

    let client: MQTTClient
    private let log = Locked((entries: [Entry](), rides: Set<String>()))
    private let task = Locked<Task<Void, Never>?>(nil)

    /// - Parameter persistent: unused by the counts (a clean session never redelivers what a broker restored
    ///   from old data), kept false.
    init(broker: TestBroker, logger: Logger, persistent: Bool = false, filters: [String] = ["rides/+/status"])
        async throws
    {
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientID: "chaos-observer-\(UInt32.random(in: 0...UInt32.max))",
                cleanStart: !persistent, bufferCapacity: 100_000),
            logger: logger)
        try await client.connect(timeout: .seconds(10))
        for filter in filters { try await client.subscribe(filter, qos: .atLeastOnce) }
        let client = self.client
        task.withLock {
            $0 = Task { [weak self] in
                for await message in client.messages { self?.record(message) }
            }
        }
    }

    private func record(_ message: MQTTMessage) {
        let ride = message.topic.split(separator: "/").dropFirst().first.map(String.init) ?? ""
        log.withLock { log in
            log.entries.append(Entry(at: Date(), ride: ride, retained: message.retain, payload: message.payload))
            if !message.payload.isEmpty { log.rides.insert(ride) }
        }
    }

    var ridesSeen: Int { log.withLock { $0.rides.count } }

    func snapshot() -> [Entry] { log.withLock { $0.entries } }

    func stop() async {
        task.withLock { $0?.cancel() }
        await client.disconnect()
    }
}

/// Sends the dispatch schedule in time order; pauses while the broker is about to lose its data.
actor ControlSender {
    let dispatch: MQTTClient
    let controls: [ChaosSuite.Control]
    let started: Date
    private var paused = false
    private var busy = false
    private var last: [Int: String] = [:]

    init(dispatch: MQTTClient, controls: [ChaosSuite.Control], started: Date) {
        self.dispatch = dispatch
        self.controls = controls
        self.started = started
    }

    func run() async {
        for control in controls {
            let due = started.addingTimeInterval(control.at)
            if due > Date() { try? await Task.sleep(for: .seconds(due.timeIntervalSinceNow)) }
            while paused { try? await Task.sleep(for: .milliseconds(50)) }
            busy = true
            // QoS 1 and awaited: once PUBACK arrives the broker has it (L6 covers a worker that is down).
            try? await dispatch.publish(
                topic: "rides/c-\(control.ride)/\(control.kind)", payload: Array(control.payload.utf8),
                qos: .atLeastOnce)
            busy = false
            last[control.ride] = control.kind == "cancel" ? "canceled" : control.payload
        }
    }

    /// Waits until no publish is in flight, then holds the next ones.
    func pause() async {
        paused = true
        while busy { try? await Task.sleep(for: .milliseconds(20)) }
    }

    func resume() { paused = false }

    /// What a ride's statuses must show once its last control message is carried out.
    nonisolated func expectedOutcome(_ ride: Int) -> String {
        let payloads = controls.filter { $0.ride == ride }.map { $0.kind == "cancel" ? "canceled" : $0.payload }
        switch payloads.last {
        case "canceled": return "canceled"
        case .some(let payload) where payload.contains("arrivedAtDropOff"): return "completed"
        case .some(let payload) where payload.contains("passengerOnBoard"): return "ongoing"
        case .some: return "pickup"
        case .none: return "confirmed"
        }
    }
}
