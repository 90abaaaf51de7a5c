import Foundation
import RideDomain
import Testing

@Suite("Cadence C1-C6")
struct CadenceTests {
    @Test("C1: every active ride publishes at least every updateInterval; above 20 s is refused")
    func interval() {
        var harness = Harness()
        #expect(
            harness.start(ride: "r-1").compactMap { action -> Double?? in
                if case .publish(_, _, let gap) = action { return gap } else { return nil }
            } == [nil], "the first status has no gap")
        harness.start(ride: "r-2", vehicle: "v-2", at: t0.addingTimeInterval(2))
        var published: [String: [Date]] = [:]
        var time = t0
        while time < t0.addingTimeInterval(60) {
            time = time.addingTimeInterval(0.1)
            for case .publish(let status, _, let gap) in harness.engine.tick(now: time) {
                // The gap the ride reports with each publish (the worker's cadence-gap metric) is the one seen.
                let previous = published[status.rideIdentifier]?.last ?? (status.rideIdentifier == "r-1" ? t0 : t0 + 2)
                #expect(abs((gap ?? -1) - time.timeIntervalSince(previous)) < 1e-6)
                published[status.rideIdentifier, default: []].append(time)
            }
        }
        for (ride, times) in published {
            let gaps = zip(times.dropFirst(), times).map { $0.timeIntervalSince($1) }
            #expect(gaps.allSatisfy { $0 <= 5.0001 }, "\(ride) gaps \(gaps)")
            #expect(times.count >= 11)
        }
        var configuration = RideConfiguration()
        configuration.updateInterval = 25
        #expect(configuration.problems().map(\.key) == ["updateInterval"])
        #expect(configuration.problems().first?.description.contains("20") == true)
        configuration.updateInterval = 20
        #expect(configuration.problems().isEmpty)
    }

    @Test("C2: a phase or completion change publishes at once and restarts the ride's interval")
    func immediatePublish() {
        var harness = Harness()
        harness.start()
        _ = harness.engine.tick(now: t0.addingTimeInterval(5))
        let actions = harness.event("arrivedAtPickup", at: t0.addingTimeInterval(7))
        #expect(actions.statuses.map(\.phase) == [.pickup], "published in the same step as the input")
        #expect(harness.engine.tick(now: t0.addingTimeInterval(10)).statuses.isEmpty, "interval restarted at 7 s")
        #expect(harness.engine.tick(now: t0.addingTimeInterval(12)).statuses.count == 1)
        let cancel = harness.send("rides/r-1/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0.addingTimeInterval(13))
        #expect(cancel.statuses.first?.completionStatus?.canceled == true)
    }

    @Test(
        "C3: without an accepted fix for staleAfter the cadence goes on with stale: true; a fresh fix clears it at once"
    )
    func staleness() throws {
        var harness = Harness()
        harness.start()
        let here = pickup.moved(metres: 3000, bearing: 90)
        harness.fix(at: t0.addingTimeInterval(1), here, speed: 0)
        #expect(harness.engine.tick(now: t0.addingTimeInterval(25)).statuses.last?.stale == false)
        var time = t0.addingTimeInterval(25)
        var last: RideStatus?
        while time < t0.addingTimeInterval(40) {
            time = time.addingTimeInterval(1)
            last = harness.engine.tick(now: time).statuses.last ?? last
        }
        let stale = try #require(last)
        #expect(stale.stale)
        #expect(stale.vehicleLocation?.coordinate == here, "last known location kept")
        let fresh = harness.fix(at: time.addingTimeInterval(1), here.moved(metres: 5, bearing: 0), speed: 1)
        #expect(fresh.statuses.map(\.stale) == [false])

        var never = Harness()
        never.start()
        #expect(
            never.engine.tick(now: t0.addingTimeInterval(31)).statuses.first?.stale == true, "counted from the start")
    }

    @Test("C4: after a (re)connection every active ride publishes at once")
    func publishAllOnReconnect() {
        var harness = Harness()
        for index in 0..<5 { harness.start(ride: "r-\(index)", vehicle: "v-\(index)") }
        let statuses = harness.engine.publishAll(now: t0.addingTimeInterval(1)).statuses
        #expect(Set(statuses.map(\.rideIdentifier)) == Set((0..<5).map { "r-\($0)" }))
    }

    @Test("C4, C1: after a reconnection the rides' next statuses are spread over one interval, none later")
    func republishSpreadsTheNextInterval() {
        var harness = Harness()
        for index in 0..<100 { harness.start(ride: "r-\(index)", vehicle: "v-\(index)", at: t0) }
        let reconnect = t0.addingTimeInterval(1)
        #expect(harness.engine.publishAll(now: reconnect).statuses.count == 100)
        // Without spreading, all 100 would come due together at reconnect + 5 s.
        let firstHalf = harness.engine.tick(now: reconnect.addingTimeInterval(2.5)).statuses.count
        #expect((45...55).contains(firstHalf), "\(firstHalf) of 100 due in the first half of the interval")
        let rest = harness.engine.tick(now: reconnect.addingTimeInterval(5)).statuses.count
        #expect(firstHalf + rest == 100, "C1: every ride within one interval of the republish, once")
        // A cadence tick never slices more than asked: a burst is handed out in parts.
        #expect(harness.engine.tick(now: reconnect.addingTimeInterval(100), limit: 10).statuses.count == 10)
        let stillDue = harness.engine.hasDue(now: reconnect.addingTimeInterval(100))
        #expect(stillDue)
    }

    @Test("C5: sequence strictly increases per ride and issuedAt never decreases, even when the clock steps back")
    func sequenceAndIssuedAt() {
        var harness = Harness()
        var statuses = harness.start().statuses
        statuses += harness.engine.tick(now: t0.addingTimeInterval(5)).statuses
        statuses +=
            harness.event("arrivedAtPickup", at: t0.addingTimeInterval(6))
            .statuses
        statuses += harness.engine.publishAll(now: t0.addingTimeInterval(4)).statuses  // clock stepped back
        #expect(zip(statuses.dropFirst(), statuses).allSatisfy { $0.sequence > $1.sequence })
        #expect(zip(statuses.dropFirst(), statuses).allSatisfy { $0.issuedAt >= $1.issuedAt })
    }

    @Test("C6: one scheduler for all rides; entries stay proportional to rides as they grow to 100,000")
    func oneScheduler() {
        var scheduler = CadenceScheduler()
        for index in 0..<100_000 { scheduler.schedule(index, at: Double(index % 5000) / 1000) }
        #expect(scheduler.count == 100_000)
        // Reschedule every ride many times: superseded entries are compacted away.
        for round in 1...5 {
            for index in 0..<100_000 {
                scheduler.schedule(index, at: Double(round * 5) + Double(index % 5000) / 1000)
            }
        }
        #expect(scheduler.storedEntries <= 2 * 100_000 + 1024)
        let due = scheduler.popDue(now: 31)
        #expect(due.count == 100_000)
        #expect(scheduler.count == 0)
        var ordered = CadenceScheduler()
        for (ride, due) in [(3, 3.0), (1, 1.0), (2, 2.0)] { ordered.schedule(ride, at: due) }
        ordered.cancel(2)
        #expect(ordered.popDue(now: 10) == [1, 3])
        // A superseded entry stays dead after its ride is popped and scheduled again (no reused generation).
        var revived = CadenceScheduler()
        revived.schedule(0, at: 5)
        revived.schedule(0, at: 2)
        #expect(revived.popDue(now: 2) == [0])
        revived.schedule(0, at: 7)
        #expect(revived.popDue(now: 6).isEmpty, "the superseded entry at 5 must not fire")
        #expect(revived.popDue(now: 7) == [0])
        // A slot reused by another ride after a cancel: the first ride's entry stays dead.
        revived.schedule(0, at: 9)
        revived.cancel(0)
        revived.schedule(0, at: 12)
        #expect(revived.popDue(now: 10).isEmpty, "the cancelled entry at 9 must not fire for the slot's new ride")
        #expect(revived.popDue(now: 12) == [0])
    }
}
