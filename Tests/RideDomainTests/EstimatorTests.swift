import Foundation
import PropertyBased
import RideDomain
import Testing

/// E1 as issue 15 builds it: the speed smoothed in time, started from a moving fix or the typical speed, and
/// ETAs that do not lurch later while the car comes nearer. Hand-computed cases, and a property over random
/// approaches.
@Suite("Estimates E1: smoothing in time, the first speed, ETAs that move smoothly")
struct EstimatorTests {
    static var configuration: RideConfiguration { RideConfiguration() }

    @Test("E1: the speed is smoothed in time: ten fixes a second apart weigh the same as one ten seconds on")
    func smoothingInTime() {
        let configuration = Self.configuration  // time constant 120 s
        let oneFix = Estimator.smoothed(10, with: 0, over: 10, configuration: configuration)
        var tenFixes = 10.0
        for _ in 0..<10 { tenFixes = Estimator.smoothed(tenFixes, with: 0, over: 1, configuration: configuration) }
        #expect(abs(oneFix - 10 * exp(-10.0 / 120)) < 1e-12, "10 e^(-1/12) = \(oneFix)")
        #expect(abs(oneFix - tenFixes) < 1e-9)
        // A red light of 30 s at 1 Hz takes 10 m/s to 10 e^(-1/4) = 7.79 m/s, not to the floor: the 2 km ETA
        // is 2000 x 1.3 / 7.79 = 334 s. (A fixed weight of 0.3 per fix took it to 0.0002 m/s: 520 s.)
        var atTheLight = 10.0
        for _ in 0..<30 { atTheLight = Estimator.smoothed(atTheLight, with: 0, over: 1, configuration: configuration) }
        #expect(abs(atTheLight - 7.788) < 0.001)
        let eta = Estimator(detourFactor: 1.3, speedFloor: 5).travelTime(metres: 2000, speed: atTheLight)
        #expect(abs(eta - 333.9) < 0.1)
        // Nothing moves it backwards in time, and a gap of an hour forgets the old speed.
        #expect(Estimator.smoothed(10, with: 0, over: -5, configuration: configuration) == 10)
        #expect(Estimator.smoothed(10, with: 4, over: 3600, configuration: configuration) < 4.0001)
    }

    @Test("E1: the first speed starts the smoothing; a first fix of a car standing still starts from the typical speed")
    func firstSpeed() throws {
        let configuration = Self.configuration
        #expect(Estimator.smoothed(nil, with: 12, over: nil, configuration: configuration) == 12)
        #expect(Estimator.smoothed(nil, with: 0.5, over: nil, configuration: configuration) == 7)
        // A first fix without a speed (a tracker that sends none; T7 derives it from the second on) starts
        // from the typical speed too.
        var silent = Harness()
        silent.start()
        silent.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0))
        let first = try #require(silent.engine.ride("r-1"))
        #expect(abs(first.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - 2000 * 1.3 / 7) < 1)
        // Through the engine: a first fix at a red light 2 km out gives 2000 x 1.3 / 7 = 371 s, not the
        // floor's 520 s.
        var harness = Harness()
        harness.start()
        let here = pickup.moved(metres: 2000, bearing: 0)
        harness.fix(at: t0.addingTimeInterval(1), here, speed: 0)
        let ride = try #require(harness.engine.ride("r-1"))
        #expect(abs(ride.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - 2000 * 1.3 / 7) < 1)
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

        // Standing still (a jam): the ETA moves freely, to 1950 x 1.3 / 5 (the floor) from now.
        harness.fix(at: t0.addingTimeInterval(16), north(1950), speed: 0)
        let stopped = try Self.pickupETA(&harness, at: t0.addingTimeInterval(20))
        #expect(abs(stopped.timeIntervalSince(t0.addingTimeInterval(20)) - 1950 * 1.3 / 5) < 1)

        // Moving away: freely too (nothing says the car is on its way).
        harness.fix(at: t0.addingTimeInterval(21), north(1990), speed: 5)
        harness.fix(at: t0.addingTimeInterval(23), north(2010), speed: 5)
        let away = try Self.pickupETA(&harness, at: t0.addingTimeInterval(25))
        #expect(abs(away.timeIntervalSince(t0.addingTimeInterval(25)) - 2010 * 1.3 / 5) < 1)
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
                    if let previous, let before = previous.vehicleLocation?.coordinate,
                        let here = status.vehicleLocation, (here.speed ?? 0) >= RideConfiguration().stoppedSpeed,
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

    // MARK: The detour factor per area, and its learned correction (issue 15)

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
        var learning = DetourLearning()
        #expect(learning.factor(for: Self.grid, configuration: configuration) == 1.2)
        #expect(learning.factor(for: nil, configuration: configuration) == 1.3)
        // A ride that drove 1.5 times the straight line: 1.2 + 0.1 * (1.5 - 1.2) = 1.23.
        let taught = learning.learn(driven: 3000, straight: 2000, area: Self.grid, configuration: configuration)
        #expect(taught)
        #expect(abs(learning.factor(for: Self.grid, configuration: configuration) - 1.23) < 1e-9)
        #expect(learning.factor(for: nil, configuration: configuration) == 1.3, "other areas keep theirs")
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
        #expect(learning.learned["grid"]?.rides == 401)
        // Learning off.
        configuration.detourLearningRate = 0
        var off = DetourLearning()
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
        let learned = try #require(engine.detour.learned["grid"])
        #expect(learned.rides == 1)
        let ratio = (pickup.distance(to: corner) + corner.distance(to: dropOff)) / pickup.distance(to: dropOff)
        #expect(abs(learned.factor - (1.2 + 0.5 * (ratio - 1.2))) < 0.02, "\(learned.factor) from ratio \(ratio)")
        // Its later statuses teach nothing more; a canceled ride teaches nothing.
        _ = engine.tick(now: t0.addingTimeInterval(second + 20))
        send("rides/r-2/start", bookingJSON(ride: "r-2", vehicle: "v-2"), second + 30)
        #expect(engine.ride("r-2")?.detourFactor == learned.factor, "a new ride takes the learned factor")
        send("rides/r-2/cancel", bytes(#"{"canceledBy":"user"}"#), second + 40)
        #expect(engine.detour.learned["grid"]?.rides == 1)
    }
}
