// swift-tools-version:6.1
import PackageDescription

/// The ride domain's hot paths under ordo-one/benchmark: percentiles of time, throughput and mallocs per
/// operation. A package of its own so that `make test` never builds the benchmark machinery.
/// Run with `make bench-ordo` (or `swift package --allow-writing-to-package-directory benchmark` here).
let package = Package(
    name: "ride-status-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ride-status-worker", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "RideDomainBenchmarks",
            dependencies: [
                .product(name: "RideDomain", package: "ride-status-worker"),
                .product(name: "RideStatusKit", package: "ride-status-worker"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/RideDomainBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
