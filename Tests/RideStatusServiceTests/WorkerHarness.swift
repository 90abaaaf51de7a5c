import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain

#if canImport(Glibc)
    import Glibc
#endif

let quietLogger = Logger(label: "e2e", factory: { _ in SwiftLogNoOpLogHandler() })

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// The built `ride-status-worker` executable, run as a child process against a test broker.
final class WorkerProcess: @unchecked Sendable {
    // Safe because `process` is only replaced by the test's own task.
    let workerID: String
    let metricsPort: Int
    /// Where `/metrics`, `/healthz` and `/readyz` listen: IPv4 or IPv6 loopback.
    let metricsHost: String
    let log: URL
    let arguments: [String]
    private(set) var process: ChildProcess?

    static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ride-status-worker").path
    }

    convenience init(
        broker: TestBroker, workerID: String = "w-\(UUID().uuidString.prefix(6).lowercased())", interval: Double = 1,
        metricsHost: String = "127.0.0.1", extra: [String] = []
    ) throws {
        try self.init(
            url: broker.url, directory: broker.directory, workerID: workerID, interval: interval,
            metricsHost: metricsHost, extra: extra)
    }

    /// A worker on any broker: `url` may list a cluster's nodes, comma-separated; logs and state go in `directory`.
    init(
        url: String, directory: URL, workerID: String = "w-\(UUID().uuidString.prefix(6).lowercased())",
        interval: Double = 1, metricsHost: String = "127.0.0.1", extra: [String] = []
    ) throws {
        self.workerID = workerID
        metricsPort = try TestBroker.freePort()
        self.metricsHost = metricsHost
        log = directory.appendingPathComponent("worker-\(workerID).log")
        arguments =
            [
                "--broker", url, "--worker-id", workerID, "--update-interval", "\(interval)",
                "--state-dir", directory.appendingPathComponent("state").path, "--metrics-port",
                "\(metricsPort)",
                "--log-level", "info", "--set", "metrics.host=\(metricsHost)",
            ] + extra
    }

    deinit { process?.signal(SIGKILL) }

    /// Starts the worker and waits until `/readyz` answers 200 (connected and recovered).
    func start(timeout: Double = 30) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["RIDESTATUS_WORKER_STATE_DIR"] = nil
        process = try ChildProcess(
            executable: Self.executable, arguments: arguments, environment: environment, output: log)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if readyStatus() == 200 { return }
            if process?.isRunning == false { throw TimedOut(what: "worker start: it exited; log: \(logText)") }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TimedOut(what: "worker readiness; log: \(logText)")
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// The HTTP status of `/readyz`, or nil when nothing answers.
    func readyStatus() -> Int? { httpGet(host: metricsHost, port: metricsPort, path: "/readyz")?.status }

    func kill() async {
        process?.signal(SIGKILL)
        _ = await process?.exited(within: 5)
    }

    /// SIGTERM; returns the exit code and how long the exit took.
    func terminate() async -> (code: Int32?, seconds: Double) {
        let started = Date()
        process?.signal(SIGTERM)
        _ = await process?.exited(within: 10)
        return (process?.exitCode, Date().timeIntervalSince(started))
    }
}

/// A test-side MQTT client that records what it receives.
final class Observer: Sendable {
    let client: MQTTClient
    private let received = Locked<[(at: Date, message: MQTTMessage)]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    /// - Parameter persistentSession: keep the session on the broker, so that what the broker receives while
    ///   this observer is reconnecting is delivered to it afterwards, in the broker's order.
    convenience init(_ broker: TestBroker, filters: [String], persistentSession: Bool = false) async throws {
        try await self.init(
            host: broker.host, port: broker.port, filters: filters, persistentSession: persistentSession)
    }

    /// An observer on any broker node; MQTT 3.1.1 for a NATS cluster.
    /// `qos` 0 on a NATS cluster with a node down: NATS refuses a third to a half of new QoS 1 subscriptions
    /// then (each is a replicated JetStream consumer), never a QoS 0 one; retained messages come either way.
    init(
        host: String, port: Int, filters: [String], persistentSession: Bool = false,
        protocolVersion: MQTTConfiguration.ProtocolVersion = .v5, qos: MQTTQoS = .atLeastOnce
    ) async throws {
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: host, port: port, clientID: "obs-\(UUID().uuidString.prefix(8))",
                protocolVersion: protocolVersion, cleanStart: !persistentSession),
            logger: quietLogger)
        try await client.connect(timeout: .seconds(5))
        for filter in filters { try await client.subscribe(filter, qos: qos) }
        let client = self.client
        task.withLock {
            $0 = Task { [weak self] in
                for await message in client.messages { self?.append(message) }
            }
        }
    }

    private func append(_ message: MQTTMessage) { received.withLock { $0.append((Date(), message)) } }

    var messages: [MQTTMessage] { received.withLock { $0.map(\.message) } }

    /// What was received, with when, in receive order.
    var timedMessages: [(at: Date, message: MQTTMessage)] { received.withLock { $0 } }

    func clear() { received.withLock { $0.removeAll() } }

    func publish(_ topic: String, _ text: String, retain: Bool = false, properties: MQTTProperties = MQTTProperties())
        async throws
    {
        try await client.publish(
            topic: topic, payload: Array(text.utf8), qos: .atLeastOnce, retain: retain, properties: properties)
    }

    /// Statuses of `ride` received so far, decoded (zero-length ones are skipped).
    func statuses(_ ride: String) -> [JSONValue] {
        messages.filter { $0.topic == "rides/\(ride)/status" && !$0.payload.isEmpty }.compactMap {
            try? JSONParser.parse($0.payload)
        }
    }

    /// Waits until `predicate` holds for the messages received, polling every 20 ms.
    @discardableResult
    func waitFor(_ what: String, timeout: Double = 10, _ predicate: ([MQTTMessage]) -> Bool) async throws
        -> [MQTTMessage]
    {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let snapshot = messages
            if predicate(snapshot) { return snapshot }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TimedOut(what: what)
    }

    func stop() async {
        task.withLock { $0?.cancel() }
        await client.disconnect()
    }
}

extension JSONValue {
    var phase: String? { self["phase"]?.stringValue }
    var sequence: Int? { self["sequence"]?.doubleValue.map { Int($0) } }
}

func booking(ride: String, vehicle: String?, pickupDate: Date = Date().addingTimeInterval(300)) -> String {
    let vehiclePart = vehicle.map { #""vehicleId":"\#($0)","# } ?? ""
    return
        #"{"rideIdentifier":"\#(ride)",\#(vehiclePart)"rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(pickupDate))","priceRange":{"minimumPrice":"12.00","maximumPrice":"15.00","currencyCode":"EUR"}},"pickupLocation":{"latitude":52.5219,"longitude":13.4132},"dropOffLocation":{"latitude":52.5096,"longitude":13.3759},"vehicle":{"registrationPlate":"B-RS 1042","mapAnnotationImage":"https://assets.example/cars/compact.png"},"fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}}"#
}

func fix(_ vehicle: String, _ coordinate: Coordinate, at date: Date = Date(), speed: Double = 0) -> String {
    #"{"vehicleId":"\#(vehicle)","timestamp":"\#(Timestamps.format(date))","latitude":\#(coordinate.latitude),"longitude":\#(coordinate.longitude),"speed":\#(speed),"horizontalAccuracy":5}"#
}

let pickupPoint = Coordinate(latitude: 52.5219, longitude: 13.4132)
let dropOffPoint = Coordinate(latitude: 52.5096, longitude: 13.3759)
