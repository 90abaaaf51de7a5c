import ArgumentParser
import Foundation

/// `ride-bench`: measured speed, in release builds, outside `make test`.
@main
struct RideBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ride-bench", abstract: "Benchmarks of the MQTT client and the ride domain.",
        subcommands: [
            ClientBenchmark.self, MemoryBenchmark.self, SubscribeBenchmark.self, QuoteBenchmark.self,
            EndToEndBenchmark.self, ChaosSuite.self,
            FloodBenchmark.self, GroupBenchmark.self, ETABenchmark.self, LiveMapBenchmark.self,
        ])
}
