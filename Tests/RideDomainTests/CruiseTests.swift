import Foundation
import Testing

import struct RideStatusKit.RideTopics

@testable import RideDomain

/// E1: the cruise, the speed while moving over five minutes shrunk toward the speed the ride's area
/// learned, that a far arrival is estimated toward; and that speed, learned per area and shared.
@Suite("E1: the cruise a far arrival is estimated toward, and the speed an area learns")
struct CruiseTests {
    @Test("E1: the speed expected over a horizon fades from the pace now to the cruise over 30 s, between both")
    func expectedSpeed() {
        // Hand-computed, pace 20 and cruise 15, with the fade's rational form (1 + y/6) / (1 + 2y/3 + y^2/6) for
        // y = h / 30. 30 s out: 15 + 5 x (7/6) / (11/6) = 18.1818 (the exact fade, (1 - e^-1), gives 18.1606).
        #expect(abs(Ride.expectedSpeed(pace: 20, cruise: 15, horizon: 30) - (15 + 5 * 7.0 / 11)) < 1e-9)
        // 300 s out: 15 + 5 x (8/3) / (73/3) = 15.5479 (exact: 15.49998).
        #expect(abs(Ride.expectedSpeed(pace: 20, cruise: 15, horizon: 300) - (15 + 5 * 8.0 / 73)) < 1e-9)
        #expect(Ride.expectedSpeed(pace: 20, cruise: 15, horizon: 0) == 20, "now: the pace")
        // Within 2 % of the difference between pace and cruise of the exact fade's, at every horizon.
        for horizon in stride(from: 0.5, through: 7200, by: 0.5) {
            let exact = 15 + 5 * (1 - exp(-horizon / 30)) * 30 / horizon
            #expect(abs(Ride.expectedSpeed(pace: 20, cruise: 15, horizon: horizon) - exact) < 0.02 * 5)
        }
        // Farther arrivals follow the cruise more: monotonic in the horizon, and always between the two.
        for (pace, cruise) in [(20.0, 15.0), (4.0, 9.0)] {
            var last = pace
            for horizon in stride(from: 1.0, through: 3600, by: 7) {
                let speed = Ride.expectedSpeed(pace: pace, cruise: cruise, horizon: horizon)
                #expect(abs(speed - cruise) <= abs(last - cruise) + 1e-12)
                #expect(min(pace, cruise) <= speed && speed <= max(pace, cruise))
                last = speed
            }
        }
    }

    /// A harness whose engine learned `learned` m/s for rides outside every area, with ride r-1 started.
    static func started(learned: Double) -> Harness {
        var harness = Harness()
        harness.engine.learning.learn(speed: learned, area: nil, at: t0, configuration: RideConfiguration())
        harness.start()
        return harness
    }

    /// Drives a car at `speed` m/s straight at the pickup from `metres` out for `seconds`, a fix a second with
    /// its speed; returns the seconds to the pickup ETA after the last fix, and the great-circle metres left.
    /// 40 s at 12 m/s straight to the pickup, a fix a second, the last one standing there (P3); the actions.
    @discardableResult
    static func driveToPickup(_ harness: inout Harness) -> [RideAction] {
        (0...40).flatMap { second in
            harness.fix(
                at: t0.addingTimeInterval(1 + Double(second)),
                pickup.moved(metres: 480 - 12 * Double(second), bearing: 0), speed: second == 40 ? 0 : 12)
        }
    }

    /// The first fix at `start` seconds after t0 (1 by default).
    static func approach(
        _ harness: inout Harness, from metres: Double, at speed: Double, seconds: Int, start: Double = 1
    ) throws -> (eta: Double, left: Double) {
        for second in 0...seconds {
            harness.fix(
                at: t0.addingTimeInterval(start + Double(second)),
                pickup.moved(metres: metres - speed * Double(second), bearing: 0), speed: speed)
        }
        let ride = try #require(harness.engine.ride("r-1"))
        let last = t0.addingTimeInterval(start + Double(seconds))
        return (ride.estimatedPickupDate.timeIntervalSince(last), metres - speed * Double(seconds))
    }

