import Foundation
import MQTTClient
import MosquittoTesting
import RideAccess
import RideDomain
import Testing

@testable import RideStatusService

/// Share links on real workers and a real mosquitto: a link shows its one ride on every worker of a
/// group and across a handover, refuses the rest with reasons, and never reaches a log.
@Suite("Share links end to end", .serialized)
struct ShareLinkEndToEndTests {
    /// A signing key and the key set file the workers read.
    static func keys(in directory: URL) async throws -> (signer: ShareLinks.Signer, keySet: String) {
        let (privateJWK, publicJWK) = try ShareLinks.generateKey(id: "k-test")
        let keySet = directory.appendingPathComponent("share-keys.json")
        try #"{"keys":[\#(publicJWK)]}"#.write(to: keySet, atomically: true, encoding: .utf8)
        return (try await ShareLinks.Signer(privateJWK: privateJWK), keySet.path)
    }

    static func get(_ worker: WorkerProcess, _ path: String, token: String? = nil, seconds: Double = 5)
        -> (status: Int, headers: [String: String], body: String)?
    {
        httpRequest(
            host: "127.0.0.1", port: worker.metricsPort, path: path,
            headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:], seconds: seconds)
    }

    static func reason(_ body: String) -> String? {
        guard let json = try? JSONParser.parse(Array(body.utf8)) else { return nil }
        return json["reason"]?.stringValue
    }

    @Test(
        "30, A1: a share link shows its ride on every worker of a group and after its owner leaves; other rides, the fleet and bad tokens are refused with reasons; no token in the logs"
    )
    func groupAndHandover() async throws {
        try await withTestBroker { broker in
            let (signer, keySet) = try await Self.keys(in: broker.directory)
            let extra = ["--set", "http.shareKeys=\(keySet)"]
            let workers = try ["w-sa", "w-sb"].map {
                try WorkerProcess(broker: broker, workerID: $0, interval: 1, extra: extra)
            }
            for worker in workers { try await worker.start() }
            try await GroupEndToEndTests.waitForMembers(2, of: workers)
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            let feeder = try await Observer(broker, filters: [])
            let rides = (0..<8).map { "r-sh\($0)" }
            for ride in rides {
                try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
            defer { feeding.cancel() }
            try await observer.waitFor("a status of every ride", timeout: 15) { _ in
                rides.allSatisfy { !observer.statuses($0).isEmpty }
            }
            var owner: [String: String] = [:]
            for status in GroupEndToEndTests.seen(observer.timedMessages) where status.worker != nil {
                owner[status.ride] = status.worker
            }
            #expect(Set(owner.values).count == 2, "both workers own rides: \(owner)")
            let shared = rides[0]
            let other = rides.first { owner[$0] != owner[shared] } ?? rides[1]
            let now = Date()
            let token = try await signer.token(ride: shared, expires: now.addingTimeInterval(600), now: now)

            for worker in workers {
                let owns = owner[shared] == worker.workerID
                // The page: one ride's, never cached, no referrer, not framed.
                let page = try #require(Self.get(worker, "/share/\(token)"))
                #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true)
                #expect(page.headers["referrer-policy"] == "no-referrer")
                #expect(page.headers["cache-control"] == "no-store")
                #expect(page.body.contains("/share.js"))
                // Its status, from the retained one on either worker (the owner's engine is not asked).
                let status = try #require(Self.get(worker, "/share/\(token)/status"))
                #expect(status.status == 200, "\(worker.workerID) owns: \(owns); \(status.body)")
                #expect(status.body.contains(#""rideIdentifier":"\#(shared)""#))
                // The read API with the token: this ride only.
                let one = try #require(Self.get(worker, "/v1/rides/\(shared)", token: token))
                #expect(one.status == 200 && one.body.contains(#""rideIdentifier":"\#(shared)""#))
                let list = try #require(Self.get(worker, "/v1/rides", token: token))
                #expect(list.status == 200 && !list.body.contains(other), "the list holds no other ride")
                #expect(list.body.contains(#""total":\#(owns ? 1 : 0)"#), "\(list.body)")
                let refusedRide = try #require(Self.get(worker, "/v1/rides/\(other)", token: token))
                #expect(refusedRide.status == 403 && Self.reason(refusedRide.body) == "otherRide")
                for path in ["/v1/workers", "/v1/vehicles"] {
                    let fleet = try #require(Self.get(worker, path, token: token))
                    #expect(fleet.status == 403 && Self.reason(fleet.body) == "fleetWide", "\(path)")
                }
                // The live feed: this ride's statuses, nothing of the others.
                let live = try #require(Self.get(worker, "/share/\(token)/live", seconds: 2.5))
                #expect(live.status == 200 && live.headers["content-type"] == "text/event-stream")
                #expect(live.body.contains("event: status") && live.body.contains(#""rideIdentifier":"\#(shared)""#))
                #expect(!rides.filter { $0 != shared }.contains { live.body.contains(#""\#($0)""#) })
            }

            // Bad tokens: each refused with 401, its reason and the RFC 6750 challenge.
            let (stranger, _) = try await Self.keys(in: FileManager.default.temporaryDirectory)
            let forged = try await stranger.token(ride: shared, expires: now.addingTimeInterval(600), now: now)
            let expired = try await signer.token(
                ride: shared, expires: now.addingTimeInterval(-60), now: now.addingTimeInterval(-3_600))
            for (bad, reason) in [(forged, "badSignature"), (expired, "expiredToken"), ("nonsense", "malformedToken")] {
                let answer = try #require(Self.get(workers[0], "/share/\(bad)/status"))
                #expect(answer.status == 401 && Self.reason(answer.body) == reason, "\(answer.body)")
                let api = try #require(Self.get(workers[0], "/v1/rides/\(shared)", token: bad))
                #expect(api.status == 401 && Self.reason(api.body) == reason)
                #expect(api.headers["www-authenticate"]?.contains("invalid_token") == true)
            }

            // The owner leaves (SIGTERM): the link goes on showing the ride from its new owner.
            let leaving = try #require(workers.first { $0.workerID == owner[shared] })
            let staying = try #require(workers.first { $0.workerID != owner[shared] })
            #expect(await leaving.terminate().code == 0)
            let left = Date()
            try await observer.waitFor("\(shared) published by its new owner", timeout: 15) { _ in
                GroupEndToEndTests.seen(observer.timedMessages).contains {
                    $0.ride == shared && $0.at > left && $0.worker == staying.workerID
                }
            }
            let live = try #require(Self.get(staying, "/share/\(token)/live", seconds: 2.5))
            #expect(live.body.contains("event: status") && live.body.contains(#""rideIdentifier":"\#(shared)""#))
            let after = try #require(Self.get(staying, "/share/\(token)/status"))
            #expect(after.status == 200)

            // Never logged: neither the link's token nor a refused one.
            for worker in workers {
                #expect(!worker.logText.contains(token) && !worker.logText.contains(forged), "\(worker.workerID)")
            }
            // L8 with share links being read: the share connection's streams end at once, not at its next sweep.
            let exit = await staying.terminate()
            #expect(exit.code == 0 && exit.seconds < 3, "exit \(String(describing: exit.code)) in \(exit.seconds) s")
        }
    }

    @Test(
        "30: with an operator token (a reverse proxy may stand in front of loopback) /v1 answers only with a token: 401 without one, everything with the operator's, one ride with a share token"
    )
    func exposed() async throws {
        try await withTestBroker { broker in
            let (signer, keySet) = try await Self.keys(in: broker.directory)
            let operatorFile = broker.directory.appendingPathComponent("operator-token")
            let operatorToken = "operator-\(UUID().uuidString)"
            try operatorToken.write(to: operatorFile, atomically: true, encoding: .utf8)
            let worker = try WorkerProcess(
                broker: broker, workerID: "w-exposed", interval: 1,
                extra: ["--set", "http.shareKeys=\(keySet)", "--set", "http.operatorTokenFile=\(operatorFile.path)"])
            try await worker.start()
            let feeder = try await Observer(broker, filters: [])
            try await feeder.publish("rides/r-x1/start", booking(ride: "r-x1", vehicle: "v-x1"))
            try await feeder.publish("rides/r-x2/start", booking(ride: "r-x2", vehicle: "v-x2"))
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, Self.get(worker, "/v1/rides", token: operatorToken)?.body.contains("r-x2") != true
            {
                try await Task.sleep(for: .milliseconds(100))
            }

            let anonymous = try #require(Self.get(worker, "/v1/rides"))
            #expect(anonymous.status == 401 && Self.reason(anonymous.body) == "unauthorized")
            #expect(anonymous.headers["www-authenticate"] == #"Bearer realm="ride-status""#)
            let live = try #require(Self.get(worker, "/v1/live", seconds: 1))
            #expect(live.status == 401)
            let all = try #require(Self.get(worker, "/v1/rides", token: operatorToken))
            #expect(all.status == 200 && all.body.contains("r-x1") && all.body.contains("r-x2"))
            let link = try await signer.token(ride: "r-x1", expires: Date().addingTimeInterval(60), now: Date())
            let one = try #require(Self.get(worker, "/v1/rides", token: link))
            #expect(one.status == 200 && one.body.contains("r-x1") && !one.body.contains("r-x2"))
            // The operator's probes and metrics stay open.
            #expect(Self.get(worker, "/readyz")?.status == 200)
            #expect(Self.get(worker, "/metrics")?.status == 200)
            #expect(!worker.logText.contains(operatorToken) && !worker.logText.contains(link))
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("30: share-key and share-link make a key set a worker takes and a link it opens")
    func commands() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("share-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let privateKey = folder.appendingPathComponent("k1.jwk").path
        let keySet = folder.appendingPathComponent("keys.json").path
        let made = try await ChildProcess.run(
            WorkerProcess.executable, ["share-key", "--id", "k1", "--private-key", privateKey, "--key-set", keySet])
        #expect(made.code == 0, "\(made.output)")
        let mode = try FileManager.default.attributesOfItem(atPath: privateKey)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let again = try await ChildProcess.run(
            WorkerProcess.executable, ["share-key", "--id", "k1", "--private-key", privateKey, "--key-set", keySet])
        #expect(again.code != 0, "a key is never overwritten, nor an id repeated")
        let second = try await ChildProcess.run(
            WorkerProcess.executable,
            ["share-key", "--id", "k2", "--private-key", privateKey + ".2", "--key-set", keySet])
        #expect(second.code == 0)
        let printed = try await ChildProcess.run(
            WorkerProcess.executable,
            ["share-link", "--ride", "r-cmd", "--private-key", privateKey, "--expires-in", "90m"])
        #expect(printed.code == 0, "\(printed.output)")
        let url = try #require(
            printed.output.split(separator: "\n").first { $0.hasPrefix("http://127.0.0.1:9466/share/") })
        let token = String(url.dropFirst("http://127.0.0.1:9466/share/".count))
        let verifier = try await ShareLinks.Verifier(jwks: try String(contentsOfFile: keySet, encoding: .utf8))
        #expect(verifier.keyIDs == ["k1", "k2"])
        guard case .success(let grant) = await verifier.verify(token, now: Date()) else {
            Issue.record("the printed link does not verify")
            return
        }
        #expect(grant.ride == "r-cmd")
        #expect(abs(grant.expires.timeIntervalSinceNow - 5_400) < 60)
        let refused = try await ChildProcess.run(
            WorkerProcess.executable, ["share-link", "--ride", "r/1", "--private-key", privateKey])
        #expect(refused.code != 0, "I1: no link for a ride that is not an identifier")
    }
}
