import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing
import WorkerGroup

/// G5, G6, G3 and C5 under a partition, with real processes: three workers take their buckets from a real 3-member
/// etcd on a real mosquitto; one of them reaches the broker and every etcd member through relays (``TCPRelay``),
/// which the test cuts (SIGSTOP: nothing forwarded either way, the connections left open, as a partition leaves
/// them) from the broker only, from etcd only, or from both, for 12 s, then heals. A recording subscriber checks
/// every ride's stream in the order it arrived. `make test-cuts` repeats each case (`CUT_RUNS`, default 20 there,
/// 1 here).
@Suite(
    "A worker cut off from the broker, from etcd, or from both (G5, G6, G3, C5)", .serialized, .timeLimit(.minutes(8)))
struct CutEndToEndTests {
    static let runs = Int(ProcessInfo.processInfo.environment["CUT_RUNS"] ?? "") ?? 1
    static let cutSeconds = 12.0

    enum Cut: String, CaseIterable, CustomStringConvertible {
        case broker, etcd, both
        var description: String { rawValue }
    }

    /// What one run saw.
    struct Outcome: CustomStringConvertible {
        var regressions: [String] = []
        var retainedBehind: [String] = []
        /// Statuses of a ride from the cut-off worker after another worker had published it, before the heal.
        var dualPublished: [String] = []
        var lost: [String] = []
        var largestGap = 0.0
        /// From the cut to the last of the cut-off worker's rides published by another worker.
        var takeover = 0.0
        var description: String {
            "regressions \(regressions.count), retained behind \(retainedBehind.count), dual published \(dualPublished.count), lost \(lost.count), takeover \(String(format: "%.2f", takeover)) s, largest gap \(String(format: "%.2f", largestGap)) s"
        }
    }

    static func arguments(etcd endpoints: [String]) -> [String] {
        [
            "--set", "group.authority=etcd", "--set", "group.etcdEndpoints=\(endpoints.joined(separator: ","))",
            "--set", "group.etcdLeaseTTL=\(Int(GroupEtcdTests.leaseTTL))",
        ]
    }

