public import Foundation
import Locking
public import Logging
import Metrics
public import RidePush
public import RideStatusKit
public import ServiceLifecycle
package import WorkerGroup

/// `ride-push`'s core: one task feeds presences, registration records, statuses, outcomes and ticks
/// to ``PushGroup`` (and through it ``PushPlanner``) and carries out their actions: pushes through the senders (at
/// most ``Settings/concurrentPushes`` at once), subscriptions and record deletions in order, metrics. The
/// group's state is owned by that one task, so it needs no lock.
///
/// Several processes share the rides by `WorkerGroup`'s ownership; a registration is a retained record in the
/// broker, written by the process the request reached and served by the ride's owner (``PushGroup``).
public final class RidePushService: Service, Sendable {
    public struct Settings: Sendable {
        public var topics = RideTopics()
        public var group = PushGroup.Settings()
        /// Pushes in flight at once, over both services.
        public var concurrentPushes = 64
        /// How often the planner looks for retries and refreshes that are due.
        public var tick: Duration = .seconds(1)
        /// How often this process repeats its presence (``PushGroup/Settings/silenceLimit`` is three of these).
        public var heartbeat: TimeInterval = 5
        /// The version in the presence.
        public var version = "ride-push"
        /// How long a registration's write to the broker may take before the request gets 503
        /// `brokerUnavailable`.
        public var recordWriteLimit: Duration = .seconds(10)

        public init() {}
    }

    /// The sender of each service: the real clients, or anything that answers like them.
    public struct Senders: Sendable {
        public var apns: (@Sendable (Push) async -> PushPlanner.Outcome)?
        public var fcm: (@Sendable (Push) async -> PushPlanner.Outcome)?
        /// A service refused its credential: make a new one (APNs's provider token, FCM's access token).
        public var renew: @Sendable (PushDevice.Service) async -> Void

        public init(
            apns: (@Sendable (Push) async -> PushPlanner.Outcome)?,
            fcm: (@Sendable (Push) async -> PushPlanner.Outcome)?,
            renew: @escaping @Sendable (PushDevice.Service) async -> Void
        ) {
            self.apns = apns
            self.fcm = fcm
            self.renew = renew
        }
    }

    /// What the service does on the broker: the MQTT client, as a seam for tests.
    public struct Broker: Sendable {
        public var subscribe: @Sendable (String) async throws -> Void
        public var unsubscribe: @Sendable (String) async throws -> Void
        /// A QoS 1 publish; returns at the broker's acknowledgement.
        public var publish: @Sendable (_ topic: String, _ payload: [UInt8], _ retain: Bool) async throws -> Void

        public init(
            subscribe: @escaping @Sendable (String) async throws -> Void,
            unsubscribe: @escaping @Sendable (String) async throws -> Void,
            publish: @escaping @Sendable (_ topic: String, _ payload: [UInt8], _ retain: Bool) async throws -> Void
        ) {
            self.subscribe = subscribe
            self.unsubscribe = unsubscribe
            self.publish = publish
        }
    }

    /// Why a registration over HTTP was refused.
    public enum RegistrationRefusal: Error, Sendable, Equatable {
        case planner(PushPlanner.Refusal)
        /// The device's service has no sender configured (`push.apns` or `push.fcm`).
        case serviceOff(PushDevice.Service)
        /// ride-push is stopping.
        case shuttingDown
        /// The broker, which keeps the registrations, cannot be reached.
        case brokerUnavailable
    }

    enum Event: Sendable {
        case message(topic: String, payload: [UInt8])
        /// A status is waiting in ``statusesWaiting`` under this topic (a stop comes as a message of its own).
        case status(topic: String)
        case register(
            PushDevice, ride: String, expires: Date, reply: @Sendable (Result<Bool, RegistrationRefusal>) -> Void)
        case unregister(PushDevice, ride: String, reply: @Sendable (Result<Bool, RegistrationRefusal>) -> Void)
        case outcome(Push, PushPlanner.Outcome)
        /// This process's write of a record was acknowledged: applied at once, before its reply, so that the next
        /// request sees it (the broker's copy comes back later and changes nothing).
        case stored(ride: String, key: String, PushGroup.Record?, reply: @Sendable () -> Void)
        case connected(incarnation: UInt64)
        /// The group's presences and registrations are subscribed: this process may announce itself.
        case groupSubscribed
        case disconnected
        case tick
    }

