import Foundation
public import RideDomain
public import WorkerGroup

/// Classes of real driving for the ETA benchmark and the simulator, calibrated to the 22 recorded
/// city trips of that issue (their figures, not their data): fixes every 1 to 5 s; arterial trips at 18 to 20
/// m/s with at most one short stop; slow urban trips at 3 to 5 m/s with 2 to 5 stops of 10 s or more (27 to 165 s
/// of a 4 to 6 minute window standing); mixed trips between. Road distance over great-circle distance had a
/// median of 1.00 to 1.04 and a 90th percentile of 1.17 to 1.27, so detours are drawn from that spread.
public enum DrivingClass: String, CaseIterable, Sendable {
    /// Arterial stretches at 15 to 20 m/s for minutes (trips 15, 17 to 20).
    case arterial
    /// Slow urban driving at 3 to 5 m/s with stops (trips 3, 5, 8 to 11, 16, 21, 22).
    case urban
    /// Mixed trips, 9 to 15 m/s on average with a stop or two (trips 1, 2, 4, 6, 7, 12 to 14).
    case mixed

    /// The great-circle distance to the pickup, in metres, as the recorded windows had them for this class.
    public var pickupDistance: ClosedRange<Double> {
        switch self {
        case .arterial: 2_200...3_000
        case .urban: 300...750
        case .mixed: 700...2_300
        }
    }

    /// What the car drives at between stops (a street's pace; each stretch varies around it), m/s.
    var cruise: ClosedRange<Double> {
        switch self {
        case .arterial: 17...22
        case .urban: 4.5...7.5
        case .mixed: 10...16
        }
    }

    /// How much longer a trip takes at `hour` of the week (0: Monday 00:00) than at night: a weekday's rush hours
    /// 1.5 (07:00 to 10:00) and 1.6 (16:00 to 19:00), its day 1.2, its evening 1.1, a weekend's day 1.15. Not from
    /// the recorded city trips (their windows carry no time of day): the shape of published city congestion indices,
    /// where rush hour adds a half to the travel time of the night. `make bench-eta-rhythm` drives by it.
    public static func congestion(hour: Int) -> Double {
        let day = hour / 24
        let time = hour % 24
        if day >= 5 { return (10..<20).contains(time) ? 1.15 : 1 }
        switch time {
        case 7..<10: return 1.5
        case 10..<16: return 1.2
        case 16..<19: return 1.6
        case 19..<22: return 1.1
        default: return 1
        }
    }

    /// Seconds of driving between stops of 10 s or more, on average (0: none expected), and how long they hold.
    var stopEvery: Double {
        switch self {
        case .arterial: 400
        case .urban: 45
        case .mixed: 150
        }
    }

    var stopLength: ClosedRange<Double> {
        switch self {
        case .arterial: 12...20
        case .urban: 10...50
        case .mixed: 15...50
        }
    }

    /// A detour factor (road over great-circle metres) from the recorded spread: mostly 1.00 to 1.05, a tenth
    /// of the trips 1.17 to 1.3.
    public static func detour(random: inout SeededRandom) -> Double {
        let draw = Double.random(in: 0..<1, using: &random)
        if draw < 0.6 { return Double.random(in: 1.0...1.05, using: &random) }
        if draw < 0.9 { return Double.random(in: 1.05...1.17, using: &random) }
        return Double.random(in: 1.17...1.3, using: &random)
    }

    /// A road from `start` to `end` whose length is `detour` times the great-circle distance: a zigzag of 4 to 8
    /// stretches either side of the straight line (a straight road for a detour of 1).
    public static func road(from start: Coordinate, to end: Coordinate, detour: Double, random: inout SeededRandom)
        -> [Coordinate]
    {
        let length = start.distance(to: end)
        let stretches = Int.random(in: 4...8, using: &random)
        let piece = length / Double(stretches)
        // Each stretch's end lies `offset` off the line at its middle: 2 * sqrt((piece/2)^2 + offset^2) = detour * piece.
        let offset = piece / 2 * max(0, detour * detour - 1).squareRoot()
        let bearing = start.bearing(to: end)
        var points = [start]
        for index in 0..<stretches {
            let along = start.moved(metres: piece * (Double(index) + 0.5), bearing: bearing)
            let side = index.isMultiple(of: 2) ? 90.0 : -90.0
            points.append(along.moved(metres: offset, bearing: bearing + side))
            points.append(start.moved(metres: piece * Double(index + 1), bearing: bearing))
        }
        points[points.count - 1] = end
        return points
    }

