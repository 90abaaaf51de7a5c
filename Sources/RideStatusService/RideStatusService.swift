import EtcdGateway
import Foundation
import Locking
public import Logging
public import MQTTClient
import Metrics
import RideAccess
import RideDomain
import RideJSON
public import ServiceLifecycle
import SettingsLayers
import WorkerGroup

import struct RideStatusKit.RideTopics

/// The ride-status worker as a `Service`: wires a broker connection to the ride domain. A short
/// composition of parts with one job each:
/// - ``WorkerLifecycle``: connecting, recovering (L5), ready, draining (L8), a pure state machine;
/// - `RideStatusService+Messages`: connection events, recovery and the routing of each message;
/// - ``ActionExecutor``: carries out the engine's actions; ``QuoteResponder``: quotes and replies (3.4, A1);
/// - `RideStatusService+Cadence`: statuses on time (C1), sleeping until the next is due, and metrics;
/// - ``SubscriptionQueue``: subscription changes, in order, off the lock.
///
/// One lock guards the ``RideEngine``; every input (message or cadence tick) is handled and its
/// ``RideAction``s are carried out while holding it, so statuses of a ride leave in sequence order (C5).
public final class RideStatusService<Transport: WorkerTransport>: Service, Sendable {
    public let settings: WorkerSettings
    let identity: WorkerIdentity
    let transport: Transport
    let logger: Logger
    let metrics = WorkerMetrics()
    let decoder: InputDecoder
    let core: Locked<Core>
    /// L8: this connection's `online` went out, so every control and request subscription is acknowledged
    /// (`/readyz`); cleared with the connection.
    let announced = Locked(false)
    let subscriptions = SubscriptionQueue()
    let executor: ActionExecutor<Transport>
    let responder: QuoteResponder<Transport>
    /// Wakes the cadence loop when a ride comes due before the time it sleeps until.
    let wakeup: Wakeup
    /// The worker's clock and wall time: it reads no other (``WorkerTime``).
    let time: WorkerTime
    /// When this service was made: priors it shares from then on come back as its own echo (E1).
    let startedAt: Date
    /// How often counters and gauges are reported, whatever the load: a saturated cadence is exactly when
    /// an operator looks at `/metrics`.
    let reportInterval: Duration
    /// G6: the etcd lease's end, which every status and state publish checks (always open in broker-only mode).
    let grantLease: GrantLease
    /// G6: etcd's gateway when `group.authority` is etcd; nil in broker-only mode.
    let etcdGateway: EtcdGateway?

    struct Core {
        var engine: RideEngine
        /// Quotes (3.4) and the available fleet; nil when no catalog is configured.
        var quoter: RideOptionQuoter?
        /// Connecting, recovering (L5), ready, draining (L8): the state machine decides, the service acts.
        var lifecycle = WorkerLifecycle<MQTTMessage>()
        /// A2: set once the no-local subscription to the ride states is acknowledged; before that a state
        /// message may be the worker's own echo (the recovery's subscription), and is not acted on.
        var watchingStates = false
        var reportedCounters = RideCounters()
        /// G1: the live workers in this worker's view, from their presence and wills.
        var group: GroupMembership
        /// G3, G4: which buckets of rides this worker serves, and the rides on their way here.
        var handover: HandoverState
        /// G1: when this connection's birth was published, and when it was last repeated (the heartbeat).
        var onlineSince: Date?
        var lastHeartbeat = Date.distantPast
        /// E1: when this worker last shared what its areas learned.
        var lastPriorsShare = Date.distantPast
        /// When the cadence loop wakes next; an input that makes a ride due earlier wakes it.
        var plannedWake = Date.distantFuture
        /// G5: when the worker began to confirm its lease after a lapse (the lease marker sent).
        var confirmingSince: Date?
        /// G6: the grants of an authority (etcd); nil in broker-only mode, and until etcd's epoch base is read.
        var authority: AuthorityState?
    }