    /// An ordered change on the broker: a ride's unsubscribe never overtakes its subscribe.
    enum BrokerChange: Sendable {
        case subscribe(String)
        case unsubscribe(String)
        /// An empty retained message on a registration's topic.
        case deleteRecord(topic: String)
    }

    /// This process's member id in the group (its presence topic's last level).
    public let member: String
    private let settings: Settings
    private let senders: Senders
    private let broker: Broker
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let events: AsyncStream<Event>
    private let input: AsyncStream<Event>.Continuation
    private let metrics = PushMetrics()
    /// Statuses the service's task has not yet taken, the newest per status topic. While that task falls behind
    /// the broker (a burst of statuses; a slow APNs does not slow it, its pushes wait as the newest state per
    /// activity), a ride's older status is replaced, not queued behind: what waits here is bounded by the rides
    /// subscribed, at about 20,000 statuses a second for the whole fleet of 100,000 rides (L3's figure).
    ///
    /// A stop (the zero-length status) neither replaces a waiting status nor is replaced: the completion waiting
    /// before it is the state its `end` shows. It goes in order, as a message of its own, behind the waiting
    /// status, which is then sealed: what comes after the stop queues behind it too, until the task took it.
    private let statusesWaiting = Locked([String: WaitingStatus]())

    struct WaitingStatus {
        var payload: [UInt8]
        /// A stop queued behind it: nothing may take its place any more.
        var sealed = false
    }

    /// - Parameters:
    ///   - member: this process's id in the group, unique among the running ones.
    ///   - clock: what the ticks sleep on.
    ///   - now: wall time for the planner's decisions, the pushes' dates and the presence.
    public init(
        member: String, settings: Settings, senders: Senders, broker: Broker,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date, logger: Logger
    ) {
        self.member = member
        self.settings = settings
        self.senders = senders
        self.broker = broker
        self.clock = clock
        self.now = now
        var logger = logger
        logger[metadataKey: "push.member"] = "\(member)"
        self.logger = logger
        (events, input) = AsyncStream.makeStream(of: Event.self)
    }

    // MARK: - The service's API

    /// Registers `device` for `ride` until `expires` (the share token's expiry): a retained record in the broker,
    /// which the ride's owner serves. Returns whether it is new (false: it was registered already).
    public func register(_ device: PushDevice, ride: String, expires: Date) async -> Result<Bool, RegistrationRefusal> {
        await withCheckedContinuation { continuation in
            let sent = input.yield(
                .register(device, ride: ride, expires: expires, reply: { continuation.resume(returning: $0) }))
            if case .terminated = sent { continuation.resume(returning: .failure(.shuttingDown)) }
        }
    }

    /// Removes `device` from `ride`. Returns whether it was registered.
    public func unregister(_ device: PushDevice, ride: String) async -> Result<Bool, RegistrationRefusal> {
        await withCheckedContinuation { continuation in
            let sent = input.yield(.unregister(device, ride: ride, reply: { continuation.resume(returning: $0) }))
            if case .terminated = sent { continuation.resume(returning: .failure(.shuttingDown)) }
        }
    }

    /// A message on a subscribed topic: a status or a stop, a member's presence, a registration record.
    public func received(topic: String, payload: [UInt8]) {
        guard settings.topics.ride(ofStatusTopic: topic) != nil else {
            input.yield(.message(topic: topic, payload: payload))
            return
        }
        enum Route { case waits, replaced, inOrder }
        let route = statusesWaiting.withLock { waiting -> Route in
            let stop = payload.isEmpty
            guard var entry = waiting[topic] else {
                if stop { return .inOrder }
                waiting[topic] = WaitingStatus(payload: payload)
                return .waits
            }
            if stop || entry.sealed {
                entry.sealed = true
                waiting[topic] = entry
                return .inOrder
            }
            entry.payload = payload
            waiting[topic] = entry
            return .replaced
        }
        switch route {
        case .waits: input.yield(.status(topic: topic))
        case .replaced: metrics.supersededStatuses.increment()
        case .inOrder: input.yield(.message(topic: topic, payload: payload))
        }
    }

