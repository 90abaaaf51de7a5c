import Foundation
import PropertyBased
import RideDomain
import Testing

import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus

/// E1 as built: the pace in two parts (the speed while moving and the share of time standing),
/// smoothed in time, started from a moving fix or the typical speed, and ETAs that do not lurch later while the
/// car comes nearer. Hand-computed cases, and a property over random approaches.
@Suite("Estimates E1: smoothing in time, the first speed, ETAs that move smoothly")
struct EstimatorTests {
    static var configuration: RideConfiguration { RideConfiguration() }

    @Test("E1: smoothing is in time: ten fixes a second apart weigh the same as one ten seconds on")
    func smoothingInTime() {
        let oneFix = Estimator.smoothed(10, toward: 0, over: 10, timeConstant: 120)
        var tenFixes = 10.0
        for _ in 0..<10 { tenFixes = Estimator.smoothed(tenFixes, toward: 0, over: 1, timeConstant: 120) }
        #expect(abs(oneFix - 10 * exp(-10.0 / 120)) < 1e-12, "10 e^(-1/12) = \(oneFix)")
        #expect(abs(oneFix - tenFixes) < 1e-9)
        // Nothing moves it backwards in time, and a gap of an hour forgets the old value.
        #expect(Estimator.smoothed(10, toward: 0, over: -5, timeConstant: 120) == 10)
        #expect(Estimator.smoothed(10, toward: 4, over: 3600, timeConstant: 120) < 4.0001)
    }