    /// L8: control and request subscriptions to make, each until the broker acknowledges it.
    enum ControlSubscription: Sendable {
        /// Recovery is complete: every control and request filter.
        case recovery([String])
        /// The connection of `incarnation` restored every subscription but refused these control filters.
        case restoration([String], incarnation: UInt64)
    }

    let controlSubscriptions = AsyncStream<ControlSubscription>.makeStream()

    /// A worker on any transport; the worker id comes from the settings or the state directory.
    package convenience init(
        settings: WorkerSettings, transport: Transport, version: String, logger: Logger,
        reportInterval: Duration = .seconds(1), time: WorkerTime = .system
    ) throws {
        try self.init(
            settings: settings, identity: WorkerIdentity(settings: settings, version: version), transport: transport,
            logger: logger, reportInterval: reportInterval, time: time)
    }

    init(
        settings: WorkerSettings, identity: WorkerIdentity, transport: Transport, logger: Logger,
        reportInterval: Duration = .seconds(1), time: WorkerTime = .system
    ) {
        self.reportInterval = reportInterval
        self.time = time
        startedAt = time.now
        wakeup = Wakeup(time: time)
        self.settings = settings
        self.identity = identity
        self.transport = transport
        var logger = logger
        logger[metadataKey: "worker.id"] = .string(identity.id)
        self.logger = logger
        decoder = InputDecoder(maxPayloadBytes: settings.ride.maxPayloadBytes)
        etcdGateway =
            settings.authority == .etcd && !settings.etcdEndpoints.isEmpty
            ? EtcdGateway(
                endpoints: settings.etcdEndpoints,
                requestTimeout: .milliseconds(max(1000, settings.etcdLeaseTTL * 200))) : nil
        grantLease = GrantLease(enabled: settings.authority == .etcd, clock: { time.seconds }) { [transport] in
            transport.setPublishGate(token: $0, validFor: $1)
        }
        core = Locked(
            Core(
                engine: RideEngine(configuration: settings.ride, topics: settings.topics, catalog: settings.catalog),
                quoter: settings.catalog.map { RideOptionQuoter(catalog: $0, configuration: settings.ride) },
                group: GroupMembership(selfID: identity.id, silenceLimit: Self.silenceLimit),
                handover: HandoverState(selfID: identity.id, settings: settings)))
        executor = ActionExecutor(
            transport: transport, topics: settings.topics, workerID: identity.id, metrics: metrics, logger: logger,
            changes: subscriptions, vehicleQoS: settings.manySubscriptionsQoS, grantLease: grantLease)
        responder = QuoteResponder(
            transport: transport, topics: settings.topics, decoder: decoder, metrics: metrics, time: time)
    }

    /// The worker id on the broker (L6, L8).
    public var workerID: String { identity.id }

    /// Whether the worker is connected, has recovered its rides and announced itself `online`, which it does
    /// only once the broker acknowledged every control and request subscription (`/readyz`, L8).
    package var isReady: Bool { announced.withLock { $0 } }

    /// The connection as a `Service` to run before this one: it connects at start and disconnects when the
    /// group shuts down, after this worker has said goodbye (L8).
    public var connection: some Service { ConnectionService(transport: transport) }

