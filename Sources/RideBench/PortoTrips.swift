import FleetModel
import Foundation
import RideDomain
import WorkerGroup

import enum RideStatusKit.EstimateSource

/// Real trips for E1 and E2: Porto's taxi fares (`Tests/Data/porto-taxi`, CC BY 4.0), a fix every 15 s. A fare has
/// no approach to a pickup and no routing engine, so, as the recorded set E2 is judged on does: the pickup is the fix at 40 % of
/// the trip's time (the driver app says so: the car does not stop there); the route is the trip's own path (a
/// navigation engine's best case); the engine's duration is the trip's true duration times a lognormal error
/// (sigma 0.2, seeded).
extension ETABenchmark {
    /// What the worker is given, from nothing to a route with the engine's duration.
    enum PortoMode: String, CaseIterable {
        case estimate = "no route (E1)"
        case route = "route alone"
        case engine = "route and the engine's duration"
    }

    /// The fares of `path` (the UCI file's columns; `POLYLINE` last) as trips, one point a second between the
    /// recorded fixes.
    static func portoTrips(path: String, seed: UInt64) throws -> [(trip: Trip, duration: Double)] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var random = SeededRandom(seed: seed ^ 0x9057_0E7A)
        var trips: [(Trip, Double)] = []
        for line in text.split(separator: "\n").dropFirst() {
            guard let open = line.range(of: "\"[["), let close = line.range(of: "]]\"", options: .backwards) else {
                continue
            }
            let json = line[line.index(after: open.lowerBound)..<line.index(before: close.upperBound)]
            guard let pairs = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[Double]] else { continue }
            let fixes = pairs.compactMap { $0.count == 2 ? Coordinate(latitude: $0[1], longitude: $0[0]) : nil }
            guard fixes.count >= 12 else { continue }
            var points: [StreetTrip.Point] = []
            for (index, (from, to)) in zip(fixes, fixes.dropFirst()).enumerated() {
                let metres = from.distance(to: to)
                let speed = metres < 1 ? 0 : metres / 15
                for second in 0..<15 {
                    let share = Double(second) / 15
                    points.append(
                        StreetTrip.Point(
                            time: Double(index * 15 + second),
                            coordinate: Coordinate(
                                latitude: from.latitude + share * (to.latitude - from.latitude),
                                longitude: from.longitude + share * (to.longitude - from.longitude)),
                            speed: speed))
                }
            }
            points.append(
                StreetTrip.Point(time: Double((fixes.count - 1) * 15), coordinate: fixes.last!, speed: 0))
            let pickupSecond = (0.4 * Double(fixes.count - 1)).rounded() * 15
            let toPickup = points.filter { $0.time <= pickupSecond }
            let toDropOff = points.filter { $0.time >= pickupSecond }.map {
                StreetTrip.Point(time: $0.time - pickupSecond, coordinate: $0.coordinate, speed: $0.speed)
            }
            // Lognormal, sigma 0.2: Box-Muller from the seeded generator.
            let u = Double.random(in: Double.ulpOfOne..<1, using: &random)
            let v = Double.random(in: 0..<1, using: &random)
            let error = exp(0.2 * (-2 * log(u)).squareRoot() * cos(2 * .pi * v))
            var trip = Trip(kind: "porto", toPickup: toPickup, toDropOff: toDropOff, fixEvery: 15, reportsSpeed: false)
            trip.exactFixes = true
            trip.driverEvents = true
            let polyline = Polyline.encode(fixes, precision: 6).replacingOccurrences(of: "\\", with: "\\\\")
            trip.route = #"{"polyline":"\#(polyline)","precision":6,"version":"porto"}"#
            trips.append((trip, Double((fixes.count - 1) * 15) * error))
        }
        return trips
    }

    /// Porto's trips through the worker given nothing, the route, and the route with the engine's duration; cold
    /// (every trip at once on a fresh worker, as a new city's first rides) and warm (one after another, the worker
    /// learning from each). Per horizon, pickup and drop-off: the worker beside naive (great circle x 1.3 at
    /// 30 km/h), the route at the trip's recent pace, and the oracle; then E2's targets (docs/routes.md).
    static func portoReport(path: String, seed: UInt64, configuration: RideConfiguration) throws {
        let loaded = try portoTrips(path: path, seed: seed)
        let minutes = loaded.map { ($0.trip.toPickup.last!.time + $0.trip.toDropOff.last!.time) / 60 }.sorted()
        print(
            "\n== porto: \(loaded.count) recorded fares (CC BY 4.0, \(path)), a fix every 15 s, "
                + String(
                    format: "%.0f to %.0f minutes (median %.0f)", minutes.first ?? 0, minutes.last ?? 0,
                    minutes.isEmpty ? 0 : minutes[minutes.count / 2])
                + "; pickup at 40 % of the trip; the route is the trip's own path; the engine's duration the true one"
                + " x lognormal(0.2)")
        for mode in PortoMode.allCases {
            let trips = loaded.map { item -> Trip in
                var trip = item.trip
                switch mode {
                case .estimate: trip.route = nil
                case .route: break
                case .engine:
                    trip.route = String(trip.route!.dropLast()) + #","duration":\#(item.duration)}"#
                }
                return trip
            }
            for warm in [false, true] {
                var random = SeededRandom(seed: seed)
                var pickup: [Sample] = []
                var dropOff: [Sample] = []
                if warm {
                    (pickup, dropOff, _) = replay(
                        trips, configuration: configuration, stopPerMetre: 0, classSpeed: 10, random: &random)
                } else {
                    for trip in trips {
                        let (one, two, _) = replay(
                            [trip], configuration: configuration, stopPerMetre: 0, classSpeed: 10, random: &random)
                        pickup += one
                        dropOff += two
                    }
                }
                let title =
                    "porto, \(mode.rawValue), \(warm ? "warm (one after another)" : "cold (each on a fresh worker)")"
                portoRows(title + ": pickup ETA", pickup, mode: mode, pickup: true)
                portoRows(title + ": drop-off ETA", dropOff, mode: mode, pickup: false)
            }
        }
    }

    static func portoRows(_ title: String, _ samples: [Sample], mode: PortoMode, pickup: Bool) {
        guard !samples.isEmpty else { return }
        func mean(_ values: [Double]) -> Double { values.reduce(0, +) / Double(max(values.count, 1)) }
        print("\n  \(title)")
        print(
            "  horizon     statuses  by route | worker |err|   bias | naive x1.3 |err|   bias | recent pace |err|   bias | oracle |err|   bias"
        )
        var verdicts: [String] = []
        for (label, range) in horizons {
            let here = samples.filter { range.contains($0.horizon) }
            guard !here.isEmpty else { continue }
            let routed = Double(here.filter { $0.source == .route }.count) / Double(here.count)
            let worker = mean(here.map { abs($0.error) })
            let bias = mean(here.map(\.error))
            let naive = mean(here.map { abs($0.naiveDetourError) })
            let pace = mean(here.map { abs($0.paceError) })
            print(
                String(format: "  %-10@ %9d %8.0f%% |", label, here.count, 100 * routed)
                    + String(format: " %12.1f %6.1f |", worker, bias)
                    + String(format: " %16.1f %6.1f |", naive, mean(here.map(\.naiveDetourError)))
                    + String(format: " %17.1f %6.1f |", pace, mean(here.map(\.paceError)))
                    + String(
                        format: " %12.1f %6.1f", mean(here.map { abs($0.oracleError) }), mean(here.map(\.oracleError))))
            let better = worker < naive ? "better than naive" : "NOT better than naive"
            switch (mode, label) {
            case (.engine, "60-120 s"):
                verdicts.append(
                    String(format: "%@ %.1f (35: %@), %@", label, worker, worker <= 35 ? "meets" : "MISSES", better))
            case (.engine, "120-240 s"):
                verdicts.append(
                    String(
                        format: "%@ %.1f (45: %@), %.2fx naive (2x: %@)", label, worker,
                        worker <= 45 ? "meets" : "MISSES",
                        naive / max(worker, 0.001), naive >= 2 * worker ? "meets" : "MISSES"))
            case (.estimate, "60-120 s") where pickup:
                verdicts.append(
                    String(format: "%@ %.1f (40: %@), %@", label, worker, worker <= 40 ? "meets" : "MISSES", better))
            case (.estimate, "120-240 s") where pickup:
                verdicts.append(
                    String(format: "%@ %.1f (59: %@), %@", label, worker, worker <= 59 ? "meets" : "MISSES", better))
            default:
                verdicts.append("\(label) \(better)")
            }
            if mode == .engine {
                verdicts.append(worker < pace ? "beats the recent pace" : "NOT better than the recent pace")
                verdicts.append(abs(bias) <= 15 ? "bias within 15 s" : String(format: "bias %.1f s MISSES 15", bias))
            }
        }
        print("  targets: " + verdicts.joined(separator: "; "))
    }
}