    /// The status waiting under `topic` for the service's task, if any (tests).
    package func statusWaiting(topic: String) -> [UInt8]? { statusesWaiting.withLock { $0[topic]?.payload } }

    /// The broker acknowledged every subscription of the connection of `incarnation`: this process announces
    /// itself.
    public func connected(incarnation: UInt64) { input.yield(.connected(incarnation: incarnation)) }

    /// The connection to the broker ended: this process serves nothing until its presence is back.
    public func disconnected() { input.yield(.disconnected) }

    /// The presence this process publishes (and its will, and its goodbye): RideStatusKit's `Presence`.
    /// - Parameter since: when this state began (the connection's start while online); `now` when nil.
    public func presence(
        online: Bool, incarnation: UInt64, since: Date? = nil, now: Date
    ) -> (topic: String, payload: [UInt8]) {
        let presence = Presence(
            state: online ? .online : .offline, since: since ?? now, version: settings.version,
            incarnation: Int(clamping: incarnation), at: now)
        return (settings.topics.pushMember(member), presence.encoded())
    }

    // MARK: - Running

    public func run() async throws {
        let input = self.input
        let broker = self.broker
        let topics = settings.topics
        let logger = self.logger
        try await withThrowingDiscardingTaskGroup { group in
            // The members and the records (both retained) come in with these; nothing is served before this
            // process's own presence is back (``PushGroup/heardSelf(now:)``), which needs the first.
            group.addTask {
                // Refused (an ACL without the broker's push role, say): ride-push stops with the reason, rather
                // than announce itself and take a share of the rides it could never serve.
                do {
                    try await broker.subscribe(topics.pushMemberFilter)
                    try await broker.subscribe(topics.pushDeviceFilter)
                } catch {
                    logger.critical(
                        "could not subscribe to the group's presences and registrations (the broker's push role?)",
                        metadata: ["error": "\(error)"])
                    throw error
                }
                input.yield(.groupSubscribed)
            }
            let tick = settings.tick
            let clock = self.clock
            group.addTask {
                while !Task.isCancelled {
                    try? await clock.sleep(for: tick)
                    input.yield(.tick)
                }
            }
            let (changes, changeInput) = AsyncStream.makeStream(of: BrokerChange.self)
            group.addTask {
                for await change in changes {
                    do {
                        switch change {
                        case .subscribe(let ride): try await broker.subscribe(topics.status(ride: ride))
                        case .unsubscribe(let ride): try await broker.unsubscribe(topics.status(ride: ride))
                        case .deleteRecord(let topic): try await broker.publish(topic, [], true)
                        }
                    } catch {
                        logger.warning("a change on the broker failed", metadata: ["error": "\(error)"])
                    }
                }
            }
            var pushGroup = PushGroup(
                selfID: member, settings: settings.group, seed: UInt64.random(in: 0...UInt64.max))
            var waiting: [Push] = []
            var waitingHead = 0
            var inFlight = 0
            var incarnation: UInt64?
            var groupSubscribed = false
            var onlineSince = Date.distantPast
            var lastHeartbeat = Date.distantPast
            func carryOut(_ actions: GroupActions) {
                for ride in actions.unsubscribe { changeInput.yield(.unsubscribe(ride)) }
                for ride in actions.subscribe { changeInput.yield(.subscribe(ride)) }
                for record in actions.deleteRecords {
                    changeInput.yield(.deleteRecord(topic: topics.pushDevice(ride: record.ride, key: record.key)))
                }
                for refused in actions.refusedRecords {
                    logger.info(
                        "a registration the ride's owner does not take is deleted",
                        metadata: [
                            "ride.id": "\(refused.ride)", "push.device": "\(refused.device)",
                            "reason": "\(refused.refusal.rawValue)",
                        ])
                }
                for removed in actions.removed {
                    metrics.removed(removed.reason)
                    logger.debug(
                        "registration removed",
                        metadata: [
                            "ride.id": "\(removed.ride)", "push.device": "\(removed.device)",
                            "reason": "\(removed.reason.rawValue)",
                        ])
                }
                for (push, reason) in actions.refused {
                    logger.warning(
                        "push refused",
                        metadata: ["ride.id": "\(push.ride)", "push.device": "\(push.device)", "reason": "\(reason)"])
                }
                for service in actions.renewCredential {
                    metrics.renewal(service)
                    let renew = senders.renew
                    group.addTask { await renew(service) }
                }
                for push in actions.pushes {
                    logger.trace(
                        "push due",
                        metadata: [
                            "ride.id": "\(push.ride)", "push.device": "\(push.device)", "push.event": "\(push.event)",
                            "push.priority": "\(push.priority.rawValue)", "push.timestamp": "\(push.timestamp)",
                            "status.sequence": "\(push.sequence)",
                        ])
                }
                waiting += actions.pushes
                while inFlight < settings.concurrentPushes, waitingHead < waiting.count {
                    let push = waiting[waitingHead]
                    waitingHead += 1
                    // The queue's head moves instead of each send shifting the array (100,000 after an outage).
                    if waitingHead == waiting.count || (waitingHead >= 1024 && waitingHead * 2 >= waiting.count) {
                        waiting.removeFirst(waitingHead)
                        waitingHead = 0
                    }
                    let send = push.device.service == .apns ? senders.apns : senders.fcm
                    inFlight += 1
                    group.addTask {
                        let outcome = await send?(push) ?? .refused(reason: "no sender for \(push.device.service)")
                        input.yield(.outcome(push, outcome))
                    }
                }
            }
            // Presence goes straight to the client, not behind the queue of subscriptions (thousands after a
            // takeover): a heartbeat stamped long before it leaves would make the others count this one gone.
            func announce(now: Date) {
                guard let incarnation, groupSubscribed else { return }
                let (topic, payload) = presence(online: true, incarnation: incarnation, since: onlineSince, now: now)
                group.addTask { try? await broker.publish(topic, payload, true) }
                lastHeartbeat = now
            }
            // A registration's record, written straight to the client with a time limit: an HTTP request waits at
            // most ``Settings/recordWriteLimit`` for a broker that is gone but not yet noticed.
            let limit = settings.recordWriteLimit
            func write(_ topic: String, _ payload: [UInt8], then: @escaping @Sendable (Bool) -> Void) {
                let once = Once()
                group.addTask {
                    let stored = (try? await broker.publish(topic, payload, true)) != nil
                    if once.claim() { then(stored) }
                }
                group.addTask {
                    try? await clock.sleep(for: limit)
                    if once.claim() { then(false) }
                }
            }
            logger.info(
                "ride-push ready",
                metadata: ["push.apns": "\(senders.apns != nil)", "push.fcm": "\(senders.fcm != nil)"])
            for await arrived in events.cancelOnGracefulShutdown() {
                let now = self.now()
                var event = arrived
                if case .status(let topic) = arrived {
                    guard let waiting = statusesWaiting.withLock({ $0.removeValue(forKey: topic) }) else { continue }
                    event = .message(topic: topic, payload: waiting.payload)
                }
                switch event {
                case .status: continue  // made a message above
                case .message(let topic, let payload):
                    if let ride = topics.ride(ofStatusTopic: topic) {
                        if payload.isEmpty {
                            carryOut(pushGroup.stopped(ride: ride, now: now))
                        } else if let status = try? JSONDecoder.rideStatus.decode(RideStatus.self, from: Data(payload)),
                            status.rideIdentifier == ride
                        {
                            logger.trace(
                                "status",
                                metadata: [
                                    "ride.id": "\(ride)", "status.sequence": "\(status.sequence)",
                                    "push.serves": "\(pushGroup.planner.serves(ride: ride))",
                                ])
                            carryOut(pushGroup.status(status, now: now))
                        } else {
                            // The worker validates what it publishes (V1-V7); anything else on a status topic is
                            // not shown to a rider.
                            metrics.unreadableStatus()
                            logger.warning(
                                "a status that does not decode, or names another ride, is not pushed",
                                metadata: ["ride.id": "\(ride)", "bytes": "\(payload.count)"])
                        }
                    } else if let other = topics.pushMember(ofTopic: topic) {
                        guard let sighting = Self.sighting(payload, now: now) else {
                            metrics.unreadableRecord()
                            logger.warning(
                                "a push member's presence that does not read is ignored (A2, G1)",
                                metadata: ["push.member": "\(other)", "bytes": "\(payload.count)"])
                            continue
                        }
                        if other == member {
                            // Its own presence back from the broker: the others see it now.
                            if let sighting = sighting, sighting.online, sighting.incarnation == incarnation {
                                carryOut(pushGroup.heardSelf(now: now))
                            }
                        } else {
                            carryOut(pushGroup.presence(of: other, sighting, now: now))
                        }
                    } else if let (ride, key) = topics.pushDevice(ofTopic: topic) {
                        if payload.isEmpty {
                            carryOut(pushGroup.record(ride: ride, key: key, nil, now: now))
                            continue
                        }
                        do throws(PushGroup.Record.Problem) {
                            let record = try PushGroup.Record(payload: payload, key: key)
                            carryOut(pushGroup.record(ride: ride, key: key, record, now: now))
                        } catch {
                            metrics.unreadableRecord()
                            logger.warning(
                                "a registration record that does not read is ignored (A2)",
                                metadata: ["ride.id": "\(ride)", "reason": "\(error.rawValue)"])
                        }
                    }
                case .register(let device, let ride, let expires, let reply):
                    let enabled = device.service == .apns ? senders.apns != nil : senders.fcm != nil
                    guard enabled else {
                        reply(.failure(.serviceOff(device.service)))
                        continue
                    }
                    guard incarnation != nil else {
                        reply(.failure(.brokerUnavailable))
                        continue
                    }
                    if let refusal = pushGroup.refusal(of: device, ride: ride) {
                        reply(.failure(.planner(refusal)))
                        continue
                    }
                    let known = pushGroup.isRegistered(device, ride: ride)
                    let record = PushGroup.Record(device: device, expires: expires)
                    let key = device.recordKey
                    write(topics.pushDevice(ride: ride, key: key), record.encoded()) { stored in
                        guard stored else { return reply(.failure(.brokerUnavailable)) }
                        let applied = input.yield(
                            .stored(ride: ride, key: key, record, reply: { reply(.success(!known)) }))
                        if case .terminated = applied { reply(.failure(.shuttingDown)) }
                    }
                case .unregister(let device, let ride, let reply):
                    guard let key = pushGroup.key(of: device, ride: ride) else {
                        reply(.success(false))
                        continue
                    }
                    guard incarnation != nil else {
                        reply(.failure(.brokerUnavailable))
                        continue
                    }
                    write(topics.pushDevice(ride: ride, key: key), []) { stored in
                        guard stored else { return reply(.failure(.brokerUnavailable)) }
                        let applied = input.yield(.stored(ride: ride, key: key, nil, reply: { reply(.success(true)) }))
                        if case .terminated = applied { reply(.failure(.shuttingDown)) }
                    }
                case .stored(let ride, let key, let record, let reply):
                    carryOut(pushGroup.record(ride: ride, key: key, record, local: true, now: now))
                    reply()
                case .outcome(let push, let outcome):
                    inFlight -= 1
                    metrics.outcome(outcome, of: push)
                    carryOut(pushGroup.outcome(outcome, of: push, now: now))
                case .groupSubscribed:
                    groupSubscribed = true
                    announce(now: now)
                case .connected(let connection):
                    incarnation = connection
                    onlineSince = now
                    announce(now: now)
                case .disconnected:
                    incarnation = nil
                    carryOut(pushGroup.disconnected())
                case .tick:
                    logger.trace(
                        "tick",
                        metadata: [
                            "push.serving": "\(pushGroup.isServing(now: now))",
                            "push.records": "\(pushGroup.recordCount)",
                        ])
                    if now.timeIntervalSince(lastHeartbeat) >= settings.heartbeat { announce(now: now) }
                    carryOut(pushGroup.tick(now: now))
                    // Once a tick: `pending` counts over every activity.
                    metrics.update(group: pushGroup, inFlight: inFlight, waiting: waiting.count - waitingHead, now: now)
                }
            }
            changeInput.finish()
            group.cancelAll()
        }
    }

