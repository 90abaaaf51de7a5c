import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing
import WorkerGroup

/// A group of workers on a real 3-node NATS cluster (G1, G3, G4, G6, section "Groups of workers"), the workers in
/// MQTT 3.1.1 mode (NATS refuses MQTT 5) with the cluster's nodes to fail over to, and their bucket ownership
/// from a 3-member etcd (G6: a clustered broker's retained copies lag, so they cannot decide it). One broker node and one
/// worker are killed mid-run: no ride is lost, no ride's statuses are issued out of order, and only statuses
/// the broker held during its recovery arrive after newer ones (docs/CONTRACT-NOTES.md).
@Suite("Groups of workers on a real 3-node NATS cluster (MQTT 3.1.1)", .serialized)
struct GroupNATSClusterTests {
    @Test(
        "G1, G3, G6, C5: 3 workers granted by etcd, 30 rides; one broker node and one worker killed mid-run; no ride lost, none issued out of order"
    )
    func nodeAndWorkerKilled() async throws {
        // G1, G6: a group on a clustered broker takes its ownership from etcd (three members on loopback).
        let etcd = try await EtcdCluster()
        defer { etcd.stop() }
        let cluster = try await NATSCluster.start()
        // The workers' and nodes' logs of the last run stay in .build/test-output/nats-group (the cluster's
        // folder goes with it): a failure here depends on how NATS recovered, and its logs tell how.
        defer {
            let kept = checkoutRoot.appendingPathComponent(".build/test-output/nats-group")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
            for file in (try? FileManager.default.contentsOfDirectory(atPath: cluster.directory.path)) ?? []
            where file.hasSuffix(".log") {
                try? FileManager.default.copyItem(
                    at: cluster.directory.appendingPathComponent(file), to: kept.appendingPathComponent(file))
            }
            cluster.stop()
        }
        let interval = 2.0
        let ids = ["w-n0", "w-n1", "w-n2"]
        // Worker i starts on node i and fails over to the others in turn.
        let workers = try ids.indices.map { index in
            let urls = (0..<3).map { cluster.nodes[(index + $0) % 3].url }.joined(separator: ",")
            return try WorkerProcess(
                url: urls, directory: cluster.directory, workerID: ids[index], interval: interval,
                extra: ["--set", "broker.protocol=3.1.1"] + GroupEtcdTests.workerArguments(etcd))
        }
        for worker in workers { try await worker.start(timeout: 60) }
        try await GroupEndToEndTests.waitForMembers(3, of: workers, timeout: 30)

        let node0 = cluster.nodes[0]
        let node1 = cluster.nodes[1]
        let observer = try await Observer(
            host: "127.0.0.1", port: node0.mqttPort, filters: ["rides/+/status"], protocolVersion: .v311)
        let feeder = try await Observer(
            host: "127.0.0.1", port: node1.mqttPort, filters: [], protocolVersion: .v311)
        let rides = (0..<30).map { "r-n\($0)" }
        for ride in rides { try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)")) }
        let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
        defer { feeding.cancel() }
        do {
            try await observer.waitFor("a status of every ride", timeout: 30) { _ in
                rides.allSatisfy { observer.statuses($0).count >= 2 }
            }
        } catch {
            let short = rides.filter { observer.statuses($0).count < 2 }
            print("rides short of two statuses: \(short.map { "\($0) (\(observer.statuses($0).count))" })")
            for (id, worker) in zip(ids, workers) {
                print("--- \(id)'s log, last lines:\n\(worker.logText.suffix(4000))")
            }
            throw error
        }
        // G1: no ride is published by two workers; each owner per the rendezvous of the three.
        let ownership = Ownership(members: ids)
        #expect(Set(rides.map { ownership.owner(ofRide: $0)! }) == Set(ids), "every worker owns rides")

        // Mid-run: broker node 2 dies (its worker fails over to node 0), then worker w-n0 dies.
        cluster.kill(node: 2)
        let nodeKilledAt = Date()
        try await Task.sleep(for: .seconds(2))
        await workers[0].kill()
        let killedAt = Date()
        let survivors = Array(workers.dropFirst())
        // G6: ownership moves with the dead worker's etcd lease, not with its will (which NATS delivered up to
        // 30 s late after a node's loss): the rides are waited for, not the presences.
        // Every ride publishes again after the kill (G3: within 10 s + interval of it, or of the node's loss).
        try await observer.waitFor("every ride after the kills", timeout: 45) { _ in
            let after = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.at > killedAt }
            return Set(rides).isSubset(of: Set(after.map(\.ride)))
        }
        // Settled: from here on the subscriber must see every ride strictly in order again.
        try await Task.sleep(for: .seconds(3 * interval))
        let settledAt = Date()
        try await Task.sleep(for: .seconds(3 * interval))
        feeding.cancel()

