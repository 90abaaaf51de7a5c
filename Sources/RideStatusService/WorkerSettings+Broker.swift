import Foundation
public import MQTTClient
import RideDomain
import RideStatusKit

// MARK: - The broker: its URLs, and what the protocol version decides

extension WorkerSettings {
    /// The broker URL(s) with any password replaced by `***`: what logs may print.
    public var redactedBrokerURL: String {
        Self.urls(brokerURL).map { url -> String in
            guard var components = URLComponents(string: url), components.password != nil else { return url }
            components.password = "***"
            return components.string ?? "***"
        }.joined(separator: ",")
    }

    /// The comma-separated URLs of ``brokerURL`` (a cluster's nodes).
    static func urls(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The QoS of the subscriptions a worker makes by the thousand (one per vehicle, L3; one per bucket while
    /// loading, G3). QoS 1 with MQTT 5; QoS 0 with 3.1.1, since NATS turns each QoS 1 subscription into a
    /// replicated JetStream consumer and allows a session about 63 of them. A fix lost at QoS 0 is superseded
    /// by the next within seconds. A load's retained states come at QoS 0 too: a connection lost in the middle
    /// of a load can lose one of them (the ride then waits for the next handover of its bucket).
    public var manySubscriptionsQoS: MQTTQoS { protocolVersion == .v5 ? .atLeastOnce : .atMostOnce }

    /// G3: the most buckets a load reads with one subscription each; a larger load reads every ride's state
    /// through one subscription and keeps its own buckets'. mosquitto makes a subscription in microseconds, so
    /// with MQTT 5 every load goes by bucket. On a NATS cluster (3.1.1) each subscription with retained messages
    /// took about 7 to 10 ms (`GroupNATSClusterTests`: 1,378 buckets after a death took 14 s to load), so
    /// there a load of more than 32 buckets reads the whole set instead.
    public var bucketFiltersPerLoad: Int { protocolVersion == .v5 ? Int.max : 32 }

    /// The MQTT client configuration: persistent session (L6), will `offline` (L8).
    public func mqttConfiguration(
        workerID: String, version: String, time: WorkerTime = .system
    ) throws -> MQTTConfiguration {
        // A clustered broker: several URLs, comma-separated; the first gives the scheme, credentials and TLS.
        let urls = Self.urls(brokerURL)
        var configuration = try MQTTConfiguration(
            url: urls.first ?? brokerURL, clientID: "ride-status-worker-\(workerID)")
        for url in urls.dropFirst() {
            let node = try MQTTConfiguration(url: url, clientID: configuration.clientID)
            configuration.failover.append(.init(host: node.host, port: node.port))
        }
        configuration.protocolVersion = protocolVersion
        if let username { configuration.username = username }
        if let password { configuration.password = password }
        if let caFile {
            configuration.tls = .init(caFile: caFile, certificateFile: certificateFile, keyFile: keyFile)
        }
        configuration.cleanStart = false
        configuration.sessionExpiry = sessionExpiry
        configuration.keepAlive = keepAlive
        configuration.interposeIO = interposeIO
        configuration.maximumReconnectDelay = .seconds(5)
        // G5: the lease, pinged on its own topic; while fenced only this worker's own markers go out (the lease
        // marker closes the confirmation; a rejoin's load markers carry nothing of the rides).
        if lease {
            configuration.lease = .init(
                topic: topics.leaseMarker(worker: workerID), margin: leaseMargin,
                passing: [topics.loadMarker(worker: workerID), topics.presence(worker: workerID)])
        }
        // G1, L8: each connection's will carries that connection's incarnation, as its birth does.
        configuration.will = .init(
            topic: topics.presence(worker: workerID),
            payload: Presence(state: .offline, since: time.now, version: version).encoded(),
            qos: .atLeastOnce, retain: true,
            payloadForIncarnation: { incarnation in
                Presence(state: .offline, since: time.now, version: version, incarnation: Int(clamping: incarnation))
                    .encoded()
            })
        return configuration
    }
}
