import ArgumentParser
import Foundation
import Logging
import MQTTClient
import MosquittoTesting

/// Vehicle subscriptions at fleet scale (L3): `filters` subscriptions made one at a time, each
/// waiting for its SUBACK (what the worker did before), against the same number in one batch (packets of 256
/// filters, all sent before any SUBACK is awaited), each on a fresh mosquitto, in the same run.
struct SubscribeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe", abstract: "Vehicle subscriptions one at a time against batched.")

    @Option var filters = 20_000
    @Option(help: "Repetitions of each way; every time is printed.") var runs = 3

    func run() async throws {
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let names = (0..<filters).map { "fleet/vehicles/v-\($0)/position" }
        print("ride-bench subscribe: \(filters) filters, \(runs) runs each way, a fresh mosquitto each time")
        for run in 1...runs {
            for batched in [false, true] {
                let seconds = try await withTestBroker { broker in
                    let client = try MQTTClient(
                        configuration: MQTTConfiguration(
                            host: broker.host, port: broker.port, clientID: "bench-sub-\(run)", cleanStart: true),
                        logger: quiet)
                    try await client.connect()
                    let started = ContinuousClock.now
                    if batched {
                        try await client.subscribe(names, qos: .atLeastOnce)
                    } else {
                        for name in names { try await client.subscribe(name, qos: .atLeastOnce) }
                    }
                    let elapsed = (ContinuousClock.now - started).seconds
                    await client.disconnect()
                    return elapsed
                }
                print(
                    String(
                        format: "  run %d  %-34@ %7.3f s  %9.0f subscriptions/s", run,
                        (batched ? "batched (256 a packet)" : "one at a time, SUBACK each") as NSString, seconds,
                        Double(filters) / seconds))
            }
        }
    }
}