    @Test("E1: a first fix without a speed, or of a car standing, starts from the typical speed")
    func firstSpeed() throws {
        // A first fix without a speed (a tracker that sends none; T7 derives it from the second on).
        var silent = Harness()
        silent.start()
        silent.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0))
        let first = try #require(silent.engine.ride("r-1"))
        #expect(abs(first.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - 2000 * 1.3 / 7) < 1)
        // A first fix at a red light 2 km out gives 2000 x 1.3 / 7 = 371 s, not the floor's 520 s.
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0), speed: 0)
        let ride = try #require(harness.engine.ride("r-1"))
        #expect(abs(ride.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - 2000 * 1.3 / 7) < 1)
        // A first fix of a car moving at 12 m/s starts the pace there: 12 x (1 - 0.15) = 10.2 m/s.
        var moving = Harness()
        moving.start()
        moving.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0), speed: 12)
        let under = try #require(moving.engine.ride("r-1"))
        #expect(abs(under.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - 2000 * 1.3 / 10.2) < 0.01)
    }

    /// Seconds from `time` to the ride's pickup ETA, straight from the ride (no status, so no delay limit).
    static func pickupSeconds(_ harness: Harness, at time: Date) throws -> Double {
        try #require(harness.engine.ride("r-1")).estimatedPickupDate.timeIntervalSince(time)
    }

    @Test(
        "E1: a fast arterial trip from a first fix with no speed: the pace is the car's from its second fix, not the typical speed's"
    )
    func arterialWithoutSpeed() throws {
        var harness = Harness()
        harness.start()
        // 18 m/s straight at the pickup from 3 km, a fix every 2 s, none with a speed (as the recorded trips).
        for step in 0...15 {
            let second = 1 + 2 * Double(step)
            harness.fix(at: t0.addingTimeInterval(second), pickup.moved(metres: 3000 - 18 * (second - 1), bearing: 0))
            if step == 0 {
                // One fix: no speed yet, so the typical 7 m/s: 3000 x 1.3 / 7 = 557 s.
                #expect(abs(try Self.pickupSeconds(harness, at: t0.addingTimeInterval(1)) - 3000 * 1.3 / 7) < 0.5)
            }
        }
        // 30 s on, 2460 m out. The pace: 18 m/s while moving from the second fix (36 m in 2 s, beyond the 10 m of
        // twice the accuracy), the cruise 18 m/s too, and a stop share of 0.15 e^(-30/300) = 0.1357 after 30 s of
        // moving: 2460 x 1.3 / (18 x 0.8643) = 205.6 s. The old smoothing (typical 7 m/s forgotten over 120 s)
        // said 285 s.
        let ride = try #require(harness.engine.ride("r-1"))
        #expect(abs((ride.smoothedSpeed ?? 0) - 18) < 0.01)
        let share = 0.15 * exp(-30.0 / RideConfiguration().stopShareTimeConstant)
        #expect(abs((ride.stopShare ?? 0) - share) < 1e-6)
        let expected = 2460 * ride.detourFactor / (18 * (1 - share))
        #expect(abs(try Self.pickupSeconds(harness, at: t0.addingTimeInterval(31)) - expected) < 0.5, "\(expected)")
    }

    @Test(
        "E1: a stop at a light counts in the stop share, not in the speed while moving; a new pace is followed within 30 s"
    )
    func stopAtALight() throws {
        var harness = Harness()
        harness.start()
        var north = 4000.0
        var second = 1.0
        func drive(_ seconds: Int, at speed: Double) {
            for _ in 0..<seconds {
                harness.fix(at: t0.addingTimeInterval(second), pickup.moved(metres: north, bearing: 0), speed: speed)
                north -= speed
                second += 1
            }
        }
        drive(61, at: 10)  // 60 s of intervals at 10 m/s
        var ride = try #require(harness.engine.ride("r-1"))
        let moved = 0.15 * exp(-60.0 / RideConfiguration().stopShareTimeConstant)  // 0.1228
        #expect(abs((ride.stopShare ?? 0) - moved) < 1e-6)
        drive(30, at: 0)  // a red light of 30 s: each interval counts at the speed its closing fix reports
        ride = try #require(harness.engine.ride("r-1"))
        #expect(abs((ride.smoothedSpeed ?? 0) - 10) < 1e-9, "standing does not drag the moving pace")
        // 30 s standing: the share goes to 1 - (1 - 0.1228) e^(-30/300) = 0.2063.
        let standing = 1 - (1 - moved) * exp(-30.0 / RideConfiguration().stopShareTimeConstant)
        #expect(abs((ride.stopShare ?? 0) - standing) < 1e-6, "\(ride.stopShare ?? -1) against \(standing)")
        // The ETA at the light: distance x 1.3 / (10 x 0.7937) = 7.94 m/s, not the floor (pace and cruise are both
        // 10 m/s: the light does not count in either).
        let metres = ride.location!.coordinate.distance(to: pickup)
        let atLight = try Self.pickupSeconds(harness, at: t0.addingTimeInterval(second - 1))
        #expect(abs(atLight - metres * ride.detourFactor / (10 * (1 - standing))) < 0.5)
        // Away from the light at 15 m/s: after 30 s of it the moving pace is 10 + 5 (1 - e^-3) = 14.75 m/s.
        drive(30, at: 15)
        ride = try #require(harness.engine.ride("r-1"))
        #expect(abs((ride.smoothedSpeed ?? 0) - (10 + 5 * (1 - exp(-3.0)))) < 0.01, "\(ride.smoothedSpeed ?? 0)")
    }

    @Test(
        "E1: a sampling gap counts at the distance covered over it; GPS jitter of a car standing without a speed is standing"
    )
    func samplingGapAndJitter() throws {
        var harness = Harness()
        harness.start()
        let start = pickup.moved(metres: 3000, bearing: 0)
        // Moving at 10 m/s, reported, for 20 s.
        for step in 0...20 {
            harness.fix(
                at: t0.addingTimeInterval(1 + Double(step)), start.moved(metres: 10 * Double(step), bearing: 180),
                speed: 10)
        }
        let before = try #require(harness.engine.ride("r-1"))
        // A 60 s gap, then a fix 30 m on with a speed of 10: the 60 s count at 0.5 m/s, standing (a stop the gap
        // hid), not at the 10 m/s the fix reports.
        let afterGap = start.moved(metres: 230, bearing: 180)
        harness.fix(at: t0.addingTimeInterval(81), afterGap, speed: 10)
        let gap = try #require(harness.engine.ride("r-1"))
        #expect(gap.smoothedSpeed == before.smoothedSpeed)
        let standing = 1 - (1 - (before.stopShare ?? 0)) * exp(-60.0 / RideConfiguration().stopShareTimeConstant)
        #expect(abs((gap.stopShare ?? 0) - standing) < 1e-6)
        // Without a speed, standing: jitter of up to 4 m a second (T7 derives up to 8 m/s from it) stays within
        // twice the 5 m accuracy of the point counted last, so it counts as standing once it cannot be moving
        // (10 m in 6.7 s at 1.5 m/s), never as a pace.
        var silent = Harness()
        silent.start()
        for step in 0...10 {
            silent.fix(
                at: t0.addingTimeInterval(1 + Double(step)), start.moved(metres: 15 * Double(step), bearing: 180))
        }
        let driving = try #require(silent.engine.ride("r-1"))
        #expect(abs((driving.smoothedSpeed ?? 0) - 15) < 0.01)
        let light = start.moved(metres: 150, bearing: 180)
        for step in 1...30 {
            let jitter = light.moved(metres: Double(step % 5), bearing: Double(step * 77 % 360))
            silent.fix(at: t0.addingTimeInterval(11 + Double(step)), jitter)
        }
        let stood = try #require(silent.engine.ride("r-1"))
        #expect(stood.smoothedSpeed == driving.smoothedSpeed, "the jitter is no pace")
        // 28 of the 30 s count as standing (4 x 7 s; the last 2 s are not yet known to be standing).
        let share = 1 - (1 - (driving.stopShare ?? 0)) * exp(-28.0 / RideConfiguration().stopShareTimeConstant)
        #expect(abs((stood.stopShare ?? 0) - share) < 1e-6, "\(stood.stopShare ?? -1) against \(share)")
    }

    @Test(
        "E1, P5: the nearby distance the pace counts is within 0.1 % of haversine up to 10 km, across the antimeridian too"
    )
    func nearbyDistance() async {
        let pairs = zip(
            Gen.double(in: -80...80), Gen.double(in: -180...180), Gen.double(in: 0..<360), Gen.double(in: 0...10_000))
        await propertyCheck(count: 2000, input: pairs) { latitude, longitude, bearing, metres in
            let from = Coordinate(latitude: latitude, longitude: longitude)
            let to = from.moved(metres: metres, bearing: bearing)
            let exact = from.distance(to: to)
            #expect(abs(from.nearbyDistance(to: to) - exact) <= max(0.001 * exact, 0.01), "\(from) to \(to)")
        }
        let west = Coordinate(latitude: 10, longitude: 179.9995)
        let east = Coordinate(latitude: 10, longitude: -179.9995)
        #expect(abs(west.nearbyDistance(to: east) - west.distance(to: east)) < 0.01)
        #expect(west.nearbyDistance(to: east) < 200)
    }

    /// The pickup ETA of the status published at `time` (the cadence's tick, or all at once after the first).
    static func pickupETA(_ harness: inout Harness, at time: Date) throws -> Date {
        let status = try #require(
            harness.engine.tick(now: time).statuses.first ?? harness.engine.publishAll(now: time).statuses.first)
        return try #require(status.estimatedPickupDate)
    }

    @Test(
        "E1: an ETA moves later by at most 30 s between statuses while the car comes nearer; standing still or moving away, it moves freely; never in the past"
    )
    func smoothETAs() throws {
        var configuration = Self.configuration
        configuration.speedTimeConstant = 1  // the speed follows each fix at once: the raw ETA lurches
        configuration.typicalStopShare = 0  // the pace is the speed until the car stands
        var harness = Harness(configuration: configuration)
        harness.start()
        let north = { (metres: Double) in pickup.moved(metres: metres, bearing: 0) }
        harness.fix(at: t0.addingTimeInterval(1), north(2000), speed: 10)
        let first = try Self.pickupETA(&harness, at: t0.addingTimeInterval(5))
        #expect(abs(first.timeIntervalSince(t0.addingTimeInterval(5)) - 2000 * 1.3 / 10) < 1)  // 260 s from then

        // Nearer and slower: the raw ETA would be 1950 x 1.3 / 5.5 = 461 s out, 200 s later; it moves 30 s.
        harness.fix(at: t0.addingTimeInterval(6), north(1950), speed: 5.5)
        let held = try Self.pickupETA(&harness, at: t0.addingTimeInterval(10))
        #expect(abs(held.timeIntervalSince(first) - 30) < 0.001, "held: \(held.timeIntervalSince(first)) s later")
        let second = try Self.pickupETA(&harness, at: t0.addingTimeInterval(15))
        #expect(abs(second.timeIntervalSince(held) - 30) < 0.001, "and 30 s more at the next status")

        // Standing still (a jam): the ETA moves freely, to 1950 x 1.3 over the pace from now: 5.53 m/s while
        // moving (the cruise: the one interval moved, 5 s at 5.5 m/s), 10 s of standing a share of
        // 1 - e^(-10/300) = 0.033, so about 5.32 m/s: 476 s, 216 s later.
        harness.fix(at: t0.addingTimeInterval(16), north(1950), speed: 0)
        let stopped = try Self.pickupETA(&harness, at: t0.addingTimeInterval(20))
        let constant = RideConfiguration().stopShareTimeConstant
        func seconds(_ metres: Double, pace: Double, cruise: Double, share: Double) -> Double {
            let horizon = metres * 1.3 / max(pace * (1 - share), 5)
            return metres * 1.3 / max(Ride.expectedSpeed(pace: pace, cruise: cruise, horizon: horizon) * (1 - share), 5)
        }
        let standing = 1 - exp(-10.0 / constant)
        let expected = seconds(1950, pace: 5.5 + 4.5 * exp(-5.0), cruise: 5.5, share: standing)
        #expect(abs(stopped.timeIntervalSince(t0.addingTimeInterval(20)) - expected) < 1, "\(expected)")

        // Moving away: freely too (nothing says the car is on its way). 5 s and 2 s at 5 m/s weigh into the
        // cruise, each decaying what came before by e^(-seconds / 300).
        harness.fix(at: t0.addingTimeInterval(21), north(1990), speed: 5)
        harness.fix(at: t0.addingTimeInterval(23), north(2010), speed: 5)
        let away = try Self.pickupETA(&harness, at: t0.addingTimeInterval(25))
        let (five, two) = (exp(-5.0 / Ride.cruiseMemory), exp(-2.0 / Ride.cruiseMemory))
        let cruise = ((27.5 * five + 25) * two + 10) / ((5 * five + 5) * two + 2)
        let expectedAway = seconds(2010, pace: 5, cruise: cruise, share: standing * exp(-7.0 / constant))
        #expect(abs(away.timeIntervalSince(t0.addingTimeInterval(25)) - expectedAway) < 1, "\(expectedAway)")
        #expect(away >= t0.addingTimeInterval(25), "never in the past")
    }

    @Test(
        "E1: over 500 random approaches, no pickup ETA is in the past, and none moves later by more than 30 s while the car moves and comes no farther"
    )
    func etaProperty() async {
        // Each step: seconds until the fix (1-10), metres a second toward the pickup (-5: away, to 20), speed.
        let steps = zip(Gen.int(in: 1...10), Gen.double(in: -5...20), Gen.double(in: 0...15)).array(of: 5...80)
        await propertyCheck(count: 500, input: steps) { steps in
            var harness = Harness()
            harness.start()
            var now = t0
            var north = 3000.0
            var previous: RideStatus?
            for (seconds, perSecond, speed) in steps {
                now = now.addingTimeInterval(Double(seconds))
                north = max(100, north - perSecond * Double(seconds))
                var actions = harness.fix(at: now, pickup.moved(metres: north, bearing: 0), speed: speed)
                actions += harness.engine.tick(now: now)
                for status in actions.statuses where status.phase < .pickup {
                    let eta = try #require(status.estimatedPickupDate)
                    #expect(eta >= status.issuedAt, "E1: never in the past")
                    if let previous, let before = previous.vehicle.location?.coordinate,
                        let here = status.vehicle.location, (here.speed ?? 0) >= RideConfiguration().stoppedSpeed,
                        here.coordinate.distance(to: pickup) <= before.distance(to: pickup),
                        let last = previous.estimatedPickupDate
                    {
                        #expect(eta.timeIntervalSince(last) <= 30.001, "E1: \(eta.timeIntervalSince(last)) s later")
                    }
                    previous = status
                }
            }
        }
    }

    // MARK: The detour factor per area, and its learned correction

    static let grid = ServiceArea(
        name: "grid", currencyCode: "EUR",
        polygons: [
            [
                [
                    Coordinate(latitude: 52.3, longitude: 13.0), Coordinate(latitude: 52.3, longitude: 13.8),
                    Coordinate(latitude: 52.7, longitude: 13.8), Coordinate(latitude: 52.7, longitude: 13.0),
                    Coordinate(latitude: 52.3, longitude: 13.0),
                ]
            ]
        ], detourFactor: 1.2)

    @Test(
        "E1: an area's detour factor comes from the catalog, else rides.detourFactor; completed rides correct it, bounded"
    )
    func detourLearning() {
        var configuration = Self.configuration
        configuration.detourLearningRate = 0.1
        var learning = AreaLearning()
        #expect(learning.factor(for: Self.grid, configuration: configuration) == 1.2)
        #expect(learning.factor(for: nil, configuration: configuration) == 1.3)
        // A ride that drove 1.5 times the straight line rises it by at most 0.1 (detourRise): 1.2 + 0.1 * 0.1 = 1.21.
        let taught = learning.learn(driven: 3000, straight: 2000, area: Self.grid, configuration: configuration)
        #expect(taught)
        #expect(abs(learning.factor(for: Self.grid, configuration: configuration) - 1.21) < 1e-9)
        // One that drove 1.1 times pulls it down by all of it: 1.21 + 0.1 * (1.1 - 1.21) = 1.199.
        learning.learn(driven: 2200, straight: 2000, area: Self.grid, configuration: configuration)
        #expect(abs(learning.factor(for: Self.grid, configuration: configuration) - 1.199) < 1e-9)
        #expect(
            abs(learning.factor(for: nil, configuration: configuration) - 1.199) < 1e-9,
            "an area with no history of its own starts from the fleet's, not rides.detourFactor")
        // Short legs teach nothing; a wild ratio counts only up to the bound.
        let short = learning.learn(driven: 900, straight: 300, area: Self.grid, configuration: configuration)
        #expect(!short)
        for _ in 0..<200 {
            learning.learn(driven: 50_000, straight: 1000, area: Self.grid, configuration: configuration)
        }
        #expect(learning.factor(for: Self.grid, configuration: configuration) <= configuration.detourFactorMaximum)
        for _ in 0..<200 { learning.learn(driven: 500, straight: 1000, area: Self.grid, configuration: configuration) }
        let low = learning.factor(for: Self.grid, configuration: configuration)
        #expect(low >= configuration.detourFactorMinimum && low < configuration.detourFactorMinimum + 1e-6, "\(low)")
        #expect(learning.learned["grid"]?.rides == 402)
        // Learning off.
        configuration.detourLearningRate = 0
        var off = AreaLearning()
        let offTaught = off.learn(driven: 3000, straight: 2000, area: Self.grid, configuration: configuration)
        #expect(!offTaught)
        #expect(off.factor(for: Self.grid, configuration: configuration) == 1.2)
    }

    @Test("E1: a completed ride teaches its area's factor once; a canceled one does not; new rides take the factor")
    func detourLearnedFromRides() throws {
        var configuration = Self.configuration
        configuration.detourLearningRate = 0.5
        let catalog = RideOptionCatalog(
            areas: [Self.grid],
            options: testCatalog().options.map { option in
                var option = option
                option.fares = ["grid": option.fares["berlin"]!]
                return option
            })
        var engine = RideEngine(configuration: configuration, catalog: catalog)
        func send(_ topic: String, _ payload: [UInt8], _ seconds: Double) {
            _ = engine.receive(topic: topic, payload: payload, now: t0.addingTimeInterval(seconds))
        }
        // r-1 drives from the pickup to the drop-off along two legs of a right angle (road > straight line).
        send("rides/r-1/start", bookingJSON(ride: "r-1", vehicle: "v-1"), 0)
        #expect(engine.ride("r-1")?.detourFactor == 1.2)
        send("rides/r-1/event", bytes(#"{"type":"arrivedAtPickup"}"#), 10)
        send("rides/r-1/event", bytes(#"{"type":"passengerOnBoard"}"#), 20)
        let corner = Coordinate(latitude: dropOff.latitude, longitude: pickup.longitude)
        var second = 20.0
        for step in 0...10 {
            let share = Double(step) / 10
            let point = Coordinate(
                latitude: pickup.latitude + (corner.latitude - pickup.latitude) * share, longitude: pickup.longitude)
            second += 20
            send("fleet/vehicles/v-1/position", fixJSON(at: t0.addingTimeInterval(second), point, speed: 8), second)
        }
        for step in 1...10 {
            let share = Double(step) / 10
            let point = Coordinate(
                latitude: corner.latitude, longitude: corner.longitude + (dropOff.longitude - corner.longitude) * share)
            second += 20
            send("fleet/vehicles/v-1/position", fixJSON(at: t0.addingTimeInterval(second), point, speed: 8), second)
        }
        send("rides/r-1/event", bytes(#"{"type":"arrivedAtDropOff"}"#), second + 5)
        #expect(engine.ride("r-1")?.phase == .completed)
        let learned = try #require(engine.learning.learned["grid"])
        #expect(learned.rides == 1)
        let ratio = (pickup.distance(to: corner) + corner.distance(to: dropOff)) / pickup.distance(to: dropOff)
        // Its rise capped at detourRise.
        let rise = min(ratio - 1.2, AreaLearning.detourRise)
        #expect(abs(learned.factor - (1.2 + 0.5 * rise)) < 0.02, "\(learned.factor) from ratio \(ratio)")
        // Its later statuses teach nothing more; a canceled ride teaches nothing.
        _ = engine.tick(now: t0.addingTimeInterval(second + 20))
        send("rides/r-2/start", bookingJSON(ride: "r-2", vehicle: "v-2"), second + 30)
        #expect(engine.ride("r-2")?.detourFactor == learned.factor, "a new ride takes the learned factor")
        send("rides/r-2/cancel", bytes(#"{"canceledBy":"user"}"#), second + 40)
        #expect(engine.learning.learned["grid"]?.rides == 1)
    }
}
