public import Foundation
public import Logging
import Metrics
public import RidePush
public import RideStatusKit
public import ServiceLifecycle

/// `ride-push`'s core (issue 32): it subscribes to the statuses of rides with registered devices, feeds
/// statuses, registrations, outcomes and ticks to ``PushPlanner`` in one task, and carries out its actions:
/// pushes through the senders (at most ``Settings/concurrentPushes`` at once), subscriptions, metrics. The
/// planner's state is owned by that one task, so it needs no lock.
public final class RidePushService: Service, Sendable {
    public struct Settings: Sendable {
        public var topics = RideTopics()
        public var planner = PushPlanner.Settings()
        /// Pushes in flight at once, over both services.
        public var concurrentPushes = 64
        /// How often the planner looks for retries and refreshes that are due.
        public var tick: Duration = .seconds(1)

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

    /// What the subscriptions are made with: the MQTT client, as a seam for tests.
    public struct Subscriber: Sendable {
        public var subscribe: @Sendable (String) async throws -> Void
        public var unsubscribe: @Sendable (String) async throws -> Void

        public init(
            subscribe: @escaping @Sendable (String) async throws -> Void,
            unsubscribe: @escaping @Sendable (String) async throws -> Void
        ) {
            self.subscribe = subscribe
            self.unsubscribe = unsubscribe
        }
    }

    /// Why a registration over HTTP was refused.
    public enum RegistrationRefusal: Error, Sendable, Equatable {
        case planner(PushPlanner.Refusal)
        /// The device's service has no sender configured (`push.apns` or `push.fcm`).
        case serviceOff(PushDevice.Service)
        /// ride-push is stopping.
        case shuttingDown
    }

    enum Event: Sendable {
        case message(topic: String, payload: [UInt8])
        case register(
            PushDevice, ride: String, expires: Date, reply: @Sendable (Result<Bool, RegistrationRefusal>) -> Void)
        case unregister(PushDevice, ride: String, reply: @Sendable (Bool) -> Void)
        case outcome(Push, PushPlanner.Outcome)
        case tick
    }

    private let settings: Settings
    private let senders: Senders
    private let subscriber: Subscriber
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let events: AsyncStream<Event>
    private let input: AsyncStream<Event>.Continuation
    private let metrics = PushMetrics()

    /// - Parameters:
    ///   - clock: what the ticks sleep on.
    ///   - now: wall time for the planner's decisions and the pushes' dates.
    public init(
        settings: Settings, senders: Senders, subscriber: Subscriber, clock: any Clock<Duration> = ContinuousClock(),
        now: @escaping @Sendable () -> Date, logger: Logger
    ) {
        self.settings = settings
        self.senders = senders
        self.subscriber = subscriber
        self.clock = clock
        self.now = now
        self.logger = logger
        (events, input) = AsyncStream.makeStream(of: Event.self)
    }

    // MARK: - The service's API

    /// Registers `device` for `ride` until `expires` (the share token's expiry). Returns whether it is new
    /// (false: it was registered already).
    public func register(_ device: PushDevice, ride: String, expires: Date) async -> Result<Bool, RegistrationRefusal> {
        await withCheckedContinuation { continuation in
            let sent = input.yield(
                .register(device, ride: ride, expires: expires, reply: { continuation.resume(returning: $0) }))
            if case .terminated = sent { continuation.resume(returning: .failure(.shuttingDown)) }
        }
    }

    /// Removes `device` from `ride`. Returns whether it was registered.
    public func unregister(_ device: PushDevice, ride: String) async -> Bool {
        await withCheckedContinuation { continuation in
            let sent = input.yield(.unregister(device, ride: ride, reply: { continuation.resume(returning: $0) }))
            if case .terminated = sent { continuation.resume(returning: false) }
        }
    }

    /// A message on a subscribed status topic: a status, or the stop's empty payload.
    public func received(topic: String, payload: [UInt8]) { input.yield(.message(topic: topic, payload: payload)) }

    // MARK: - Running