    @Test(
        "E1: an area with a learned speed: a far ETA leans toward it, a near one follows the pace; without one, the car's own"
    )
    func farArrivalsLeanOnTheArea() throws {
        let configuration = RideConfiguration()
        // The area ("" without a catalog) learned 18 m/s; the car drives 12 m/s for 60 s, 3 km out.
        var harness = Self.started(learned: 18)
        #expect(harness.engine.ride("r-1")?.cruisePrior == 18)
        let (eta, left) = try Self.approach(&harness, from: 3000, at: 12, seconds: 60)
        // The cruise: 60 one-second intervals at 12 m/s, each decaying those before by e^(-1/300), weighed
        // with the area's 18 m/s over 60 s. The stop share: 0.15 x e^(-60/300).
        let moving = (0..<60).map { exp(-Double($0) / 300) }.reduce(0, +)
        let cruise = (60 * 18 + 12 * moving) / (60 + moving)
        let share = 0.15 * exp(-60.0 / configuration.stopShareTimeConstant)
        let factor = configuration.detourFactor
        let horizon = left * factor / (12 * (1 - share))
        let expected =
            left * factor / (Ride.expectedSpeed(pace: 12, cruise: cruise, horizon: horizon) * (1 - share))
        #expect(abs(eta - expected) < 0.01, "\(eta) against \(expected)")
        #expect(cruise > 15.1 && cruise < 15.2, "about half the car's, half the area's: \(cruise)")
        #expect(eta < horizon - 20, "leans toward the faster area: \(eta) against \(horizon) at the pace")

        // Without a learned speed the cruise is the car's own 12 m/s: the ETA is the pace's.
        var alone = Harness()
        alone.start()
        #expect(alone.engine.ride("r-1")?.cruisePrior == nil)
        let (own, _) = try Self.approach(&alone, from: 3000, at: 12, seconds: 60)
        #expect(abs(own - horizon) < 0.01, "\(own) against \(horizon)")

        // Near the pickup (30 m out, about 3 s) the pace rules: the ETA within 5 % of the pace's (1.5 % here).
        var near = Self.started(learned: 18)
        let (close, closeLeft) = try Self.approach(&near, from: 750, at: 12, seconds: 60)
        let paced = closeLeft * factor / (12 * (1 - share))
        #expect(abs(close - paced) / paced < 0.05, "\(close) against \(paced)")
        #expect(close < paced, "and leaning, a little, toward the faster area")
    }

