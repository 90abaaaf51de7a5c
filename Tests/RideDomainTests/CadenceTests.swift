import Foundation
import RideDomain
import Testing

import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus

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

    @Test("C1, C6: a burst of bookings spreads its second statuses over half an interval, none later than C1")
    func burstOfBookingsSpreads() {
        // 5,000 bookings in one instant (a dispatch system catching up): at the interval after them they would
        // all be due in one tenth of a second, 50,000 a second, twice what the broker took in `make bench-scale`.
        var harness = Harness()
        for ride in 0..<5_000 { harness.start(ride: "r-\(ride)", vehicle: "v-\(ride)") }
        var perHalfSecond: [Int: Int] = [:]
        var time = t0
        var late = 0
        var earliest = Double.infinity
        while time < t0.addingTimeInterval(5.05) {
            time = time.addingTimeInterval(0.1)
            let published = harness.engine.tick(now: time).statuses.count
            let after = time.timeIntervalSince(t0)
            if after > 5.0001 { late += published }
            if published > 0 {
                earliest = min(earliest, after)
                perHalfSecond[Int(after * 2 - 1e-6), default: 0] += published
            }
        }
        #expect(late == 0, "C1: every second status within the interval of the first")
        #expect(perHalfSecond.values.reduce(0, +) == 5_000, "every ride published its second status")
        // Spread from 2.5 s to 5 s: about 1,000 a half second, where the burst would put all 5,000 in one.
        #expect(earliest >= 2.5, "never more than half an interval early")
        #expect(perHalfSecond.values.max()! <= 1_100, "\(perHalfSecond.sorted { $0.key < $1.key })")
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
        #expect(stale.vehicle.location?.coordinate == here, "last known location kept")
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

    /// Runs `cycles` intervals of 5 s in steps of 0.1 s: every due key is rescheduled one interval on with
    /// levelling within `lead` (the engine's: ``RideEngine/levellingLead(interval:share:firstStatus:)``). Returns the
    /// statuses per tenth of a second in the last interval, and checks that no key is ever due later than its
    /// interval or more than the lead before it (C1).
    private static func level(
        _ scheduler: inout CadenceScheduler, dues: inout [Double], cycles: Int,
        lead: Double = RideEngine.levellingLead(interval: 5)
    ) -> (perTenth: [Int], moved: Int) {
        var perTenth = Array(repeating: 0, count: 50)
        var moved = 0
        var late = 0
        var tooEarly = 0
        for step in 1...(cycles * 50) {
            let now = Double(step) / 10
            for key in scheduler.popDue(now: now + 1e-9) {
                // On time: one interval after the due time it had (the engine counts from its publish).
                let due = dues[key] + 5
                let chosen = scheduler.schedule(key, at: due, levellingWithin: lead)
                if chosen > due { late += 1 }
                if chosen < due - lead { tooEarly += 1 }
                if chosen != due { moved += 1 }
                dues[key] = chosen
                if step > (cycles - 1) * 50 { perTenth[step % 50] += 1 }
            }
        }
        #expect(late == 0, "C1: never later than the interval")
        #expect(tooEarly == 0, "never more than the lead early")
        return (perTenth, moved)
    }

    @Test("C1, C6: an uneven load evens out over the interval; a ride's status only ever comes early")
    func levelling() {
        // 20,000 rides whose bookings came unevenly, as `make bench-scale` saw at 100,000: a second of the
        // interval with 110 due per tenth of a second, the other four with 472 (the mean is 400).
        var lumpy = CadenceScheduler()
        let trough: [Double] = (0..<1_100).map { Double($0 % 10) / 10 + 0.05 }
        let crowd: [Double] = (0..<18_900).map { 1.05 + Double($0 % 40) / 10 }
        var dues = trough + crowd
        for (key, due) in dues.enumerated() { lumpy.schedule(key, at: due) }
        var halfSecond = lumpy
        var halfSecondDues = dues
        let (perTenth, _) = Self.level(&lumpy, dues: &dues, cycles: 12)
        // Twelve intervals later (a minute at 5 s) the trough is gone: with the engine's lead (1 s at 5 s) the
        // crowd spreads into it tenth by tenth, and no tenth is more crowded than before.
        #expect(perTenth.min()! >= 300, "the trough fills: \(perTenth)")
        #expect(perTenth.max()! <= 473, "no new crowd: \(perTenth)")
        #expect(perTenth.reduce(0, +) >= 20_000, "every ride published in the last interval")
        // Within half a second (the lead before 2026-11-26) the emptiest tenth only doubled in the same minute:
        // the crowds a burst of bookings leaves at 100,000 rides stayed for most of `make bench-scale`'s run.
        let (slower, _) = Self.level(&halfSecond, dues: &halfSecondDues, cycles: 12, lead: 0.5)
        #expect(slower.min()! >= 200 && slower.min()! < perTenth.min()!, "\(slower) against \(perTenth)")

        // Rides already spread keep their due times: nothing moves, and nobody publishes more often.
        var even = CadenceScheduler()
        var evenDues = (0..<20_000).map { Double($0 % 50) / 10 + 0.05 }
        for (key, due) in evenDues.enumerated() { even.schedule(key, at: due) }
        let (flat, moved) = Self.level(&even, dues: &evenDues, cycles: 4)
        #expect(moved == 0)
        #expect(flat.allSatisfy { $0 == 400 })

        // A small fleet, even in one tenth of a second, is below the floor: due times stay as asked.
        var small = CadenceScheduler()
        var smallDues = Array(repeating: 0.05, count: Int(CadenceScheduler.levellingFloor) - 1)
        for key in smallDues.indices { small.schedule(key, at: 0.05) }
        #expect(Self.level(&small, dues: &smallDues, cycles: 3).moved == 0)
    }
}
