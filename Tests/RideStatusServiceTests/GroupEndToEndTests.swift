import Foundation
import Locking
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

/// Groups of workers (G1 to G4) on a real mosquitto, with real worker processes: three workers share the
/// rides; the busiest is killed (SIGKILL), a fourth joins, another leaves (SIGTERM). Every status the
/// riders would see is checked, ride by ride, in the order a subscriber received it.
@Suite("Groups of workers end to end (G1-G4)", .serialized)
struct GroupEndToEndTests {
    /// One status as a subscriber received it.
    struct Seen {
        var at: Date
        var ride: String
        var sequence: Int?
        var issuedAt: Date?
        var worker: String?
        var epoch: Int?
        var json: JSONValue?
    }

    static func seen(_ timed: [(at: Date, message: MQTTMessage)]) -> [Seen] {
        timed.compactMap { item in
            let topic = item.message.topic.split(separator: "/")
            guard topic.count == 3, topic[2] == "status" else { return nil }
            let properties = Dictionary(
                item.message.properties.userProperties, uniquingKeysWith: { _, last in last })
            let json = item.message.payload.isEmpty ? nil : try? JSONParser.parse(item.message.payload)
            return Seen(
                at: item.at, ride: String(topic[1]), sequence: json?.sequence,
                issuedAt: json?["issuedAt"]?.stringValue.flatMap { Timestamps.parse($0) },
                worker: properties["worker"], epoch: properties["epoch"].flatMap { Int($0) }, json: json)
        }
    }

