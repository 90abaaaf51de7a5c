public import Foundation
import Locking
public import Logging
import Metrics
public import RidePush
public import RideStatusKit
public import ServiceLifecycle

/// `ride-push`'s core: presences, registration records, statuses, outcomes and ticks go to ``PushGroup`` (and
/// through it ``PushPlanner``), to ``PushConnection`` and to a ``SendQueue``, in one task that owns them
/// (``PushCore``), so they need no lock. Their actions are carried out by small services beside it: pushes through
/// the senders (at most ``Settings/concurrentPushes`` at once), subscriptions and record deletions in order,
/// presences and registration writes straight to the client, and the ticks.
///
/// Several processes share the rides by `WorkerGroup`'s ownership; a registration is a retained record in the
/// broker, written by the process the request reached and served by the ride's owner (``PushGroup``).
public final class RidePushService: Sendable {
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
        /// A status is waiting in the inbox under this topic (a stop comes as a message of its own).
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

    /// This process's member id in the group (its presence topic's last level).
    public let member: String
    /// ride-push's parts, for the executable's service group: the core, which owns the state, and the small
    /// services that carry out its actions.
    public let services: [ServiceGroupConfiguration.ServiceConfiguration]
    private let settings: Settings
    private let logger: Logger
    private let input: AsyncStream<Event>.Continuation
    private let metrics = PushMetrics()
    /// Statuses the service's task has not yet taken, the newest per status topic (``PushInbox``).
    private let inbox: Locked<PushInbox>

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
        var logger = logger
        logger[metadataKey: "push.member"] = "\(member)"
        self.logger = logger
        let (events, input) = AsyncStream.makeStream(of: Event.self)
        self.input = input
        let inbox = Locked(PushInbox(topics: settings.topics))
        self.inbox = inbox
        let (changes, changeInput) = AsyncStream.makeStream(of: BrokerChange.self)
        let (writes, writeInput) = AsyncStream.makeStream(of: BrokerWrite.self)
        let (deliveries, deliveryInput) = AsyncStream.makeStream(of: Delivery.self)
        let core = PushCore(
            events: events,
            state: PushCore.State(
                member: member, settings: settings,
                enabled: [.apns: senders.apns != nil, .fcm: senders.fcm != nil],
                group: PushGroup(selfID: member, settings: settings.group, seed: UInt64.random(in: 0...UInt64.max)),
                outputs: .init(input: input, changes: changeInput, writes: writeInput, deliveries: deliveryInput),
                inbox: inbox, metrics: metrics, logger: self.logger),
            now: now)
        // In the order they start; a graceful shutdown ends them in reverse: the core first, then what it fed.
        services = [
            .init(
                service: GroupSubscription(broker: broker, topics: settings.topics, input: input, logger: self.logger)),
            .init(service: Ticker(clock: clock, every: settings.tick, input: input)),
            .init(
                service: BrokerChanges(changes: changes, broker: broker, topics: settings.topics, logger: self.logger)),
            .init(
                service: BrokerWrites(writes: writes, broker: broker, clock: clock, limit: settings.recordWriteLimit)),
            .init(service: Deliveries(deliveries: deliveries, senders: senders, input: input)),
            .init(service: core),
        ]
    }

    // MARK: - The service's API

    /// Registers `device` for `ride` until `expires` (the share token's expiry): a retained record in the broker,
    /// which the ride's owner serves. Returns whether it is new (false: it was registered already).
    public func register(_ device: PushDevice, ride: String, expires: Date) async -> Result<Bool, RegistrationRefusal> {
        await withCheckedContinuation { continuation in
            let reply = Answer(continuation)
            let sent = input.yield(.register(device, ride: ride, expires: expires, reply: { reply($0) }))
            if case .terminated = sent { reply(.failure(.shuttingDown)) }
        }
    }

    /// Removes `device` from `ride`. Returns whether it was registered.
    public func unregister(_ device: PushDevice, ride: String) async -> Result<Bool, RegistrationRefusal> {
        await withCheckedContinuation { continuation in
            let reply = Answer(continuation)
            let sent = input.yield(.unregister(device, ride: ride, reply: { reply($0) }))
            if case .terminated = sent { reply(.failure(.shuttingDown)) }
        }
    }

    /// A message on a subscribed topic: a status or a stop, a member's presence, a registration record.
    public func received(topic: String, payload: [UInt8]) {
        switch inbox.withLock({ $0.arrived(topic: topic, payload: payload) }) {
        case .waits: input.yield(.status(topic: topic))
        case .replaced: metrics.supersededStatuses.increment()
        case .inOrder: input.yield(.message(topic: topic, payload: payload))
        }
    }

    /// The status waiting under `topic` for the service's task, if any (tests).
    package func statusWaiting(topic: String) -> [UInt8]? { inbox.withLock { $0.waiting(topic: topic) } }

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
        Self.presence(
            member: member, settings: settings, online: online, incarnation: incarnation, since: since, now: now)
    }

    static func presence(
        member: String, settings: Settings, online: Bool, incarnation: UInt64, since: Date?, now: Date
    ) -> (topic: String, payload: [UInt8]) {
        let presence = Presence(
            state: online ? .online : .offline, since: since ?? now, version: settings.version,
            incarnation: Int(clamping: incarnation), at: now)
        return (settings.topics.pushMember(member), presence.encoded())
    }
}

/// A registration's answer, given once. One dropped unanswered (its event or its write lost when the group was
/// cancelled) answers `shuttingDown` as it goes, so that no HTTP request waits for ever.
final class Answer: Sendable {
    private let continuation: Locked<CheckedContinuation<Result<Bool, RidePushService.RegistrationRefusal>, Never>?>

    init(_ continuation: CheckedContinuation<Result<Bool, RidePushService.RegistrationRefusal>, Never>) {
        self.continuation = Locked(continuation)
    }

    func callAsFunction(_ result: Result<Bool, RidePushService.RegistrationRefusal>) {
        let waiting = continuation.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
        waiting?.resume(returning: result)
    }

    deinit { self(.failure(.shuttingDown)) }
}
