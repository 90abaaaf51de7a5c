import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// G5 and C5 under a paused process, on a real mosquitto with real worker processes: a group of three shares the
/// rides, the busiest gets SIGSTOP (as a long GC-like stall, a VM migration or a debugger would stop it), then
/// SIGCONT. A recording subscriber checks every ride's stream in the order it arrived. `make test-pause` repeats
/// each case (`PAUSE_RUNS`, default 20 there, 1 here).
@Suite("A paused worker never rolls a ride back (G5, C5)", .serialized)
struct PauseEndToEndTests {
    static let runs = Int(ProcessInfo.processInfo.environment["PAUSE_RUNS"] ?? "") ?? 1
    /// `PAUSE_LEASE=off` runs the workers without G5's lease, to measure what it prevents (the checks then fail).
    static let extra =
        ProcessInfo.processInfo.environment["PAUSE_LEASE"] == "off" ? ["--set", "broker.lease=false"] : []

    /// What one run saw.
    struct Outcome: CustomStringConvertible {
        var regressions: [String] = []
        var retainedBehind: [String] = []
        var dualPublishers = 0
        var largestGap = 0.0
        var lapsed = false
        var lost: [String] = []
        var description: String {
            "regressions \(regressions.count), retained behind \(retainedBehind.count), dual publishers \(dualPublishers), largest gap \(String(format: "%.2f", largestGap)) s, lapsed \(lapsed), lost \(lost.count)"
        }
    }

    /// One run: three workers, `rides` rides at a fix a second, the busiest paused for `pause` seconds; then
    /// `watch` seconds more.
    static func run(pause: Double, rides count: Int = 30, watch: Double = 8) async throws -> Outcome {
        try await withTestBroker { broker in
            let interval = 1.0
            let ids = ["w-p1", "w-p2", "w-p3"]
            let workers = try ids.map {
                try WorkerProcess(broker: broker, workerID: $0, interval: interval, extra: Self.extra)
            }
            for worker in workers { try await worker.start() }
            try await GroupEndToEndTests.waitForMembers(3, of: workers)
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            let feeder = try await Observer(broker, filters: [])
            let rides = (0..<count).map { "r-pause\($0)" }
            for ride in rides {
                try await feeder.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            let feeding = GroupEndToEndTests.feedVehicles(of: rides, with: feeder)
            defer { feeding.cancel() }
            try await observer.waitFor("a status of every ride", timeout: 15) { _ in
                rides.allSatisfy { !observer.statuses($0).isEmpty }
            }
            try await Task.sleep(for: .seconds(2 * interval))
            var owner: [String: String] = [:]
            for status in GroupEndToEndTests.seen(observer.timedMessages) where status.worker != nil {
                owner[status.ride] = status.worker
            }
            let byWorker = Dictionary(grouping: owner.keys, by: { owner[$0]! })
            let busiest = byWorker.max { $0.value.count < $1.value.count }!.key
            let paused = workers.first { $0.workerID == busiest }!

            paused.process?.signal(SIGSTOP)
            try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            paused.process?.signal(SIGCONT)
            let resumedAt = Date()
            try await Task.sleep(for: .seconds(watch))

            var outcome = Outcome()
            let seen = GroupEndToEndTests.seen(observer.timedMessages).filter { $0.sequence != nil }
            // C5: per ride, (epoch, sequence) strictly grows in the order the subscriber received the statuses.
            for ride in rides {
                var highest: (epoch: Int, sequence: Int)?
                var last: Date?
                for status in seen where status.ride == ride {
                    let key = (epoch: status.epoch ?? 0, sequence: status.sequence!)
                    if let highest,
                        !(key.epoch > highest.epoch || (key.epoch == highest.epoch && key.sequence > highest.sequence))
                    {
                        outcome.regressions.append(
                            "\(ride): \(status.worker ?? "?") epoch \(key.epoch) seq \(key.sequence) after \(highest.epoch)/\(highest.sequence)"
                        )
                    }
                    if highest == nil || key.epoch > highest!.epoch
                        || (key.epoch == highest!.epoch && key.sequence > highest!.sequence)
                    {
                        highest = key
                    }
                    if let last { outcome.largestGap = max(outcome.largestGap, status.at.timeIntervalSince(last)) }
                    last = status.at
                }
                if let last, Date().timeIntervalSince(last) > 20 { outcome.lost.append(ride) }
                if last == nil { outcome.lost.append(ride) }
            }
            // G1: after the resume one worker at a time publishes for a ride: a handover moves it once (back to
            // the worker that rejoined, by the rendezvous); a worker that publishes, is taken over and publishes
            // again (A, B, A) served it beside another.
            for ride in rides {
                var runs: [String] = []
                for status in seen where status.ride == ride && status.at > resumedAt {
                    let worker = status.worker ?? "?"
                    if runs.last != worker { runs.append(worker) }
                }
                if Set(runs).count < runs.count { outcome.dualPublishers += 1 }
            }
            // The retained status, read fresh, is the highest received.
            let reader = try await Observer(broker, filters: ["rides/+/status"])
            try await Task.sleep(for: .seconds(1))
            for ride in rides {
                let retained = reader.statuses(ride).last?.sequence
                let highest = seen.filter { $0.ride == ride }.compactMap(\.sequence).max()
                if let retained, let highest, retained < highest {
                    outcome.retainedBehind.append("\(ride): retained \(retained) < \(highest)")
                }
            }
            outcome.lapsed = paused.logText.contains("lease with the broker lapsed")
            await reader.stop()
            await observer.stop()
            await feeder.stop()
            for worker in workers { _ = await worker.terminate() }
            return outcome
        }
    }

    @Test(
        "G5, C5, G3: SIGSTOP past the will of the busiest of three workers: no status goes back, retained or received")
    func pausePastTheWill() async throws {
        for run in 1...Self.runs {
            let outcome = try await Self.run(pause: 10)
            print("pause past the will, run \(run) of \(Self.runs): \(outcome)")
            #expect(outcome.regressions.isEmpty, "C5: \(outcome.regressions.prefix(5))")
            #expect(outcome.retainedBehind.isEmpty, "C5: \(outcome.retainedBehind.prefix(5))")
            #expect(outcome.lapsed, "G5: the paused worker saw its lease lapse")
            #expect(outcome.lost.isEmpty, "C1, G3: rides without a status for 20 s: \(outcome.lost)")
            #expect(outcome.dualPublishers == 0, "G1: rides served by two workers after the resume")
            #expect(outcome.largestGap <= 10 + 1 + 10, "G3: back within 10 s + interval of the pause's will")
        }
    }

    @Test("G5, C5: SIGSTOP shorter than the lease: nothing lapses, nothing moves, nothing goes back")
    func shortPause() async throws {
        for run in 1...Self.runs {
            let outcome = try await Self.run(pause: 3)
            print("pause shorter than the lease, run \(run) of \(Self.runs): \(outcome)")
            #expect(outcome.regressions.isEmpty, "C5: \(outcome.regressions.prefix(5))")
            #expect(outcome.retainedBehind.isEmpty, "C5: \(outcome.retainedBehind.prefix(5))")
            #expect(!outcome.lapsed, "G5: 3 s is inside the 6 s lease")
            #expect(outcome.lost.isEmpty)
            #expect(outcome.dualPublishers == 0)
        }
    }
}
