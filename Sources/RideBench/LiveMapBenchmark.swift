import ArgumentParser
import Foundation
import RideDomain
import RideJSON

/// What the live map costs the worker each second: walking every active ride in pieces of 2,000
/// under the lock (``RideEngine/summaries(from:limit:now:)``, as `LiveFeed` does), and the JSON of a whole-fleet
/// event; while nobody watches it costs nothing. Also the read API's page: the identifiers (under the lock) and
/// their sort (outside it).
struct LiveMapBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "live-map", abstract: "The live map's walk and events, and the read API's paging, by fleet size.")

    @Option(help: "Fleet sizes, comma separated.") var rides = "1000,10000,100000"
    @Option(help: "Repetitions per size; the table gives the median and the range.") var repetitions = 7

    func run() throws {
        let sizes = rides.split(separator: ",").compactMap { Int($0) }
        print("ride-bench live-map: release build, \(repetitions) runs per size (median, min-max)")
        print(
            "rides     walk, lock held per piece      walk total          event JSON          event bytes   page sort")
        for size in sizes {
            let origin = Date(timeIntervalSince1970: 1_795_341_000)
            var engine = RideEngine()
            for index in 0..<size {
                let latitude = 52.45 + Double(index % 1000) * 0.0001
                let longitude = 13.3 + Double(index / 1000) * 0.001
                let booking =
                    #"{"rideIdentifier":"r-\#(index)","vehicleId":"v-\#(index)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":\#(latitude),"longitude":\#(longitude)},"dropOffLocation":{"latitude":\#(latitude + 0.02),"longitude":\#(longitude)},"vehicle":{"registrationPlate":"B-RS \#(index)","mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
                _ = engine.receive(topic: "rides/r-\(index)/start", payload: Array(booking.utf8), now: origin)
                let fix =
                    #"{"timestamp":"\#(Timestamps.format(origin.addingTimeInterval(1)))","latitude":\#(latitude - 0.01),"longitude":\#(longitude),"speed":8,"course":12}"#
                _ = engine.receive(
                    topic: "fleet/vehicles/v-\(index)/position", payload: Array(fix.utf8),
                    now: origin.addingTimeInterval(1))
            }
            precondition(engine.activeRideCount == size && engine.counters.fixesAccepted == size, "bookings refused")
            var pieces: [Double] = []
            var walks: [Double] = []
            var encodes: [Double] = []
            var sorts: [Double] = []
            var bytes = 0
            let now = origin.addingTimeInterval(2)
            for _ in 0..<repetitions {
                let walkStart = ContinuousClock.now
                var summaries: [RideSummary] = []
                var start = 0
                var longest = Duration.zero
                while true {
                    let pieceStart = ContinuousClock.now
                    let (piece, next) = engine.summaries(from: start, limit: 2_000, now: now)
                    longest = max(longest, ContinuousClock.now - pieceStart)
                    summaries += piece
                    guard let next else { break }
                    start = next
                }
                walks.append(seconds(ContinuousClock.now - walkStart))
                pieces.append(seconds(longest))
                let encodeStart = ContinuousClock.now
                var writer = JSONWriter(capacity: 512 + summaries.count * 480)
                writer.beginArray()
                for summary in summaries { summary.write(to: &writer) }
                writer.endArray()
                encodes.append(seconds(ContinuousClock.now - encodeStart))
                bytes = writer.count
                let sortStart = ContinuousClock.now
                let identifiers = engine.rideIdentifiers(in: nil)
                _ = identifiers.sorted().prefix(100)
                sorts.append(seconds(ContinuousClock.now - sortStart))
            }
            print(
                "\(String(size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(stat(pieces))   \(stat(walks))   "
                    + "\(stat(encodes))   \(String(format: "%8.1f MB", Double(bytes) / 1e6))   \(stat(sorts))")
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func stat(_ values: [Double]) -> String {
        let sorted = values.sorted()
        let median = sorted[sorted.count / 2] * 1000
        return String(format: "%6.2f ms (%.2f-%.2f)", median, sorted.first! * 1000, sorted.last! * 1000)
    }
}