    /// The HTTP server (`/metrics`, `/healthz`, `/readyz`, the read API `/v1`, the live map at `/` and share
    /// links at `/share/`) as a `Service` to run after this one; nil when `metrics.port` is 0.
    /// - Parameters:
    ///   - metricsText: the Prometheus text (the executable owns the metrics backend).
    ///   - shareTransport: the connection share links read rides' statuses on (``ShareFeed``), when
    ///     `http.shareKeys` is set; it is started and stopped with the server.
    public func httpServer<Share: WorkerTransport>(
        metricsText: @escaping @Sendable () -> String, shareTransport: Share?
    ) async throws -> (any Service)? {
        guard settings.metricsPort > 0 else { return nil }
        let web = URL(fileURLWithPath: settings.webRoot)
        let openAPI = try? String(contentsOf: web.appendingPathComponent("openapi.json"), encoding: .utf8)
        let exposed = !HTTPAccess.isLoopback(settings.metricsHost)
        var access = HTTPAccess(tokenRequired: exposed, operatorToken: nil, verifier: nil, time: time)
        if !settings.operatorTokenFile.isEmpty {
            let token: String
            do {
                token = try MQTTConfiguration.password(fromFile: settings.operatorTokenFile)
            } catch {
                throw WorkerSettings.Problem(key: "http.operatorTokenFile", message: "\(error)")
            }
            guard token.utf8.count >= 16 else {
                throw WorkerSettings.Problem(
                    key: "http.operatorTokenFile", message: "the operator token must be 16 characters or more")
            }
            access.operatorToken = Array(token.utf8)
            // With an operator token every read needs a token, loopback too: a reverse proxy on this host would
            // otherwise hand the whole fleet to its clients.
            access.tokenRequired = true
        }
        if !settings.shareKeys.isEmpty {
            do {
                let jwks = try String(contentsOfFile: settings.shareKeys, encoding: .utf8)
                access.verifier = try await ShareLinks.Verifier(jwks: jwks)
            } catch {
                throw WorkerSettings.Problem(key: "http.shareKeys", message: "\(error)")
            }
        }
        if settings.readAPI && access.tokenRequired {
            logger.notice(
                "the read API answers only with the operator token or a share token (served beyond loopback, or an operator token set)",
                metadata: [
                    "metrics.host": "\(settings.metricsHost)",
                    "http.operatorTokenFile": "\(settings.operatorTokenFile.isEmpty ? "none" : "set")",
                ])
        }
        if settings.readAPI && openAPI == nil {
            logger.warning(
                "the live map's files were not found: / and /v1/openapi.json answer 404",
                metadata: ["http.webRoot": "\(settings.webRoot)"])
        }
        var streets: [UInt8]?
        if settings.readAPI && !settings.streets.isEmpty {
            // The map's streets: a file the operator named must be there and be GeoJSON, or start-up stops naming it.
            let problem: String?
            do {
                let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: settings.streets)))
                if bytes.count > 16 << 20 {
                    problem = "larger than 16 MiB"
                } else if case .object(let collection) = try JSONParser.parse(bytes),
                    collection["type"] == .string("FeatureCollection")
                {
                    (streets, problem) = (bytes, nil)
                } else {
                    problem = "not a GeoJSON FeatureCollection"
                }
            } catch {
                problem = "\(error)"
            }
            if let problem {
                throw WorkerSettings.Problem(key: "http.streets", message: "\(settings.streets): \(problem)")
            }
        }
        var share: (any WorkerHTTPServer.ShareSource)?
        if settings.readAPI, access.verifier != nil, let shareTransport {
            share = ShareFeed(transport: shareTransport, topics: settings.topics, time: time, logger: logger)
            logger.info(
                "share links on: /share/{token} shows one ride from its retained status",
                metadata: ["keys": "\(access.verifier?.keyIDs.sorted() ?? [])"])
        }
        return WorkerHTTPServer(
            host: settings.metricsHost, port: settings.metricsPort, hosts: settings.httpHosts, logger: logger,
            isReady: { [weak self] in self?.isReady ?? false }, metricsText: metricsText, reader: self,
            content: .init(
                webRoot: settings.webRoot, leafletDirectory: settings.leafletDirectory, tileURL: settings.tileURL,
                tileAttribution: settings.tileAttribution, readAPI: settings.readAPI, openAPIDocument: openAPI,
                sharePage: try? String(contentsOf: web.appendingPathComponent("share.html"), encoding: .utf8),
                streets: streets, streetsAttribution: settings.streetsAttribution),
            time: time, access: access, share: share)
    }

    public func run() async throws {
        logStart()
        // Not a child of the group below: a SUBACK that never comes (a half-open connection) must not hold up
        // the goodbye; the connection's disconnect answers its waiter after this service returns.
        let applier = Task { await self.applySubscriptionChanges() }
        let controls = Task { await self.subscribeControls() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.consumeEvents() }
            group.addTask { await self.consumeMessages() }
            group.addTask { await self.runCadence() }
            group.addTask { await self.runAuthority() }
            // Wait for SIGTERM/SIGINT (or the group's cancellation), then leave cleanly (L8); the connection
            // service disconnects after this returns.
            try? await gracefulShutdown()
            let others = core.withLock { core in
                // E1: before the lifecycle leaves `recovered`, what the areas learned since the last share.
                sharePriors(now: time.now, force: true, core: &core)
                core.lifecycle.shutdown()
                let others = core.group.members.count - 1
                // G3, C5: the staying members continue above these floors whatever state they read (broker-only
                // mode; under an authority, G6, the grant's epoch is the floor).
                if others > 0, settings.authority == .broker { announceLeavingFloors(core: &core) }
                return others
            }
            // G6: the grants end, and their release notice goes out behind the last statuses, before the goodbye:
            // so the goodbye, too, comes after every status on this connection. The lease goes before the tasks
            // are cancelled, so that its revoke is not cancelled with them.
            await leaveAuthority()
            logger.info(
                "shutting down: presence offline, flushing QoS 1 messages",
                metadata: ["members.staying": "\(others)"])
            try? transport.publish(
                identity.presenceTopic,
                identity.presence(online: false, incarnation: transport.incarnation, now: time.now),
                retain: true)
            let flushed = await transport.flush(timeout: .seconds(3))
            subscriptions.finish()
            controlSubscriptions.continuation.finish()
            applier.cancel()
            controls.cancel()
            group.cancelAll()
            logger.info("stopped", metadata: ["flushed": "\(flushed)"])
        }
    }

    private func logStart() {
        logger.info(
            "ride-status worker starting",
            metadata: [
                "broker": "\(settings.redactedBrokerURL)", "update.interval": "\(settings.ride.updateInterval)",
                "config": "\(settings.configurationFile ?? "none: built-in defaults")",
            ])
        for warning in settings.warnings { logger.warning("\(warning)") }
        switch transport.ioInterposition {
        case .installed:
            logger.info("MQTT reads buffered under libmosquitto (broker.interposeIO)", metadata: ["io": "installed"])
        case .disabled:
            logger.notice(
                "MQTT reads unbuffered: broker.interposeIO is false (about 7 system calls per received message, not 1)",
                metadata: ["io": "disabled"])
        case .unavailable(let reason):
            logger.warning(
                "MQTT reads unbuffered: libmosquitto could not be patched here (about 7 system calls per received message, not 1)",
                metadata: ["io": "unavailable", "reason": "\(reason)"])
        }
        if let catalog = settings.catalog {
            logger.info(
                "ride options from the catalog (3.4)",
                metadata: [
                    "catalog": "\(settings.rideOptionsCatalogPath)", "options": "\(catalog.options.map(\.name))",
                    "areas": "\(catalog.areas.map(\.name))",
                ])
        } else {
            logger.warning(
                "no ride-option catalog: ride-options/request answers failureServiceTemporarilyUnavailable",
                metadata: ["catalog": "\(settings.rideOptionsCatalogPath)"])
        }
    }

    private func applySubscriptionChanges() async {
        while let steps = await subscriptions.next() {
            for step in steps {
                do {
                    switch step {
                    case .subscribe(let filters, let qos, let options):
                        try await transport.subscribe(filters, qos: qos, options: options)
                        if options.noLocal && filters.contains(settings.topics.stateFilter) {
                            core.withLock { $0.watchingStates = true }
                        }
                    case .unsubscribe(let filters): try await transport.unsubscribe(filters)
                    case .publish(let topic, let payload): try transport.publish(topic, payload)
                    }
                } catch {
                    logger.error("subscription change failed", metadata: ["change": "\(step)", "error": "\(error)"])
                }
            }
        }
    }
}

