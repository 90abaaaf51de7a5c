public import Foundation
public import RideStatusKit
import WorkerGroup

/// What `ride-push` sends, decided in one pure machine: statuses, registrations, outcomes and ticks
/// in, one ``PushActions`` value out per event. No I/O and no clock: every event carries `now`, and the jitter
/// of retries comes from a generator seeded at creation, so a test replays a day of pushes in microseconds.
///
/// The rules, per activity (a device registered for a ride):
/// - **One in flight, the newest waiting.** While a push is out, or APNs is down, only the ride's newest state
///   waits; an older one is never sent after a newer one (statuses are ordered by their sequence, C5). Memory
///   stays one state per ride and a little per device, however long an outage lasts.
/// - **Priority 10** when the phase or the ending changed since the last push, or the arrival moved more than
///   ``Settings/urgentArrivalChange``, within ``Settings/urgentPushesPerHour`` per activity (APNs's budget);
///   beyond that, or for any other change, priority 5. An `end` always goes at priority 10.
/// - **Priority 5** at most every ``Settings/minimumInterval`` when what the lock screen shows changed, and at
///   least every ``Settings/refreshInterval`` while the worker publishes, so that a healthy ride's `stale-date`
///   (the status's `issuedAt` plus twice the refresh interval) is always ahead, and a silent worker's is not.
/// - **The end.** A status with a completion, or the ride's stop, sends an `end` with a `dismissal-date`; once
///   it is delivered (or refused) the registration is removed, and with the ride's last one the subscription.
/// - **Outcomes.** An unregistered token removes the registration; a retryable failure waits with exponential
///   backoff and jitter (or the service's `Retry-After`); an expired credential asks for a new one, and retries
///   after the same backoff.
public struct PushPlanner: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Devices one ride may have registered (a rider's phone and watch, a companion's phone, ...).
        public var maximumDevicesPerRide = 5
        /// Priority-10 pushes per activity per rolling hour (APNs throttles beyond its own budget).
        public var urgentPushesPerHour = 12
        /// How far the arrival must move since the last push for a priority-10 update, seconds.
        public var urgentArrivalChange: TimeInterval = 60
        /// The least time between two priority-5 pushes to one activity, seconds.
        public var minimumInterval: TimeInterval = 15
        /// The most time between two pushes to one activity while newer statuses arrive, seconds; the
        /// `stale-date` is the status's `issuedAt` plus twice this.
        public var refreshInterval: TimeInterval = 60
        /// How long an ended activity stays on the lock screen, seconds (`dismissal-date`).
        public var dismissalDelay: TimeInterval = 900
        /// How long a ride that ended is remembered, so that a device registering late gets `rideEnded` (its
        /// retained status is gone after the stop), seconds.
        public var endedRideMemory: TimeInterval = 3600
        /// Backoff after the first retryable failure, doubling with each further one up to ``retryLimit``;
        /// the wait is between half and all of it (jitter), seconds.
        public var retryBase: TimeInterval = 1
        public var retryLimit: TimeInterval = 60
        /// Seconds a subscribed ride may go without any status before it counts as stopped: a live ride always
        /// has a retained status (the broker sends it on subscribing) and a new one at least every 20 s (C1), so
        /// none at all means its stop came while no process was subscribed (a handover). Its devices go, as on a
        /// stop with no state known.
        public var missingStatusLimit: TimeInterval = 60

        public init() {}
    }

    /// The result of one push, as the sender saw it.
    public enum Outcome: Sendable, Equatable {
        /// Accepted by APNs (200) or FCM.
        case delivered
        /// The token is no longer valid (APNs 410 or `BadDeviceToken`, FCM `UNREGISTERED`): the registration goes.
        case unregistered
        /// Worth another try (429, 500, 503, a connection failure); `after` is the service's `Retry-After`.
        case retry(after: TimeInterval?)
        /// The service refused the sender's credential as expired (APNs's provider token, FCM's access token):
        /// make a new one, then send again after the usual backoff.
        case credentialExpired
        /// Refused for a reason a retry will not mend (a 400 other than the token): this push is dropped, the
        /// registration stays, and the next state goes as usual.
        case refused(reason: String)
    }

    /// Why a registration is refused.
    public enum Refusal: String, Error, Sendable, Equatable {
        /// The ride already has ``Settings/maximumDevicesPerRide`` devices.
        case tooManyDevices
        /// The ride has ended: there is nothing left to show.
        case rideEnded
    }

    /// Why a registration was removed.
    public enum Removal: String, Sendable, Equatable {
        /// The ride ended and its `end` went out (or was refused).
        case rideEnded
        /// APNs or FCM said the token is no longer valid.
        case unregistered
        /// The device asked.
        case requested
        /// The share token it registered with expired: nothing then proves the ride any more, and a ride that
        /// never ends (its stop lost) keeps no subscription beyond it.
        case expired
    }

    public private(set) var settings: Settings
    private var rides: [String: RideEntry] = [:]
    /// Rides whose end went out, and when: a late registration gets `rideEnded` (``Settings/endedRideMemory``).
    private var endedRides: [String: Date] = [:]
    /// Services whose last answer was a failure: the next delivery through one ends everybody's backoff, once.
    private var failing: Set<PushDevice.Service> = []
    private var random: SeededRandom

    public init(settings: Settings = Settings(), seed: UInt64 = 0x5EED) {
        self.settings = settings
        self.random = SeededRandom(seed: seed)
    }

    // MARK: - Events

    /// A device registers for `ride` until `expires` (its share token's expiry). The first device of a ride
    /// subscribes to its status; a ride whose state is known sends it at once. Registering again moves the
    /// expiry on.
    ///
    /// `takenOver`: the device may have had pushes from another ride-push process, which handed the ride over
    /// (``PushGroup``). Its timestamps are unknown here, but every process keeps its timestamps within a second of
    /// the later of its clock and the state's `issuedAt`; so this activity's first push waits for the next whole
    /// second and goes one above it: the device never gets a timestamp that does not grow (with the hosts' clocks
    /// in step), at the cost of up to a second's wait and one repeat of the state the old owner last sent.
    public mutating func register(
        _ device: PushDevice, ride: String, expires: Date, now: Date, takenOver: Bool = false
    ) -> Result<PushActions, Refusal> {
        if let refusal = refusal(of: device, ride: ride) { return .failure(refusal) }
        var entry = rides[ride] ?? RideEntry()
        var actions = PushActions()
        if entry.activities[device] == nil {
            if entry.activities.isEmpty && !entry.subscribed {
                entry.subscribed = true
                entry.subscribedAt = now
                actions.subscribe = ride
            }
            var activity = Activity(expires: expires)
            if takenOver { activity.notBefore = Self.second(now) + 1 }
            entry.activities[device] = activity
        } else if var activity = entry.activities[device] {
            activity.expires = max(activity.expires, expires)
            entry.activities[device] = activity
        }
        rides[ride] = entry
        actions.pushes += pushesDue(ride: ride, devices: [device], now: now)
        return .success(actions)
    }

    /// Why `device` could not register for `ride` now, or nil when it could: a ride that ended, or a new device
    /// beyond ``Settings/maximumDevicesPerRide``.
    public func refusal(of device: PushDevice, ride: String) -> Refusal? {
        guard endedRides[ride] == nil else { return .rideEnded }
        guard let entry = rides[ride] else { return nil }
        if let latest = entry.latest, latest.ended { return .rideEnded }
        if entry.activities[device] == nil, entry.activities.count >= settings.maximumDevicesPerRide {
            return .tooManyDevices
        }
        return nil
    }

    /// Another ride-push process serves `ride` now (``PushGroup``): its devices and state leave this planner with
    /// no removal (their registrations stay), the subscription goes, and an outcome of a push still out is
    /// ignored.
    public mutating func release(ride: String) -> PushActions {
        var actions = PushActions()
        guard let entry = rides.removeValue(forKey: ride) else { return actions }
        if entry.subscribed { actions.unsubscribe.append(ride) }
        return actions
    }

    /// Whether `ride` has devices here.
    public func serves(ride: String) -> Bool { rides[ride] != nil }

    /// A device leaves `ride`; with the ride's last device, the subscription goes.
    public mutating func unregister(_ device: PushDevice, ride: String) -> PushActions {
        var actions = PushActions()
        remove(device, ride: ride, reason: .requested, into: &actions)
        return actions
    }

    /// A status of a ride with devices. One not newer than the newest seen (C5's sequence) changes nothing.
    public mutating func status(_ status: RideStatus, now: Date) -> PushActions {
        let ride = status.rideIdentifier
        guard var entry = rides[ride], !entry.activities.isEmpty else { return PushActions() }
        if let latest = entry.latest, latest.ended || status.sequence <= latest.sequence { return PushActions() }
        let state = RideActivityAttributes.ContentState(status: status)
        entry.latest = Latest(
            state: state, sequence: status.sequence, issuedAt: status.issuedAt, ended: state.ending != nil)
        if state.ending != nil { entry.endedAt = now }
        rides[ride] = entry
        var actions = PushActions()
        actions.pushes = pushesDue(ride: ride, devices: Array(entry.activities.keys), now: now)
        return actions
    }

    /// The ride's stop (the zero-length status, L2): its devices get an `end` with the last state known; a ride
    /// with none known has nothing to show, and its devices are removed.
    public mutating func stopped(ride: String, now: Date) -> PushActions {
        guard var entry = rides[ride] else { return PushActions() }
        var actions = PushActions()
        guard var latest = entry.latest else {
            entry.endedAt = now
            rides[ride] = entry
            for device in Array(entry.activities.keys) {
                remove(device, ride: ride, reason: .rideEnded, into: &actions)
            }
            return actions
        }
        guard !latest.ended else { return actions }
        latest.ended = true
        entry.endedAt = now
        entry.latest = latest
        rides[ride] = entry
        actions.pushes = pushesDue(ride: ride, devices: Array(entry.activities.keys), now: now)
        return actions
    }

    /// What became of a push the sender was given.
    public mutating func outcome(_ outcome: Outcome, of push: Push, now: Date) -> PushActions {
        var actions = PushActions()
        guard var entry = rides[push.ride], var activity = entry.activities[push.device],
            activity.inFlight == push
        else { return actions }
        activity.inFlight = nil
        // A push delivered after failures: the service is back, so nobody need wait out the rest of a backoff.
        // Once per failing spell: a scan of every ride per delivery would stall a recovery at 100,000 rides.
        let recovered = outcome == .delivered && failing.remove(push.device.service) != nil
        switch outcome {
        case .delivered, .refused:
            activity.failures = 0
            activity.retryAt = nil
            activity.lastSent = Sent(
                state: push.state, sequence: push.sequence, timestamp: push.timestamp, sentAt: now,
                event: push.event)
            if push.priority == .urgent { activity.urgentTimes.append(now) }
            if case .refused(let reason) = outcome { actions.refused.append((push, reason)) }
        case .unregistered:
            entry.activities[push.device] = activity
            rides[push.ride] = entry
            remove(push.device, ride: push.ride, reason: .unregistered, into: &actions)
            return actions
        case .retry, .credentialExpired:
            // Backoff for both: a credential that cannot be renewed yet (APNs refuses a renewal within 20
            // minutes) must not turn into a loop of refused pushes.
            activity.failures += 1
            failing.insert(push.device.service)
            let backoff = min(settings.retryLimit, settings.retryBase * pow(2, Double(activity.failures - 1)))
            let jittered = backoff * (0.5 + 0.5 * Double(random.next() >> 11) / Double(1 << 53))
            var after: TimeInterval = 0
            if case .retry(let serviceAfter?) = outcome { after = serviceAfter }
            activity.retryAt = now.addingTimeInterval(max(after, jittered))
            activity.waitAsked = after > 0
            if outcome == .credentialExpired { actions.renewCredential = push.device.service }
        }
        entry.activities[push.device] = activity
        rides[push.ride] = entry
        if push.event == .end, activity.lastSent?.event == .end {
            remove(push.device, ride: push.ride, reason: .rideEnded, into: &actions)
            return actions
        }
        actions.pushes = pushesDue(ride: push.ride, devices: [push.device], now: now)
        if recovered { actions.pushes += serviceRecovered(push.device.service, now: now) }
        return actions
    }

    /// A push through `service` went after failures: every activity of that service waiting out its own backoff
    /// goes now (those the service asked to wait, with Retry-After, keep waiting). After a 60 s outage the
    /// backoffs had grown to 16-32 s: without this, the last activities got their newest state a minute after
    /// APNs was back (`make bench-push`).
    private mutating func serviceRecovered(_ service: PushDevice.Service, now: Date) -> [Push] {
        var pushes: [Push] = []
        for (ride, entry) in rides {
            let waiting = entry.activities.filter {
                $0.key.service == service && $0.value.retryAt != nil && !$0.value.waitAsked && $0.value.inFlight == nil
            }
            guard !waiting.isEmpty, var updated = rides[ride] else { continue }
            for device in waiting.keys {
                updated.activities[device]?.retryAt = nil
                updated.activities[device]?.failures = 0
            }
            rides[ride] = updated
            pushes += pushesDue(ride: ride, devices: Array(waiting.keys), now: now)
        }
        return pushes
    }

    /// Time passes: retries whose wait is over, priority-5 pushes held back by ``Settings/minimumInterval``,
    /// and refreshes that keep a healthy ride's `stale-date` ahead.
    public mutating func tick(now: Date) -> PushActions {
        var actions = PushActions()
        endedRides = endedRides.filter { now.timeIntervalSince($0.value) < settings.endedRideMemory }
        for (ride, entry) in rides {
            if entry.latest == nil, let since = entry.subscribedAt,
                now.timeIntervalSince(since) >= settings.missingStatusLimit
            {
                let stopped = stopped(ride: ride, now: now)
                actions.removed += stopped.removed
                actions.unsubscribe += stopped.unsubscribe
                continue
            }
            for (device, activity) in entry.activities where activity.expires <= now && activity.inFlight == nil {
                remove(device, ride: ride, reason: .expired, into: &actions)
            }
            guard entry.latest != nil, let remaining = rides[ride] else { continue }
            actions.pushes += pushesDue(ride: ride, devices: Array(remaining.activities.keys), now: now)
        }
        return actions
    }

    // MARK: - What it holds

    /// Devices registered, over all rides.
    public var registrations: Int { rides.values.reduce(0) { $0 + $1.activities.count } }

    /// Rides with at least one device (the subscriptions `ride-push` holds).
    public var subscribedRides: Int { rides.values.count(where: { $0.subscribed }) }

    /// Activities with a newer state than the last one they got, and none in flight: what an outage holds back.
    /// Never more than ``registrations``.
    public var pending: Int {
        rides.values.reduce(0) { count, entry in
            guard let latest = entry.latest else { return count }
            return count
                + entry.activities.values.count(where: {
                    $0.inFlight == nil && Self.hasNews(latest, since: $0.lastSent)
                })
        }
    }

    /// The devices registered for `ride`.
    public func devices(of ride: String) -> Set<PushDevice> { Set(rides[ride].map { Array($0.activities.keys) } ?? []) }

    // MARK: - Deciding

    private mutating func pushesDue(ride: String, devices: [PushDevice], now: Date) -> [Push] {
        guard var entry = rides[ride], let latest = entry.latest else { return [] }
        var pushes: [Push] = []
        for device in devices {
            guard var activity = entry.activities[device],
                let push = nextPush(for: &activity, latest: latest, ride: ride, device: device, now: now)
            else { continue }
            activity.inFlight = push
            activity.highestTimestamp = max(activity.highestTimestamp, push.timestamp)
            activity.notBefore = nil
            entry.activities[device] = activity
            pushes.append(push)
        }
        rides[ride] = entry
        return pushes
    }

    private mutating func nextPush(
        for activity: inout Activity, latest: Latest, ride: String, device: PushDevice, now: Date
    ) -> Push? {
        guard activity.inFlight == nil else { return nil }
        if let retryAt = activity.retryAt, now < retryAt { return nil }
        let last = activity.lastSent
        guard Self.hasNews(latest, since: last) else { return nil }
        // Timestamps stay within a second of the later of this host's clock and the state's `issuedAt`, so that a
        // process taking a ride over can start above whatever the old owner sent: a burst beyond one push a
        // second waits for the clock. A taken-over activity's first push waits for the second after the
        // takeover and goes one above it. (With the hosts' clocks in step, as G1's incarnations assume too: the
        // old owner saw no state issued after it stopped.)
        let issued = Self.second(latest.issuedAt)
        let clock = Self.second(now)
        var timestamp = max(issued, activity.highestTimestamp + 1)
        if let notBefore = activity.notBefore {
            guard clock >= notBefore else { return nil }
            timestamp = max(timestamp, clock + 1)
        }
        guard timestamp <= max(issued, clock) + 1 else { return nil }
        activity.urgentTimes.removeAll { now.timeIntervalSince($0) >= 3600 }
        let event: LiveActivityPush.Event
        let priority: Push.Priority
        if latest.ended {
            event = .end
            priority = .urgent
        } else {
            event = .update
            let wantsUrgent: Bool
            if let last {
                wantsUrgent =
                    last.state.phase != latest.state.phase || last.state.ending != latest.state.ending
                    || Self.moved(
                        last.state.estimatedArrival, latest.state.estimatedArrival, by: settings.urgentArrivalChange)
            } else {
                wantsUrgent = true
            }
            if wantsUrgent && activity.urgentTimes.count < settings.urgentPushesPerHour {
                priority = .urgent
            } else {
                priority = .routine
                if let last, activity.retryAt == nil {
                    let since = now.timeIntervalSince(last.sentAt)
                    let shows = Self.shown(last.state) != Self.shown(latest.state)
                    guard (shows && since >= settings.minimumInterval) || since >= settings.refreshInterval
                    else { return nil }
                }
            }
        }
        return Push(
            ride: ride, device: device, event: event, priority: priority, state: latest.state,
            sequence: latest.sequence,
            timestamp: timestamp,
            staleDate: event == .end ? nil : latest.issuedAt.addingTimeInterval(2 * settings.refreshInterval),
            dismissalDate: event == .end ? now.addingTimeInterval(settings.dismissalDelay) : nil,
            relevanceScore: Self.relevance(latest.state, ended: latest.ended))
    }

    private mutating func remove(_ device: PushDevice, ride: String, reason: Removal, into actions: inout PushActions) {
        guard var entry = rides[ride], entry.activities.removeValue(forKey: device) != nil else { return }
        actions.removed.append(Removed(ride: ride, device: device, reason: reason))
        if entry.activities.isEmpty {
            if entry.latest?.ended == true || reason == .rideEnded { endedRides[ride] = entry.endedAt ?? .distantPast }
            rides[ride] = nil
            if entry.subscribed { actions.unsubscribe.append(ride) }
        } else {
            rides[ride] = entry
        }
    }

    /// Whether an activity that got `last` has something newer to get: a newer status, or the stop of a ride whose
    /// last status had no completion. Nothing after its `end`.
    /// A time in whole seconds since 1970, as APNs's `timestamp` counts.
    static func second(_ date: Date) -> Int { Int(date.timeIntervalSince1970.rounded(.down)) }

    private static func hasNews(_ latest: Latest, since last: Sent?) -> Bool {
        guard let last else { return true }
        guard last.event != .end else { return false }
        return latest.sequence > last.sequence || latest.ended
    }

    /// A `Retry-After` header in seconds, within 0 to 3600 (a delta in seconds is what APNs and FCM send; an
    /// HTTP date, a negative or infinite number are not followed).
    public static func retryAfter(_ header: String?) -> TimeInterval? {
        guard let header, let seconds = TimeInterval(header.trimmingCharacters(in: .whitespaces)), seconds.isFinite
        else { return nil }
        return min(max(seconds, 0), 3600)
    }

    /// Whether the arrival appeared, went, or moved by more than `limit` seconds.
    static func moved(_ old: Date?, _ new: Date?, by limit: TimeInterval) -> Bool {
        switch (old, new) {
        case (nil, nil): return false
        case (let old?, let new?): return abs(new.timeIntervalSince(old)) > limit
        default: return true
        }
    }

    /// What the lock screen shows of a state: all of it but the sequence and time it was issued.
    static func shown(_ state: RideActivityAttributes.ContentState) -> RideActivityAttributes.ContentState {
        var shown = state
        shown.sequence = 0
        shown.issuedAt = Date(timeIntervalSince1970: 0)
        return shown
    }

    /// Which of a rider's activities matters most now (`relevance-score`): the car at or near the pickup first,
    /// an ended ride last.
    static func relevance(_ state: RideActivityAttributes.ContentState, ended: Bool) -> Double {
        if ended { return 0 }
        switch state.phase {
        case .pickup: return 100
        case .approachingPickup: return 80
        case .ongoing: return 60
        case .confirmed: return 40
        case .received: return 20
        case .completed: return 0
        }
    }

    // MARK: - State

    private struct RideEntry: Sendable {
        var latest: Latest?
        var activities: [PushDevice: Activity] = [:]
        var subscribed = false
        /// When the subscription was asked for (``Settings/missingStatusLimit``).
        var subscribedAt: Date?
        /// When the ride's end (a completion or the stop) was seen.
        var endedAt: Date?
    }

    private struct Latest: Sendable {
        var state: RideActivityAttributes.ContentState
        var sequence: Int
        var issuedAt: Date
        /// A completion or a stop: the next push is the `end`.
        var ended: Bool
    }

    private struct Activity: Sendable {
        var lastSent: Sent?
        var inFlight: Push?
        var retryAt: Date?
        /// The service asked for `retryAt` (Retry-After): a recovery elsewhere does not cut it short.
        var waitAsked = false
        var failures = 0
        /// When the priority-10 pushes of the last hour went, oldest first; at most the budget's count.
        var urgentTimes: [Date] = []
        /// The highest `timestamp` this activity was sent, delivered or not: a push that timed out may have
        /// reached APNs, and the device drops a state whose timestamp does not grow.
        var highestTimestamp = Int.min
        /// Registered when another process handed the ride over: the whole second (UNIX time) its first push waits
        /// for; nil once one went, or for a device registered here first.
        var notBefore: Int?
        /// When the share token it registered with expires.
        var expires: Date

        init(expires: Date) { self.expires = expires }
    }

    private struct Sent: Sendable {
        var state: RideActivityAttributes.ContentState
        var sequence: Int
        var timestamp: Int
        var sentAt: Date
        var event: LiveActivityPush.Event
    }
}

