/// G5: how long the broker still takes this client for alive, by the client's own monotonic clock.
///
/// The broker declares a client dead (and publishes its will) once it has heard nothing from it for 1.5 times
/// the keepalive: mosquitto 2.0 compares whole seconds, so with keepalive 5 the earliest will comes 7 s after
/// the last packet it *received*. The client cannot know when that was; it knows when it *sent* a packet that
/// the broker has since acknowledged, which the broker received no earlier. So the lease runs from the send
/// time of the latest acknowledged packet (the CONNECT, a QoS 1 publish, a subscribe), for the broker's
/// deadline less a margin. The time an acknowledgement came back would not be safe: the broker's timer started
/// before it.
///
/// Whose clock: this process's monotonic clock (`ContinuousClock`, which counts a pause of the process, a
/// stopped VM or a suspended host). A pause is a lapse: once the clock passes ``expiry``, nothing written
/// before may go out (the client closes the connection and drops what it held), and the service confirms
/// that it still holds its rides before it publishes for them again.
///
/// A client with nothing to send would let its lease lapse: ``pingDue(at:)`` asks for an acknowledged packet
/// once half a keepalive has passed since the last one was sent. A pure value: events in, answers out.
public struct BrokerLease: Sendable, Equatable {
    /// The broker's silence before it fires the will: `keepAlive × 3 / 2` in whole seconds.
    public let brokerDeadline: Duration
    /// The lease: the broker's deadline less the margin.
    public let duration: Duration
    /// How long after the last packet sent the client sends one more that the broker acknowledges.
    public let pingInterval: Duration

    /// The send time of the latest acknowledged packet, while connected; nil before the first connection.
    public private(set) var base: ContinuousClock.Instant?
    /// When the CONNECT of the current attempt was sent.
    private var connectSentAt: ContinuousClock.Instant?
    /// Packets sent and not yet acknowledged, by libmosquitto's message id, with their send times.
    private var outstanding: [Int32: ContinuousClock.Instant] = [:]
    /// When a packet that the broker will acknowledge was last sent.
    public private(set) var lastSent: ContinuousClock.Instant?

    /// - Parameters:
    ///   - keepAlive: the keepalive sent with CONNECT, in seconds.
    ///   - margin: what the lease keeps from the broker's deadline (the broker checks every few seconds, and a
    ///     packet in the socket's buffer at the lapse still counts as sent).
    public init(keepAlive: Int, margin: Duration = .seconds(1)) {
        brokerDeadline = .seconds(keepAlive * 3 / 2)
        duration = max(.zero, brokerDeadline - margin)
        pingInterval = .milliseconds(keepAlive * 500)
    }

    /// When the lease ends; nil while there is none (before the first connection, or after a lapse until the
    /// next connection).
    public var expiry: ContinuousClock.Instant? { base.map { $0 + duration } }

    /// Whether the lease holds at `now`.
    public func isLive(at now: ContinuousClock.Instant) -> Bool {
        guard let expiry else { return false }
        return now < expiry
    }

    /// Whether a lease was held and has run out at `now`: what was written under it must not go out.
    public func hasLapsed(at now: ContinuousClock.Instant) -> Bool {
        guard let expiry else { return false }
        return now >= expiry
    }

    /// The client sends CONNECT.
    public mutating func connecting(at now: ContinuousClock.Instant) {
        connectSentAt = now
        lastSent = now
    }

    /// The broker accepted the connection: the lease runs from when CONNECT was sent.
    public mutating func connected() {
        guard let sent = connectSentAt else { return }
        base = max(base ?? sent, sent)
        connectSentAt = nil
    }

    /// A packet the broker acknowledges (a QoS 1 publish, a subscribe) was handed to the connection.
    public mutating func sent(_ id: Int32, at now: ContinuousClock.Instant) {
        outstanding[id] = now
        lastSent = now
    }

    /// The broker acknowledged packet `id`: it received it, so it heard this client no earlier than its send.
    public mutating func acknowledged(_ id: Int32) {
        guard let sent = outstanding.removeValue(forKey: id), base != nil else { return }
        base = max(base ?? sent, sent)
    }

    /// Whether the client should send an acknowledged packet now to keep the lease (half a keepalive since the
    /// last one sent).
    public func pingDue(at now: ContinuousClock.Instant) -> Bool {
        guard base != nil, let lastSent else { return false }
        return now - lastSent >= pingInterval
    }

    /// The lease lapsed and the client gave up what it held: no lease until the next connection, and no
    /// packet of the old connection can extend the new one.
    public mutating func fenced() {
        base = nil
        connectSentAt = nil
        outstanding = [:]
    }
}