    /// Each ride's vehicle (`v-{ride}`) reports at 1 Hz, 2 km from the pickup, until the task is cancelled.
    static func feedVehicles(of rides: [String], with feeder: Observer) -> Task<Void, Never> {
        let place = Coordinate(latitude: 52.5399, longitude: 13.4132)
        return Task {
            while !Task.isCancelled {
                for ride in rides {
                    try? await feeder.publish("fleet/vehicles/v-\(ride)/position", fix("v-\(ride)", place))
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    static func members(_ worker: WorkerProcess) -> Int? {
        httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body
            .split(separator: "\n").first { $0.hasPrefix("ridestatus_group_members ") }
            .flatMap { Double($0.split(separator: " ")[1]) }.map { Int($0) }
    }

    static func waitForMembers(_ count: Int, of workers: [WorkerProcess], timeout: Double = 15) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if workers.allSatisfy({ members($0) == count }) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TimedOut(what: "every worker to see a group of \(count)")
    }

    @Test(
        "G1, G2, G3, G4: 3 workers share 60 rides; SIGKILL the busiest, a fourth joins, SIGTERM another; every ride's stream stays whole"
    )
    func killJoinLeave() async throws {
        try await withTestBroker { broker in
            let interval = 1.0
            let ids = ["w-a", "w-b", "w-c"]
            var workers = try ids.map { try WorkerProcess(broker: broker, workerID: $0, interval: interval) }
            for worker in workers { try await worker.start() }
            try await Self.waitForMembers(3, of: workers)

            let observer = try await Observer(broker, filters: ["rides/+/status"])
            let feeder = try await Observer(broker, filters: [])
            let rides = (0..<60).map { "r-g\($0)" }
            for ride in rides {
                try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            let feeding = Self.feedVehicles(of: rides, with: feeder)
            defer { feeding.cancel() }
            try await observer.waitFor("a status of every ride", timeout: 15) { _ in
                rides.allSatisfy { !observer.statuses($0).isEmpty }
            }
            try await Task.sleep(for: .seconds(2 * interval))

            // G1: each ride has one owner, and every worker owns some.
            var owner: [String: String] = [:]
            for status in Self.seen(observer.timedMessages) where status.worker != nil {
                owner[status.ride] = status.worker
            }
            #expect(owner.count == rides.count)
            let byWorker = Dictionary(grouping: owner.keys, by: { owner[$0]! })
            #expect(Set(byWorker.keys) == Set(ids), "every worker owns rides: \(byWorker.mapValues(\.count))")
            for worker in ids {
                let statuses = Self.seen(observer.timedMessages).filter { $0.worker == worker }
                #expect(
                    statuses.allSatisfy { owner[$0.ride] == worker },
                    "G1: \(worker) publishes only its own rides")
            }

            // SIGKILL the busiest worker: its rides publish again from the others (G3: 10 s + interval).
            let busiest = byWorker.max { $0.value.count < $1.value.count }!.key
            let orphans = Set(byWorker[busiest]!)
            let killed = workers.first { $0.workerID == busiest }!
            await killed.kill()
            let killedAt = Date()
            try await observer.waitFor("every ride of the killed worker back", timeout: 10 + interval + 5) { _ in
                let after = Self.seen(observer.timedMessages).filter { $0.at > killedAt && $0.worker != busiest }
                return orphans.isSubset(of: Set(after.map(\.ride)))
            }
            let resumed = Self.seen(observer.timedMessages).filter { $0.at > killedAt && $0.worker != busiest }
            let delays = orphans.map { ride in resumed.first { $0.ride == ride }!.at.timeIntervalSince(killedAt) }
            #expect(delays.max()! <= 10 + interval, "G3: back within 10 s + interval; slowest \(delays.max()!) s")

            // Control messages for the killed worker's rides are carried out by their new owners (G3).
            let orphaned = orphans.sorted()
            let canceled = orphaned[0]
            let stopped = orphaned[1]
            try await feeder.publish("rides/\(canceled)/cancel", #"{"canceledBy":"service"}"#)
            try await feeder.publish("rides/\(stopped)/stop", "")
            try await observer.waitFor("the cancel and the stop carried out", timeout: 10) { messages in
                observer.statuses(canceled).last?["completionStatus"]?["canceled"] == .bool(true)
                    && messages.last { $0.topic == "rides/\(stopped)/status" }?.payload.isEmpty == true
            }

            // A fourth worker joins: it takes rides over from live owners (release, then load).
            let joiner = try WorkerProcess(broker: broker, workerID: "w-d", interval: interval)
            try await joiner.start()
            workers.append(joiner)
            #expect(
                joiner.logText.contains("reading=by bucket (in a group)"),
                "G3: a worker joining reads its buckets' states, not every ride's")
            let alive = workers.filter { $0.workerID != busiest }
            try await Self.waitForMembers(3, of: alive)
            let joinedAt = Date()
            try await observer.waitFor("statuses from the fourth worker", timeout: 10) { _ in
                Self.seen(observer.timedMessages).contains { $0.worker == "w-d" }
            }
            try await Task.sleep(for: .seconds(3 * interval))

            // Another leaves gracefully: SIGTERM still exits 0 within 5 s (L8); its rides move without a gap.
            let leaver = alive.first { $0.workerID != "w-d" }!
            let exit = await leaver.terminate()
            #expect(exit.code == 0 && exit.seconds < 5, "L8: \(exit)")
            let leftAt = Date()
            let survivors = alive.filter { $0.workerID != leaver.workerID }
            try await Self.waitForMembers(2, of: survivors)
            try await Task.sleep(for: .seconds(4 * interval))
            feeding.cancel()

            // Every ride, as the subscriber saw it.
            let all = Self.seen(observer.timedMessages)
            let live = Set(rides).subtracting([stopped])
            for ride in rides {
                let stream = all.filter { $0.ride == ride && $0.json != nil }
                let sequences = stream.compactMap(\.sequence)
                #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "C5, G3: \(ride) \(sequences)")
                let issued = stream.compactMap(\.issuedAt)
                #expect(zip(issued, issued.dropFirst()).allSatisfy { $0 <= $1 }, "C5: issuedAt of \(ride)")
                // G2, G4: once a newer epoch is seen, an older one's status comes at most one interval later.
                var newest = (epoch: 0, at: Date.distantPast)
                for status in stream {
                    guard let epoch = status.epoch else { continue }
                    if epoch > newest.epoch {
                        newest = (epoch, status.at)
                    } else if epoch < newest.epoch {
                        #expect(
                            status.at.timeIntervalSince(newest.at) <= interval,
                            "G4: \(ride) epoch \(epoch) after \(newest.epoch)")
                    }
                }
                // G3: gaps within interval + 2 s, except across the kill for the killed worker's rides.
                guard live.contains(ride), ride != canceled else { continue }
                for (before, after) in zip(stream, stream.dropFirst()) {
                    let gap = after.at.timeIntervalSince(before.at)
                    let acrossKill = orphans.contains(ride) && before.at <= killedAt && after.at > killedAt
                    let bound = acrossKill ? 10 + interval : interval + 2
                    #expect(gap <= bound, "G3: \(ride) gap \(gap) s at \(after.at) (join \(joinedAt), leave \(leftAt))")
                }
            }

            // C5: the retained status of every ride is the newest one published, after the last workers leave.
            let logs = survivors.map(\.logText).joined()
            for worker in survivors {
                #expect(await worker.terminate().code == 0)
                try await Task.sleep(for: .seconds(2 * interval))
            }
            let reader = try await Observer(broker, filters: ["rides/+/status"])
            try await reader.waitFor("every retained status", timeout: 10) { _ in
                live.allSatisfy { !reader.statuses($0).isEmpty }
            }
            let final = Self.seen(observer.timedMessages)
            for ride in live {
                let newest = final.filter { $0.ride == ride }.compactMap(\.sequence).max()
                #expect(reader.statuses(ride).first?.sequence == newest, "C5: \(ride)'s retained status")
            }
            await reader.stop()
            await observer.stop()
            await feeder.stop()
            #expect(logs.contains("rides taken over (G3)"))
            let every = workers.map(\.logText).joined()
            #expect(!every.contains("input rejected") && !every.contains("refused"), "nothing written is refused")
            #expect(every.contains("rides released to their new owner (G3)"), "the join moved rides from live owners")
            #expect(!every.contains("loading anyway (G4)"), "every release came; no new owner had to wait it out")
        }
    }

    @Test("G1: a worker whose clock is behind the incarnation it announced before reconnects above it (real client)")
    func clockBehind() async throws {
        try await withTestBroker { broker in
            let ahead = Int((Date().timeIntervalSince1970 + 3600) * 1000)
            let observer = try await Observer(broker, filters: ["ridestatus/workers/w-clock"])
            try await observer.publish(
                "ridestatus/workers/w-clock",
                #"{"state":"offline","since":"2026-11-25T10:00:00.000Z","version":"0","incarnation":\#(ahead)}"#,
                retain: true)
            let worker = try WorkerProcess(broker: broker, workerID: "w-clock", interval: 1)
            try await worker.start()
            let births = try await observer.waitFor("a birth above the announced incarnation") { messages in
                messages.contains { message in
                    guard let presence = try? JSONParser.parse(message.payload) else { return false }
                    return presence["state"]?.stringValue == "online"
                        && (presence["incarnation"]?.doubleValue ?? 0) > Double(ahead)
                }
            }
            #expect(!births.isEmpty)
            #expect(worker.logText.contains("clock is behind"))
            #expect(await worker.terminate().code == 0)
            await observer.stop()
        }
    }
}
