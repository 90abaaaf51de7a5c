import Foundation
import Logging
import MQTTClient
import Metrics
import RideDomain
import ServiceLifecycle
import Synchronization

/// The ride-status worker as a `Service`: wires the MQTT client to the ride domain.
///
/// One `Mutex` guards the ``RideEngine``; every input (message or cadence tick) is handled and its
/// ``RideAction``s are carried out while holding it, so statuses of a ride leave in sequence order (C5).
/// Publishing there never waits on the network (libmosquitto queues); subscription changes, which do wait,
/// go through an ordered queue to their own task.
public final class RideStatusService: Service, Sendable {
    public let settings: WorkerSettings
    public let version: String
    let logger: Logger
    let metrics: WorkerMetrics
    let core: Mutex<Core>
    let readiness = Mutex(Readiness())
    private let metricsText: @Sendable () -> String
    private let decoder: InputDecoder

    struct Core: ~Copyable {
        var engine: RideEngine
        /// Quotes (3.4) and the available fleet; nil when no catalog is configured.
        var quoter: RideOptionQuoter?
        /// Connecting, recovering (L5), ready, draining (L8): the state machine decides, the service acts.
        var lifecycle = WorkerLifecycle<MQTTMessage>()
        /// A2: set once the no-local subscription to the ride states is acknowledged; before that a state
        /// message may be the worker's own echo (the recovery's subscription), and is not acted on.
        var watchingStates = false
        var reportedCounters = RideCounters()
        /// One encoder for the durable state of every publish, rather than one per publish.
        let stateEncoder = JSONEncoder()
    }

    struct Readiness {
        var connected = false
        var recovered = false
    }

    enum SubscriptionChange: Sendable {
        case subscribe(String, options: MQTTSubscribeOptions = MQTTSubscribeOptions())
        case unsubscribe(String)
        /// Every change queued before it has been acknowledged: the worker is ready (`/readyz`).
        case ready
    }

    /// - Parameters:
    ///   - metricsText: the Prometheus text for `/metrics` (the executable owns the metrics backend).
    public init(
        settings: WorkerSettings, version: String = "0.1.0", logger: Logger,
        metricsText: @escaping @Sendable () -> String = { "" }
    ) {
        self.settings = settings
        self.version = version
        self.logger = logger
        self.metricsText = metricsText
        metrics = WorkerMetrics()
        decoder = InputDecoder(maxPayloadBytes: settings.ride.maxPayloadBytes)
        core = Mutex(
            Core(
                engine: RideEngine(configuration: settings.ride, topics: settings.topics, catalog: settings.catalog),
                quoter: settings.catalog.map { RideOptionQuoter(catalog: $0, configuration: settings.ride) }))
    }

    /// Whether the worker is connected and has recovered its rides (`/readyz`).
    public var isReady: Bool { readiness.withLock { $0.connected && $0.recovered } }