    static func run(_ cut: Cut, rides count: Int = 30) async throws -> Outcome {
        let etcd = try await EtcdCluster()
        defer { etcd.stop() }
        return try await withTestBroker { broker in
            let interval = 1.0
            let brokerRelay = try await TCPRelay(to: broker.port)
            var etcdRelays: [TCPRelay] = []
            for member in etcd.members { etcdRelays.append(try await TCPRelay(to: member.clientPort)) }
            defer { for relay in [brokerRelay] + etcdRelays { relay.stop() } }
            let ids = ["w-c0", "w-c1", "w-c2"]
            let cutOff = try WorkerProcess(
                url: "mqtt://127.0.0.1:\(brokerRelay.port)", directory: broker.directory, workerID: ids[0],
                interval: interval, extra: arguments(etcd: etcdRelays.map { "http://127.0.0.1:\($0.port)" }))
            let others = try ids.dropFirst().map {
                try WorkerProcess(
                    broker: broker, workerID: $0, interval: interval, extra: arguments(etcd: etcd.endpoints))
            }
            let workers = [cutOff] + others
            for worker in workers { try await worker.start() }
            defer { for worker in workers { worker.process?.signal(SIGKILL) } }

            let observer = try await Observer(broker, filters: ["rides/+/status"])
            let feeder = try await Observer(broker, filters: [])
            let rides = (0..<count).map { "r-cut\($0)" }
            for ride in rides {
                try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
            defer { feeding.cancel() }
            let three = Ownership(members: ids)
            func fromOwners(after start: Date, _ ownership: Ownership) -> Bool {
                let seen = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.at > start }
                return rides.allSatisfy { ride in seen.last { $0.ride == ride }?.worker == ownership.owner(ofRide: ride)
                }
            }
            try await observer.waitFor("every ride from its owner", timeout: 30) { _ in
                fromOwners(after: .distantPast, three)
            }
            let held = rides.filter { three.owner(ofRide: $0) == cutOff.workerID }

            switch cut {
            case .broker: brokerRelay.cut()
            case .etcd: for relay in etcdRelays { relay.cut() }
            case .both: for relay in [brokerRelay] + etcdRelays { relay.cut() }
            }
            let cutAt = Date()
            // G3: the others take the cut-off worker's rides (its G5 lease lapses and it gives its grant back, or
            // its etcd lease ends).
            try await observer.waitFor("the cut-off worker's rides from the others", timeout: cutSeconds) { _ in
                let after = GroupEndToEndTests.seen(observer.timedMessages).filter {
                    $0.at > cutAt && $0.worker != cutOff.workerID
                }
                return Set(held).isSubset(of: Set(after.map(\.ride)))
            }
            try await Task.sleep(for: .seconds(max(0, cutSeconds - Date().timeIntervalSince(cutAt))))
            for relay in [brokerRelay] + etcdRelays { relay.heal() }
            let healedAt = Date()
            try await observer.waitFor("every ride from its owner after the heal", timeout: 30) { _ in
                fromOwners(after: healedAt, three)
            }
            try await Task.sleep(for: .seconds(2 * interval))
            feeding.cancel()

            var outcome = Outcome()
            let seen = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.sequence != nil }
            for ride in rides {
                let stream = seen.filter { $0.ride == ride }
                // C5, G6: as received, the sequence (its grant's epoch in the high bits) strictly grows.
                for (earlier, later) in zip(stream, stream.dropFirst()) where later.sequence! <= earlier.sequence! {
                    outcome.regressions.append(
                        "\(ride): \(later.worker ?? "?") \(later.sequence!) after \(earlier.worker ?? "?") \(earlier.sequence!)"
                    )
                }
                for (earlier, later) in zip(stream, stream.dropFirst()) {
                    outcome.largestGap = max(outcome.largestGap, later.at.timeIntervalSince(earlier.at))
                }
                if let last = stream.last, Date().timeIntervalSince(last.at) > 10 { outcome.lost.append(ride) }
                if stream.isEmpty { outcome.lost.append(ride) }
                guard held.contains(ride) else { continue }
                let takenAt = stream.first { $0.at > cutAt && $0.worker != cutOff.workerID }?.at ?? .distantFuture
                outcome.takeover = max(outcome.takeover, takenAt.timeIntervalSince(cutAt))
                // G1: once another worker published the ride, the cut-off one publishes nothing of it until healed.
                for status in stream
                where status.worker == cutOff.workerID && status.at > takenAt && status.at < healedAt {
                    outcome.dualPublished.append(
                        "\(ride): \(status.sequence!) at +\(status.at.timeIntervalSince(cutAt)) s")
                }
            }
            // C5: the retained status, read fresh, is the highest received.
            let reader = try await Observer(broker, filters: ["rides/+/status"])
            try await reader.waitFor("every retained status", timeout: 10) { _ in
                rides.allSatisfy { !reader.statuses($0).isEmpty }
            }
            for ride in rides {
                let retained = reader.statuses(ride).first?.sequence
                let highest = seen.filter { $0.ride == ride }.compactMap(\.sequence).max()
                if let retained, let highest, retained < highest {
                    outcome.retainedBehind.append("\(ride): retained \(retained) < \(highest)")
                }
            }
            if !outcome.regressions.isEmpty || !outcome.dualPublished.isEmpty {
                print("--- \(cutOff.workerID):\n\(cutOff.logText.suffix(4000))")
            }
            await reader.stop()
            await observer.stop()
            await feeder.stop()
            for worker in workers { _ = await worker.terminate() }
            return outcome
        }
    }

    @Test(
        "G5, G6, G3, C5: a worker cut off from the broker, from etcd or from both: its rides move within 10 s + interval, it publishes none of them meanwhile, nothing goes back",
        arguments: Cut.allCases)
    func cutOff(_ cut: Cut) async throws {
        for index in 1...Self.runs {
            let outcome = try await Self.run(cut)
            print("cut from \(cut), run \(index) of \(Self.runs): \(outcome)")
            #expect(outcome.regressions.isEmpty, "C5: \(outcome.regressions.prefix(5))")
            #expect(outcome.retainedBehind.isEmpty, "C5: \(outcome.retainedBehind.prefix(5))")
            #expect(outcome.dualPublished.isEmpty, "G1, G6: \(outcome.dualPublished.prefix(5))")
            #expect(outcome.lost.isEmpty, "no ride lost: \(outcome.lost.prefix(5))")
            #expect(outcome.takeover <= 10 + 1 + 1, "G3: the rides move within 10 s + interval (+1 s of polling)")
            #expect(outcome.largestGap <= 20, "C1: at most 20 s between statuses")
        }
    }
}
