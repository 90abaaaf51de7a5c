import Foundation
import PropertyBased
import Testing
import WorkerGroup

import enum RideStatusKit.RidePhase

@testable import RideDomain

/// E1's range: the latest time is the estimate's time to go times the 90th percentile of how much
/// longer arrivals took, per area, leg and horizon, shrunk toward the fleet and a prior while history is thin.
@Suite("Estimates E1: the range of an arrival and how often it holds")
struct ArrivalRangeTests {
    @Test("E1: before any arrival the latest time is half as long again; an estimate's horizon picks its bucket")
    func prior() {
        let ranges = ArrivalRanges()
        #expect(ranges.latest(in: 100, leg: .pickup, area: "berlin") == 150)
        #expect(ranges.latest(in: 0, leg: .dropOff, area: "") == 0)
        #expect(ArrivalRanges.horizon(of: 59.9) == 0 && ArrivalRanges.horizon(of: 60) == 1)
        #expect(ArrivalRanges.horizon(of: 239) == 2 && ArrivalRanges.horizon(of: 240) == 3)
        #expect(ranges.coverage(.pickup, horizon: 1) == nil)
    }

    @Test(
        "E1: on a known error distribution (arrivals 0.8 to 1.4 times the estimate) the latest time is its 90th percentile, shrunk toward the prior, and covers what it says"
    )
    func knownDistribution() {
        var ranges = ArrivalRanges()
        var random = SeededRandom(seed: 31)
        for _ in 0..<1000 {
            let ratio = Double.random(in: 0.8...1.4, using: &random)
            ranges.observe(estimated: 100, actual: 100 * ratio, latest: nil, leg: .pickup, area: "berlin")
        }
        // The 90th percentile is 0.8 + 0.9 x 0.6 = 1.34; the histogram answers with the upper edge of its bin
        // (bins 6 % wide), and 1000 fading arrivals weigh (1 - 0.995^1000) / 0.005 = 198.7 against the
        // prior's 5 and the fleet's 20 (shrunk toward 1.5 twice: the fleet's cell toward the prior, the area's
        // toward the fleet).
        let weight = (1 - pow(0.995, 1000)) / 0.005
        let step = pow(16, 1.0 / 48)
        func shrunk(_ value: Double, toward prior: Double, by priorWeight: Double = 20) -> Double {
            (weight * value + priorWeight * prior) / (weight + priorWeight)
        }
        let lowest = shrunk(1.34, toward: shrunk(1.34, toward: 1.5, by: 5))
        let highest = shrunk(1.34 * step, toward: shrunk(1.34 * step, toward: 1.5, by: 5))
        let ratio = ranges.ratio(.pickup, horizon: 1, area: "berlin")
        #expect(ratio >= lowest && ratio <= highest, "\(ratio) in \(lowest)...\(highest)")
        // Another area with no history of its own borrows the fleet's.
        let borrowed = ranges.ratio(.pickup, horizon: 1, area: "hamburg")
        #expect(
            borrowed >= shrunk(1.34, toward: 1.5, by: 5) && borrowed <= shrunk(1.34 * step, toward: 1.5, by: 5),
            "\(borrowed)")
        // Other legs and horizons have learned nothing.
        #expect(ranges.ratio(.dropOff, horizon: 1, area: "berlin") == 1.5)
        #expect(ranges.ratio(.pickup, horizon: 2, area: "berlin") == 1.5)
        // Coverage on arrivals the range was not learned from: the share of ratios up to the latest's.
        var fresh = ranges
        for _ in 0..<2000 {
            let actual = 100 * Double.random(in: 0.8...1.4, using: &random)
            let latest = ranges.latest(in: 100, leg: .pickup, area: "berlin")
            fresh.observe(estimated: 100, actual: actual, latest: latest, leg: .pickup, area: "berlin")
        }
        let expected = (ratio - 0.8) / 0.6
        let coverage = fresh.coverage(.pickup, horizon: 1) ?? 0
        #expect(abs(coverage - expected) < 0.03, "coverage \(coverage) against \(expected)")
        #expect(fresh.arrivals[1] == 2000)
    }

    @Test(
        "E1: statuses carry the latest times; a car arriving at the pickup teaches its area's range, a cancellation nothing"
    )
    func throughTheEngine() throws {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0), speed: 10)
        let now = t0.addingTimeInterval(5)
        let status = try #require(
            harness.engine.tick(now: now).statuses.first ?? harness.engine.publishAll(now: now).statuses.first)
        let estimate = try #require(status.estimatedPickupDate).timeIntervalSince(status.issuedAt)
        let latest = try #require(status.estimatedPickupDateLatest).timeIntervalSince(status.issuedAt)
        #expect(abs(latest - 1.5 * estimate) < 0.01, "the prior: \(latest) for \(estimate)")
        #expect(try #require(status.estimatedDropOffDateLatest) >= (status.estimatedDropOffDate ?? .distantFuture))
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
        // The car stands at the pickup 200 s after the booking: the estimate of 5 s (306 s, horizon 240+; the
        // booking's own estimate of 480 s teaches nothing) took 0.64 of its time, within its latest.
        harness.fix(at: t0.addingTimeInterval(200), pickup.moved(metres: 10, bearing: 0), speed: 0)
        #expect(harness.phase() == .pickup)
        let ranges = harness.engine.ranges
        #expect(ranges.arrivals[3] == 1 && ranges.covered[3] == 1, "\(ranges.arrivals)")
        #expect(ranges.coverage(.pickup, horizon: 3) == 1)
        #expect(ranges.ratio(.pickup, horizon: 3, area: "") < 1.45, "learned toward 0.64")
        #expect(ranges.ratio(.pickup, horizon: 2, area: "") == 1.5, "other horizons keep the prior")
        // A cancelled ride teaches nothing.
        harness.start(ride: "r-2", vehicle: "v-2", at: t0.addingTimeInterval(210))
        harness.send(
            "rides/r-2/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0.addingTimeInterval(220))
        #expect(harness.engine.ranges.arrivals == ranges.arrivals)
    }

    @Test(
        "E1: coverage counts statuses, so an arrival weighs as many statuses as its estimate stood for: one slow ride that lingered outweighs nine that passed"
    )
    func weighedByStatuses() {
        var (byStatuses, byArrivals) = (ArrivalRanges(), ArrivalRanges())
        // One ride shown 49 times in the 60-120 s horizon that took twice as long; then 49 shown once each, on
        // time (in this order, so that fading does not favour the slow one).
        byStatuses.observe(estimated: 100, actual: 200, latest: 150, leg: .pickup, area: "berlin", statuses: 49)
        byArrivals.observe(estimated: 100, actual: 200, latest: 150, leg: .pickup, area: "berlin")
        for _ in 0..<49 {
            byStatuses.observe(estimated: 100, actual: 100, latest: 150, leg: .pickup, area: "berlin", statuses: 1)
            byArrivals.observe(estimated: 100, actual: 100, latest: 150, leg: .pickup, area: "berlin")
        }
        // Half the statuses took twice their estimate: their 90th percentile is in 2's bin (2 to 2.12), where by
        // arrivals it is in 1's (1 to 1.06), each then shrunk toward the fleet's and the prior.
        let weighed = byStatuses.ratio(.pickup, horizon: 1, area: "berlin")
        let counted = byArrivals.ratio(.pickup, horizon: 1, area: "berlin")
        #expect(weighed > 1.8 && counted < 1.2, "\(weighed) by statuses, \(counted) by arrivals")
        // The coverage metric counts the statuses: 49 of 98 came by their latest time, against 49 of 50 arrivals.
        #expect(byStatuses.arrivals[1] == 98 && byStatuses.covered[1] == 49)
        #expect(byStatuses.coverage(.pickup, horizon: 1) == 0.5 && byArrivals.coverage(.pickup, horizon: 1) == 0.98)
        // A weight below 1 counts as 1.
        var floor = ArrivalRanges()
        floor.observe(estimated: 100, actual: 100, latest: 150, leg: .dropOff, area: "", statuses: 0)
        #expect(floor.arrivals[5] == 1)
    }

    @Test(
        "E1, C1: a status that found no room at the broker is not counted: the retry counts once, and a horizon's first estimate goes with its status"
    )
    func deferredStatusesUncounted() {
        let start = t0
        var samples = ArrivalSamples()
        // Three statuses 90 s out (60-120 s), the last deferred and sent again.
        for second in [0.0, 5, 10] {
            samples.record(.pickup, at: start + second, since: start, toGo: 90 - second, latest: 135)
        }
        samples.uncount()
        samples.uncount()  // once only: a second call takes nothing more back
        samples.record(.pickup, at: start + 10.5, since: start, toGo: 79.5, latest: 120)
        // The first status of the 0-60 s horizon deferred: its estimate goes too, and the retry's is kept.
        samples.record(.pickup, at: start + 40, since: start, toGo: 50, latest: 75)
        samples.uncount()
        samples.record(.pickup, at: start + 41, since: start, toGo: 44, latest: 66)
        var ranges = ArrivalRanges()
        let taught = samples.teach(&ranges, arrival: start + 88, since: start, area: "")
        #expect(taught)
        #expect(ranges.arrivals[1] == 3, "three statuses 60-120 s out left: \(ranges.arrivals)")
        #expect(ranges.arrivals[0] == 1, "one 0-60 s out: \(ranges.arrivals)")
        // The retry's estimate (44 s, made at 41 s, arrival at 88 s: 47 s, over its latest of 66) is the one
        // taught, not the deferred one's (50 s at 40 s: 48 s, by its latest of 75).
        #expect(ranges.covered[0] == 1, "\(ranges.covered)")
    }

    @Test("E1: a ride counts the statuses of each horizon it showed, and teaches them all when its car arrives")
    func countsTheStatuses() throws {
        var harness = Harness()
        harness.start()
        let origin = pickup.moved(metres: 1500, bearing: 0)
        var published = 0
        // A car 1.5 km out at 10 m/s, a fix a second and a status every 5 s until it stands at the pickup.
        // Every status counts, the one a change of phase publishes at once (C2, P2) as the cadence's; one that
        // found no room at the broker (C1) does not, and its retry does.
        var deferred = 0
        for second in 1...150 {
            let now = t0.addingTimeInterval(Double(second))
            let actions =
                harness.fix(at: now, toward(origin, pickup, metres: 10 * Double(second)), speed: 10)
                + harness.engine.tick(now: now)
            let counted = actions.statuses.filter { $0.estimatedPickupDateLatest != nil && $0.phase < .pickup }
            if second % 40 == 0, counted.count == 1 {
                harness.engine.deferStatus(of: "r-1", stateDropped: false, now: now)
                deferred += 1
            } else {
                published += counted.count
            }
        }
        #expect(deferred >= 1, "a status deferred")
        harness.fix(at: t0.addingTimeInterval(151), pickup, speed: 0)
        #expect(harness.phase() == .pickup)
        let ranges = harness.engine.ranges
        let taught = (0..<4).map { ranges.arrivals[$0] }
        #expect(published > 20 && taught.reduce(0, +) == published, "\(taught) for \(published) statuses")
        #expect(taught.filter { $0 > 0 }.count >= 2, "statuses in more than one horizon: \(taught)")
    }

    @Test(
        "E1: a percentile of few arrivals is read higher, as a quantile of n arrivals must be to cover the next one as often: 0.9 x (n + 1) / n, at most 0.99"
    )
    func fewArrivals() throws {
        #expect(abs(ArrivalRanges.level(0.9, arrivals: 20) - 0.945) < 1e-12)
        #expect(abs(ArrivalRanges.level(0.9, arrivals: 200) - 0.9045) < 1e-12)
        #expect(ArrivalRanges.level(0.9, arrivals: 5) == 0.99 && ArrivalRanges.level(0.9, arrivals: 0.5) == 0.99)
        // One slow ride in twelve (the oldest, so the others weigh a little more: 92 % of the weight at 1). Twelve
        // arrivals are read at 0.977: 2's bin. 480 arrivals (faded to 182) with the same share are read at 0.905:
        // 1's bin. Read at 0.9, both would be in 1's bin.
        var cell = ArrivalRanges.Cell()
        cell.add(ratio: 2, statuses: 1)
        for _ in 0..<11 { cell.add(ratio: 1, statuses: 1) }
        let few = try #require(cell.ratio(at: 0.9))
        #expect(few > 2 && few < 2.2, "\(few)")
        var many = ArrivalRanges.Cell()
        for _ in 0..<40 {
            many.add(ratio: 2, statuses: 1)
            for _ in 0..<11 { many.add(ratio: 1, statuses: 1) }
        }
        let level = ArrivalRanges.level(0.9, arrivals: many.total)
        #expect(level < 0.91, "\(level)")
        let read = try #require(many.ratio(at: 0.9))
        #expect(read > 1 && read < 1.07, "\(read) at \(level)")
    }

    @Test(
        "E1: estimates closer than 15 s teach nothing; an arrival earlier than estimated keeps the latest at the estimate"
    )
    func shortAndEarly() {
        var ranges = ArrivalRanges()
        for _ in 0..<500 { ranges.observe(estimated: 10, actual: 40, latest: nil, leg: .dropOff, area: "") }
        #expect(ranges.ratio(.dropOff, horizon: 0, area: "") == 1.5, "a 4x ratio from 10 s estimates is noise")
        for _ in 0..<2000 { ranges.observe(estimated: 300, actual: 150, latest: nil, leg: .dropOff, area: "") }
        #expect(ranges.latest(in: 300, leg: .dropOff, area: "") == 300, "never before the estimate")
    }

    @Test("E1: another car starts its own pace: the old car's place and estimates are not counted against it")
    func reassignment() throws {
        var harness = Harness()
        harness.start()
        for second in 1...20 {
            harness.fix(
                at: t0.addingTimeInterval(Double(second)),
                pickup.moved(metres: 3000 - 10 * Double(second), bearing: 0), speed: 10)
        }
        _ = harness.engine.publishAll(now: t0.addingTimeInterval(20))
        harness.send("rides/r-1/assign", bytes(#"{"vehicleId":"v-2"}"#), at: t0.addingTimeInterval(21))
        // The new car is 3 km on the other side, its first fix 2 s after the old car's last, without a speed.
        harness.fix(vehicle: "v-2", at: t0.addingTimeInterval(22), pickup.moved(metres: 3000, bearing: 180))
        let ride = try #require(harness.engine.ride("r-1"))
        #expect(ride.smoothedSpeed == nil, "no pace until the new car is seen moving, not 3 km in 2 s")
        #expect(ride.phase == .confirmed, "P2: 3 km at the typical speed is no approach")
        let eta = ride.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(22))
        #expect(abs(eta - 3000 * ride.detourFactor / 7) < 1, "\(eta) s: the typical 7 m/s")
    }

    @Test("E1: over random arrivals, the latest time is never before the estimate, nor ever in the past")
    func neverBeforeTheEstimate() async {
        let arrivals = zip(Gen.double(in: 0...1000), Gen.double(in: 0...4000), Gen.int(in: 0...1)).array(of: 0...200)
        await propertyCheck(count: 300, input: zip(arrivals, Gen.double(in: -10...2000))) { arrivals, toGo in
            var ranges = ArrivalRanges()
            for (estimated, actual, leg) in arrivals {
                ranges.observe(
                    estimated: estimated, actual: actual, latest: nil, leg: leg == 0 ? .pickup : .dropOff, area: "a")
            }
            for leg in ArrivalRanges.Leg.allCases {
                let latest = ranges.latest(in: toGo, leg: leg, area: "a")
                #expect(latest >= max(0, toGo), "E1: \(latest) before \(toGo)")
            }
        }
    }
}