    public func run() async throws {
        let workerID = try resolveWorkerID()
        var workerLogger = self.logger
        workerLogger[metadataKey: "worker.id"] = .string(workerID)
        let logger = workerLogger
        let client = try MQTTClient(
            configuration: try settings.mqttConfiguration(workerID: workerID, version: version), logger: logger)
        let (changes, changeSink) = AsyncStream<SubscriptionChange>.makeStream()
        let endpoint = try startEndpoint(logger: logger)
        defer { endpoint?.stop() }
        logger.info(
            "ride-status worker starting",
            metadata: [
                "broker": "\(settings.brokerURL)", "update.interval": "\(settings.ride.updateInterval)",
                "config": "\(settings.configurationFile ?? "none: built-in defaults")",
            ])
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
        client.start()

        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.consumeEvents(client, workerID: workerID, changes: changeSink, logger: logger) }
            group.addTask {
                await self.consumeMessages(client, workerID: workerID, changes: changeSink, logger: logger)
            }
            group.addTask { await self.applySubscriptionChanges(changes, client: client, logger: logger) }
            group.addTask { await self.runCadence(client, changes: changeSink, logger: logger) }
            // Wait for SIGTERM/SIGINT (or the group's cancellation), then leave cleanly (L8).
            try? await gracefulShutdown()
            core.withLock { $0.lifecycle.shutdown() }
            logger.info("shutting down: presence offline, flushing QoS 1 messages")
            try? client.publishWithoutWaiting(
                topic: settings.topics.presence(worker: workerID),
                payload: Presence(state: "offline", since: Date(), version: version).encoded(), qos: .atLeastOnce,
                retain: true)
            let flushed = await client.flush(timeout: .seconds(3))
            await client.disconnect(flushTimeout: .milliseconds(500))
            changeSink.finish()
            group.cancelAll()
            logger.info("stopped", metadata: ["flushed": "\(flushed)"])
        }
    }

    // MARK: Connection events: recovery (L5) and republish after reconnect (C4)

    private func consumeEvents(
        _ client: MQTTClient, workerID: String, changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) async {
        for await event in client.events {
            switch event {
            case .connected(let sessionPresent):
                readiness.withLock { $0.connected = true }
                metrics.connects.increment()
                switch core.withLock({ $0.lifecycle.connected(nonce: UUID().uuidString) }) {
                case .startRecovery(let nonce):
                    await startRecovery(
                        client, workerID: workerID, nonce: nonce, sessionPresent: sessionPresent, logger: logger)
                case .republishAll:
                    announce(client, workerID: workerID)
                    let count = core.withLock { core in
                        let actions = core.engine.publishAll(now: Date())
                        execute(actions, core: &core, client: client, changes: changes, logger: logger)
                        return core.engine.activeRideCount
                    }
                    logger.info("reconnected: republished every active ride (C4)", metadata: ["rides": "\(count)"])
                case .none, .restore, .finishRecovery, .handle:
                    break
                }
            case .disconnected(let reason):
                readiness.withLock { $0.connected = false }
                core.withLock { $0.lifecycle.disconnected() }
                logger.warning("broker connection lost; reconnecting", metadata: ["reason": "\(reason)"])
            case .closed:
                readiness.withLock { $0.connected = false }
                core.withLock { $0.lifecycle.disconnected() }
                logger.info("disconnected from the broker")
            case .connectFailed(let reason, let retryIn):
                logger.notice("broker not reachable yet", metadata: ["reason": "\(reason)", "retry.in": "\(retryIn)"])
            case .refused(let error):
                logger.critical("broker refused the worker; not retrying", metadata: ["error": "\(error)"])
            }
        }
    }

    /// L5: read every retained ride state, then a marker published after the state subscription: the broker
    /// sends retained messages before anything published later, so the marker closes the recovery.
    private func startRecovery(
        _ client: MQTTClient, workerID: String, nonce: String, sessionPresent: Bool, logger: Logger
    ) async {
        let marker = recoveryMarker(workerID: workerID)
        logger.info("recovering rides from retained state", metadata: ["session.present": "\(sessionPresent)"])
        do {
            try await client.subscribe(marker, qos: .atLeastOnce)
            try await client.subscribe(settings.topics.stateFilter, qos: .atLeastOnce)
            try client.publishWithoutWaiting(topic: marker, payload: Array(nonce.utf8), qos: .atLeastOnce)
        } catch {
            logger.error("recovery subscription failed; retrying on next connection", metadata: ["error": "\(error)"])
        }
    }

    /// The topic of the marker that closes this worker's recovery.
    private func recoveryMarker(workerID: String) -> String {
        "\(settings.topics.serviceName)/workers/\(workerID)/recovery"
    }

    private func finishRecovery(
        _ client: MQTTClient, workerID: String, stashed stash: [MQTTMessage], core: inout Core,
        changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) {
        let topics = settings.topics
        // A2: from now on only other clients' writes to ride states arrive (no local, no retained replay): a
        // state deleted or overwritten behind this worker's back is written again at once.
        changes.yield(
            .subscribe(topics.stateFilter, options: MQTTSubscribeOptions(noLocal: true, retainHandling: .never)))
        changes.yield(.unsubscribe(recoveryMarker(workerID: workerID)))
        var filters = topics.controlFilters + [topics.statusRequestFilter, topics.rideOptionsRequest]
        // Retained availability first arrives now: the quoter's index fills before the worker is ready.
        if core.quoter != nil { filters.append(topics.availabilityFilter) }
        for filter in filters { changes.yield(.subscribe(filter)) }
        // Ready only once the control subscriptions are acknowledged: before that a booking could be lost.
        changes.yield(.ready)
        announce(client, workerID: workerID)
        let now = Date()
        let actions = core.engine.publishAll(now: now)
        execute(actions, core: &core, client: client, changes: changes, logger: logger)
        logger.info(
            "recovered; rides resumed (L5)",
            metadata: [
                "rides": "\(core.engine.activeRideCount)", "queued.messages": "\(stash.count)",
                "fixes.skipped": "\(core.lifecycle.fixesSkipped)",
            ])
        if core.lifecycle.stashOverflow > 0 {
            logger.error(
                "control messages beyond the recovery stash were dropped (L6)",
                metadata: ["dropped": "\(core.lifecycle.stashOverflow)", "limit": "\(core.lifecycle.stashLimit)"])
        }
        for message in stash {
            handle(message, now: now, core: &core, client: client, changes: changes, logger: logger)
        }
    }

    private func announce(_ client: MQTTClient, workerID: String) {
        try? client.publishWithoutWaiting(
            topic: settings.topics.presence(worker: workerID),
            payload: Presence(state: "online", since: Date(), version: version).encoded(), qos: .atLeastOnce,
            retain: true)
    }

    // MARK: Messages

    private func consumeMessages(
        _ client: MQTTClient, workerID: String, changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) async {
        for await message in client.messages {
            let received = ContinuousClock.now
            let now = Date()
            if message.topic == settings.topics.rideOptionsRequest,
                case .some(let quoter) = core.withLock({ $0.lifecycle.recovered ? Optional($0.quoter) : nil })
            {
                // 3.4: priced outside the lock, on a copy of the quoter (copy-on-write: no copying of the fleet
                // index), so a burst of quotes never holds back a fix or a phase change (C2).
                answerQuote(message, quoter: quoter, now: now, client: client, changes: changes, logger: logger)
                continue
            }
            let parsed = settings.topics.parse(message.topic)
            let kind: WorkerLifecycle<MQTTMessage>.Kind
            switch parsed {
            case .state: kind = .rideState
            case .position: kind = .fix
            case .unknown where message.topic == recoveryMarker(workerID: workerID):
                kind = .recoveryMarker(String(decoding: message.payload, as: UTF8.self))
            default: kind = .other
            }
            let published = core.withLock { core -> Bool in
                switch core.lifecycle.received(kind, message) {
                case .handle(let message):
                    return handle(message, now: now, core: &core, client: client, changes: changes, logger: logger)
                case .restore(let message):
                    if case .state(let ride) = parsed {
                        restore(message, ride: ride, now: now, core: &core, client: client, changes: changes)
                    }
                case .finishRecovery(let stashed):
                    finishRecovery(
                        client, workerID: workerID, stashed: stashed, core: &core, changes: changes, logger: logger)
                case .none, .startRecovery, .republishAll:
                    break
                }
                return false
            }
            if published {
                metrics.inputToStatus.record(ContinuousClock.now - received)
            }
        }
    }

    /// L5, A2: one retained ride state; what fails the checks is logged (naming A2), dead-lettered and left
    /// retained. A zero-length message is a deleted state: nothing to restore.
    private func restore(
        _ message: MQTTMessage, ride: String, now: Date, core: inout Core, client: MQTTClient,
        changes: AsyncStream<SubscriptionChange>.Continuation
    ) {
        guard !message.payload.isEmpty else { return }
        let actions = core.engine.restore(topic: message.topic, ride: ride, payload: message.payload, now: now)
        for case .deadLetter(let letter) in actions {
            logger.error(
                "ride state refused (A2); it stays retained and the ride is not resumed",
                metadata: [
                    "topic": "\(message.topic)", "reason": "\(letter.reason.rawValue)", "detail": "\(letter.detail)",
                ])
        }
        execute(actions, core: &core, client: client, changes: changes, logger: logger)
    }

    /// Handles one message; returns whether it caused a status publish.
    @discardableResult
    private func handle(
        _ message: MQTTMessage, now: Date, core: inout Core, client: MQTTClient,
        changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) -> Bool {
        switch settings.topics.parse(message.topic) {
        case .statusRequest(let ride):
            if let refused = reply(to: message, payload: core.engine.statusReply(for: ride), client: client) {
                let actions = core.engine.reject(refused, topic: message.topic, payload: message.payload, now: now)
                execute(actions, core: &core, client: client, changes: changes, logger: logger)
            }
            return false
        case .rideOptionsRequest:
            // Only messages stashed during recovery come here; later ones are answered outside the lock.
            var rejection: Rejection?
            let answer = quote(message, quoter: core.quoter, now: now) { rejection = $0 }
            for refused in [rejection, reply(to: message, payload: answer.encoded(), client: client)].compactMap({ $0 })
            {
                let actions = core.engine.reject(refused, topic: message.topic, payload: message.payload, now: now)
                execute(actions, core: &core, client: client, changes: changes, logger: logger)
            }
            return false
        case .availability(let vehicle):
            guard core.quoter != nil else { return false }
            do throws(Rejection) {
                try core.quoter!.receiveAvailability(
                    vehicleId: vehicle, payload: message.payload, decoder: decoder, now: now)
            } catch {
                let actions = core.engine.reject(error, topic: message.topic, payload: message.payload, now: now)
                execute(actions, core: &core, client: client, changes: changes, logger: logger)
            }
            return false
        case .state(let ride):
            // A2: another client wrote or deleted the state of a ride this worker runs. The worker's own is the
            // truth: it is written again at once, so that a restart does not lose the ride.
            guard core.watchingStates, let current = core.engine.ride(ride) else { return false }
            logger.warning(
                "ride state changed on the broker by another client (A2); writing this worker's again",
                metadata: ["ride.id": "\(ride)", "payload.bytes": "\(message.payload.count)"])
            do {
                try client.publishWithoutWaiting(
                    topic: settings.topics.state(ride: ride), payload: Array(try core.stateEncoder.encode(current)),
                    qos: .atLeastOnce, retain: true)
            } catch {
                logger.error("ride state rewrite failed", metadata: ["ride.id": "\(ride)", "error": "\(error)"])
            }
            return false
        default:
            let actions = core.engine.receive(topic: message.topic, payload: message.payload, now: now)
            return execute(actions, core: &core, client: client, changes: changes, logger: logger)
        }
    }

    /// 3.4: answers a request from a copy of the quoter, taking the lock only to dead-letter a malformed one.
    private func answerQuote(
        _ message: MQTTMessage, quoter: RideOptionQuoter?, now: Date, client: MQTTClient,
        changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) {
        var rejection: Rejection?
        let answer = quote(message, quoter: quoter, now: now) { rejection = $0 }
        let refusals = [rejection, reply(to: message, payload: answer.encoded(), client: client)].compactMap { $0 }
        guard !refusals.isEmpty else { return }
        core.withLock { core in
            for refused in refusals {
                let actions = core.engine.reject(refused, topic: message.topic, payload: message.payload, now: now)
                execute(actions, core: &core, client: client, changes: changes, logger: logger)
            }
        }
    }

    /// 3.4: a quote from the catalog and the live fleet, or a failure reply that says why. A malformed
    /// request also goes to `rejected` (for the dead letter, 3.5).
    private func quote(
        _ message: MQTTMessage, quoter: RideOptionQuoter?, now: Date, rejected: (Rejection) -> Void
    ) -> RideOptionsReply {
        let started = ContinuousClock.now
        let answer: RideOptionsReply
        if let quoter {
            do throws(Rejection) {
                answer = quoter.quote(try decoder.rideOptionsRequest(payload: message.payload), now: now)
            } catch {
                rejected(error)
                answer = RideOptionsReply(
                    code: .failure, expirationDate: now.addingTimeInterval(quoter.catalog.quotes.timeToLive),
                    reason: error.reason.rawValue, detail: error.detail)
            }
        } else {
            answer = RideOptionsReply(
                code: .failureServiceTemporarilyUnavailable, expirationDate: now.addingTimeInterval(60),
                reason: "noCatalog", detail: "this worker has no ride-option catalog")
        }
        metrics.quoteDuration.record(ContinuousClock.now - started)
        metrics.quoteAnswered(answer.code)
        return answer
    }

    /// A1: publishes a reply on the request's Response Topic with its Correlation Data, only when that topic
    /// lies under the reply prefix. Returns the rejection to dead-letter otherwise (no reply is sent).
    private func reply(to request: MQTTMessage, payload: [UInt8], client: MQTTClient) -> Rejection? {
        let responseTopic = request.properties.responseTopic
        if let problem = settings.topics.replyTopicProblem(responseTopic) { return problem }
        try? client.publishWithoutWaiting(
            topic: responseTopic ?? "", payload: payload, qos: .atLeastOnce,
            properties: MQTTProperties(
                correlationData: request.properties.correlationData, contentType: "application/json"))
        return nil
    }

    // MARK: Cadence

    private func runCadence(_ client: MQTTClient, changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger)
        async
    {
        var lastReport = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
            // Due rides in slices of 16, the lock released between slices: a message (a phase change) waits
            // for at most one slice, not for a whole burst of due rides (C2).
            var more = true
            while more {
                more = core.withLock { core in
                    guard core.lifecycle.recovered else { return false }
                    let now = Date()
                    let actions = core.engine.tick(now: now, limit: 16)
                    execute(actions, core: &core, client: client, changes: changes, logger: logger)
                    return core.engine.hasDue(now: now)
                }
                if more { await Task.yield() }
            }
            if ContinuousClock.now - lastReport >= .seconds(1) {
                lastReport = ContinuousClock.now
                core.withLock { core in
                    metrics.report(core.engine.counters, previous: core.reportedCounters, engine: core.engine)
                    core.reportedCounters = core.engine.counters
                    if core.quoter != nil {
                        // Positions older than availabilityMaxAge no longer count: memory follows the live fleet.
                        core.quoter!.pruneFleet(now: Date())
                        metrics.availableVehicles.record(core.quoter!.fleet.count)
                    }
                }
                metrics.reconnects.record(client.reconnectCount)
                metrics.droppedMessages.record(client.droppedMessages)
            }
        }
    }

    // MARK: Carrying out actions

    /// Returns whether a status was published.
    @discardableResult
    private func execute(
        _ actions: [RideAction], core: inout Core, client: MQTTClient,
        changes: AsyncStream<SubscriptionChange>.Continuation, logger: Logger
    ) -> Bool {
        let topics = settings.topics
        var published = false
        for action in actions {
            switch action {
            case .publish(let status, let state):
                do {
                    // State first: a restart then never reuses a sequence already published (C5, L5).
                    let encodedState = try core.stateEncoder.encode(state)
                    try client.publishWithoutWaiting(
                        topic: topics.state(ride: status.rideIdentifier), payload: Array(encodedState),
                        qos: .atLeastOnce,
                        retain: true)
                    try client.publishWithoutWaiting(
                        topic: topics.status(ride: status.rideIdentifier), payload: status.encoded(), qos: .atLeastOnce,
                        retain: true)
                    published = true
                    // Never a trap: a gap that is not a plausible duration (a restored state's odd time) is not recorded.
                    if let gap = state.cadenceGap, let nanoseconds = Int64(exactly: (gap * 1e9).rounded()),
                        nanoseconds >= 0
                    {
                        metrics.cadenceGap.recordNanoseconds(nanoseconds)
                    }
                } catch {
                    logger.error(
                        "status publish failed", metadata: ["ride.id": "\(status.rideIdentifier)", "error": "\(error)"])
                }
            case .clear(let ride):
                try? client.publishWithoutWaiting(
                    topic: topics.status(ride: ride), payload: [], qos: .atLeastOnce, retain: true)
                try? client.publishWithoutWaiting(
                    topic: topics.state(ride: ride), payload: [], qos: .atLeastOnce, retain: true)
                logger.info("ride ended (L2)", metadata: ["ride.id": "\(ride)"])
            case .subscribe(let vehicle):
                changes.yield(.subscribe(topics.position(vehicle: vehicle)))
            case .unsubscribe(let vehicle):
                changes.yield(.unsubscribe(topics.position(vehicle: vehicle)))
            case .deadLetter(let letter):
                logger.warning(
                    "input rejected (\(letter.reason.rule))",
                    metadata: [
                        "reason": "\(letter.reason.rawValue)", "detail": "\(letter.detail)", "topic": "\(letter.topic)",
                    ])
                try? client.publishWithoutWaiting(
                    topic: topics.deadLetter, payload: letter.encoded(), qos: .atLeastOnce)
                metrics.deadLetters.increment()
            case .invalidStatus(let ride, let violation):
                logger.error(
                    "status failed validation (\(violation.rule)); last valid status republished (V7)",
                    metadata: ["ride.id": "\(ride)", "detail": "\(violation.detail)"])
            }
        }
        return published
    }

    private func applySubscriptionChanges(
        _ changes: AsyncStream<SubscriptionChange>, client: MQTTClient, logger: Logger
    ) async {
        for await change in changes {
            do {
                switch change {
                case .subscribe(let filter, let options):
                    try await client.subscribe(filter, qos: .atLeastOnce, options: options)
                    if filter == settings.topics.stateFilter && options.noLocal {
                        core.withLock { $0.watchingStates = true }
                    }
                case .unsubscribe(let filter): try await client.unsubscribe(filter)
                case .ready: readiness.withLock { $0.recovered = true }
                }
            } catch {
                logger.error("subscription change failed", metadata: ["change": "\(change)", "error": "\(error)"])
            }
        }
    }

    // MARK: Identity and HTTP

    /// `worker.id`, else the id kept in the state directory, else a new one saved there: a restarted worker
    /// reuses its MQTT session (L6).
    private func resolveWorkerID() throws -> String {
        if let id = settings.workerID {
            guard Identifier.isValid(id) else {
                throw WorkerSettings.Problem(
                    key: "worker.id", message: "'\(id)' breaks I1 (1-64 of A-Z a-z 0-9 . _ : -)")
            }
            return id
        }
        let directory = URL(fileURLWithPath: settings.stateDirectory)
        let file = directory.appendingPathComponent("worker-id")
        if let saved = try? String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            Identifier.isValid(saved)
        {
            return saved
        }
        let id = "w-" + UUID().uuidString.prefix(8).lowercased()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try (id + "\n").write(to: file, atomically: true, encoding: .utf8)
        } catch {
            // One sentence, not a Foundation error domain: the reason is the system's (errno) when there is one.
            let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? any Error
            let reason =
                underlying.map { String(cString: strerror(Int32(($0 as NSError).code))) } ?? "it cannot be written"
            throw WorkerSettings.Problem(
                key: "worker.stateDir",
                message:
                    "cannot keep the worker id in \(directory.standardizedFileURL.path): \(reason.lowercased()); set worker.stateDir to a writable folder or give worker.id"
            )
        }
        return id
    }

    private func startEndpoint(logger: Logger) throws -> HTTPEndpoint? {
        guard settings.metricsPort > 0 else { return nil }
        let endpoint = try HTTPEndpoint(host: settings.metricsHost, port: settings.metricsPort) { [self] path in
            switch path {
            case "/metrics": return (200, "text/plain; version=0.0.4", metricsText())
            case "/healthz": return (200, "text/plain", "ok\n")
            case "/readyz": return isReady ? (200, "text/plain", "ready\n") : (503, "text/plain", "not ready\n")
            default: return (404, "text/plain", "not found\n")
            }
        }
        logger.info("HTTP endpoint listening", metadata: ["address": "\(settings.metricsHost):\(endpoint.port)"])
        return endpoint
    }
}