        let all = GroupEndToEndTests.seen(observer.timedMessages)
        var late: [String] = []
        for ride in rides {
            // The same status received twice is a QoS 1 redelivery (at least once; NATS redelivers when a
            // stream's leader moves): a subscriber drops it, and so does this check.
            var received = Set<String>()
            let stream = all.filter { $0.ride == ride && $0.json != nil && $0.issuedAt != nil }.filter {
                received.insert("\($0.sequence ?? -1) \($0.issuedAt!.timeIntervalSince1970)").inserted
            }
            // C5, G3 at the source: in the order the workers issued them, across every owner, the sequence
            // strictly increases (a new owner continues a block above the ceiling it read).
            let byIssue = stream.enumerated().sorted {
                ($0.element.issuedAt!, $0.offset) < ($1.element.issuedAt!, $1.offset)
            }
            .map(\.element)
            let issued = byIssue.compactMap(\.sequence)
            // On failure, each status as sequence@issued+arrived, in seconds after the node's loss.
            let timeline = byIssue.map {
                let issuedAt = $0.issuedAt!.timeIntervalSince(nodeKilledAt)
                let arrived = $0.at.timeIntervalSince(nodeKilledAt)
                return "\($0.sequence ?? -1)@\(String(format: "%.2f+%.2f", issuedAt, arrived - issuedAt))"
            }
            #expect(
                zip(issued, issued.dropFirst()).allSatisfy { $0 < $1 },
                "C5, G3: \(ride) by issuedAt \(issued): \(timeline.joined(separator: " "))")
            // C5 as received. A worker's QoS 1 statuses that this broker held while it lost a node (up to
            // 13 s measured) can arrive after the statuses of the worker that took the ride over meanwhile: an
            // older sequence after a newer one, which a subscriber keeping the highest sequence drops
            // (docs/CONTRACT-NOTES.md, "C5 across a NATS node's loss"). Only then: once the group has settled,
            // nothing arrives out of order, and no late status is later than 30 s after the node's loss.
            var highest = 0
            for status in stream {
                guard let sequence = status.sequence else { continue }
                if sequence <= highest {
                    late.append("\(ride) \(sequence) after \(highest)")
                    #expect(status.at < settledAt, "C5: \(ride) \(sequence) after \(highest), once settled")
                    #expect(status.at.timeIntervalSince(nodeKilledAt) < 30, "C5: \(ride) late status")
                }
                highest = max(highest, sequence)
            }
            let last = try #require(stream.last)
            #expect(Date().timeIntervalSince(last.at) < 3 * interval + 2, "no ride lost: \(ride) still published")
        }
        if !late.isEmpty { print("statuses arriving after a newer one during the node's loss: \(late.count)") }
        let logs = survivors.map(\.logText).joined()
        // Not held to G3's 10 s + interval here: after losing a node, NATS delivered the dead worker's will to a
        // worker that had just failed over only once it had a new meta leader (measured 8 s after the kill;
        // the slowest ride resumed 11.6 s and 14.1 s after it in two runs).
        let resumed = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.at > killedAt }
        let slowest = rides.compactMap { ride in resumed.first { $0.ride == ride }?.at.timeIntervalSince(killedAt) }
        #expect(slowest.count == rides.count && slowest.max()! < 30, "every ride back: \(slowest.max() ?? -1) s")
        #expect(logs.contains("rides taken over (G3)"))
        #expect(!logs.contains("input rejected"), "nothing a worker wrote is refused")
        // C5, for the run's record: rides each survivor numbered above another worker that served them too (a
        // release notice's floor, or that worker's write under the same epoch while their views split).
        let lifted = survivors.map { worker in
            httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body
                .split(separator: "\n").first { $0.hasPrefix(#"ridestatus_handover_rides_total{direction="lifted"}"#) }
                .flatMap { $0.split(separator: " ").last.map(String.init) } ?? "none"
        }
        print("rides lifted above another worker's numbers (C5), per survivor: \(lifted)")
        for worker in survivors { #expect(await worker.terminate().code == 0) }
        let terminatedAt = Date()
        // C5: whatever arrived late, the retained status of every ride is the newest one. A NATS node answers
        // retained reads from a cache its consumer of the retained-message stream keeps current, and after another
        // node's loss that cache can lag (docs/research/nats-cluster.md). So a ride's newest status must be
        // retained on a live node: node 0, else node 1, else node 0 again 5 s later. QoS 0: node 2 is still down
        // (see Observer's init). The survivors stop one after the other, so the second takes the first's rides
        // over: it must number them above what the first showed (the release floors, CONTRACT-NOTES.md).
        func retained(on node: NATSCluster.Node) async throws -> [String: Int] {
            let reader = try await Observer(
                host: "127.0.0.1", port: node.mqttPort, filters: ["rides/+/status"], protocolVersion: .v311,
                qos: .atMostOnce)
            try await reader.waitFor("every retained status", timeout: 15) { _ in
                rides.allSatisfy { !reader.statuses($0).isEmpty }
            }
            await reader.stop()
            return Dictionary(uniqueKeysWithValues: rides.map { ($0, reader.statuses($0).first?.sequence ?? -1) })
        }
        let final = GroupEndToEndTests.seen(observer.timedMessages)
        let newest = Dictionary(
            uniqueKeysWithValues: rides.map { ride in
                (ride, final.filter { $0.ride == ride }.compactMap(\.sequence).max() ?? 0)
            })
        var reads = [try await retained(on: node0)]
        if rides.contains(where: { reads[0][$0] != newest[$0] }) {
            reads.append(try await retained(on: node1))
            try await Task.sleep(for: .seconds(5))
            reads.append(try await retained(on: node0))
            for ride in rides where reads[0][ride] != newest[ride] {
                print(
                    "retained \(ride): node 0 \(reads[0][ride]!), node 1 \(reads[1][ride]!), node 0 5 s later \(reads[2][ride]!), newest \(newest[ride]!)"
                )
                // What the observer received last, as sequence@issued+arrived (s after the node's loss), r = retained.
                let tail = observer.timedMessages.filter { $0.message.topic == "rides/\(ride)/status" }.suffix(6).map {
                    item -> String in
                    let json = try? JSONParser.parse(item.message.payload)
                    let issued = json?["issuedAt"]?.stringValue.flatMap { Timestamps.parse($0) }
                    return "\(json?.sequence ?? -1)@"
                        + String(
                            format: "%.2f+%.2f", issued?.timeIntervalSince(nodeKilledAt) ?? -1,
                            item.at.timeIntervalSince(issued ?? item.at)) + (item.message.retain ? "r" : "")
                }
                print("  last received: \(tail.joined(separator: " "))")
            }
            print("survivors terminated at \(String(format: "%.2f", terminatedAt.timeIntervalSince(nodeKilledAt))) s")
            for (id, worker) in zip(ids.dropFirst(), survivors) {
                let lines = worker.logText.split(separator: "\n").filter {
                    $0.contains("(G3)") || $0.contains("stopp") || $0.contains("releas") || $0.contains("shut")
                }
                print("--- \(id):\n\(lines.suffix(12).joined(separator: "\n"))")
            }
        }
        for ride in rides {
            #expect(
                reads.contains { $0[ride] == newest[ride] }, "C5: \(ride)'s retained status is the newest on no node")
        }
        await observer.stop()
        await feeder.stop()
    }
}
