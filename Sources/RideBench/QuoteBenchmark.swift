import ArgumentParser
import Foundation
import RideDomain
import WorkerGroup

import struct RideStatusKit.Place
import struct RideStatusKit.RideOptionsRequest

/// The live-fleet index and quotes (3.4): nearest-vehicle queries at fleet scale, next to a brute-force
/// scan of the same vehicles measured in the same run.
struct QuoteBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "quotes")

    @Option(help: "Available vehicles in the index.") var vehicles = 100_000
    @Option(help: "Nearest queries to time.") var queries = 200_000

    func run() throws {
        let origin = Date(timeIntervalSince1970: 1_795_341_000)
        let classes = ["Compact", "Comfort", "SUV"]
        var random = SeededRandom(seed: 42)
        // A city of 30 x 30 km around Berlin's centre, vehicles spread uniformly.
        let center = Coordinate(latitude: 52.52, longitude: 13.405)
        func place() -> Coordinate {
            Coordinate(
                latitude: center.latitude + Double.random(in: -0.135...0.135, using: &random),
                longitude: center.longitude + Double.random(in: -0.22...0.22, using: &random))
        }
        print("ride-bench quotes: \(vehicles) available vehicles in 3 classes over 30 x 30 km, release build")

        var index = FleetIndex()
        var positions: [(id: String, vehicleClass: String, coordinate: Coordinate)] = []
        positions.reserveCapacity(vehicles)
        let residentBefore = residentBytes()
        let insertSeconds = measure {
            for number in 0..<vehicles {
                let entry = (id: "v-\(number)", vehicleClass: classes[number % 3], coordinate: place())
                positions.append(entry)
                index.update(
                    vehicleId: entry.id, vehicleClass: entry.vehicleClass, coordinate: entry.coordinate, speed: 0,
                    at: origin)
            }
        }
        let residentAfter = residentBytes()
        report("index: add a vehicle", Double(vehicles) / insertSeconds, unit: "updates/s")

        // Vehicles moving: each update is a small move, sometimes into the next cell.
        let moves = 1_000_000
        let moveSeconds = measure {
            for step in 0..<moves {
                let entry = positions[step % vehicles]
                let moved = Coordinate(
                    latitude: entry.coordinate.latitude + Double(step % 7) * 0.0003,
                    longitude: entry.coordinate.longitude)
                index.update(
                    vehicleId: entry.id, vehicleClass: entry.vehicleClass, coordinate: moved, speed: 8,
                    at: origin.addingTimeInterval(1))
            }
        }
        report("index: move a vehicle", Double(moves) / moveSeconds, unit: "updates/s")
        // Put every vehicle back where `positions` says, for the brute-force comparison.
        for entry in positions {
            index.update(
                vehicleId: entry.id, vehicleClass: entry.vehicleClass, coordinate: entry.coordinate, speed: 0,
                at: origin)
        }

        let pickups = (0..<1000).map { _ in place() }
        var found = 0
        let querySeconds = measure {
            for number in 0..<queries {
                found +=
                    index.nearest(
                        classes[number % 3], to: pickups[number % pickups.count], limit: 3, maxDistance: 20_000,
                        notBefore: origin
                    ).count
            }
        }
        let perQuery = querySeconds / Double(queries) * 1e6
        print(
            String(
                format: "%-58@ %10.2f µs a query (target < 50 µs) %@", "nearest 3 of a class, \(vehicles) vehicles",
                perQuery, perQuery < 50 ? "meets" : "BELOW target"))

        // Comparison: a linear scan over every vehicle of the class, same pickups.
        let bruteQueries = 500
        var agree = 0
        let bruteSeconds = measure {
            for number in 0..<bruteQueries {
                let vehicleClass = classes[number % 3]
                let pickup = pickups[number % pickups.count]
                var best: [(Double, String)] = []
                for entry in positions where entry.vehicleClass == vehicleClass {
                    let distance = pickup.distance(to: entry.coordinate)
                    if best.count < 3 || distance < best[2].0 {
                        best.append((distance, entry.id))
                        best.sort { $0.0 < $1.0 }
                        if best.count > 3 { best.removeLast() }
                    }
                }
                let indexed = index.nearest(vehicleClass, to: pickup, limit: 3, maxDistance: 20_000, notBefore: origin)
                if indexed.map(\.vehicleId) == best.map(\.1) { agree += 1 }
            }
        }
        print(
            String(
                format: "%-58@ %10.2f µs a query (%d of %d answers identical to the index's)",
                "  comparison: brute-force scan of the class" as NSString, bruteSeconds / Double(bruteQueries) * 1e6,
                agree, bruteQueries))

        // A whole quote: area lookup, three options priced, pickup estimates from the index.
        let quoter = makeQuoter(index: index)
        let quoteCount = 50_000
        var bytes = 0
        let quoteSeconds = measure {
            for number in 0..<quoteCount {
                let pickup = pickups[number % pickups.count]
                let request = RideOptionsRequest(
                    pickupLocation: Place(coordinate: pickup),
                    dropOffLocation: Place(coordinate: pickup.moved(metres: 6000, bearing: Double(number % 360))),
                    partySize: 1 + number % 3)
                bytes += quoter.quote(request, now: origin).encoded().count
            }
        }
        report("quote: 3 options priced, estimated and encoded", Double(quoteCount) / quoteSeconds, unit: "replies/s")
        print("  (\(bytes / quoteCount) bytes a reply, \(found / queries) vehicles a query)")
        print(
            String(
                format: "%-58@ %10.0f bytes per vehicle", "memory, index of \(vehicles) vehicles" as NSString,
                Double(residentAfter - residentBefore) / Double(vehicles)))
    }

    /// The quoter over `index`'s vehicles, with a catalog like `config/ride-options.yaml`.
    func makeQuoter(index: FleetIndex) -> RideOptionQuoter {
        let ring = [(13.0, 52.3), (13.8, 52.3), (13.8, 52.7), (13.0, 52.7), (13.0, 52.3)].map {
            Coordinate(latitude: $0.1, longitude: $0.0)
        }
        let table = FareTable(
            baseCharge: 3.5, perKilometer: 1.5, perMinute: 0.3, minimumFare: 8,
            surcharges: [.init(title: "Service fee", amount: 0.5)],
            partyTiers: [.init(upTo: 1, surcharge: 0), .init(upTo: 3, surcharge: 4), .init(upTo: 4, surcharge: 8)])
        let catalog = RideOptionCatalog(
            areas: [ServiceArea(name: "berlin", currencyCode: "EUR", polygons: [[ring]])],
            options: ["Compact", "Comfort", "SUV"].map {
                CatalogOption(
                    name: $0, capacity: 4, mapAnnotationImage: "https://assets.example/\($0).png",
                    fares: ["berlin": table])
            })
        var quoter = RideOptionQuoter(catalog: catalog)
        quoter.replaceFleet(index)
        return quoter
    }

    func report(_ name: String, _ rate: Double, unit: String) {
        print(String(format: "%-58@ %12.0f %@", name as NSString, rate, unit as NSString))
    }

}
