import Foundation

/// How an ``MQTTClient`` connects: broker address, identity, session, TLS, will and buffering.
public struct MQTTConfiguration: Sendable {
    /// The MQTT protocol version spoken on the wire.
    public enum ProtocolVersion: Sendable {
        case v5
        case v311

        /// The version as a setting or a flag names it: `5` (or `5.0`) and `3.1.1` (or `311`); nil for anything else.
        public init?(setting: String) {
            switch setting {
            case "5", "5.0": self = .v5
            case "3.1.1", "311": self = .v311
            default: return nil
            }
        }
    }

    /// TLS settings. `caFile` or `caDirectory` is required; the client certificate is optional.
    public struct TLS: Sendable {
        public var caFile: String?
        public var caDirectory: String?
        public var certificateFile: String?
        public var keyFile: String?
        public init(
            caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil, keyFile: String? = nil
        ) {
            self.caFile = caFile
            self.caDirectory = caDirectory
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// G5: a lease with the broker (``BrokerLease``). The client keeps one acknowledged QoS 1 packet going out at
    /// least every half keepalive (an empty publish to `topic` when nothing else went), and once the lease has
    /// lapsed (by its monotonic clock: a pause, a stall) or the connection was lost, it closes the connection
    /// without writing anything more, drops every publish it held (libmosquitto's in-flight ones included, by
    /// `mosquitto_reinitialise`), reports ``MQTTConnectionEvent/leaseLapsed(silence:)`` and, until
    /// ``MQTTClient/confirmLease()``, drops every publish but to the `passing` topics.
    public struct Lease: Sendable, Equatable {
        /// Where the lease pings go (empty, QoS 1, not retained): a topic only this client reads.
        public var topic: String
        /// What the lease keeps from the broker's deadline (``BrokerLease``).
        public var margin: Duration
        /// Topics published to while fenced: markers that carry no data of what the client held.
        public var passing: Set<String>

        public init(topic: String, margin: Duration = .seconds(1), passing: Set<String> = []) {
            self.topic = topic
            self.margin = margin
            self.passing = passing.union([topic])
        }
    }

    /// The message the broker publishes for this client when the connection dies without DISCONNECT.
    public struct Will: Sendable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: MQTTQoS
        public var retain: Bool
        /// When set, the will is made anew before every connection from that connection's incarnation
        /// (``MQTTClient/incarnation``), so that a birth and its will can carry the same one (G1).
        public var payloadForIncarnation: (@Sendable (UInt64) -> [UInt8])?

        public init(
            topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
            payloadForIncarnation: (@Sendable (UInt64) -> [UInt8])? = nil
        ) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
            self.payloadForIncarnation = payloadForIncarnation
        }
    }

    /// What the network thread does when the incoming buffer is full.
    public enum BufferPolicy: Sendable, Equatable {
        /// The network thread waits for room: TCP back-pressure reaches the broker, nothing is lost.
        /// The consumer of ``MQTTClient/messages`` must not await acknowledgements of its own publishes
        /// while the buffer is full, or it waits on itself.
        case suspendNetwork
        /// The newest message is dropped and counted in ``MQTTClient/droppedMessages``.
        case dropNewest
        /// The oldest buffered message is dropped and counted in ``MQTTClient/droppedMessages``.
        case dropOldest
    }

    public var host: String
    public var port: Int
    /// Other nodes of a clustered broker, tried in turn after `host`: each failed connect and each lost
    /// connection moves to the next (the session lives on every node of such a cluster).
    public var failover: [Endpoint] = []
    public var clientID: String
    public var username: String?
    public var password: String?
    public var keepAlive: Int
    public var protocolVersion: ProtocolVersion
    /// `false` keeps the session (subscriptions and QoS 1 queue) on the broker across reconnects.
    public var cleanStart: Bool
    /// MQTT 5 session expiry interval in seconds, sent with every CONNECT when `cleanStart` is false.
    public var sessionExpiry: UInt32
    public var tls: TLS?
    public var will: Will?
    /// First reconnect delay; it doubles on each failed attempt up to `maximumReconnectDelay`.
    public var initialReconnectDelay: Duration
    public var maximumReconnectDelay: Duration
    /// Capacity of the incoming message buffer, in messages.
    public var bufferCapacity: Int
    public var bufferPolicy: BufferPolicy
    /// Sends each packet at once instead of letting Nagle's algorithm hold small ones back for the
    /// peer's delayed acknowledgement (about 40 ms on Linux): a phase change must not wait (C2).
    public var tcpNoDelay = true
    /// After a reconnect, new publishes wait until libmosquitto's resends of older messages are acknowledged,
    /// so they never overtake them (``MQTTClient``'s ordered resend); past this time they leave anyway.
    public var orderedResendTimeout: Duration = .seconds(10)
    /// QoS 1 messages handed to libmosquitto and not yet acknowledged, at most. Beyond it publishes wait in
    /// the client, coalesced per retained topic (only the newest retained message of a topic matters), and
    /// leave in order as acknowledgements make room: a slow or frozen broker cannot grow libmosquitto's queue
    /// without bound. 1,000 keeps 25 ms of a 40,000 messages a second stream in flight.
    public var maxInFlight = 1000
    /// Whether the client buffers its reads under libmosquitto and skips libmosquitto's wake-up bytes
    /// (`CMosquittoIO` patches libmosquitto's imports of `read` and `write`; Linux with glibc only): 7.4 system
    /// calls per received message without, 1.1 with (docs/performance.md). Off, libmosquitto is left as it is.
    /// ``MQTTClient/ioInterposition`` says what the client got.
    public var interposeIO = true
    /// MQTT 5 Receive Maximum sent with CONNECT: QoS 1 messages the broker may send before this client
    /// acknowledges them. Unset, MQTT 5 means 65,535, and mosquitto 2.0 then keeps that many in flight and
    /// searches them on every PUBACK: draining 151,000 queued messages the broker spent a core while the
    /// worker idled, at 64 % to 68 % of a bare MQTT 3.1.1 `mosquitto_sub` (whose window is the broker's
    /// `max_inflight_messages`). 0 sends none.
    public var receiveMaximum: UInt16 = 100
    /// G5: the lease with the broker; nil keeps none (a tool, not a worker).
    public var lease: Lease?