    /// A member's presence payload as the group reads it; `.some(nil)` for a deleted one (empty), nil when it does
    /// not read (A2): not a presence, or an incarnation below zero or more than a day ahead (the workers' check).
    package static func sighting(_ payload: [UInt8], now: Date) -> GroupMembership.Sighting?? {
        if payload.isEmpty { return .some(nil) }
        guard let presence = try? JSONDecoder.rideStatus.decode(Presence.self, from: Data(payload)),
            (presence.incarnation ?? 0) >= 0,
            GroupMembership.isPlausible(
                incarnation: Double(presence.incarnation ?? 0), now: now.timeIntervalSince1970)
        else { return nil }
        return .some(
            GroupMembership.Sighting(
                online: presence.state == .online, incarnation: UInt64(presence.incarnation ?? 0),
                // A heartbeat stamped ahead of this host's clock counts as heard now: a member whose clock is ahead
                // would otherwise never fall silent here once its will is lost.
                seenAt: presence.at.map { min($0, now).timeIntervalSince1970 }))
    }
}

/// `ridepush_*` metrics: registrations, what waits, and every push's outcome by service and priority.
struct PushMetrics: Sendable {
    let registrations = Gauge(label: "ridepush_registrations")
    let rides = Gauge(label: "ridepush_subscribed_rides")
    let pending = Gauge(label: "ridepush_pending")
    let inFlight = Gauge(label: "ridepush_in_flight")
    let unreadable = Counter(label: "ridepush_unreadable_statuses_total")
    /// Statuses replaced by a newer one of their ride before the service's task took them.
    let supersededStatuses = Counter(label: "ridepush_superseded_statuses_total")

