import FleetModel
import Foundation
import RideDomain
import Testing
import WorkerGroup

/// The ETA benchmark's trips look like the 22 recorded city trips, class by class: their
/// mean speed with stops, their stops of 10 s or more, and their detour.
@Suite("Driving classes: the ETA yardstick calibrated to real trips")
struct DrivingClassTests {
    /// Mean speed with stops, stops of 10 s or more, and road over great-circle metres of one trip.
    static func figures(_ kind: DrivingClass, seed: UInt64) -> (
        speed: Double, stops: Int, detour: Double, drawn: Double
    ) {
        var random = SeededRandom(seed: seed)
        let start = Coordinate(latitude: 52.52, longitude: 13.405)
        let end = start.moved(metres: Double.random(in: kind.pickupDistance, using: &random), bearing: 70)
        let detour = DrivingClass.detour(random: &random)
        let road = DrivingClass.road(from: start, to: end, detour: detour, random: &random)
        let points = kind.drive(along: road, random: &random)
        let driven = zip(points, points.dropFirst()).map { $0.coordinate.distance(to: $1.coordinate) }.reduce(0, +)
        var stops = 0
        var standing = 0
        for point in points.dropLast() {
            if point.speed < 0.5 && point.time > 0 {
                standing += 1
            } else {
                if standing >= 10 { stops += 1 }
                standing = 0
            }
        }
        if standing >= 10 { stops += 1 }
        #expect(points.last!.coordinate.distance(to: end) < 2, "the trip ends at its end")
        return (driven / points.last!.time, stops, driven / start.distance(to: end), detour)
    }

    @Test("E1: arterial trips drive 15 to 21 m/s with at most a short stop or two")
    func arterial() {
        let trips = (1...40).map { Self.figures(.arterial, seed: $0) }
        let speeds = trips.map(\.speed).sorted()
        #expect(speeds[speeds.count / 2] > 15 && speeds[speeds.count / 2] < 21, "median \(speeds[speeds.count / 2])")
        #expect(trips.map(\.stops).max()! <= 2)
    }

    @Test("E1: urban trips average 3 to 6 m/s with stops of 10 s or more")
    func urban() {
        let trips = (1...40).map { Self.figures(.urban, seed: $0) }
        let speeds = trips.map(\.speed).sorted()
        #expect(speeds[speeds.count / 2] > 2.5 && speeds[speeds.count / 2] < 6, "median \(speeds[speeds.count / 2])")
        let stops = trips.map(\.stops).sorted()
        #expect(stops[stops.count / 2] >= 1 && stops[stops.count / 2] <= 5, "median stops \(stops[stops.count / 2])")
    }

    @Test("E1: mixed trips sit between, 7 to 15 m/s")
    func mixed() {
        let speeds = (1...40).map { Self.figures(.mixed, seed: $0).speed }.sorted()
        #expect(speeds[speeds.count / 2] > 7 && speeds[speeds.count / 2] < 15, "median \(speeds[speeds.count / 2])")
    }

    @Test(
        "E1: the road is as long as its drawn detour, with the recorded spread (median near 1.0, p90 1.17 to 1.3)"
    )
    func detours() {
        let trips = (1...200).map { Self.figures(.mixed, seed: $0) }
        for trip in trips {
            #expect(abs(trip.detour - trip.drawn) < 0.02, "driven \(trip.detour), drawn \(trip.drawn)")
        }
        let drawn = trips.map(\.drawn).sorted()
        #expect(drawn[drawn.count / 2] < 1.06)
        #expect(drawn[drawn.count * 9 / 10] > 1.1 && drawn[drawn.count * 9 / 10] < 1.3)
    }

    @Test("E1: at rush hour's congestion a trip takes that much longer, on the same road and draws")
    func congestion() {
        for kind in DrivingClass.allCases {
            var ratios: [Double] = []
            for seed in UInt64(1)...30 {
                let start = Coordinate(latitude: 52.52, longitude: 13.405)
                var draw = SeededRandom(seed: seed)
                let road = DrivingClass.road(
                    from: start, to: start.moved(metres: 2000, bearing: 30), detour: 1.05, random: &draw)
                var free = draw
                var rush = draw
                let freeTime = kind.drive(along: road, random: &free).last!.time
                let rushTime = kind.drive(along: road, congestion: 1.5, random: &rush).last!.time
                ratios.append(rushTime / freeTime)
            }
            let mean = ratios.reduce(0, +) / Double(ratios.count)
            // Acceleration and braking do not scale: a little under 1.5.
            #expect(mean > 1.3 && mean < 1.6, "\(kind): \(mean)")
        }
        // The profile: weekday rush hours, a weekend's day, the night.
        #expect(DrivingClass.congestion(hour: 8) == 1.5 && DrivingClass.congestion(hour: 17) == 1.6)
        #expect(DrivingClass.congestion(hour: 5 * 24 + 12) == 1.15 && DrivingClass.congestion(hour: 3) == 1)
    }

    @Test("Issue 31: fleet-sim's vehicles drive the classes in the recorded shares, sampled every 1 to 5 s")
    func fleetProfiles() {
        var random = SeededRandom(seed: 7)
        let before = random
        #expect(FleetDriving.grid.profile(random: &random) == .init(kind: nil, fixEvery: nil, reportsSpeed: true))
        var untouched = before
        let (next, expected) = (random.next(), untouched.next())
        #expect(next == expected, "the grid draws nothing")
        let profiles = (0..<2200).map { _ in FleetDriving.classes.profile(random: &random) }
        func share(_ kind: DrivingClass) -> Double {
            Double(profiles.filter { $0.kind == kind }.count) / Double(profiles.count)
        }
        // 5, 9 and 8 of the 22 recorded trips.
        #expect(abs(share(.arterial) - 5.0 / 22) < 0.03 && abs(share(.urban) - 9.0 / 22) < 0.03)
        #expect(abs(share(.mixed) - 8.0 / 22) < 0.03)
        #expect(Set(profiles.compactMap(\.fixEvery)) == [1, 2, 3, 4, 5])
        let silent = Double(profiles.filter { !$0.reportsSpeed }.count) / Double(profiles.count)
        #expect(abs(silent - 0.5) < 0.05, "half without speed: \(silent)")
        #expect(FleetDriving.urban.profile(random: &random).kind == .urban)
        let gaps = (0..<500).map { _ in FleetDriving.nextFix(every: 5, random: &random) }
        #expect(gaps.min()! >= 4 && gaps.max()! <= 7, "5 s jittered by up to 30 %, whole seconds")
        let halves = (0..<100).map { _ in FleetDriving.nextFix(every: 0.5, random: &random) }
        #expect(halves.allSatisfy { $0 == 1 }, "at least a second: 0.35 to 0.65 s would round to 0 or 1")
    }
}
