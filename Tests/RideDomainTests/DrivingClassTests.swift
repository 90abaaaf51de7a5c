import FleetModel
import Foundation
import RideDomain
import Testing

/// The ETA benchmark's trips (issue 31) look like the 22 recorded city trips of that issue, class by class: their
/// mean speed with stops, their stops of 10 s or more, and their detour.
@Suite("Driving classes: the ETA yardstick calibrated to real trips (issue 31)")
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

    @Test("E1, issue 31: arterial trips drive 15 to 21 m/s with at most a short stop or two")
    func arterial() {
        let trips = (1...40).map { Self.figures(.arterial, seed: $0) }
        let speeds = trips.map(\.speed).sorted()
        #expect(speeds[speeds.count / 2] > 15 && speeds[speeds.count / 2] < 21, "median \(speeds[speeds.count / 2])")
        #expect(trips.map(\.stops).max()! <= 2)
    }

    @Test("E1, issue 31: urban trips average 3 to 6 m/s with stops of 10 s or more")
    func urban() {
        let trips = (1...40).map { Self.figures(.urban, seed: $0) }
        let speeds = trips.map(\.speed).sorted()
        #expect(speeds[speeds.count / 2] > 2.5 && speeds[speeds.count / 2] < 6, "median \(speeds[speeds.count / 2])")
        let stops = trips.map(\.stops).sorted()
        #expect(stops[stops.count / 2] >= 1 && stops[stops.count / 2] <= 5, "median stops \(stops[stops.count / 2])")
    }

    @Test("E1, issue 31: mixed trips sit between, 7 to 15 m/s")
    func mixed() {
        let speeds = (1...40).map { Self.figures(.mixed, seed: $0).speed }.sorted()
        #expect(speeds[speeds.count / 2] > 7 && speeds[speeds.count / 2] < 15, "median \(speeds[speeds.count / 2])")
    }

    @Test(
        "E1, issue 31: the road is as long as its drawn detour, with the recorded spread (median near 1.0, p90 1.17 to 1.3)"
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
}
