import ArgumentParser
import Foundation
import Logging
import MQTTClient
import Metrics
import Prometheus
import RideStatusService
import ServiceLifecycle
import SettingsLayers
import UnixSignals

/// `ride-status-worker`: turns fleet telemetry into validated ride statuses (`run`, the default), and makes
/// share-link keys and links (`share-key`, `share-link`). Thin: parse flags, load settings, bootstrap logging
/// and metrics, run the service until SIGTERM/SIGINT.
@main
struct RideStatusWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ride-status-worker",
        abstract: "Turns fleet telemetry into validated ride-status messages over MQTT.",
        subcommands: [RunWorker.self, ShareKeyCommand.self, ShareLinkCommand.self],
        defaultSubcommand: RunWorker.self)
}

/// The worker itself: `ride-status-worker [run] [options]`.
struct RunWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Turns fleet telemetry into validated ride-status messages over MQTT (the default).",
        discussion: "Settings: config/worker.yaml, then RIDESTATUS_* environment variables, then these flags.")

    @Option(
        help: """
            The YAML configuration file; relative paths in it resolve against its folder. \
            Default: config/worker.yaml here, else in the checkout the executable was built in.
            """)
    var config: String?
    @Option(help: "Broker URL, mqtt://user:password@host:port or mqtts://…") var broker: String?
    @Option(name: .customLong("update-interval"), help: "Seconds between statuses of a ride (C1), at most 20.")
    var updateInterval: String?
    @Option(name: .customLong("state-dir"), help: "Directory for the worker's identity.") var stateDir: String?
    @Option(name: .customLong("worker-id"), help: "The worker id (default: kept in the state directory).")
    var workerID: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?
    @Option(name: .customLong("metrics-port"), help: "Port of /metrics, /healthz, /readyz; 0 turns it off.")
    var metricsPort: String?
    @Option(name: .customLong("set"), help: "Any configuration key, as key=value (repeatable).")
    var assignments: [String] = []

    func run() async throws {
        // No fast bins in glibc's malloc. libmosquitto allocates each status's copy (payload, topic, G2 user
        // properties) on the publishing thread and frees it on the network thread at its PUBACK, and every
        // payload (above 1 KB) consolidated the fast bins those frees had filled: at the 100,000-ride cadence of
        // `make bench-scale`, `malloc_consolidate` and `_int_malloc` were 15 % of the worker's CPU (`perf
        // record`). Without fast bins the same build took 31.9 µs of CPU per status against 35.9 and 38.5 µs
        // with them (`perf stat`, one run each with at most 3.5 s of steal: this machine's noise is of that
        // order; the README's Scaling section has the runs of the whole change). Since the client's outbox the
        // copies are made and freed on the network thread, where each payload's copy would still consolidate
        // the fast bins the small frees fill; not measured again since.
        #if canImport(Glibc)
            let fastBinsOff = glibcMallopt(1 /* M_MXFAST, <malloc.h> */, 0) == 1
        #else
            let fastBinsOff = true
        #endif
        var overrides: [(String, String)] = []
        if let broker { overrides.append(("broker.url", broker)) }
        if let updateInterval { overrides.append(("rides.updateInterval", updateInterval)) }
        if let stateDir { overrides.append(("worker.stateDir", stateDir)) }
        if let workerID { overrides.append(("worker.id", workerID)) }
        if let logLevel { overrides.append(("worker.logLevel", logLevel)) }
        if let metricsPort { overrides.append(("metrics.port", metricsPort)) }
        for assignment in assignments {
            guard let (key, value) = SettingValue.assignment(assignment) else {
                throw ValidationError("--set takes key=value, not '\(assignment)'")
            }
            overrides.append((key, value))
        }
        let settings: WorkerSettings
        do {
            settings = try WorkerSettings.load(file: config, overrides: overrides)
        } catch {
            FileHandle.standardError.write(Data("ride-status-worker: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["ridestatus_cadence_gap_seconds"] = WorkerMetrics.cadenceGapBuckets(
            for: settings)
        MetricsSystem.bootstrap(factory)
        let logger = Logger(label: "ride-status-worker")
        if !fastBinsOff { logger.notice("malloc's fast bins could not be turned off; the cadence costs more CPU") }
        let worker: RideStatusService<MQTTClient>
        do {
            worker = try RideStatusService.connecting(settings: settings, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("ride-status-worker: \(error)\n".utf8))
            throw ExitCode(2)
        }
        // Started in this order, shut down in reverse: HTTP first, then the worker says goodbye (L8), then
        // the connection closes.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: worker.connection),
            .init(service: worker, successTerminationBehavior: .gracefullyShutdownGroup),
        ]
        let http: (any Service)?
        do {
            http = try await worker.httpServer(metricsText: { WorkerMetrics.withHelp(registry.emitToString()) })
        } catch {
            FileHandle.standardError.write(Data("ride-status-worker: \(error)\n".utf8))
            throw ExitCode(2)
        }
        if let http {
            // A port it cannot bind shuts the group down in order (goodbye, flush, disconnect), not at once.
            services.append(.init(service: http, failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

#if canImport(Glibc)
    /// glibc's `mallopt` (`<malloc.h>`, which the Glibc module does not bring in): a plain C function of two
    /// ints, which Swift passes and returns in the same registers as C on x86_64 and aarch64. Returns 1 on
    /// success.
    @_silgen_name("mallopt")
    private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif
