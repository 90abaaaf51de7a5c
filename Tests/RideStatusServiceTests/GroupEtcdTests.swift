import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing
import WorkerGroup

/// G6 end to end: three worker processes take their buckets from a real 3-member etcd (`group.authority: etcd`),
/// on a real mosquitto. Every status's sequence carries its grant's epoch; a killed worker's rides come back
/// from the others under a newer epoch; a worker paused past its etcd lease publishes nothing for the rides
/// it lost when it resumes, so no ride's received or retained sequence ever goes back.
@Suite("Groups with etcd as their authority (G6)", .serialized, .timeLimit(.minutes(4)))
struct GroupEtcdTests {
    static let leaseTTL = 4.0

    static func workerArguments(_ etcd: EtcdCluster) -> [String] {
        [
            "--set", "group.authority=etcd", "--set", "group.etcdEndpoints=\(etcd.endpoints.joined(separator: ","))",
            "--set", "group.etcdLeaseTTL=\(Int(leaseTTL))",
        ]
    }

    /// `ridestatus_etcd_requests_total` of a worker.
    static func etcdRequests(_ worker: WorkerProcess) -> Double {
        httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body
            .split(separator: "\n").first { $0.hasPrefix("ridestatus_etcd_requests_total ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
    }

    @Test(
        "G6, G1, G3, C5: 3 workers granted by etcd; SIGKILL one, SIGSTOP another past its lease: every ride back under a newer epoch, no sequence goes back"
    )
    func killAndPause() async throws {
        let etcd = try await EtcdCluster()
        defer { etcd.stop() }
        try await withTestBroker { broker in
            let interval = 1.0
            let ids = ["w-e0", "w-e1", "w-e2"]
            let workers = try ids.map {
                try WorkerProcess(broker: broker, workerID: $0, interval: interval, extra: Self.workerArguments(etcd))
            }
            for worker in workers { try await worker.start() }

            let observer = try await Observer(broker, filters: ["rides/+/status"])
            let feeder = try await Observer(broker, filters: [])
            let rides = (0..<30).map { "r-e\($0)" }
            for ride in rides {
                try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
            defer { feeding.cancel() }
            // G1: every ride served, and by the rendezvous owner among the three once all hold their grants.
            let ownership = Ownership(members: ids)
            let distributing = Date()
            do {
                // Usually under 10 s. One clean-clone CI run (2026-12-07) still had 302 buckets refused after 30 s,
                // not seen again in 3 runs: the wait is 60 s, and the time it took is printed to follow it.
                try await observer.waitFor("every ride from its owner", timeout: 60) { _ in
                    let seen = GroupEndToEndTests.seen(observer.timedMessages)
                    return rides.allSatisfy { ride in
                        seen.last { $0.ride == ride }?.worker == ownership.owner(ofRide: ride)
                    }
                }
            } catch {
                for worker in workers {
                    // Each worker's grant progress and anything not routine, not only its last lines.
                    let lines = worker.logText.split(separator: "\n").filter {
                        !$0.contains("buckets granted") && !$0.contains("rides taken over")
                            && !$0.contains("rides released")
                    }
                    print("--- \(worker.workerID):\n\(lines.suffix(40).joined(separator: "\n"))")
                }
                throw error
            }
            print(
                "every ride from its rendezvous owner \(String(format: "%.1f", Date().timeIntervalSince(distributing))) s after the bookings"
            )

            // SIGKILL the owner of the most rides: the others take them over once its etcd lease ends (G3).
            // The load on etcd once the grants are in (every bucket held): requests per second, all three workers.
            let before = workers.map(Self.etcdRequests)
            try await Task.sleep(for: .seconds(5))
            let steady = zip(workers.map(Self.etcdRequests), before).map { $0 - $1 }.reduce(0, +) / 5
            print("etcd requests per second, 3 workers holding 8,192 buckets, steady: \(steady)")
            #expect(
                steady < 30, "G6: the steady load on etcd is a few requests a second a worker, not a poll per bucket")

            let counts = Dictionary(grouping: rides, by: { ownership.owner(ofRide: $0)! })
            let busiest = counts.max { $0.value.count < $1.value.count }!.key
            let killed = workers.first { $0.workerID == busiest }!
            await killed.kill()
            let killedAt = Date()
            let orphans = Set(counts[busiest]!)
            try await observer.waitFor("the killed worker's rides back", timeout: 10 + interval + 5) { _ in
                let after = GroupEndToEndTests.seen(observer.timedMessages).filter {
                    $0.at > killedAt && $0.worker != busiest
                }
                return orphans.isSubset(of: Set(after.map(\.ride)))
            }
            let resumed = GroupEndToEndTests.seen(observer.timedMessages).filter {
                $0.at > killedAt && $0.worker != busiest
            }
            let delays = orphans.map { ride in resumed.first { $0.ride == ride }!.at.timeIntervalSince(killedAt) }
            #expect(delays.max()! <= 10 + interval, "G3: back within 10 s + interval; slowest \(delays.max()!) s")

            // SIGSTOP a survivor for twice its lease: the last one takes every ride; on SIGCONT the paused one
            // publishes nothing of them (G6: its lease ended by its own clock, so it stops before writing).
            let survivors = workers.filter { $0.workerID != busiest }
            let paused = survivors[0]
            let staying = survivors[1]
            paused.process?.signal(SIGSTOP)
            let pausedAt = Date()
            try await Task.sleep(for: .seconds(2 * Self.leaseTTL + 2))
            try await observer.waitFor("every ride from the one worker left", timeout: 15) { _ in
                let seen = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.at > pausedAt }
                return rides.allSatisfy { ride in seen.last { $0.ride == ride }?.worker == staying.workerID }
            }
            let beforeJoin = [paused, staying].map(Self.etcdRequests)
            paused.process?.signal(SIGCONT)
            let resumedAt = Date()
            // It rejoins: the group of two splits the rides again (by the rendezvous of the two).
            let two = Ownership(members: [paused.workerID, staying.workerID])
            try await observer.waitFor("the paused worker back with its share", timeout: 20) { _ in
                let seen = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.at > resumedAt }
                return rides.allSatisfy { ride in seen.last { $0.ride == ride }?.worker == two.owner(ofRide: ride) }
            }
            let joinSeconds = Date().timeIntervalSince(resumedAt)
            let joinRequests = zip([paused, staying].map(Self.etcdRequests), beforeJoin).map { $0 - $1 }.reduce(0, +)
            print(
                "etcd requests during the paused worker's rejoin: \(Int(joinRequests)) in \(String(format: "%.1f", joinSeconds)) s (\(Int(joinRequests / joinSeconds)) a second)"
            )
            try await Task.sleep(for: .seconds(2 * interval))
            feeding.cancel()

            let all = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.sequence != nil }
            for ride in rides {
                let stream = all.filter { $0.ride == ride }
                let sequences = stream.map { $0.sequence! }
                let epochs = sequences.map { SequenceNumbering.epoch(of: $0) }
                // G6: every status carries its grant's epoch in its high bits, and the G2 property names it too.
                let ungranted = epochs.filter { $0 < 1 }.count
                #expect(ungranted == 0, "G6: \(ride) numbered under a grant: \(sequences.prefix(3))")
                let mismatched = zip(stream, epochs).filter { $0.0.epoch.map(UInt64.init) != $0.1 }.count
                #expect(mismatched == 0, "G2, G6: \(ride)'s epoch property is its sequence's epoch")
                // C5, G5, G6: as received, every ride's sequence strictly grows: nothing stale after the pause.
                let regressions = zip(sequences, sequences.dropFirst()).filter { $0.0 >= $0.1 }
                #expect(regressions.isEmpty, "C5: \(ride) went back: \(regressions.prefix(3))")
                // Nothing from the paused worker after its SIGCONT under an epoch older than one seen before it.
                let newestBefore = zip(stream, epochs).filter { $0.0.at < resumedAt }.map(\.1).max() ?? 0
                let stale = zip(stream, epochs).filter {
                    $0.0.worker == paused.workerID && $0.0.at > resumedAt && $0.1 < newestBefore
                }
                #expect(stale.isEmpty, "G6: \(ride): the paused worker published under a lost grant")
                // A takeover raises the epoch.
                if orphans.contains(ride) {
                    let before = Array(zip(stream, epochs)).last { $0.0.at < killedAt }?.1
                    let after = zip(stream, epochs).first { $0.0.at > killedAt && $0.0.worker != busiest }?.1
                    #expect((after ?? 0) > (before ?? .max), "G6: \(ride) taken over under a newer epoch")
                }
            }
            // Both leave (SIGTERM): each revokes its lease on the way out, so the other takes its rides at once.
            for worker in [paused, staying] { #expect(await worker.terminate().code == 0) }
            try await Task.sleep(for: .seconds(1))
            // C5: each ride's retained status is the highest it published, across every owner and the leaves.
            let final = GroupEndToEndTests.seen(observer.timedMessages)
            let reader = try await Observer(broker, filters: ["rides/+/status"])
            try await reader.waitFor("every retained status", timeout: 10) { _ in
                rides.allSatisfy { !reader.statuses($0).isEmpty }
            }
            for ride in rides {
                let newest = final.filter { $0.ride == ride }.compactMap(\.sequence).max()
                #expect(reader.statuses(ride).first?.sequence == newest, "C5: \(ride)'s retained status is its newest")
            }
            let logs = workers.map(\.logText).joined()
            #expect(logs.contains("buckets granted by etcd (G6)"))
            // G3, G6: a SIGTERM revokes the lease before the worker's tasks end (a cancelled request never goes).
            #expect(logs.components(separatedBy: "etcd lease revoked").count - 1 == 2, "both leavers revoked")
            #expect(!logs.contains("input rejected"), "nothing a worker wrote is refused")
        }
    }
}