    @Test(
        "E1: before the car is seen moving, the area's learned speed times the share moving, not the typical speed"
    )
    func unseenSpeed() throws {
        let configuration = RideConfiguration()
        var harness = Self.started(learned: 18)
        // A first fix without a speed 2 km out: 2000 x 1.3 / (18 x (1 - 0.15)) = 169.9 s, not 2000 x 1.3 / 7.
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0))
        let ride = try #require(harness.engine.ride("r-1"))
        let expected = 2000 * configuration.detourFactor / (18 * (1 - configuration.typicalStopShare))
        #expect(abs(ride.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - expected) < 0.5)
        // The ride's leg before the pickup goes at it too: the legs' great circle over the same speed.
        let leg = pickup.distance(to: dropOff) * configuration.detourFactor / (18 * 0.85)
        let dropOffETA = try #require(ride.estimatedDropOffDate)
        #expect(abs(dropOffETA.timeIntervalSince(ride.estimatedPickupDate) - leg) < 0.5)
    }

    @Test("E1: an area learns the speed while moving of each leg driven to its end; bounded; off at 0")
    func learning() {
        var configuration = RideConfiguration()
        configuration.stopShareLearningRate = 0.1
        var learning = AreaLearning()
        let centre = ServiceArea(name: "centre", currencyCode: "EUR", polygons: [])
        let ring = ServiceArea(name: "ring", currencyCode: "EUR", polygons: [])
        // The first leg: its own speed (no fleet yet). The next: 10 % of the way, 8 + 0.1 (6 - 8) = 7.8.
        let first = learning.learn(speed: 8, area: centre, at: t0, configuration: configuration)
        #expect(first)
        #expect(learning.learned["centre"]?.speed == 8 && learning.learned["centre"]?.speedLegs == 1)
        learning.learn(speed: 6, area: centre, at: t0, configuration: configuration)
        #expect(abs((learning.learned["centre"]?.speed ?? 0) - 7.8) < 1e-12)
        #expect(learning.changed == ["centre"], "learned: to share")
        // Out of bounds (a stationary car's noise, a glitch at 70 m/s): nothing learned.
        let slow = learning.learn(speed: 0.2, area: centre, at: t0, configuration: configuration)
        let fast = learning.learn(speed: 70, area: centre, at: t0, configuration: configuration)
        #expect(!slow && !fast)
        #expect(learning.learned["centre"]?.speedLegs == 2)
        // A new area starts from the fleet's: the ring's first leg moves it 10 % from 7.8 toward 20.
        #expect(learning.speed(for: ring, at: t0, configuration: configuration) == 7.8)
        learning.learn(speed: 20, area: ring, at: t0, configuration: configuration)
        #expect(abs((learning.learned["ring"]?.speed ?? 0) - (7.8 + 0.1 * (20 - 7.8))) < 1e-12)
        // The fleet's for a third area: weighed by legs (2 and 1, under the memory of 10).
        let fleet = (2 * 7.8 + 1 * (7.8 + 1.22)) / 3
        #expect(abs((learning.fleetSpeed(configuration) ?? 0) - fleet) < 1e-12)
        // Learning off: nothing learned, no fleet value.
        configuration.stopShareLearningRate = 0
        var off = AreaLearning()
        let offTaught = off.learn(speed: 8, area: centre, at: t0, configuration: configuration)
        #expect(!offTaught)
        #expect(learning.fleetSpeed(configuration) == nil)
    }

    @Test(
        "E1: a leg driven to the pickup teaches the speed; a new ride starts from it, a restored one without"
    )
    func legsTeachAndRidesTakeIt() throws {
        var harness = Harness()
        harness.start()
        // 40 s at 12 m/s to the pickup, then standing there: P3.
        var state: Ride?
        for case .publish(_, let written?, _) in Self.driveToPickup(&harness) { state = written }
        #expect(harness.phase() == .pickup)
        let learned = try #require(harness.engine.learning.learned[""])
        #expect(abs((learned.speed ?? 0) - 12) < 1e-4 && learned.speedLegs == 1, "\(learned)")
        // A second ride takes it.
        harness.start(ride: "r-2", vehicle: "v-2", at: t0.addingTimeInterval(60))
        #expect(harness.engine.ride("r-2")?.cruisePrior == learned.speed)
        // The first ride started before its area learned a speed: a new owner restoring it gives it its own.
        var successor = RideEngine()
        successor.learning.learn(speed: 16, area: nil, at: t0, configuration: RideConfiguration())
        _ = successor.restore(try #require(state), now: t0.addingTimeInterval(45))
        #expect(successor.ride("r-1")?.cruisePrior == 16)
    }

    @Test("A2, T4: an absurd reported speed counts at rides.maxSpeed, first fix or not; the ETA recovers")
    func absurdSpeed() throws {
        let configuration = RideConfiguration()
        var harness = Harness()
        harness.start()
        _ = try Self.approach(&harness, from: 3000, at: 12, seconds: 10)
        // 12 m on in a second (T4 accepts the place), reporting 1e308 m/s.
        harness.fix(at: t0.addingTimeInterval(12), pickup.moved(metres: 2868, bearing: 0), speed: 1e308)
        let absurd = try #require(harness.engine.ride("r-1"))
        #expect(absurd.location?.timestamp == t0.addingTimeInterval(12), "the fix is accepted")
        #expect(absurd.cruiseMetres.isFinite && (absurd.smoothedSpeed ?? .infinity) <= configuration.maxSpeed)
        // 120 s more at 12 m/s from 2,856 m: the pace is the car's again (10 s time constant); the 70 m/s second
        // still weighs a little in the five-minute cruise, so the ETA is within 5 % of the pace's.
        let (eta, left) = try Self.approach(&harness, from: 2856, at: 12, seconds: 120, start: 13)
        let ride = try #require(harness.engine.ride("r-1"))
        #expect(abs((ride.smoothedSpeed ?? 0) - 12) < 0.01)
        let pace = left * configuration.detourFactor / (12 * (1 - (ride.stopShare ?? 0)))
        #expect(eta.isFinite && abs(eta - pace) / pace < 0.05, "\(eta) against \(pace)")
        let status = try #require(harness.engine.tick(now: t0.addingTimeInterval(200)).statuses.first)
        #expect(status.estimatedPickupDate != nil && status.phase == .confirmed)

        // A first fix (no T4: nothing to compare it with) reporting 1e308, 10 km out: the pace starts at 70 m/s,
        // so the ETA is 10,000 x 1.3 / (70 x 0.85) = 218 s, and P2 (120 s) does not fire.
        var first = Harness()
        first.start()
        first.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 10_000, bearing: 0), speed: 1e308)
        let started = try #require(first.engine.ride("r-1"))
        #expect(started.smoothedSpeed == configuration.maxSpeed)
        let expected = 10_000 * configuration.detourFactor / (70 * (1 - configuration.typicalStopShare))
        #expect(abs(started.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - expected) < 0.5)
        #expect(started.phase == .confirmed)
    }

    @Test("E1: with two areas, each ride learns and reads under its own area, by its catalog index")
    func areasByIndex() throws {
        func square(_ west: Double) -> [[[Coordinate]]] {
            [
                [
                    [
                        Coordinate(latitude: 52.3, longitude: west), Coordinate(latitude: 52.3, longitude: west + 0.8),
                        Coordinate(latitude: 52.7, longitude: west + 0.8), Coordinate(latitude: 52.7, longitude: west),
                        Coordinate(latitude: 52.3, longitude: west),
                    ]
                ]
            ]
        }
        let areas = [
            ServiceArea(name: "west", currencyCode: "EUR", polygons: square(13.0)),
            ServiceArea(name: "east", currencyCode: "EUR", polygons: square(13.8)),
        ]
        let catalog = RideOptionCatalog(
            areas: areas,
            options: testCatalog().options.map { option in
                var option = option
                option.fares = ["west": option.fares["berlin"]!, "east": option.fares["berlin"]!]
                return option
            })
        let configuration = RideConfiguration()
        var engine = RideEngine(configuration: configuration, catalog: catalog)
        engine.learning.learn(speed: 10, area: areas[0], at: t0, configuration: configuration)
        engine.learning.learn(speed: 30, area: areas[1], at: t0, configuration: configuration)
        let east = Coordinate(latitude: 52.5, longitude: 14.2)
        #expect(engine.catalogArea(at: pickup).index == 1 && engine.catalogArea(at: east).index == 2)
        #expect(engine.areaName(2) == "east" && engine.areaName(0) == "" && engine.areaName(3) == "")
        #expect(engine.catalogArea(at: Coordinate(latitude: 10, longitude: 10)).index == 0)
        // A ride in each: each takes its own area's speed.
        _ = engine.receive(topic: "rides/r-1/start", payload: bookingJSON(ride: "r-1", vehicle: "v-1"), now: t0)
        let eastBooking = String(decoding: bookingJSON(ride: "r-2", vehicle: "v-2"), as: UTF8.self)
            .replacingOccurrences(
                of: #""latitude":52.5219,"longitude":13.4132"#,
                with: #""latitude":\#(east.latitude),"longitude":\#(east.longitude)"#)
        _ = engine.receive(topic: "rides/r-2/start", payload: Array(eastBooking.utf8), now: t0)
        #expect(engine.ride("r-1")?.areaIndex == 1 && engine.ride("r-1")?.cruisePrior == 10)
        // East learned after west: from the fleet's 10 m/s, 5 % of the way to 30; its hour (the same as the
        // ride's) learned 30 from its one leg, weighed 1 against the area's 2.
        #expect(engine.ride("r-2")?.areaIndex == 2)
        #expect(abs((engine.ride("r-2")?.cruisePrior ?? 0) - (30 + 2 * (10 + 0.05 * 20)) / 3) < 1e-12)
        // The east car drives 1.5 km straight to its pickup at 5 m/s: its arrival teaches the east range (earlier
        // than estimated: the estimates count a detour of 1.3 on a straight road); the west range learns nothing.
        let before = engine.ranges.ratio(.pickup, horizon: 2, area: "west")
        for second in stride(from: 0, through: 300, by: 5) {
            let place = east.moved(metres: max(0, 1500 - 5 * Double(second)), bearing: 0)
            let now = t0.addingTimeInterval(Double(second) + 1)
            _ = engine.receive(
                topic: "fleet/vehicles/v-2/position",
                payload: fixJSON(vehicle: "v-2", at: now, place, speed: second >= 300 ? 0 : 5), now: now)
            _ = engine.tick(now: now)
        }
        #expect(engine.ride("r-2")?.phase == .pickup)
        // An area that learned nothing reads the fleet's ratio; the one that learned reads its own.
        let (eastRatio, westRatio) = (
            engine.ranges.ratio(.pickup, horizon: 2, area: "east"),
            engine.ranges.ratio(.pickup, horizon: 2, area: "west")
        )
        let fleetRatio = engine.ranges.ratio(.pickup, horizon: 2, area: "nowhere")
        #expect(fleetRatio != before, "the arrival was learned: \(before) to \(fleetRatio)")
        #expect(westRatio == fleetRatio && eastRatio != fleetRatio, "east \(eastRatio), west \(westRatio)")
    }

    @Test("G3, E1: a new owner reading the state estimates the next fix as the old owner does")
    func handoverKeepsTheCruise() throws {
        let configuration = RideConfiguration()
        var harness = Self.started(learned: 18)
        _ = try Self.approach(&harness, from: 3000, at: 12, seconds: 60)
        let state = try #require(harness.engine.ride("r-1")).durableState()
        // The same state without the cruise (shape 7), for a new owner that would start it again.
        var object = try #require(try JSONSerialization.jsonObject(with: Data(state)) as? [String: Any])
        for key in ["cruiseMetres", "cruiseSeconds", "cruisePrior"] { object[key] = nil }
        let older = Array(try JSONSerialization.data(withJSONObject: object))
        let restart = t0.addingTimeInterval(62)
        func successor(reading payload: [UInt8]) throws -> RideEngine {
            var engine = RideEngine()
            engine.learning.learn(speed: 25, area: nil, at: t0, configuration: configuration)
            let ride = try Ride.restored(topicRide: "r-1", payload: payload, now: restart, configuration: configuration)
            _ = engine.restore(ride, now: restart)
            return engine
        }
        var new = try successor(reading: state)
        var fresh = try successor(reading: older)
        let next = fixJSON(at: t0.addingTimeInterval(63), pickup.moved(metres: 3000 - 12 * 62, bearing: 0), speed: 12)
        let topic = harness.topics.position(vehicle: "v-1")
        harness.send(topic, next, at: t0.addingTimeInterval(63))
        _ = new.receive(topic: topic, payload: next, now: t0.addingTimeInterval(63))
        _ = fresh.receive(topic: topic, payload: next, now: t0.addingTimeInterval(63))
        let old = try #require(harness.engine.ride("r-1")).estimatedPickupDate
        let kept = try #require(new.ride("r-1")).estimatedPickupDate
        let lost = try #require(fresh.ride("r-1")).estimatedPickupDate
        // The point the pace is counted from is not durable: the new owner counts the next interval from this fix,
        // one second less than the old owner (0.4 s of a 170 s ETA here).
        #expect(abs(old.timeIntervalSince(kept)) < 1, "\(old) against \(kept)")
        #expect(new.ride("r-1")?.cruisePrior == 18, "the ride's prior, not the new owner's 25 m/s")
        // Without the cruise the new owner's 25 m/s pulls the far ETA earlier by tens of seconds.
        #expect(old.timeIntervalSince(lost) > 10, "\(old) against \(lost)")
    }

    @Test("P2, E1: approachingPickup follows the published estimate, the cruise included")
    func approachingByTheEstimate() throws {
        let configuration = RideConfiguration()
        var harness = Self.started(learned: 20)
        // 10 m/s from 2.5 km: the far estimate leans toward 20 m/s, so it says "within 120 s" earlier than the pace.
        var changed = false
        for second in 0...200 {
            let now = t0.addingTimeInterval(1 + Double(second))
            let place = pickup.moved(metres: 2500 - 10 * Double(second), bearing: 0)
            harness.fix(at: now, place, speed: 10)
            let ride = try #require(harness.engine.ride("r-1"))
            let near =
                ride.estimatedPickupDate.timeIntervalSince(now) <= configuration.approachingWithin
                || place.distance(to: pickup) <= configuration.approachingDistance
            if ride.phase == .confirmed { #expect(!near, "confirmed while the estimate says near, at \(second) s") }
            if near { #expect(ride.phase >= .approachingPickup, "at \(second) s") }
            changed = changed || ride.phase == .approachingPickup
        }
        #expect(changed)
    }

    @Test("E1: a ride completed from pickup teaches no leg again")
    func completedFromPickupTeachesNothingAgain() throws {
        var harness = Harness()
        harness.start()
        Self.driveToPickup(&harness)
        #expect(harness.phase() == .pickup)
        let taught = try #require(harness.engine.learning.learned[""])
        harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(60))
        _ = harness.engine.tick(now: t0.addingTimeInterval(61))
        #expect(harness.phase() == .completed)
        let after = try #require(harness.engine.learning.learned[""])
        #expect(after.speedLegs == taught.speedLegs && after.legs == taught.legs, "\(after)")
    }

    @Test("E1: shared priors carry the speed, weighed by legs up to the learning's memory")
    func sharedSpeed() {
        var configuration = RideConfiguration()
        configuration.stopShareLearningRate = 0.1  // a memory of 10 legs
        var learning = AreaLearning()
        let area = ServiceArea(name: "berlin", currencyCode: "EUR", polygons: [])
        for _ in 0..<5 { learning.learn(speed: 9, area: area, at: t0, configuration: configuration) }
        let shared = AreaPriors(
            area: "berlin", worker: "w-2", at: t0, detourFactor: 1.1, rides: 0, stopShare: nil, legs: 0, speed: 15,
            speedLegs: 40)
        let adopted = learning.adopt(shared, configuredFactor: 1.3, configuration: configuration)
        #expect(adopted)
        // 5 legs at 9 against 40 (the memory: 10) at 15: (5 x 9 + 10 x 15) / 15 = 13.
        let entry = learning.learned["berlin"]
        #expect(abs((entry?.speed ?? 0) - 13) < 1e-12 && entry?.speedLegs == 40)
        // Priors without a speed (a worker before it was shared) leave it alone.
        var older = shared
        (older.speed, older.speedLegs, older.at) = (nil, 0, t0.addingTimeInterval(60))
        learning.adopt(older, configuredFactor: 1.3, configuration: configuration)
        #expect(abs((learning.learned["berlin"]?.speed ?? 0) - 13) < 1e-12)
        // What a worker shares carries it.
        var engine = RideEngine(configuration: configuration)
        engine.learning.learn(speed: 11, area: nil, at: t0, configuration: configuration)
        let payload = engine.priorsToShare(worker: "w-1", now: t0).first?.payload ?? []
        // t0, Sunday 22 November 2026 09:50 UTC (rides.timeZone), is hour 6 * 24 + 9 of the week.
        #expect(
            String(decoding: payload, as: UTF8.self).hasSuffix(
                #""speed":11.0,"speedLegs":1,"timeZone":"UTC","hours":[{"hour":153,"speed":11.0,"speedLegs":1}]}"#))
    }
}
