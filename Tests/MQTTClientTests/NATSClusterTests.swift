import Foundation
import MQTTClient
import MosquittoTesting
import Testing

/// What a group of workers needs of a clustered broker (G1, G3), proven on a real 3-node NATS cluster with
/// the client in MQTT 3.1.1 mode (NATS refuses MQTT 5): retained messages, wills and persistent sessions span
/// the nodes, and survive the loss of one.
@Suite("MQTT client on a real 3-node NATS cluster (MQTT 3.1.1)", .serialized)
struct NATSClusterTests {
    func client(_ node: NATSCluster.Node, id: String, cleanStart: Bool = true, will: MQTTConfiguration.Will? = nil)
        async throws -> MQTTClient
    {
        var configuration = MQTTConfiguration(
            port: node.mqttPort, clientID: id, protocolVersion: .v311, cleanStart: cleanStart, will: will)
        configuration.keepAlive = 5
        let client = try MQTTClient(configuration: configuration, logger: quietLogger)
        // Generous: NATS may hold a connect for its JetStream API timeout (5 s) more than once while a stream leader
        // is elected again after a node's loss.
        try await client.connect(timeout: .seconds(30))
        return client
    }

    @Test("G1, L8: a retained presence and a will published through one node reach subscribers on the others")
    func presenceAcrossNodes() async throws {
        let cluster = try await NATSCluster.start()
        defer { cluster.stop() }
        let worker = try await client(
            cluster.nodes[0], id: "w-a",
            will: .init(topic: "ridestatus/workers/w-a", payload: "offline".bytes, qos: .atLeastOnce, retain: true))
        try await worker.publish(
            topic: "ridestatus/workers/w-a", payload: "online".bytes, qos: .atLeastOnce, retain: true)

        let watcher = try await client(cluster.nodes[2], id: "watcher")
        try await watcher.subscribe("ridestatus/workers/+", qos: .atLeastOnce)
        let birth = try await receive(watcher, timeout: .seconds(10))
        #expect(birth.first?.payload == "online".bytes, "the retained birth, read on another node")

        // The worker's connection dies without DISCONNECT: the cluster publishes its will, retained.
        worker.simulateNetworkFailure()
        let will = try await receive(watcher, timeout: .seconds(15))
        #expect(will.first?.topic == "ridestatus/workers/w-a" && will.first?.payload == "offline".bytes)
        await watcher.disconnect()
        await worker.disconnect()
    }

    @Test("G3: a node killed: retained ride state stays readable and new publishes flow between the others")
    func nodeLoss() async throws {
        let cluster = try await NATSCluster.start()
        defer { cluster.stop() }
        let writer = try await client(cluster.nodes[0], id: "writer")
        try await writer.publish(
            topic: "ridestatus/state/r-1", payload: "state-1".bytes, qos: .atLeastOnce, retain: true)
        await writer.disconnect()

        cluster.kill(node: 1)
        let reader = try await client(cluster.nodes[2], id: "reader")
        // QoS 0: while a node is down NATS refuses a third to a half of new QoS 1 subscriptions (each is a
        // replicated JetStream consumer; docs/research/nats-cluster.md), never a QoS 0 one. Retained messages
        // come either way, but on 2.15 the first read after a node's loss can go to the dead stream leader,
        // wait out JetStream's API timeout (5 s) and deliver nothing: a subscription made again reads them.
        var state: [MQTTMessage] = []
        var attempts = 0
        while state.isEmpty, attempts < 4 {
            attempts += 1
            try await reader.subscribe("ridestatus/state/+", qos: .atMostOnce)
            state = (try? await receive(reader, timeout: .seconds(8))) ?? []
            if state.isEmpty { try await reader.unsubscribe("ridestatus/state/+") }
        }
        print("node-loss: the retained state read on attempt \(attempts)")
        #expect(state.first?.payload == "state-1".bytes, "retained state survives the loss of a node")

        // A publish through the first node reaches the subscriber on the third (the lost node's first
        // publish may hang up to 4 s while a new meta leader is chosen: the client retries on reconnect).
        let again = try await client(cluster.nodes[0], id: "writer-2")
        try await again.publish(
            topic: "ridestatus/state/r-1", payload: "state-2".bytes, qos: .atLeastOnce, retain: true)
        let update = try await receive(reader, timeout: .seconds(15))
        #expect(update.first?.payload == "state-2".bytes)
        await again.disconnect()
        await reader.disconnect()
    }
}
