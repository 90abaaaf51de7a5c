import ArgumentParser
import Foundation
import RideDomain

/// The ride domain's hot paths on one core, each next to its comparison measured in the same run.
struct DomainBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "domain")

    @Option var rides = 100_000
    @Option var fixes = 1_000_000
    @Option(help: "Repeat only the status benchmark this many times (for profiling).") var statusOnly = 0
    @Option(help: "Apply the fixes this many more times before measuring (for profiling).") var applyRepeat = 0

    func run() throws {
        let origin = Date(timeIntervalSince1970: 1_795_341_000)
        print("ride-bench domain: \(rides) rides, \(fixes) fixes, one core, release build")
        print(
            "  (inline sizes: Ride \(MemoryLayout<Ride>.stride) B, Booking \(MemoryLayout<Booking>.stride) B, RideStatus \(MemoryLayout<RideStatus>.stride) B)"
        )

        // 1. Decode and accept one native telemetry fix.
        let payloads: [[UInt8]] = (0..<1000).map { index in
            Array(
                #"{"vehicleId":"v-0042","timestamp":"\#(Timestamps.format(origin.addingTimeInterval(Double(index))))","latitude":52.5\#(String(format: "%04d", index)),"longitude":13.404954,"speed":8.3,"course":92.5,"horizontalAccuracy":4.0,"sequence":\#(index)}"#
                    .utf8)
        }
        let decoder = InputDecoder()
        let configuration = RideConfiguration()
        var track = VehicleTrack()
        var accepted = 0
        let decodeSeconds = measure {
            for index in 0..<fixes {
                let payload = payloads[index % payloads.count]
                guard let fix = try? decoder.telemetry(vehicleId: "v-0042", payload: payload) else { continue }
                if index % payloads.count == 0 { track = VehicleTrack() }
                if case .accepted(let fix) = TelemetryAcceptance.evaluate(
                    fix, track: track, now: fix.timestamp, configuration: configuration)
                {
                    track.record(fix)
                    accepted += 1
                }
            }
        }
        struct NativeFix: Decodable {
            var vehicleId: String?
            var timestamp: String
            var latitude: Double
            var longitude: Double
            var speed: Double?
            var course: Double?
            var horizontalAccuracy: Double?
            var sequence: Int?
        }
        let jsonDecoder = JSONDecoder()
        let foundationCount = fixes / 5
        var decodedByFoundation = 0
        let foundationSeconds = measure {
            for index in 0..<foundationCount {
                if (try? jsonDecoder.decode(NativeFix.self, from: Data(payloads[index % payloads.count]))) != nil {
                    decodedByFoundation += 1
                }
            }
        }
        report("decode + accept a native fix (T1-T7)", Double(fixes) / decodeSeconds, unit: "fixes/s", target: 400_000)
        report(
            "  comparison: Foundation JSONDecoder alone", Double(foundationCount) / foundationSeconds, unit: "fixes/s",
            target: nil)
        precondition(accepted > 0 && decodedByFoundation == foundationCount)

        // 2. Apply an accepted fix with `rides` active rides.
        let residentBefore = residentBytes()
        var engine = RideEngine()
        for index in 0..<rides {
            let ride = "r-\(index)"
            let pickup = Coordinate(
                latitude: 52.45 + Double(index % 1000) * 0.0001, longitude: 13.3 + Double(index / 1000) * 0.001)
            let booking =
                #"{"rideIdentifier":"\#(ride)","vehicleId":"v-\#(index)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude)},"dropOffLocation":{"latitude":\#(pickup.latitude + 0.02),"longitude":\#(pickup.longitude)},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
            _ = engine.receive(topic: "rides/\(ride)/start", payload: Array(booking.utf8), now: origin)
        }
        let residentAfter = residentBytes()
        precondition(engine.activeRideCount == rides)
        let fullBookingBytes = fullBookingMemory(origin: origin)
        let vehicleIDs = (0..<rides).map { "v-\($0)" }
        let fixList: [TelemetryFix] = (0..<fixes).map { index in
            let ride = index % rides
            let round = index / rides
            return TelemetryFix(
                vehicleId: vehicleIDs[ride], timestamp: origin.addingTimeInterval(Double(round + 1)),
                coordinate: Coordinate(
                    latitude: 52.40 + Double(ride % 1000) * 0.0001 - Double(round) * 0.00001,
                    longitude: 13.3 + Double(ride / 1000) * 0.001),
                speed: 9, course: 0, horizontalAccuracy: 5)
        }
        var statusActions = 0
        for round in 0..<applyRepeat {
            let shift = Double((round + 1) * 1000)
            for fix in fixList {
                var later = fix
                later.timestamp = fix.timestamp.addingTimeInterval(shift)
                statusActions += engine.receive(fix: later, now: later.timestamp).count
            }
        }
        let applySeconds = measure {
            for fix in fixList { statusActions += engine.receive(fix: fix, now: fix.timestamp).count }
        }
        report(
            "apply an accepted fix, \(rides) active rides (P2-P5, E1)", Double(fixes) / applySeconds, unit: "fixes/s",
            target: 1_000_000)
        print(String(format: "  (%d accepted, %d actions)", engine.counters.fixesAccepted, statusActions))

        // 3. Build, validate and encode one status.
        var ride = engine.rides["r-1"]!
        for _ in 0..<statusOnly {
            var total = 0
            for index in 0..<300_000 {
                let status = ride.nextStatus(
                    now: origin.addingTimeInterval(Double(index)), configuration: configuration)
                if StatusValidator.violation(of: status, bookedRide: "r-1") == nil { total += status.encoded().count }
            }
            precondition(total > 0)
        }
        var bytes = 0
        let statusCount = 300_000
        let statusSeconds = measure {
            for index in 0..<statusCount {
                let status = ride.nextStatus(
                    now: origin.addingTimeInterval(Double(index) * 0.001), configuration: configuration)
                if StatusValidator.violation(of: status, bookedRide: "r-1") == nil { bytes += status.encoded().count }
            }
        }
        report(
            "build + validate (V1-V6) + encode a status", Double(statusCount) / statusSeconds, unit: "statuses/s",
            target: 200_000)
        print("  (\(bytes / statusCount) bytes a status)")

        // 3b. The durable state (L5), written with the statuses that persist it.
        var stateBytes = 0
        let stateCount = 100_000
        let stateSeconds = measure {
            for _ in 0..<stateCount { stateBytes += ride.durableState().count }
        }
        report("encode the durable state (L5)", Double(stateCount) / stateSeconds, unit: "states/s", target: nil)
        print("  (\(stateBytes / stateCount) bytes a state)")

        // 4. The cadence scheduler with `rides` rides at a 5 s interval, 50 ms ticks over 60 simulated seconds.
        var scheduler = CadenceScheduler()
        for index in 0..<rides { scheduler.schedule(index, at: Double(index % 5000) / 1000) }
        var popped = 0
        let schedulerSeconds = measure {
            var now = 0.0
            while now < 60 {
                now += 0.05
                for ride in scheduler.popDue(now: now) {
                    scheduler.schedule(ride, at: now + 5)
                    popped += 1
                }
            }
        }
        print(
            String(
                format: "%-58@ %10.3f %% of one core (target < 2 %%), %d due rides handled",
                "scheduler, \(rides) rides at 5 s" as NSString, 100 * schedulerSeconds / 60, popped))

        // 5. Memory per active ride.
        let perRide = Double(residentAfter - residentBefore) / Double(rides)
        print(
            String(
                format: "%-58@ %10.0f bytes per ride (target <= 1024), resident %.1f MiB",
                "memory, \(rides) active rides" as NSString, perRide, Double(residentAfter) / 1_048_576))
        print(
            String(
                format: "%-58@ %10.0f bytes per ride",
                "  the same with full bookings (driver, plate, fare, prices)" as NSString, fullBookingBytes))
    }

    /// Resident bytes per ride for `rides` bookings that carry everything a dispatch system may send: a
    /// vehicle and driver of their own, place names, a price range, fare line items and a fare.
    func fullBookingMemory(origin: Date) -> Double {
        let before = residentBytes()
        var engine = RideEngine()
        for index in 0..<rides {
            let ride = "r-\(index)"
            let latitude = 52.45 + Double(index % 1000) * 0.0001
            let longitude = 13.3 + Double(index / 1000) * 0.001
            let booking =
                #"{"rideIdentifier":"\#(ride)","vehicleId":"v-\#(index)","rideOption":{"name":"Comfort","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))","priceRange":{"minimumPrice":"14.20","maximumPrice":"18.90","currencyCode":"EUR"},"fareLineItems":[{"title":"Base fare","price":"3.90","currencyCode":"EUR"},{"title":"Distance","price":"10.30","currencyCode":"EUR"}],"usesMeteredFare":true},"pickupLocation":{"latitude":\#(latitude),"longitude":\#(longitude),"name":"Pickup \#(index)","address":"Torstrasse \#(index % 200), 10119 Berlin"},"dropOffLocation":{"latitude":\#(latitude + 0.02),"longitude":\#(longitude),"name":"Hauptbahnhof"},"waypoints":[],"vehicle":{"registrationPlate":"B-RS \#(index)","manufacturer":"Toyota","model":"Prius","mapAnnotationImage":"https://assets.example/cars/comfort.png"},"driver":{"displayName":"Driver \#(index)","phoneNumber":"+49 30 \#(1_000_000 + index)","rating":"4.8"},"partySize":2,"fare":{"baseCharge":"3.90","perKilometer":"1.60","perMinute":"0.35","currencyCode":"EUR"}}"#
            _ = engine.receive(topic: "rides/\(ride)/start", payload: Array(booking.utf8), now: origin)
        }
        precondition(engine.activeRideCount == rides)
        return withExtendedLifetime(engine) { Double(residentBytes() - before) / Double(rides) }
    }

    func report(_ name: String, _ rate: Double, unit: String, target: Double?) {
        let verdict = target.map { rate >= $0 ? "meets \(Int($0))" : "BELOW target \(Int($0))" } ?? ""
        print(String(format: "%-58@ %12.0f %@ %@", name as NSString, rate, unit as NSString, verdict as NSString))
    }

}
