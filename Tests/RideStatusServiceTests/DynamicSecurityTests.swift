import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

/// Issue 30: accounts created and removed while mosquitto runs, through its dynamic security plugin and
/// `scripts/broker-accounts.py`, with the roles of `scripts/broker_roles.py`. Isolation is read from the broker's
/// reason codes (SUBACK and PUBACK 0x87, CONNACK refused), never from a wait that times out.
@Suite("Accounts changed while the broker runs (dynamic security)", .serialized)
struct DynamicSecurityTests {
    /// Rider accounts per run: about 100 in CI; `make test-accounts RIDERS=1000` for the long run.
    static let riders = Int(ProcessInfo.processInfo.environment["ACCOUNTS_RIDERS"] ?? "") ?? 100
    static let notAuthorized: Int32 = 0x87

    /// Runs `scripts/broker-accounts.py` against the shipped broker of `deployment` as its accounts admin and returns
    /// what it printed; a failure is the test's.
    @discardableResult
    static func accounts(
        _ arguments: [String], _ deployment: DeploymentSecurityTests.Deployment, port: Int
    ) async throws -> String {
        let script = BrokerSecurityTests.root.appendingPathComponent("scripts/broker-accounts.py").path
        let (code, output) = try await ChildProcess.run(
            "/usr/bin/env",
            ["python3", script] + arguments + [
                "--secrets", deployment.path("accounts"), "--static-secrets", deployment.path("secrets"),
                "--port", "\(port)", "--cafile", deployment.path("tls/ca.crt"), "--host", "localhost",
            ])
        guard code == 0 else {
            throw TimedOut(what: "broker-accounts.py \(arguments.first ?? "") to succeed: \(output)")
        }
        return output
    }

    static func password(_ account: String, _ deployment: DeploymentSecurityTests.Deployment) throws -> String {
        try String(contentsOfFile: deployment.path("accounts/\(account)"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The reason code of a refusal, or nil for another error.
    static func reasonCode(_ error: any Error) -> Int32? {
        switch error as? MQTTError {
        case .rejected(_, let code, _)?, .connectionRefused(let code, _)?: code
        default: nil
        }
    }

    @Test(
        "14, A1: rider accounts created and removed while the worker serves their rides, no broker restart; each reads only its own ride (SUBACK, PUBACK and CONNACK codes)"
    )
    func ridersComeAndGo() async throws {
        let deployment = try await DeploymentSecurityTests.setUp()
        defer { try? FileManager.default.removeItem(at: deployment.folder) }
        let ca = deployment.path("tls/ca.crt")
        let broker = try await DeploymentSecurityTests.shippedBroker(deployment)
        defer { broker.stop() }
        do {
            let pid = try #require(broker.pid)
            let tlsPort = try #require(broker.tlsPort)
            // The worker by its certificate, as shipped (A4: no worker account on the password listener).
            let worker = try WorkerProcess(
                url: "mqtts://localhost:\(tlsPort)", directory: broker.directory, workerID: "w-dyn", interval: 5,
                extra: [
                    "--set", "broker.caFile=\(ca)",
                    "--set", "broker.certificateFile=\(deployment.path("tls/worker.crt"))",
                    "--set", "broker.keyFile=\(deployment.path("tls/worker.key"))",
                ])
            try await worker.start()
            let dispatch = try await DeploymentSecurityTests.client(
                broker, caFile: ca, user: "dispatch", password: try deployment.password("dispatch"))
            let seen = BrokerSecurityTests.Inbox(dispatch)
            try await dispatch.subscribe("rides/+/status", qos: .atLeastOnce)
            let rides = (0..<Self.riders).map { "r-acc-\($0)" }
            for ride in rides {
                try await dispatch.publish(
                    topic: "rides/\(ride)/start", payload: Array(booking(ride: ride, vehicle: nil).utf8),
                    qos: .atLeastOnce)
            }
            try await BrokerSecurityTests.waitUntil("every ride published", timeout: 60) {
                rides.allSatisfy { !seen.statuses($0).isEmpty }
            }

            // Dispatch issues the rider accounts while the worker serves the rides: one request, no reload.
            let started = Date()
            try await Self.accounts(["add-rider"] + rides, deployment, port: broker.port)
            print("dynamic security: \(rides.count) rider accounts created in \(Date().timeIntervalSince(started)) s")
            var checked = 0
            for (index, ride) in rides.enumerated() {
                let rider = try await DeploymentSecurityTests.client(
                    broker, caFile: ca, user: ride, password: try Self.password(ride, deployment))
                let inbox = BrokerSecurityTests.Inbox(rider)
                try await rider.subscribe("rides/\(ride)/status", qos: .atLeastOnce)
                try await BrokerSecurityTests.waitUntil("\(ride) reads its own retained status") {
                    !inbox.statuses(ride).isEmpty
                }
                let other = rides[(index + 1) % rides.count]
                do {
                    try await rider.subscribe("rides/\(other)/status", qos: .atLeastOnce)
                    Issue.record("\(ride) subscribed to \(other)'s status")
                } catch {
                    #expect(Self.reasonCode(error) == Self.notAuthorized, "SUBACK for another ride: \(error)")
                }
                do {
                    try await rider.publish(topic: "rides/\(other)/status/get", payload: [])
                    Issue.record("\(ride) asked for \(other)'s status")
                } catch {
                    #expect(Self.reasonCode(error) == Self.notAuthorized, "PUBACK for another ride: \(error)")
                }
                #expect(inbox.messages.allSatisfy { $0.topic == "rides/\(ride)/status" }, "\(ride) saw only its ride")
                await rider.disconnect()
                checked += 1
            }
            #expect(checked == rides.count)

            // At the rides' end dispatch removes the accounts: a rider still connected is cut off at once, and no
            // removed rider signs in again.
            let lingering = try await DeploymentSecurityTests.client(
                broker, caFile: ca, user: rides[0], password: try Self.password(rides[0], deployment))
            let lingeringEvents = Task {
                for await event in lingering.events { if case .disconnected = event { return true } }
                return false
            }
            let passwords = try rides.map { try Self.password($0, deployment) }
            try await Self.accounts(["remove-rider"] + rides, deployment, port: broker.port)
            #expect(await lingeringEvents.value, "the connected rider was disconnected by the removal")
            for (ride, password) in zip(rides, passwords).prefix(10) {
                do {
                    _ = try await DeploymentSecurityTests.client(broker, caFile: ca, user: ride, password: password)
                    Issue.record("\(ride) signed in after its removal")
                } catch {
                    #expect(Self.reasonCode(error) == Self.notAuthorized, "CONNACK after the removal: \(error)")
                }
            }
            #expect(broker.pid == pid, "the broker was never restarted or reloaded")
            // The worker served on throughout: a ride still publishes after the removals.
            let before = seen.statuses(rides[0]).count
            try await BrokerSecurityTests.waitUntil("the worker still publishing", timeout: 15) {
                seen.statuses(rides[0]).count > before
            }
            await lingering.disconnect()
            await dispatch.disconnect()
            #expect(await worker.terminate().code == 0)
        }
    }
}
