import Locking
public import MQTTClient

/// An MQTT broker in memory for the service's own unit tests, in the role NIOEmbedded plays for swift-nio:
/// retained messages, `+` and `#` filters, MQTT 5 no-local and retain handling, and sessions that keep
/// what arrives while a client is away. It runs the worker's logic fast and deterministically; it is not
/// a broker to test against. End-to-end tests use a real mosquitto.
public final class InMemoryBroker: Sendable {
    struct Session {
        var subscriptions: [String: MQTTSubscribeOptions] = [:]
        var connected = false
        /// What arrived for the session while its client was away, delivered when it comes back.
        var pending: [MQTTMessage] = []
        var deliver: AsyncStream<MQTTMessage>.Continuation
    }

    struct State {
        var retained: [String: MQTTMessage] = [:]
        var sessions: [Int: Session] = [:]
        var nextID = 1
        var published: [MQTTMessage] = []
    }

    let state = Locked(State())

    public init() {}

    /// A client of this broker that the worker can use as its transport.
    public func transport() -> InMemoryTransport { InMemoryTransport(broker: self) }

    /// The retained message on `topic`, if any.
    public func retained(_ topic: String) -> MQTTMessage? { state.withLock { $0.retained[topic] } }

    /// Every topic with a retained message.
    public var retainedTopics: [String] { state.withLock { $0.retained.keys.sorted() } }

    /// Every filter some client is subscribed to.
    public var subscribedFilters: Set<String> {
        state.withLock { Set($0.sessions.values.flatMap { $0.subscriptions.keys }) }
    }

    /// Every message published through this broker so far, in order.
    public var published: [MQTTMessage] { state.withLock { $0.published } }

    /// Publishes as another client (a dispatcher, a vehicle, an intruder).
    public func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool = false, properties: MQTTProperties = MQTTProperties()
    ) {
        route(
            MQTTMessage(topic: topic, payload: payload, qos: .atLeastOnce, retain: retain, properties: properties),
            from: 0)
    }

    /// Publishes text as another client.
    public func publish(_ topic: String, _ text: String, retain: Bool = false) {
        publish(topic, Array(text.utf8), retain: retain)
    }

    // MARK: The transport's side

    func register(_ deliver: AsyncStream<MQTTMessage>.Continuation) -> Int {
        state.withLock { state in
            defer { state.nextID += 1 }
            state.sessions[state.nextID] = Session(deliver: deliver)
            return state.nextID
        }
    }

    /// Connects a session; returns whether it was there before (MQTT's session present).
    func connect(_ id: Int) {
        state.withLock { state in
            state.sessions[id]?.connected = true
            for message in state.sessions[id]?.pending ?? [] { state.sessions[id]?.deliver.yield(message) }
            state.sessions[id]?.pending = []
        }
    }

    func disconnect(_ id: Int) { state.withLock { $0.sessions[id]?.connected = false } }

    /// The session is gone (a clean start, or a broker restarted without persistence): its subscriptions and
    /// what waited for it.
    func forgetSession(_ id: Int) {
        state.withLock { state in
            state.sessions[id]?.subscriptions = [:]
            state.sessions[id]?.pending = []
        }
    }

    func route(_ message: MQTTMessage, from sender: Int) {
        state.withLock { state in
            state.published.append(message)
            if message.retain {
                if message.payload.isEmpty {
                    state.retained[message.topic] = nil
                } else {
                    state.retained[message.topic] = message
                }
            }
            var live = message
            live.retain = false
            for (id, session) in state.sessions {
                let wanted = session.subscriptions.contains { filter, options in
                    Self.matches(filter: filter, topic: message.topic) && !(options.noLocal && id == sender)
                }
                guard wanted else { continue }
                if session.connected {
                    session.deliver.yield(live)
                } else {
                    state.sessions[id]?.pending.append(live)
                }
            }
        }
    }

    func subscribe(_ id: Int, filter: String, options: MQTTSubscribeOptions) {
        state.withLock { state in
            let isNew = state.sessions[id]?.subscriptions[filter] == nil
            state.sessions[id]?.subscriptions[filter] = options
            let sendRetained =
                switch options.retainHandling {
                case .sendOnSubscribe: true
                case .sendIfNew: isNew
                case .never: false
                }
            guard sendRetained, let session = state.sessions[id] else { return }
            for (topic, message) in state.retained.sorted(by: { $0.key < $1.key })
            where Self.matches(filter: filter, topic: topic) {
                session.deliver.yield(message)
            }
        }
    }

    func unsubscribe(_ id: Int, filter: String) {
        state.withLock { _ = $0.sessions[id]?.subscriptions.removeValue(forKey: filter) }
    }

    /// MQTT topic matching: `+` is one level, `#` (last) is any number of levels, including none.
    public static func matches(filter: String, topic: String) -> Bool {
        let filterLevels = filter.split(separator: "/", omittingEmptySubsequences: false)
        let topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in filterLevels.enumerated() {
            if level == "#" { return true }
            guard index < topicLevels.count else { return false }
            if level != "+" && level != topicLevels[index] { return false }
        }
        return filterLevels.count == topicLevels.count
    }
}
