/// The worker's lifecycle as a plain state machine: connecting, recovering its rides (L5), ready, draining
/// (L8). Events in, one action out; no I/O, so it is tested alone (`WorkerLifecycleTests`), and the service
/// only carries out what it returns.
///
/// Recovery (L5): after the first CONNACK the worker subscribes to every retained presence and publishes a
/// view marker to itself; the broker sends retained messages before anything published later, so that
/// marker closes the first view of the group (G1). The worker then subscribes to the ride states it reads
/// at start (every one when it is alone, G3) and publishes a marker carrying a fresh nonce, which closes the
/// recovery. Control messages and requests that
/// arrive meanwhile (a persistent session delivers those sent while the worker was down, L6) wait in a
/// stash and are handled in order right after the recovery. Fixes are not kept: the next one of a vehicle
/// comes within seconds and supersedes it (counted in ``fixesSkipped``).
///
/// Announcing (L8): the retained `online` goes out only once the broker has acknowledged every subscription the
/// worker takes control messages and requests on. Two facts must hold on the current connection: the control
/// subscriptions were acknowledged once (``controlsAcknowledged()``; the client remembers them and subscribes
/// them again on every later connection), and the client reported that this connection's restoration of every
/// remembered subscription was answered (``subscriptionsRestored(incarnation:controlsRefused:)``). Whichever
/// comes second announces, once per connection, with that connection's incarnation.
///
/// The lease (G5): once the client's lease with the broker lapsed (a pause, a stall, a lost connection), the client
/// is fenced and the worker publishes nothing for the rides it holds until it knows it still holds them. The
/// client is the one source of that fact: each CONNACK says whether it is fenced. On a fenced CONNACK it publishes a
/// marker to itself (``Action/confirmLease(nonce:)``): the broker delivers first what its
/// session queued meanwhile (the group's presences, this worker's own will if it fired, which makes it rejoin as a
/// newcomer), then the marker. When the marker comes back the worker has read everything that happened while it
/// was away: the client may publish again, every ride publishes at once (C4), and `online` may go out.
///
/// The stash is bounded by ``stashLimit``: past it, a control message is dropped and counted in
/// ``stashOverflow``; the service logs it (naming L6). A worker that has more control messages waiting
/// than that at start-up has a broker session far beyond what the cadence could take in anyway.
struct WorkerLifecycle<Message> {
    enum State: Equatable {
        case connecting
        case recovering
        case ready
        /// G5: connected again after a lapse; the lease marker has not come back yet.
        case confirming
        case draining
    }

    /// What a message is, as far as the lifecycle cares.
    enum Kind: Equatable {
        /// A retained ride state (`ridestatus/state/{ride}`).
        case rideState
        /// A ride's status (`rides/{ride}/status`): retained ones are read back during recovery (L5).
        case rideStatus
        /// A worker's presence: the retained ones, read during recovery, form the first view of the group (G1).
        case presence
        /// The recovery marker, with its payload.
        case recoveryMarker(String)
        /// G5: this worker's lease marker (`{serviceName}/workers/{id}/lease`), with its payload.
        case leaseMarker(String)
        /// A vehicle's position.
        case fix
        /// A control message or a request.
        case other
    }

    enum Action {
        /// Subscribe to the marker and the presences, then publish ``viewMarker(nonce:)`` on the marker.
        case startRecovery(nonce: String)
        /// G1: the retained presences are in (the view marker came back): the service chooses what to read
        /// (every ride state alone, or by bucket in a group), then publishes `nonce` on the marker.
        case formView(nonce: String)
        /// Restore one ride from its retained state or status, or take one presence into the first view.
        case restore(Message)
        /// Recovery is complete: subscribe to the control topics (the announcement waits for their
        /// acknowledgement, L8), publish every ride (C4), then handle the stashed messages in order.
        case finishRecovery(stashed: [Message])
        /// A reconnect after recovery: publish every ride at once (C4); the announcement waits for the
        /// restoration of the subscriptions (L8).
        case republishAll
        /// G5: a reconnect after the lease lapsed: publish `nonce` on the lease marker; nothing for the rides.
        case confirmLease(nonce: String)
        /// G5: the lease marker `nonce` came back: the client may publish again, every ride publishes at once
        /// (C4), and `online` goes out on the incarnation given, if due (L8).
        case leaseConfirmed(nonce: String, announce: UInt64?)
        /// Handle the message now.
        case handle(Message)
        /// Nothing to do.
        case none
    }

