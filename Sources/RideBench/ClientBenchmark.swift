import ArgumentParser
import Foundation
import Logging
import MQTTClient
import MosquittoTesting

#if canImport(Glibc)
    import Glibc
#endif

/// Messages per second received through a local broker by ``MQTTClient`` and, in the same run from the same
/// publisher, by `mosquitto_sub`.
struct ClientBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "client")

    @Option var host = "127.0.0.1"
    @Option var port = 1883
    @Option var messages = 200_000
    @Option(help: "0 or 1") var qos: Int32 = 0
    @Option var payloadBytes = 200
    @Option(help: "Repetitions; the median is reported.") var runs = 3
    @Option(help: "Who publishes: mosquitto_pub (fast, from a file) or MQTTClient.") var publisher = "mosquitto_pub"

    func run() async throws {
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).txt")
        let line = String(repeating: "a", count: payloadBytes) + "\n"
        try String(repeating: line, count: messages).write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var clientRates: [Double] = []
        var subRates: [Double] = []
        for run in 1...runs {
            let topic = "bench/\(UUID().uuidString.prefix(8))"
            let qosLevel: MQTTQoS = qos == 0 ? .atMostOnce : .atLeastOnce
            let receiver = try MQTTClient(
                configuration: MQTTConfiguration(
                    host: host, port: port, clientID: "bench-rx-\(run)", cleanStart: true, bufferCapacity: 100_000),
                logger: quiet)
            try await receiver.connect()
            try await receiver.subscribe(topic, qos: qosLevel)
            let sub = try ChildProcess(
                executable: "/usr/bin/mosquitto_sub",
                arguments: [
                    "-h", host, "-p", "\(port)", "-t", topic, "-q", "\(qos)", "-C", "\(messages)", "-W", "120",
                ])
            try await Task.sleep(for: .milliseconds(700))
            let payload = [UInt8](repeating: 0x61, count: payloadBytes)
            let start = ContinuousClock.now
            let counting = Task { () -> (Int, Duration) in
                var count = 0
                var last = start
                for await _ in receiver.messages {
                    count += 1
                    last = ContinuousClock.now
                    if count == messages { break }
                }
                return (count, last - start)
            }
            let subDone = Task { () -> Duration in
                while sub.isRunning { try? await Task.sleep(for: .microseconds(200)) }
                return ContinuousClock.now - start
            }
            var sender: MQTTClient?
            if publisher == "mosquitto_pub" {
                // One line a message, published by mosquitto_pub -l as fast as the broker takes them.
                let pub = try ChildProcess(
                    executable: "/usr/bin/mosquitto_pub",
                    arguments: ["-h", host, "-p", "\(port)", "-t", topic, "-q", "\(qos)", "-l"], input: file)
                while pub.isRunning { try await Task.sleep(for: .milliseconds(1)) }
            } else {
                let client = try MQTTClient(
                    configuration: MQTTConfiguration(
                        host: host, port: port, clientID: "bench-tx-\(run)", cleanStart: true),
                    logger: quiet)
                try await client.connect()
                for _ in 0..<messages {
                    if qos == 1 {
                        while client.unacknowledgedCount > 1000 { try await Task.sleep(for: .microseconds(50)) }
                    }
                    try client.publishWithoutWaiting(topic: topic, payload: payload, qos: qosLevel)
                }
                sender = client
            }
            let timeout = Task {
                try await Task.sleep(for: .seconds(120))
                counting.cancel()
            }
            let (count, clientTime) = await counting.value
            let subTime = await subDone.value
            timeout.cancel()
            let clientRate = Double(count) / clientTime.seconds
            let subRate = Double(messages) / subTime.seconds
            clientRates.append(clientRate)
            subRates.append(subRate)
            print(
                String(
                    format: "run %d QoS %d: MQTTClient %.0f msg/s (%d of %d), mosquitto_sub %.0f msg/s", run, qos,
                    clientRate, count, messages, subRate))
            await sender?.disconnect()
            await receiver.disconnect()
        }
        let clientMedian = clientRates.sorted()[clientRates.count / 2]
        let subMedian = subRates.sorted()[subRates.count / 2]
        print(
            String(
                format: "QoS %d median: MQTTClient %.0f msg/s, mosquitto_sub %.0f msg/s, ratio %.1f%%", qos,
                clientMedian, subMedian, 100 * clientMedian / subMedian))
    }
}