    public init(
        host: String = "127.0.0.1",
        port: Int = 1883,
        clientID: String = "swift-\(UInt32.random(in: 0...UInt32.max))",
        username: String? = nil,
        password: String? = nil,
        keepAlive: Int = 30,
        protocolVersion: ProtocolVersion = .v5,
        cleanStart: Bool = false,
        sessionExpiry: UInt32 = 3600,
        tls: TLS? = nil,
        will: Will? = nil,
        initialReconnectDelay: Duration = .milliseconds(100),
        maximumReconnectDelay: Duration = .seconds(10),
        bufferCapacity: Int = 10_000,
        bufferPolicy: BufferPolicy = .suspendNetwork
    ) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.username = username
        self.password = password
        self.keepAlive = keepAlive
        self.protocolVersion = protocolVersion
        self.cleanStart = cleanStart
        self.sessionExpiry = sessionExpiry
        self.tls = tls
        self.will = will
        self.initialReconnectDelay = initialReconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
        self.bufferCapacity = bufferCapacity
        self.bufferPolicy = bufferPolicy
    }

    /// One broker node.
    public struct Endpoint: Sendable, Equatable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// The nodes to connect to, in the order they are tried: `host` first, then ``failover``.
    public var endpoints: [Endpoint] { [Endpoint(host: host, port: port)] + failover }

    /// Reads `mqtt://user:password@host:port` or `mqtts://…` (default ports 1883 and 8883).
    /// A `mqtts` URL without `tls` settings uses the system's CA directory.
    public init(url: String, clientID: String) throws(MQTTError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            throw .invalidConfiguration("broker URL '\(url)' is not a URL")
        }
        guard scheme == "mqtt" || scheme == "mqtts" || scheme == "tcp" || scheme == "ssl" else {
            throw .invalidConfiguration("broker URL scheme '\(scheme)' is not mqtt or mqtts")
        }
        guard let host = components.host, !host.isEmpty else {
            throw .invalidConfiguration("broker URL '\(url)' has no host")
        }
        let secure = scheme == "mqtts" || scheme == "ssl"
        self.init(host: host, port: components.port ?? (secure ? 8883 : 1883), clientID: clientID)
        self.username = components.user?.removingPercentEncoding
        self.password = components.password?.removingPercentEncoding
        if secure {
            self.tls = TLS(caDirectory: "/etc/ssl/certs")
        }
    }
}

/// MQTT quality of service.
public enum MQTTQoS: Int32, Sendable, Comparable {
    case atMostOnce = 0
    case atLeastOnce = 1

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension MQTTConfiguration {
    /// A password kept in a file: the file's first line. The worker's `broker.passwordFile` and the
    /// tools' `--password-file` read it so.
    public static func password(fromFile path: String) throws(MQTTError) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw .invalidConfiguration("cannot read the password file \(path)")
        }
        return text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
    }

    /// A command-line tool's credentials: an account, its password read from the first line of a
    /// file (never a flag, which `ps` shows to every user of the host), and the CA that signed the broker's
    /// certificate (for an `mqtts://` broker of a deployment with its own CA). Nil leaves a setting as the URL
    /// gave it.
    public mutating func useCredentials(
        username: String?, passwordFile: String?, caFile: String?
    ) throws(MQTTError) {
        if let username { self.username = username }
        if let passwordFile { password = try Self.password(fromFile: passwordFile) }
        if let caFile {
            guard tls != nil else {
                throw .invalidConfiguration("a CA file is for an mqtts:// broker, and the broker URL is not one")
            }
            tls?.caFile = caFile
            tls?.caDirectory = nil
        }
    }
}