extension RideStatusService {
    /// L8: subscribes to the control and request filters, again and again with a growing pause while the broker
    /// refuses them (a NATS node that cannot create its consumer yet), then tells the lifecycle, which
    /// announces `online` when this connection's subscriptions are all restored too. Not a child of the
    /// service's task group, as the subscription applier is not: a SUBACK that never comes must not hold up
    /// the goodbye.
    func subscribeControls() async {
        for await request in controlSubscriptions.stream {
            let filters: [String]
            switch request {
            case .recovery(let all): filters = all
            case .restoration(let refused, _): filters = refused
            }
            var pause = Duration.milliseconds(250)
            while true {
                do {
                    try await transport.subscribe(filters, qos: .atLeastOnce, options: MQTTSubscribeOptions())
                    break
                } catch {
                    guard !Task.isCancelled, core.withLock({ $0.lifecycle.state != .draining }) else { return }
                    logger.error(
                        "the broker refused a control subscription; not online until it is acknowledged (L8)",
                        metadata: ["filters": "\(filters)", "error": "\(error)", "retry.in": "\(pause)"])
                    try? await time.sleep(for: pause)
                    pause = min(pause * 2, .seconds(30))
                }
            }
            core.withLock { core in
                let announcing: UInt64?
                switch request {
                case .recovery: announcing = core.lifecycle.controlsAcknowledged()
                case .restoration(_, let incarnation):
                    announcing = core.lifecycle.controlsRestored(incarnation: incarnation)
                }
                if let announcing { announce(incarnation: announcing, core: &core) }
            }
        }
    }

