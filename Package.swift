// swift-tools-version:6.1
import PackageDescription

/// One set of settings for every target (Swift 6 language mode is the tools-version default).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ride-status-worker",
    platforms: [.macOS(.v15), .iOS(.v17), .watchOS(.v10)],
    products: [
        .executable(name: "ride-status-worker", targets: ["RideStatusWorker"]),
        .executable(name: "fleet-sim", targets: ["FleetSim"]),
        .executable(name: "ride-watch", targets: ["RideWatch"]),
        .executable(name: "ride-bench", targets: ["RideBench"]),
        .executable(name: "ride-instructions", targets: ["RideInstructions"]),
        .executable(name: "ride-push", targets: ["RidePushCommand"]),
        .library(name: "MQTTClient", targets: ["MQTTClient"]),
        .library(name: "RideDomain", targets: ["RideDomain"]),
        .library(name: "RideJSON", targets: ["RideJSON"]),
        .library(name: "RideStatusService", targets: ["RideStatusService"]),
        .library(name: "MosquittoTesting", targets: ["MosquittoTesting"]),
        // For consumers (rider apps, Intents extensions, dashboards): the contract's payloads; nothing third-party.
        .library(name: "RideStatusKit", targets: ["RideStatusKit"]),
    ],
    traits: [
        .trait(
            name: "UnbufferedIO",
            description: """
                Builds the MQTT client without its read buffer under libmosquitto (no patching of libmosquitto's \
                imports of read and write): the path every platform but Linux with glibc takes. CI builds it.
                """)
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        // Share links (issue 30): Ed25519-signed JWTs with a key id, verified by the workers.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // ride-push (issue 32): APNs over HTTP/2 and FCM over HTTPS, with TLS trust roots of its own in tests
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // ride-push's registration records are named by a SHA-256 of the push token (jwt-kit resolves it already)
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // MARK: C boundary
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // A read buffer under libmosquitto's socket reads (its imports of `read` and `write`, patched; measured:
        // 3.9 reads and 2.0 writes per received message, see mosquitto_io.h)
        .target(
            name: "CMosquittoIO",
            cSettings: [.define("MOSQUITTO_IO_DISABLED", .when(traits: ["UnbufferedIO"]))]
        ),

        // MARK: The one lock type (ThreadSanitizer sees it; see Locked.swift)
        .target(
            name: "Locking",
            swiftSettings: swiftSettings
        ),

        // MARK: MQTT client (the only importer of CMosquitto)
        .target(
            name: "MQTTClient",
            dependencies: [
                "CMosquitto",
                "CMosquittoIO",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: JSON reading and writing without allocation, and RFC 3339 times (measured: 1.2M fixes/s
        // against 90k/s for JSONDecoder, `ride-bench domain`)
        .target(
            name: "RideJSON",
            swiftSettings: swiftSettings
        ),

        // MARK: The client library: Codable payloads of the contract, topic names, the SiriKit mapping (no
        // dependencies outside this package: RideJSON writes and reads its times; Linux and Apple platforms)
        .target(
            name: "RideStatusKit",
            dependencies: ["RideJSON"],
            swiftSettings: swiftSettings
        ),

        // MARK: ride-push (issue 32): what goes to the lock screens, decided in a pure planner; APNs's and FCM's
        // requests and answers as values
        .target(
            name: "RidePush",
            dependencies: ["RideStatusKit", "WorkerGroup", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),

        // MARK: Who may see a ride: share tokens, signed by dispatch and verified by the workers and ride-push
        // alike; the host names their HTTP servers answer (A4)
        .target(
            name: "RideAccess",
            dependencies: [
                "RideStatusKit", .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Groups of workers (G1-G4): ownership and membership, pure (no I/O), tested alone
        .target(
            name: "WorkerGroup",
            swiftSettings: swiftSettings
        ),

        // MARK: Groups on a clustered broker (G6): etcd's v3 JSON gateway over async-http-client
        .target(
            name: "EtcdGateway",
            dependencies: [
                "Locking",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Pure ride domain (no I/O, no C, no MQTT), folders by the contract's sections
        .target(
            name: "RideDomain",
            dependencies: ["Locking", "RideJSON", "RideStatusKit", "WorkerGroup"],
            swiftSettings: swiftSettings
        ),

        // MARK: Service wiring the client and the domain
        .target(
            name: "RideStatusService",
            dependencies: [
                "SettingsLayers",
                "WorkerGroup",
                "RideAccess",
                "RideStatusKit",
                "Locking",
                "MQTTClient",
                "RideDomain",
                "EtcdGateway",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: ride-push's service: the planner's actions carried out over MQTT, APNs, FCM and HTTP
        .target(
            name: "RidePushService",
            dependencies: [
                "Locking",
                "SettingsLayers",
                "RideAccess",
                "RidePush",
                "RideStatusKit",
                "WorkerGroup",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Thin executables
        .executableTarget(
            name: "RidePushCommand",
            dependencies: [
                "BrokerOptions",
                "MQTTClient",
                "RideAccess",
                "RidePush",
                "RidePushService",
                "RideStatusKit",
                "SettingsLayers",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "RideStatusWorker",
            dependencies: [
                "RideAccess",
                "RideStatusService",
                "SettingsLayers",
                "MQTTClient",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "FleetModel",
            dependencies: ["RideDomain", "RideJSON", "WorkerGroup"],
            swiftSettings: swiftSettings
        ),
        // MARK: How services read settings: a YAML file, environment variables, flags (worker and ride-push)
        .target(
            name: "SettingsLayers",
            dependencies: [.product(name: "Yams", package: "Yams")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "BrokerOptions",
            dependencies: [
                "MQTTClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FleetSim",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                "BrokerOptions",
                "FleetModel",
                "Locking",
                "MQTTClient",
                "RideDomain",
                "RideJSON",
                "WorkerGroup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "RideWatch",
            dependencies: [
                "BrokerOptions",
                "Locking",
                "MQTTClient",
                "RideStatusKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "RideBench",
            dependencies: [
                "FleetModel",
                "Locking",
                "MQTTClient",
                "RideDomain",
                "MosquittoTesting",
                "WorkerGroup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Instructions per fix and per status under callgrind (make bench-instructions): a synchronous main
        .executableTarget(
            name: "RideInstructions",
            dependencies: [
                "RideDomain",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Test support: a real mosquitto on a free loopback port
        .target(
            name: "MosquittoTesting",
            dependencies: [
                "Locking",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Test support: an in-memory broker and transport for the service's own unit tests
        .target(
            name: "RideStatusTesting",
            dependencies: ["Locking", "RideStatusService", "MQTTClient"],
            swiftSettings: swiftSettings
        ),

        // MARK: Tests, one target per module
        .testTarget(
            name: "MQTTClientTests",
            dependencies: [
                "MQTTClient",
                "Locking",
                "CMosquittoIO",
                "MosquittoTesting",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RideStatusKitTests",
            dependencies: ["RideStatusKit", "RideDomain", "RideJSON", "MosquittoTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RidePushTests",
            dependencies: [
                "Locking",
                "RidePush",
                "RidePushService",
                "SettingsLayers",
                "RideStatusKit",
                "WorkerGroup",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FleetSimTests",
            dependencies: ["FleetSim", "FleetModel", "RideDomain", "RideStatusKit", "RideWatch", "WorkerGroup"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WorkerGroupTests",
            dependencies: [
                "WorkerGroup",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RideDomainTests",
            dependencies: [
                "RideDomain",
                "FleetModel",
                "MosquittoTesting",
                "WorkerGroup",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["Golden"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RideStatusServiceTests",
            dependencies: [
                "Locking",
                "RideAccess",
                "RideStatusService",
                "SettingsLayers",
                "RideStatusTesting",
                "MQTTClient",
                "RideDomain",
                "RideStatusKit",
                "MosquittoTesting",
                "EtcdGateway",
                "WorkerGroup",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