    /// The car along `road`, second by second, in this class's way: a pace per stretch of 100 to 600 m around
    /// the class's cruise speed, stops of 10 s or more at random places, 1.5 m/s² up and 2.5 m/s² down, and a
    /// stop at the end. Deterministic for a generator's state.
    /// - Parameter moving: whether the car is already under way at the start (a car assigned while driving, as
    ///   the recorded windows began), rather than leaving a curb.
    /// - Parameter congestion: how much longer the trip takes at this hour than in free traffic (1: as the
    ///   recorded trips; 1.5: rush hour): the pace divided by it and the stops per metre multiplied by it, so
    ///   that both the moving and the standing take that much longer. At 1 the draws from `random` are those of
    ///   the trips before this parameter; above it, more stops draw more.
    public func drive(
        along road: [Coordinate], moving: Bool = false, congestion: Double = 1, random: inout SeededRandom
    ) -> [StreetTrip.Point] {
        var pace = Double.random(in: cruise, using: &random) / congestion
        var points = [StreetTrip.Point(time: 0, coordinate: road[0], speed: moving ? pace : 0)]
        let total = zip(road, road.dropFirst()).map { $0.distance(to: $1) }.reduce(0, +)
        // Where the stops are, in metres along the road: one every `stopEvery` seconds of cruising on average.
        var stops: [(at: Double, seconds: Double)] = []
        let meanCruise = (cruise.lowerBound + cruise.upperBound) / 2
        var at = 0.0
        while true {
            at += meanCruise * stopEvery / congestion * -log(max(1e-9, Double.random(in: 0..<1, using: &random)))
            guard at < total - 30 else { break }
            stops.append((at, Double.random(in: stopLength, using: &random)))
        }
        var travelled = 0.0
        var speed = moving ? pace : 0.0
        var time = 0.0
        var segment = 0
        var paceUntil = Double.random(in: 100...600, using: &random)
        var position = road[0]
        while travelled < total - 0.5 && segment < road.count - 1 {
            if travelled >= paceUntil {
                pace = Double.random(in: cruise, using: &random) / congestion
                paceUntil = travelled + Double.random(in: 100...600, using: &random)
            }
            // The next place to stand: a stop, or the end of the road.
            let stopAt = min(stops.first?.at ?? total, total)
            let ahead = max(0, stopAt - travelled)
            let target = min(pace, (2 * 2.5 * ahead).squareRoot())
            speed = target > speed ? min(target, speed + 1.5) : max(target, speed - 2.5)
            var step = min(max(speed, 0.3), ahead)
            let arrives = ahead - step <= 0.5
            if arrives { step = ahead }
            var left = step
            while left > 0, segment < road.count - 1 {
                let next = road[segment + 1]
                let remaining = position.distance(to: next)
                if remaining <= left {
                    left -= remaining
                    position = next
                    segment += 1
                } else {
                    position = position.moved(metres: left, bearing: position.bearing(to: next))
                    left = 0
                }
            }
            travelled += step
            time += 1
            points.append(StreetTrip.Point(time: time, coordinate: position, speed: arrives ? 0 : speed))
            if arrives, let stop = stops.first, stopAt < total {
                stops.removeFirst()
                speed = 0
                for _ in 0..<Int(stop.seconds) {
                    time += 1
                    points.append(StreetTrip.Point(time: time, coordinate: position, speed: 0))
                }
            }
        }
        points[points.count - 1].speed = 0
        return points
    }
}
