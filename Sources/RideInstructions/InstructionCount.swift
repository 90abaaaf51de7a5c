import ArgumentParser
import Foundation
import RideDomain

/// `count` operations of one kind after a set-up, for valgrind's callgrind to count the instructions of
/// ``countedWork(_:engine:topics:payloads:origin:configuration:)`` alone (`make bench-instructions` collects
/// only inside it). Divided by `count`, that is the instructions per operation: the same on every run of the
/// same build, so changes compare without this noisy machine's wall-clock noise.
///
/// Its own executable with a synchronous `main`: valgrind 3.19 (Debian 12) crashes on the threads an async
/// `main` starts, as `ride-bench`'s does.
@main
struct InstructionCount: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ride-instructions",
        abstract: "Runs N operations of one kind after a fixed set-up, for callgrind's instruction counts.")

    enum Operation: String, ExpressibleByArgument, CaseIterable {
        /// A native fix through the engine: topic, decode (fast path), T1-T7, P2-P5 and E1 on its ride.
        case fix
        /// A status that is due: C1's tick, V1-V7, its JSON, and the durable state when its block asks for one.
        case status
    }

    @Option(help: "fix or status") var operation: Operation
    @Option(help: "Operations after the set-up; 0 measures the set-up alone.") var count = 100_000
    @Option(help: "Active rides in the engine (each with a vehicle of its own).") var rides = 1000
    @Option(help: "rides.sequenceBlock: statuses per durable-state write (1: before every status, as before 4).")
    var sequenceBlock = 12
    @Option(help: "rides.trackLength: accepted fixes kept per vehicle for the read API (0: none).")
    var trackLength = RideConfiguration().trackLength
    @Flag(help: "Book every ride by a catalog option's name (3.4, P5: the catalog's fixed or metered pricing).")
    var catalog = false
    @Flag(help: "Fixes without `speed`, as the recorded city trips (T7 derives one; E1's pace counts by distance).")
    var withoutSpeed = false
    @Flag(
        help:
            "Give every ride a route on `assign` (E2): 5 km ahead of the car, a point every 14 m as OSRM's city routes have, then the pickup."
    )
    var route = false

    /// A catalog like `config/ride-options.yaml`'s: a fixed-price Compact and a metered Comfort with a
    /// surcharge and a discount, in one area around the rides.
    static let testCatalog = RideOptionCatalog(
        areas: [
            ServiceArea(
                name: "berlin", currencyCode: "EUR",
                polygons: [
                    [
                        [
                            Coordinate(latitude: 51, longitude: 12), Coordinate(latitude: 51, longitude: 15),
                            Coordinate(latitude: 54, longitude: 15), Coordinate(latitude: 54, longitude: 12),
                            Coordinate(latitude: 51, longitude: 12),
                        ]
                    ]
                ])
        ],
        options: [
            CatalogOption(
                name: "Compact", capacity: 1, mapAnnotationImage: "https://assets.example/cars/compact.png",
                pricing: .fixed,
                fares: ["berlin": FareTable(baseCharge: 2.5, perKilometer: 1.1, perMinute: 0.2, minimumFare: 6)]),
            CatalogOption(
                name: "Comfort", capacity: 4, mapAnnotationImage: "https://assets.example/cars/comfort.png",
                fares: [
                    "berlin": FareTable(
                        baseCharge: 3.5, perKilometer: 1.5, perMinute: 0.3, minimumFare: 8,
                        surcharges: [.init(title: "Service fee", amount: 0.5)],
                        discounts: [.init(title: "Launch discount", percent: 10)])
                ]),
        ])

    func run() throws {
        let origin = Date(timeIntervalSince1970: 1_795_341_000)
        var configuration = RideConfiguration()
        configuration.sequenceBlock = sequenceBlock
        configuration.trackLength = trackLength
        configuration.maxFixAge = 10_000_000
        configuration.futureTolerance = 10_000_000
        var engine = RideEngine(configuration: configuration, catalog: catalog ? Self.testCatalog : nil)
        for index in 0..<rides {
            let pickup = position(index, round: -2000)
            // With the catalog, a booking by name as fleet-sim sends one: no fare of its own, half each option.
            let name = catalog && index % 2 == 1 ? "Comfort" : "Compact"
            let booking =
                #"{"rideIdentifier":"r-\#(index)","vehicleId":"v-\#(index)","rideOption":{"name":"\#(name)","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude)},"dropOffLocation":{"latitude":\#(pickup.latitude - 0.05),"longitude":\#(pickup.longitude)},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
            _ = engine.receive(topic: "rides/r-\(index)/start", payload: Array(booking.utf8), now: origin)
            if route {
                let ahead = (0...357).map { position(index, round: $0 * 14 / 5) } + [pickup]
                let line = Polyline.encode(ahead, precision: 6).replacingOccurrences(of: "\\", with: "\\\\")
                let assign =
                    #"{"vehicleId":"v-\#(index)","route":{"polyline":"\#(line)","precision":6,"duration":1200}}"#
                let actions = engine.receive(
                    topic: "rides/r-\(index)/assign", payload: Array(assign.utf8), now: origin)
                precondition(!actions.contains { if case .deadLetter = $0 { true } else { false } }, "\(actions)")
            }
        }
        precondition(engine.activeRideCount == rides)
        // The inputs are made before the counted work, in the set-up that `--count 0` measures too.
        let topics = (0..<rides).map { "fleet/vehicles/v-\($0)/position" }
        let payloads: [[UInt8]] =
            operation == .fix
            ? (0..<count).map { fix($0, origin: origin) }
            : []
        // Statuses are issued once a second, as C1 ticks; the first ones (the booking's) are out of the way.
        _ = engine.tick(now: origin.addingTimeInterval(10))
        let produced = countedWork(
            operation, engine: &engine, topics: topics, payloads: payloads, origin: origin,
            configuration: configuration)
        print("ride-instructions: \(operation.rawValue) x \(count), \(rides) rides, actions \(produced)")
    }

    /// The measured work, and nothing else: callgrind collects inside this function only.
    @inline(never)
    func countedWork(
        _ operation: Operation, engine: inout RideEngine, topics: [String], payloads: [[UInt8]], origin: Date,
        configuration: RideConfiguration
    ) -> Int {
        // Read once: an option's getter in the loop would be counted too.
        let count = count
        let rides = rides
        var produced = 0
        switch operation {
        case .fix:
            for index in 0..<count {
                let actions = engine.receive(
                    topic: topics[index % rides], payload: payloads[index],
                    now: origin.addingTimeInterval(Double(index / rides)))
                produced += actions.count
            }
        case .status:
            var bytes = 0
            var second = 10.0
            while produced < count {
                second += configuration.updateInterval
                for action in engine.tick(now: origin.addingTimeInterval(second), limit: count - produced) {
                    guard case .publish(let status, let state, _) = action else { continue }
                    bytes += status.encoded().count + (state?.durableState().count ?? 0)
                    produced += 1
                }
            }
            precondition(count == 0 || bytes > 0)
        }
        return produced
    }

    /// Vehicle `index`'s place `round` steps of 5 m north of its start.
    private func position(_ index: Int, round: Int) -> Coordinate {
        Coordinate(
            latitude: 52.40 + Double(index % 100) * 0.001 + Double(round) * 0.000045,
            longitude: 13.3 + Double(index / 100) * 0.001)
    }

    /// Degrees with 7 decimals (about 1 cm), as trackers send them.
    private func degrees(_ value: Double) -> String { String(format: "%.7f", value) }

    /// Fix `number` of the stream: vehicles in turn, each one second and 5 m after its previous one.
    private func fix(_ number: Int, origin: Date) -> [UInt8] {
        let vehicle = number % rides
        let round = number / rides
        let place = position(vehicle, round: round)
        let stamp = Timestamps.format(origin.addingTimeInterval(Double(round)))
        return Array(
            #"{"vehicleId":"v-\#(vehicle)","timestamp":"\#(stamp)","latitude":\#(degrees(place.latitude)),"longitude":\#(degrees(place.longitude)),\#(withoutSpeed ? "" : #""speed":5.0,"#)"horizontalAccuracy":5.0}"#
                .utf8)
    }
}