    let members = Gauge(label: "ridepush_members")
    let records = Gauge(label: "ridepush_records")
    let serving = Gauge(label: "ridepush_serving")
    let unreadableRecords = Counter(label: "ridepush_unreadable_records_total")

    func update(group: PushGroup, inFlight: Int, waiting: Int, now: Date) {
        let planner = group.planner
        registrations.record(planner.registrations)
        rides.record(planner.subscribedRides)
        pending.record(planner.pending + waiting)
        self.inFlight.record(inFlight)
        members.record(group.membership.members.count)
        records.record(group.recordCount)
        serving.record(group.isServing(now: now) ? 1 : 0)
    }

    func unreadableRecord() { unreadableRecords.increment() }

    func outcome(_ outcome: PushPlanner.Outcome, of push: Push) {
        let name: String
        switch outcome {
        case .delivered: name = "delivered"
        case .unregistered: name = "unregistered"
        case .retry: name = "retry"
        case .credentialExpired: name = "credentialExpired"
        case .refused: name = "refused"
        }
        Counter(
            label: "ridepush_pushes_total",
            dimensions: [
                ("service", push.device.service.rawValue), ("priority", String(push.priority.rawValue)),
                ("event", push.event.rawValue), ("outcome", name),
            ]
        ).increment()
    }

    func removed(_ reason: PushPlanner.Removal) {
        Counter(label: "ridepush_registrations_removed_total", dimensions: [("reason", reason.rawValue)]).increment()
    }

    func renewal(_ service: PushDevice.Service) {
        Counter(label: "ridepush_credential_renewals_total", dimensions: [("service", service.rawValue)]).increment()
    }

    func unreadableStatus() { unreadable.increment() }
}

/// Claimed once: the first of two racing tasks to finish answers.
private final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false

    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if claimed { return false }
        claimed = true
        return true
    }
}
