import Foundation
import Locking
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

/// L8 and L6 with real processes: fresh workers on a real mosquitto, each met by a dispatcher that does what
/// the contract documents, waiting for the worker's retained `online` and publishing a booking the instant it
/// arrives. Every booking must produce a status. `READINESS_STARTS` sets the number of starts (10 here);
/// `make test-starts` runs 100 beside a CPU hog on each core, where the presence used to come before the
/// control subscriptions' SUBACKs in most starts.
@Suite("Readiness end to end: a booking sent at online is never lost (L8, L6)", .serialized)
struct ReadinessEndToEndTests {
    static var starts: Int { Int(ProcessInfo.processInfo.environment["READINESS_STARTS"] ?? "") ?? 10 }
    static var hog: Bool { ProcessInfo.processInfo.environment["READINESS_HOG"] == "1" }

    /// A dispatcher as documented: on the worker's `online`, it publishes the booking from the thread that
    /// received the presence, without waiting for anything else.
    final class Dispatcher: Sendable {
        let client: MQTTClient
        let sentAt = Locked<Date?>(nil)
        let statusAt = Locked<Date?>(nil)
        private let task: Task<Void, Never>

        init(_ broker: TestBroker, worker: String, ride: String) async throws {
            client = try MQTTClient(
                configuration: MQTTConfiguration(
                    host: broker.host, port: broker.port, clientID: "dispatch-\(UUID().uuidString.prefix(8))"),
                logger: quietLogger)
            try await client.connect(timeout: .seconds(5))
            try await client.subscribe("ridestatus/workers/\(worker)")
            try await client.subscribe("rides/\(ride)/status")
            let (client, sentAt, statusAt) = (client, sentAt, statusAt)
            let booking = Array(bookingText(ride: ride).utf8)
            task = Task {
                for await message in client.messages {
                    if message.topic == "rides/\(ride)/status", !message.payload.isEmpty {
                        statusAt.withLock { $0 = $0 ?? Date() }
                    } else if sentAt.withLock({ $0 == nil }),
                        (try? JSONParser.parse(message.payload))?["state"]?.stringValue == "online"
                    {
                        try? client.publishWithoutWaiting(topic: "rides/\(ride)/start", payload: booking)
                        sentAt.withLock { $0 = Date() }
                    }
                }
            }
        }

        func stop() async {
            task.cancel()
            await client.disconnect()
        }
    }

    @Test("L8, L6: fresh workers one after another; a booking published the instant online arrives gets a status")
    func bookingAtOnline() async throws {
        let hogs = try (0..<(Self.hog ? ProcessInfo.processInfo.activeProcessorCount : 0)).map { _ in
            try ChildProcess(executable: "/bin/sh", arguments: ["-c", "while :; do :; done"])
        }
        defer { for hog in hogs { hog.signal(SIGKILL) } }
        try await withTestBroker { broker in
            var lost: [String] = []
            var latencies: [Double] = []
            for start in 0..<Self.starts {
                // A new worker id each time: a first start, with a session the broker has never seen.
                let id = "w-start-\(start)"
                let ride = "r-start-\(start)"
                let dispatcher = try await Dispatcher(broker, worker: id, ride: ride)
                let worker = try WorkerProcess(broker: broker, workerID: id, interval: 1)
                try await worker.start(timeout: 60)
                let deadline = Date().addingTimeInterval(10)
                while dispatcher.statusAt.withLock({ $0 }) == nil, Date() < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                if let sent = dispatcher.sentAt.withLock({ $0 }), let status = dispatcher.statusAt.withLock({ $0 }) {
                    latencies.append(status.timeIntervalSince(sent))
                } else {
                    lost.append("\(ride) (booking sent: \(dispatcher.sentAt.withLock { $0 } != nil))")
                    print("worker log of \(id):\n\(worker.logText)")
                }
                try await dispatcher.client.publish(topic: "rides/\(ride)/stop", payload: [])
                _ = await worker.terminate()
                await dispatcher.stop()
            }
            let sorted = latencies.sorted()
            print(
                "readiness starts: \(Self.starts), statuses: \(latencies.count), lost: \(lost.count), CPU hogs: "
                    + "\(hogs.count), booking to status p50 \(sorted.isEmpty ? 0 : sorted[sorted.count / 2]) s, "
                    + "max \(sorted.last ?? 0) s")
            #expect(lost.isEmpty, "L8: bookings published at online and lost: \(lost)")
        }
    }
}

/// The harness's booking, under a name the dispatcher's closure cannot confuse with anything of its own.
private func bookingText(ride: String) -> String { booking(ride: ride, vehicle: "v-\(ride)") }