/// One push for a sender to carry out: the same decision for APNs and FCM.
public struct Push: Sendable, Hashable {
    public enum Priority: Int, Sendable, Hashable {
        /// APNs priority 10 (FCM `HIGH`): shown at once, within the activity's budget.
        case urgent = 10
        /// APNs priority 5 (FCM `NORMAL`): delivered when the device sees fit.
        case routine = 5
    }

    public var ride: String
    public var device: PushDevice
    public var event: LiveActivityPush.Event
    public var priority: Priority
    public var state: RideActivityAttributes.ContentState
    /// The status's sequence (C5): FCM's data carries it, so that an app drops an older state.
    public var sequence: Int
    /// Seconds since 1970, growing with every push to the activity: the status's `issuedAt`, or one more than
    /// the last push's when two statuses fall in one second.
    public var timestamp: Int
    public var staleDate: Date?
    public var dismissalDate: Date?
    public var relevanceScore: Double

    public init(
        ride: String, device: PushDevice, event: LiveActivityPush.Event, priority: Priority,
        state: RideActivityAttributes.ContentState, sequence: Int, timestamp: Int, staleDate: Date?,
        dismissalDate: Date?, relevanceScore: Double
    ) {
        self.ride = ride
        self.device = device
        self.event = event
        self.priority = priority
        self.state = state
        self.sequence = sequence
        self.timestamp = timestamp
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
    }
}

/// What one event asks the owner of a ``PushPlanner`` to do.
public struct PushActions: Sendable {
    /// Hand these to the senders, each with its outcome reported back.
    public var pushes: [Push] = []
    /// Subscribe to this ride's status (its first device registered).
    public var subscribe: String?
    /// Unsubscribe from these rides' statuses (their last device left; a tick may end several).
    public var unsubscribe: [String] = []
    /// Registrations removed, and why (a metric each; the token itself is never logged).
    public var removed: [Removed] = []
    /// Pushes refused for a reason a retry will not mend, with the service's reason.
    public var refused: [(Push, String)] = []
    /// Make a new credential for this service before its next push: APNs's provider token
    /// (``ProviderTokenPolicy`` decides whether it may yet) or FCM's access token.
    public var renewCredential: PushDevice.Service?

    public init() {}
}

/// A registration removed.
public struct Removed: Sendable, Equatable {
    public var ride: String
    public var device: PushDevice
    public var reason: PushPlanner.Removal

    public init(ride: String, device: PushDevice, reason: PushPlanner.Removal) {
        self.ride = ride
        self.device = device
        self.reason = reason
    }
}