    public func run() async throws {
        let input = self.input
        try await withThrowingDiscardingTaskGroup { group in
            let tick = settings.tick
            let clock = self.clock
            group.addTask {
                while !Task.isCancelled {
                    try? await clock.sleep(for: tick)
                    input.yield(.tick)
                }
            }
            // Subscription changes in the planner's order: a ride's unsubscribe never overtakes its subscribe.
            let (changes, changeInput) = AsyncStream.makeStream(of: (String, Bool).self)
            let subscriber = self.subscriber
            let topics = settings.topics
            let logger = self.logger
            group.addTask {
                for await (ride, subscribe) in changes {
                    do {
                        if subscribe {
                            try await subscriber.subscribe(topics.status(ride: ride))
                        } else {
                            try await subscriber.unsubscribe(topics.status(ride: ride))
                        }
                    } catch {
                        logger.warning(
                            "could not change a subscription", metadata: ["ride.id": "\(ride)", "error": "\(error)"])
                    }
                }
            }
            var planner = PushPlanner(settings: settings.planner, seed: UInt64.random(in: 0...UInt64.max))
            var waiting: [Push] = []
            var inFlight = 0
            func carryOut(_ actions: PushActions) {
                if let ride = actions.subscribe { changeInput.yield((ride, true)) }
                if let ride = actions.unsubscribe { changeInput.yield((ride, false)) }
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
                if let service = actions.renewCredential {
                    metrics.renewal(service)
                    let renew = senders.renew
                    group.addTask { await renew(service) }
                }
                waiting += actions.pushes
                while inFlight < settings.concurrentPushes, !waiting.isEmpty {
                    let push = waiting.removeFirst()
                    let send = push.device.service == .apns ? senders.apns : senders.fcm
                    inFlight += 1
                    group.addTask {
                        let outcome = await send?(push) ?? .refused(reason: "no sender for \(push.device.service)")
                        input.yield(.outcome(push, outcome))
                    }
                }
            }
            logger.info(
                "ride-push ready",
                metadata: ["push.apns": "\(senders.apns != nil)", "push.fcm": "\(senders.fcm != nil)"])
            for await event in events.cancelOnGracefulShutdown() {
                let now = self.now()
                switch event {
                case .message(let topic, let payload):
                    guard let ride = settings.topics.ride(ofStatusTopic: topic) else { continue }
                    if payload.isEmpty {
                        carryOut(planner.stopped(ride: ride, now: now))
                    } else if let status = try? JSONDecoder.rideStatus.decode(RideStatus.self, from: Data(payload)),
                        status.rideIdentifier == ride
                    {
                        carryOut(planner.status(status, now: now))
                    } else {
                        // The worker validates what it publishes (V1-V7); anything else on a status topic is not
                        // shown to a rider.
                        metrics.unreadableStatus()
                        logger.warning(
                            "a status that does not decode, or names another ride, is not pushed",
                            metadata: ["ride.id": "\(ride)", "bytes": "\(payload.count)"])
                    }
                case .register(let device, let ride, let expires, let reply):
                    let enabled = device.service == .apns ? senders.apns != nil : senders.fcm != nil
                    guard enabled else {
                        reply(.failure(.serviceOff(device.service)))
                        continue
                    }
                    let known = planner.devices(of: ride).contains(device)
                    switch planner.register(device, ride: ride, expires: expires, now: now) {
                    case .success(let actions):
                        reply(.success(!known))
                        carryOut(actions)
                    case .failure(let refusal):
                        reply(.failure(.planner(refusal)))
                    }
                case .unregister(let device, let ride, let reply):
                    let actions = planner.unregister(device, ride: ride)
                    reply(!actions.removed.isEmpty)
                    carryOut(actions)
                case .outcome(let push, let outcome):
                    inFlight -= 1
                    metrics.outcome(outcome, of: push)
                    carryOut(planner.outcome(outcome, of: push, now: now))
                case .tick:
                    carryOut(planner.tick(now: now))
                    // Once a tick: `pending` counts over every activity.
                    metrics.update(planner: planner, inFlight: inFlight, waiting: waiting.count)
                }
            }
            changeInput.finish()
            group.cancelAll()
        }
    }
}

/// `ridepush_*` metrics: registrations, what waits, and every push's outcome by service and priority.
struct PushMetrics: Sendable {
    let registrations = Gauge(label: "ridepush_registrations")
    let rides = Gauge(label: "ridepush_subscribed_rides")
    let pending = Gauge(label: "ridepush_pending")
    let inFlight = Gauge(label: "ridepush_in_flight")
    let unreadable = Counter(label: "ridepush_unreadable_statuses_total")

    func update(planner: PushPlanner, inFlight: Int, waiting: Int) {
        registrations.record(planner.registrations)
        rides.record(planner.subscribedRides)
        pending.record(planner.pending + waiting)
        self.inFlight.record(inFlight)
    }

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