    private(set) var state: State = .connecting
    /// Whether recovery has completed once (a reconnect then republishes instead of recovering again).
    private(set) var recovered = false
    private var nonce = ""
    private var stash: [Message] = []
    let stashLimit: Int
    private(set) var stashOverflow = 0
    private(set) var fixesSkipped = 0
    /// L8: the broker acknowledged the control and request subscriptions (on some connection).
    private(set) var controlsSubscribed = false
    /// L8: the incarnation of the current connection once its restoration was answered with no control
    /// subscription refused; nil before that and while disconnected.
    private(set) var restoredIncarnation: UInt64?
    /// A restoration that refused a control subscription: the one being subscribed again.
    private var retryingIncarnation: UInt64?
    /// L8: the incarnation announced on the current connection, if it was.
    private(set) var announcedIncarnation: UInt64?

    init(stashLimit: Int = 100_000) {
        self.stashLimit = stashLimit
    }

    var stashedCount: Int { stash.count }

    /// A CONNACK. `nonce` is fresh for each call; it is used only when a recovery (re)starts or the lease is
    /// confirmed. `fenced`: the client's lease lapsed since the worker last confirmed it (G5).
    mutating func connected(nonce: String, fenced: Bool = false) -> Action {
        forgetConnection()
        switch state {
        case .draining:
            return .none
        case .connecting where recovered && fenced, .ready where fenced, .confirming where fenced:
            state = .confirming
            self.nonce = nonce
            return .confirmLease(nonce: nonce)
        case .connecting where recovered, .confirming:
            state = .ready
            return .republishAll
        case .ready:
            return .republishAll
        case .connecting, .recovering:
            // A connection lost during recovery starts it again: the old marker may never arrive.
            state = .recovering
            self.nonce = nonce
            return .startRecovery(nonce: nonce)
        }
    }

    /// The payload of the first marker of a recovery, which closes the read of the presences (G1).
    static func viewMarker(nonce: String) -> String { nonce + "/view" }

    mutating func disconnected() {
        if state == .ready || state == .recovering || state == .confirming { state = .connecting }
        forgetConnection()
    }

    private mutating func forgetConnection() {
        restoredIncarnation = nil
        retryingIncarnation = nil
        announcedIncarnation = nil
    }

    /// The client answered every resubscription of the connection of `incarnation`. When a control subscription
    /// was refused, the service subscribes it again and calls ``controlsRestored(incarnation:)`` once acknowledged.
    /// - Returns: the incarnation to announce now (L8), if any.
    mutating func subscriptionsRestored(incarnation: UInt64, controlsRefused: Bool) -> UInt64? {
        guard state != .draining else { return nil }
        if controlsRefused {
            retryingIncarnation = incarnation
            return nil
        }
        restoredIncarnation = incarnation
        return announceIfDue()
    }

    /// The control subscriptions a restoration refused were acknowledged on a second try.
    /// - Returns: the incarnation to announce now (L8), if any.
    mutating func controlsRestored(incarnation: UInt64) -> UInt64? {
        guard retryingIncarnation == incarnation else { return nil }
        retryingIncarnation = nil
        restoredIncarnation = incarnation
        return announceIfDue()
    }

    /// The broker acknowledged every control and request subscription that recovery made.
    /// - Returns: the incarnation to announce now (L8), if any.
    mutating func controlsAcknowledged() -> UInt64? {
        controlsSubscribed = true
        return announceIfDue()
    }

    private mutating func announceIfDue() -> UInt64? {
        guard state == .ready, recovered, controlsSubscribed, announcedIncarnation == nil,
            let incarnation = restoredIncarnation
        else { return nil }
        announcedIncarnation = incarnation
        return incarnation
    }

    /// SIGTERM or SIGINT: from now on messages are still handled, but nothing restarts (L8).
    mutating func shutdown() {
        state = .draining
    }

    /// G5: the lease marker never came back; the service rejoined as a newcomer and goes on as if it had.
    mutating func confirmationTimedOut() -> Action {
        guard state == .confirming else { return .none }
        state = .ready
        return .leaseConfirmed(nonce: nonce, announce: announceIfDue())
    }

    mutating func received(_ kind: Kind, _ message: Message) -> Action {
        if case .leaseMarker(let payload) = kind {
            guard state == .confirming, payload == nonce else { return .none }
            state = .ready
            return .leaseConfirmed(nonce: nonce, announce: announceIfDue())
        }
        guard !recovered else {
            // Ready, or reconnecting after recovery: every message is handled as it comes.
            return .handle(message)
        }
        guard state != .draining else { return .none }
        switch kind {
        case .rideState, .rideStatus, .presence:
            return .restore(message)
        case .recoveryMarker(let payload):
            guard state == .recovering else { return .none }
            if payload == Self.viewMarker(nonce: nonce) { return .formView(nonce: nonce) }
            guard payload == nonce else { return .none }
            state = .ready
            recovered = true
            let stashed = stash
            stash = []
            return .finishRecovery(stashed: stashed)
        case .fix:
            fixesSkipped += 1
            return .none
        case .leaseMarker:
            return .none
        case .other:
            guard stash.count < stashLimit else {
                stashOverflow += 1
                return .none
            }
            stash.append(message)
            return .none
        }
    }
}
