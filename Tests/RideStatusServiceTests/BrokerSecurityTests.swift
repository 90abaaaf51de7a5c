import Foundation
import Locking
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

import struct RideStatusKit.RideTopics

/// Issue 14 against a real mosquitto running the accounts and ACL that `scripts/broker-security.py` makes from
/// `config/security/accounts.yaml`: each role does its job and nothing more.
@Suite("Broker security: roles and ACLs on mosquitto", .serialized)
struct BrokerSecurityTests {
    /// The generated files and each account's password.
    struct Accounts {
        let folder: URL
        func password(_ account: String) throws -> String {
            try String(contentsOf: folder.appendingPathComponent("secrets/\(account)"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var options: TestBroker.Options {
            .secured(
                passwordFile: folder.appendingPathComponent("passwords").path,
                aclFile: folder.appendingPathComponent("acl").path)
        }
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")

    static func makeAccounts(riders: [String]) async throws -> Accounts {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("security-\(UUID().uuidString)")
        let (code, output) = try await ChildProcess.run(
            "/usr/bin/env",
            [
                "python3", root.appendingPathComponent("scripts/broker-security.py").path, "--accounts",
                root.appendingPathComponent("config/security/accounts.yaml").path, "--out", folder.path,
            ] + riders.flatMap { ["--rider", $0] })
        guard code == 0 else { throw TimedOut(what: "broker-security.py to succeed: \(output)") }
        return Accounts(folder: folder)
    }

    static func client(_ broker: TestBroker, user: String?, password: String?) async throws -> MQTTClient {
        var configuration = MQTTConfiguration(
            host: broker.host, port: broker.port, clientID: user ?? "sec-\(UUID().uuidString.prefix(8))",
            cleanStart: true)
        configuration.username = user
        configuration.password = password
        let client = try MQTTClient(configuration: configuration, logger: quietLogger)
        try await client.connect(timeout: .seconds(5))
        return client
    }

    /// The worker signed in with its generated account, its password read from its secret file.
    static func worker(
        _ broker: TestBroker, _ accounts: Accounts, id: String, interval: Double = 1, extra: [String] = []
    ) throws -> WorkerProcess {
        try WorkerProcess(
            url: "mqtt://worker@\(broker.host):\(broker.port)", directory: broker.directory, workerID: id,
            interval: interval,
            extra: ["--set", "broker.passwordFile=\(accounts.folder.appendingPathComponent("secrets/worker").path)"]
                + extra)
    }

    /// Collects what a client receives.
    final class Inbox: Sendable {
        private let received = Locked<[MQTTMessage]>([])
        private let task: Task<Void, Never>

        init(_ client: MQTTClient) {
            let received = self.received
            task = Task { for await message in client.messages { received.withLock { $0.append(message) } } }
        }

        deinit { task.cancel() }

        var messages: [MQTTMessage] { received.withLock { $0 } }

        func statuses(_ ride: String) -> [JSONValue] {
            messages.filter { $0.topic == "rides/\(ride)/status" && !$0.payload.isEmpty }.compactMap {
                try? JSONParser.parse($0.payload)
            }
        }
    }

    static func waitUntil(_ what: String, timeout: Double = 10, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw TimedOut(what: what) }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test(
        "14: anonymous and wrong passwords refused; a vehicle moves only itself; a rider sees and asks only its ride; only the worker writes state, statuses and priors (E1)"
    )
    func rolesDoTheirJobOnly() async throws {
        let accounts = try await Self.makeAccounts(riders: ["r-1", "r-2"])
        defer { try? FileManager.default.removeItem(at: accounts.folder) }
        try await withTestBroker(accounts.options) { broker in
            // Nobody gets in without an account (a typed error, not a hang).
            await #expect(throws: MQTTError.self) { _ = try await Self.client(broker, user: nil, password: nil) }
            await #expect(throws: MQTTError.self) {
                _ = try await Self.client(broker, user: "dispatch", password: "not-the-password")
            }

            // Sharing no priors of its own, so that any priors it reads back can only be someone else's.
            let worker = try Self.worker(
                broker, accounts, id: "w-sec", extra: ["--set", "rides.priorsShareInterval=0"])
            try await worker.start()
            let dispatch = try await Self.client(broker, user: "dispatch", password: try accounts.password("dispatch"))
            let seen = Inbox(dispatch)
            try await dispatch.subscribe("rides/+/status", qos: .atLeastOnce)
            for (ride, vehicle) in [("r-1", "v-0042"), ("r-2", "v-0043")] {
                try await dispatch.publish(
                    topic: "rides/\(ride)/start", payload: Array(booking(ride: ride, vehicle: vehicle).utf8),
                    qos: .atLeastOnce)
            }
            try await Self.waitUntil("both rides confirmed (dispatch reads every status)") {
                !seen.statuses("r-1").isEmpty && !seen.statuses("r-2").isEmpty
            }

            // Vehicle v-0043 cannot publish as v-0042: the fix never reaches the worker.
            let impostor = try await Self.client(broker, user: "v-0043", password: try accounts.password("v-0043"))
            try? await impostor.publish(
                topic: "fleet/vehicles/v-0042/position", payload: Array(fix("v-0042", pickupPoint).utf8),
                qos: .atLeastOnce)
            try await Task.sleep(for: .seconds(1))
            func accepted() -> Double {
                let text = httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body ?? ""
                return text.split(separator: "\n").first { $0.hasPrefix("ridestatus_fixes_accepted_total ") }
                    .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
            }
            #expect(accepted() == 0, "the impostor's fix was dropped by the broker")
            #expect(!seen.statuses("r-1").contains { $0.phase == "pickup" || $0.phase == "approachingPickup" })
            let genuine = try await Self.client(broker, user: "v-0042", password: try accounts.password("v-0042"))
            try await genuine.publish(
                topic: "fleet/vehicles/v-0042/position", payload: Array(fix("v-0042", pickupPoint).utf8),
                qos: .atLeastOnce)
            try await Self.waitUntil("the vehicle's own fix accepted") { accepted() == 1 }

            // Rider r-1 reads only its own ride, and cannot cancel another.
            let rider = try await Self.client(broker, user: "r-1", password: try accounts.password("r-1"))
            let riderSees = Inbox(rider)
            try? await rider.subscribe("rides/+/status", qos: .atLeastOnce)
            try? await rider.subscribe("rides/r-2/status", qos: .atLeastOnce)
            try await Task.sleep(for: .seconds(2.5))
            #expect(!riderSees.statuses("r-1").isEmpty, "its own ride's statuses")
            #expect(riderSees.statuses("r-2").isEmpty, "never another ride's")
            try? await rider.publish(topic: "rides/r-2/cancel", payload: Array(#"{"canceledBy":"user"}"#.utf8))
            try await Task.sleep(for: .seconds(1.5))
            #expect(seen.statuses("r-2").last?.phase != "completed", "the rider's cancel never reached the worker")
            try await dispatch.publish(
                topic: "rides/r-2/cancel", payload: Array(#"{"canceledBy":"service"}"#.utf8), qos: .atLeastOnce)
            try await Self.waitUntil("dispatch's cancel carried out") {
                seen.statuses("r-2").last?.phase == "completed"
            }

            // Nobody but the worker writes ride state or statuses: a deletion and a forged status are dropped.
            try? await dispatch.publish(
                topic: RideTopics().state(ride: "r-1"), payload: [], qos: .atLeastOnce, retain: true)
            try? await dispatch.publish(
                topic: "rides/r-1/status", payload: Array(#"{"rideIdentifier":"r-1","sequence":1000000000000}"#.utf8),
                qos: .atLeastOnce, retain: true)
            // E1: forged priors, retained where a restart reads them back; and, as the control that the
            // restarted worker reads priors at all, a colleague's under the workers' own account.
            try? await dispatch.publish(
                topic: RideTopics().priors(key: AreaPriors.key(area: "")),
                payload: Array(
                    #"{"area":"","worker":"w-forger","at":"\#(Timestamps.format(Date()))","detourFactor":1.9,"rides":500,"legs":0}"#
                        .utf8), qos: .atLeastOnce, retain: true)
            let colleague = try await Self.client(broker, user: "worker", password: try accounts.password("worker"))
            try await colleague.publish(
                topic: RideTopics().priors(key: AreaPriors.key(area: "berlin")),
                payload: Array(
                    #"{"area":"berlin","worker":"w-colleague","at":"\#(Timestamps.format(Date()))","detourFactor":1.25,"rides":30,"legs":0}"#
                        .utf8), qos: .atLeastOnce, retain: true)
            try await Task.sleep(for: .seconds(1))
            #expect(!seen.statuses("r-1").contains { ($0.sequence ?? 0) >= 1_000_000_000_000 })
            await worker.kill()
            let before = seen.statuses("r-1").compactMap(\.sequence).max() ?? 0
            try await worker.start()
            try await Self.waitUntil("r-1 resumes above its last sequence after a restart (L5)") {
                (seen.statuses("r-1").compactMap(\.sequence).max() ?? 0) > before
            }
            #expect(!worker.logText.contains("changed on the broker by another client"), "no forged write arrived")
            func priors(_ direction: String) -> Double {
                let text = httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body ?? ""
                return text.split(separator: "\n").first {
                    $0.hasPrefix("ridestatus_priors_total{direction=\"\(direction)\"} ")
                }.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
            }
            #expect(
                priors("adopted") == 1 && priors("refused") == 0,
                "only workers write priors: the colleague's was read back, dispatch's never reached the broker (E1)")
            for client in [dispatch, impostor, genuine, rider, colleague] { await client.disconnect() }
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test(
        "A3, P3, P4: under the generated ACL only the assigned vehicle's account moves a ride, a reassignment moves the right, and no vehicle writes another's topics"
    )
    func vehicleBoundEvents() async throws {
        let accounts = try await Self.makeAccounts(riders: [])
        defer { try? FileManager.default.removeItem(at: accounts.folder) }
        try await withTestBroker(accounts.options) { broker in
            let worker = try Self.worker(broker, accounts, id: "w-a3")
            try await worker.start()
            let dispatch = try await Self.client(broker, user: "dispatch", password: try accounts.password("dispatch"))
            let seen = Inbox(dispatch)
            try await dispatch.subscribe("rides/+/status", qos: .atLeastOnce)
            try await dispatch.subscribe("ridestatus/deadletter", qos: .atLeastOnce)
            try await dispatch.publish(
                topic: "rides/r-1/start", payload: Array(booking(ride: "r-1", vehicle: "v-0042").utf8),
                qos: .atLeastOnce)
            try await Self.waitUntil("r-1 confirmed") { seen.statuses("r-1").last?.phase == "confirmed" }
            func refusals(_ topic: String) -> [String] {
                seen.messages.filter { $0.topic == "ridestatus/deadletter" }.compactMap {
                    guard let letter = try? JSONParser.parse($0.payload), letter["topic"]?.stringValue == topic else {
                        return nil
                    }
                    return letter["reason"]?.stringValue
                }
            }
            func event(_ type: String) -> [UInt8] { Array(#"{"rideIdentifier":"r-1","type":"\#(type)"}"#.utf8) }

            // Another vehicle's account, on its own topic: the broker lets it in, the worker refuses it (A3).
            let other = try await Self.client(broker, user: "v-0043", password: try accounts.password("v-0043"))
            try await other.publish(topic: "fleet/vehicles/v-0043/event", payload: event("arrivedAtPickup"))
            try await Self.waitUntil("v-0043's event dead-lettered notAssignedVehicle") {
                refusals("fleet/vehicles/v-0043/event") == ["notAssignedVehicle"]
            }
            // On the assigned vehicle's topic, or dispatch's, the broker refuses it (PUBACK: not authorized).
            await #expect(throws: MQTTError.self, "v-0043 writing v-0042's event topic") {
                try await other.publish(topic: "fleet/vehicles/v-0042/event", payload: event("arrivedAtPickup"))
            }
            await #expect(throws: MQTTError.self, "a vehicle writing dispatch's event topic") {
                try await other.publish(topic: "rides/r-1/event", payload: Array(#"{"type":"arrivedAtPickup"}"#.utf8))
            }
            #expect(seen.statuses("r-1").last?.phase == "confirmed", "nothing moved the ride")

            // Reassigned to v-0043: the replaced vehicle's event is refused, the new one's applies.
            try await dispatch.publish(
                topic: "rides/r-1/assign",
                payload: Array(#"{"vehicleId":"v-0043","driver":{"displayName":"Bo K."}}"#.utf8),
                qos: .atLeastOnce)
            try await Self.waitUntil("the reassignment published") {
                seen.statuses("r-1").last?["driver"]?["displayName"]?.stringValue == "Bo K."
            }
            let replaced = try await Self.client(broker, user: "v-0042", password: try accounts.password("v-0042"))
            try await replaced.publish(topic: "fleet/vehicles/v-0042/event", payload: event("arrivedAtPickup"))
            try await Self.waitUntil("the replaced vehicle's event dead-lettered") {
                refusals("fleet/vehicles/v-0042/event") == ["notAssignedVehicle"]
            }
            #expect(seen.statuses("r-1").last?.phase == "confirmed")
            try await other.publish(topic: "fleet/vehicles/v-0043/event", payload: event("arrivedAtPickup"))
            try await Self.waitUntil("P3 by the assigned vehicle") { seen.statuses("r-1").last?.phase == "pickup" }
            try await other.publish(topic: "fleet/vehicles/v-0043/event", payload: event("passengerOnBoard"))
            try await Self.waitUntil("P4 by the assigned vehicle") { seen.statuses("r-1").last?.phase == "ongoing" }
            #expect(refusals("fleet/vehicles/v-0043/event") == ["notAssignedVehicle"], "its later events applied")
            for client in [dispatch, other, replaced] { await client.disconnect() }
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test(
        "14, A1, L7, 3.4: under the ACL a rider gets its own status/get and quote replies; another ride's it cannot ask"
    )
    func repliesUnderTheACL() async throws {
        let accounts = try await Self.makeAccounts(riders: ["r-1", "r-2"])
        defer { try? FileManager.default.removeItem(at: accounts.folder) }
        try await withTestBroker(accounts.options) { broker in
            let catalog = Self.root.appendingPathComponent("config/ride-options.yaml").path
            let worker = try Self.worker(
                broker, accounts, id: "w-rep", interval: 5, extra: ["--set", "rideOptions.catalog=\(catalog)"])
            try await worker.start()
            let dispatch = try await Self.client(broker, user: "dispatch", password: try accounts.password("dispatch"))
            for ride in ["r-1", "r-2"] {
                try await dispatch.publish(
                    topic: "rides/\(ride)/start", payload: Array(booking(ride: ride, vehicle: nil).utf8),
                    qos: .atLeastOnce)
            }
            let rider = try await Self.client(broker, user: "r-1", password: try accounts.password("r-1"))
            let inbox = Inbox(rider)
            try await rider.subscribe("replies/r-1/#", qos: .atLeastOnce)
            try await rider.subscribe("rides/r-1/status", qos: .atLeastOnce)
            try await Self.waitUntil("r-1 started") { !inbox.statuses("r-1").isEmpty }
            // Its own ride's status (L7), on a reply topic only it may read.
            try await rider.publish(
                topic: "rides/r-1/status/get", payload: [],
                properties: MQTTProperties(responseTopic: "replies/r-1/status", correlationData: [1]))
            try await Self.waitUntil("r-1's status/get answered") {
                inbox.messages.contains { $0.topic == "replies/r-1/status" }
            }
            let reply = try #require(inbox.messages.first { $0.topic == "replies/r-1/status" })
            #expect((try JSONParser.parse(reply.payload))["rideIdentifier"]?.stringValue == "r-1")
            // A quote (3.4).
            try await rider.publish(
                topic: "ride-options/request",
                payload: Array(
                    #"{"pickupLocation":{"latitude":52.5219,"longitude":13.4132},"dropOffLocation":{"latitude":52.5096,"longitude":13.3759}}"#
                        .utf8),
                properties: MQTTProperties(responseTopic: "replies/r-1/quote", correlationData: [2]))
            try await Self.waitUntil("the quote") { inbox.messages.contains { $0.topic == "replies/r-1/quote" } }
            // Another ride's status it may not even ask for: the broker drops the request.
            try? await rider.publish(
                topic: "rides/r-2/status/get", payload: [],
                properties: MQTTProperties(responseTopic: "replies/r-1/other", correlationData: [3]))
            try await Task.sleep(for: .seconds(1.5))
            #expect(!inbox.messages.contains { $0.topic == "replies/r-1/other" })
            for client in [dispatch, rider] { await client.disconnect() }
            #expect(await worker.terminate().code == 0)
        }
    }
}