    /// L8: every filter the worker takes control messages and requests on; `online` waits for their SUBACKs.
    func controlFilters(quoting: Bool) -> [String] {
        let topics = settings.topics
        var filters =
            topics.controlFilters + [topics.vehicleEventFilter, topics.statusRequestFilter, topics.rideOptionsRequest]
        // Retained availability arrives with its SUBACK: the quoter's index fills before the worker is online.
        if quoting { filters.append(topics.availabilityFilter) }
        return filters
    }
}

extension RideStatusService where Transport == MQTTClient {
    /// The worker on a real broker: resolves its id (L6), then makes the libmosquitto client with its will (L8).
    public static func connecting(settings: WorkerSettings, version: String = "0.1.0", logger: Logger) throws
        -> RideStatusService
    {
        let identity = try WorkerIdentity(settings: settings, version: version)
        var clientLogger = logger
        clientLogger[metadataKey: "worker.id"] = .string(identity.id)
        let client = try MQTTClient(
            configuration: try settings.mqttConfiguration(workerID: identity.id, version: version),
            logger: clientLogger)
        return RideStatusService(settings: settings, identity: identity, transport: client, logger: logger)
    }

    /// The HTTP server, with a connection of its own for share links when `http.shareKeys` is set: a clean
    /// session with no will, under the worker's account, that reads only the statuses of rides being shown.
    public func httpServer(metricsText: @escaping @Sendable () -> String) async throws -> (any Service)? {
        var share: MQTTClient?
        if settings.readAPI, !settings.shareKeys.isEmpty, settings.metricsPort > 0 {
            var configuration = try settings.mqttConfiguration(workerID: identity.id, version: "share")
            configuration.clientID += "-share"
            // It reads, and holds nothing to fence (G5 is the worker's connection's).
            configuration.lease = nil
            configuration.cleanStart = true
            configuration.sessionExpiry = 0
            configuration.will = nil
            var clientLogger = logger
            clientLogger[metadataKey: "worker.id"] = .string(identity.id)
            clientLogger[metadataKey: "connection"] = "share links"
            share = try MQTTClient(configuration: configuration, logger: clientLogger)
        }
        return try await httpServer(metricsText: metricsText, shareTransport: share)
    }
}

/// Connects when the group starts; disconnects cleanly when the group shuts down (after the worker).
struct ConnectionService<Transport: WorkerTransport>: Service {
    let transport: Transport

    func run() async throws {
        transport.start()
        try? await gracefulShutdown()
        await transport.disconnect(flushTimeout: .milliseconds(500))
    }
}
