public import RideDomain
public import WorkerGroup

/// A car's trip through a grid city, second by second, for the ETA benchmark: legs of 100-400 m
/// that alternate north-south and east-west (``corners(from:to:random:)``, `fleet-sim`'s street paths); each leg a street of its own
/// speed (a third of them fast, 11-15 m/s, the rest 5-9 m/s), reached and left at 2 m/s²; at each corner a
/// red light with probability 0.35 that holds the car 10-45 s. Deterministic for a generator's state.
public struct StreetTrip {
    public struct Point: Sendable {
        /// Seconds since the trip's start.
        public var time: Double
        public var coordinate: Coordinate
        public var speed: Double

        public init(time: Double, coordinate: Coordinate, speed: Double) {
            self.time = time
            self.coordinate = coordinate
            self.speed = speed
        }
    }

    static let acceleration = 2.0

    /// The car's position every second from `start` until it stops at `end`.
    public static func drive(from start: Coordinate, to end: Coordinate, random: inout SeededRandom) -> [Point] {
        var points = [Point(time: 0, coordinate: start, speed: 0)]
        var position = start
        var speed = 0.0
        var time = 0.0
        for corner in corners(from: start, to: end, random: &random) {
            let streetSpeed =
                Double.random(in: 0..<1, using: &random) < 1.0 / 3
                ? Double.random(in: 11...15, using: &random) : Double.random(in: 5...9, using: &random)
            let redLight = Double.random(in: 0..<1, using: &random) < 0.35
            let stopsAtEnd = redLight || corner == end
            while position.distance(to: corner) > 0.5 {
                let remaining = position.distance(to: corner)
                // Brake to stop at the corner when it must, else slow to 5 m/s for the turn.
                let exitSpeed = stopsAtEnd ? 0.0 : min(streetSpeed, 5)
                let braking = (exitSpeed * exitSpeed + 2 * acceleration * remaining).squareRoot()
                let target = min(streetSpeed, braking)
                speed = target > speed ? min(target, speed + acceleration) : max(target, speed - 2 * acceleration)
                let step = min(remaining, max(speed, 0.5))
                position = position.moved(metres: step, bearing: position.bearing(to: corner))
                time += 1
                points.append(Point(time: time, coordinate: position, speed: speed))
            }
            position = corner
            if redLight && corner != end {
                speed = 0
                for _ in 0..<Int.random(in: 10...45, using: &random) {
                    time += 1
                    points.append(Point(time: time, coordinate: position, speed: 0))
                }
            }
        }
        points[points.count - 1].speed = 0
        return points
    }

    /// Corners of a grid path from `start` to `end` (the last one is `end`): `fleet-sim`'s street paths.
    public static func corners(from start: Coordinate, to end: Coordinate, random: inout SeededRandom) -> [Coordinate] {
        var corners: [Coordinate] = []
        var current = start
        var northFirst = Bool.random(using: &random)
        while current.distance(to: end) > 150 {
            let corner =
                northFirst
                ? Coordinate(latitude: end.latitude, longitude: current.longitude)
                : Coordinate(latitude: current.latitude, longitude: end.longitude)
            let leg = min(current.distance(to: corner), Double.random(in: 100...400, using: &random))
            northFirst.toggle()
            if leg < 1 { continue }
            current = current.moved(metres: leg, bearing: current.bearing(to: corner))
            corners.append(current)
        }
        corners.append(end)
        return corners
    }
}
