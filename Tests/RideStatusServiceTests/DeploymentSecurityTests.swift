import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

/// Issue 14's transport security, on the deployment as shipped: `scripts/deploy-setup.sh` makes the CA, the
/// certificates and the accounts, and a real mosquitto runs `config/mosquitto.conf` with them (the file Docker
/// Compose mounts), only its ports and folders moved to the test's. No plain MQTT, no anonymous client, the
/// worker signs in with its client certificate and checks the broker's.
@Suite("Deployment security: TLS and client certificates on the shipped broker", .serialized)
struct DeploymentSecurityTests {
    /// The folder `scripts/deploy-setup.sh` filled.
    struct Deployment {
        let folder: URL
        func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
        func password(_ account: String) throws -> String {
            try String(contentsOfFile: path("secrets/\(account)"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    static func setUp() async throws -> Deployment {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        let (code, output) = try await ChildProcess.run(
            "/bin/bash", [BrokerSecurityTests.root.appendingPathComponent("scripts/deploy-setup.sh").path, folder.path])
        guard code == 0 else { throw TimedOut(what: "deploy-setup.sh to succeed: \(output)") }
        return Deployment(folder: folder)
    }

    /// Issue 30: a rider's account, made on the running broker by the accounts admin, as dispatch does at booking.
    static func addRider(_ ride: String, _ deployment: Deployment, port: Int) async throws {
        let (code, output) = try await ChildProcess.run(
            "/usr/bin/env",
            [
                "python3", BrokerSecurityTests.root.appendingPathComponent("scripts/broker-accounts.py").path,
                "add-rider", ride, "--secrets", deployment.path("accounts"), "--static-secrets",
                deployment.path("secrets"), "--port", String(port), "--cafile", deployment.path("tls/ca.crt"),
                "--host", "localhost",
            ])
        guard code == 0 else { throw TimedOut(what: "broker-accounts.py add-rider to succeed: \(output)") }
    }

    static func shippedBroker(_ deployment: Deployment) async throws -> TestBroker {
        try await TestBroker(
            .deployed(
                configuration: BrokerSecurityTests.root.appendingPathComponent("config/mosquitto.conf").path,
                secrets: deployment.folder.path))
    }

    /// A client on the password listener over TLS, trusting `caFile`, under its account's name as client id (A4:
    /// the plugin binds each account to its name), or `clientID`.
    static func client(
        _ broker: TestBroker, caFile: String?, user: String?, password: String?, port: Int? = nil,
        certificate: (file: String, key: String)? = nil, clientID: String? = nil
    ) async throws -> MQTTClient {
        var configuration = MQTTConfiguration(
            host: "localhost", port: port ?? broker.port,
            clientID: clientID ?? (port == nil ? user : nil) ?? "dep-\(UUID().uuidString.prefix(8))",
            cleanStart: true)
        configuration.username = user
        configuration.password = password
        if let caFile {
            configuration.tls = .init(caFile: caFile, certificateFile: certificate?.file, keyFile: certificate?.key)
        }
        configuration.maximumReconnectDelay = .milliseconds(200)
        let client = try MQTTClient(configuration: configuration, logger: quietLogger)
        do {
            try await client.connect(timeout: .seconds(3))
        } catch {
            await client.disconnect()
            throw error
        }
        return client
    }

    @Test(
        "14, 30: the shipped broker over TLS: the worker signs in with its client certificate, dispatch and a rider (its account made on the running broker) with passwords; a ride moves"
    )
    func shippedDeploymentWorks() async throws {
        let deployment = try await Self.setUp()
        defer { try? FileManager.default.removeItem(at: deployment.folder) }
        let broker = try await Self.shippedBroker(deployment)
        defer { broker.stop() }
        let tlsPort = try #require(broker.tlsPort)
        try await Self.addRider("r-d1", deployment, port: broker.port)
        // The worker: certificate listener, verifying the broker's certificate against the deployment's CA.
        let worker = try WorkerProcess(
            url: "mqtts://localhost:\(tlsPort)", directory: broker.directory, workerID: "w-dep", interval: 1,
            extra: [
                "--set", "broker.caFile=\(deployment.path("tls/ca.crt"))",
                "--set", "broker.certificateFile=\(deployment.path("tls/worker.crt"))",
                "--set", "broker.keyFile=\(deployment.path("tls/worker.key"))",
            ])
        try await worker.start()  // killed when released, if the test stops early

        let dispatch = try await Self.client(
            broker, caFile: deployment.path("tls/ca.crt"), user: "dispatch",
            password: try deployment.password("dispatch"))
        let rider = try await Self.client(
            broker, caFile: deployment.path("tls/ca.crt"), user: "r-d1",
            password: try String(contentsOfFile: deployment.path("accounts/r-d1"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))
        let riderSees = BrokerSecurityTests.Inbox(rider)
        try await rider.subscribe("rides/r-d1/status", qos: .atLeastOnce)
        try await dispatch.publish(
            topic: "rides/r-d1/start", payload: Array(booking(ride: "r-d1", vehicle: "v-0042").utf8), qos: .atLeastOnce)
        try await BrokerSecurityTests.waitUntil("the rider's status, published by the worker over TLS") {
            riderSees.statuses("r-d1").contains { $0.phase == "confirmed" }
        }
        // The plugin's role for r-d1 is its own ride alone (A1): another ride's status is refused by SUBACK code.
        do {
            try await rider.subscribe("rides/r-other/status", qos: .atLeastOnce)
            Issue.record("r-d1 subscribed to another ride's status")
        } catch {
            #expect(DynamicSecurityTests.reasonCode(error) == DynamicSecurityTests.notAuthorized, "\(error)")
        }
        // The account the broker took from the certificate is the worker's: it wrote the ride's state, which
        // only the worker's account may (the ACL), and the log shows no refusal.
        let stateReader = try await Self.client(
            broker, caFile: deployment.path("tls/ca.crt"), user: "worker", password: nil, port: tlsPort,
            certificate: (deployment.path("tls/worker.crt"), deployment.path("tls/worker.key")))
        let states = BrokerSecurityTests.Inbox(stateReader)
        try await stateReader.subscribe("ridestatus/state/#", qos: .atLeastOnce)
        try await BrokerSecurityTests.waitUntil("the ride's retained state") {
            states.messages.contains { $0.topic.hasSuffix("/r-d1") && !$0.payload.isEmpty }
        }
        #expect(await worker.terminate().code == 0)
        for client in [dispatch, rider, stateReader] { await client.disconnect() }
    }

    @Test(
        "14: TLS refusals: a broker certificate from another CA, plain MQTT, no client certificate or one from another CA, anonymous, a wrong password"
    )
    func refusals() async throws {
        let deployment = try await Self.setUp()
        defer { try? FileManager.default.removeItem(at: deployment.folder) }
        let broker = try await Self.shippedBroker(deployment)
        defer { broker.stop() }
        let tlsPort = try #require(broker.tlsPort)
        let ca = deployment.path("tls/ca.crt")
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("other-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: other) }
        let stranger = try await TestCertificates.generate(in: other)
        let dispatchPassword = try deployment.password("dispatch")

        // The client checks the broker: trusting another CA, it does not connect, whatever its password.
        await #expect(throws: MQTTError.self, "a broker certificate from another CA") {
            _ = try await Self.client(
                broker, caFile: stranger.caCertificate.path, user: "dispatch", password: dispatchPassword)
        }
        // No plain MQTT on either port.
        await #expect(throws: MQTTError.self, "plain MQTT on the TLS port") {
            _ = try await Self.client(broker, caFile: nil, user: "dispatch", password: dispatchPassword)
        }
        // The password listener: no anonymous client, no wrong password.
        await #expect(throws: MQTTError.self, "anonymous") {
            _ = try await Self.client(broker, caFile: ca, user: nil, password: nil)
        }
        await #expect(throws: MQTTError.self, "a wrong password") {
            _ = try await Self.client(broker, caFile: ca, user: "dispatch", password: "not-the-password")
        }
        // The workers' listener: a client certificate signed by the deployment's CA, nothing else.
        await #expect(throws: MQTTError.self, "no client certificate") {
            _ = try await Self.client(broker, caFile: ca, user: "worker", password: nil, port: tlsPort)
        }
        await #expect(throws: MQTTError.self, "a client certificate from another CA") {
            _ = try await Self.client(
                broker, caFile: ca, user: "worker", password: nil, port: tlsPort,
                certificate: (stranger.serverCertificate.path, stranger.serverKey.path))
        }
        // And the right ones get in: the refusals above are for what they say.
        let dispatch = try await Self.client(broker, caFile: ca, user: "dispatch", password: dispatchPassword)
        let worker = try await Self.client(
            broker, caFile: ca, user: nil, password: nil, port: tlsPort,
            certificate: (deployment.path("tls/worker.crt"), deployment.path("tls/worker.key")))
        #expect(dispatch.isConnected && worker.isConnected)
        await dispatch.disconnect()
        await worker.disconnect()
    }
}
