import ArgumentParser
import Foundation
import RideDomain

/// Memory per active ride in a plain process (no malloc interposer), with minimal and with full bookings.
struct MemoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory", abstract: "Resident memory per active ride, minimal and full bookings.")

    @Option var rides = 100_000
    @Option(help: .hidden) var onlyAfterFixesWithTrackLength: Int?

    func run() throws {
        let origin = Date(timeIntervalSince1970: 1_795_341_000)
        if let trackLength = onlyAfterFixesWithTrackLength {
            print(memoryAfterFixes(origin: origin, trackLength: trackLength))
            return
        }
        print(
            "ride-bench memory: \(rides) active rides, release build (hot paths: make bench-domain, ordo-one/benchmark)"
        )
        let fixed = Self.loadTimeZones(origin)
        print(
            String(
                format: "%-58@ %10.1f MiB once",
                "fixed: a time zone (E1's hours of the week), if configured" as NSString,
                Double(fixed) / 1_048_576))
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
        let perRide = Double(residentAfter - residentBefore) / Double(rides)
        print(
            String(
                format: "%-58@ %10.0f bytes per ride (target <= 1024), resident %.1f MiB",
                "memory, \(rides) active rides" as NSString, perRide, Double(residentAfter) / 1_048_576))
        withExtendedLifetime(engine) {}
        print(
            String(
                format: "%-58@ %10.0f bytes per ride",
                "  the same with full bookings (driver, plate, fare, prices)" as NSString,
                fullBookingMemory(origin: origin)))
        // The read API's track (rides.trackLength): its ring is allocated at a vehicle's first accepted fix.
        // Each in a fresh process: in this one, freed pages of the engines above would hide new allocations.
        for trackLength in [0, RideConfiguration().trackLength] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            process.arguments = [
                "memory", "--rides", "\(rides)", "--only-after-fixes-with-track-length", "\(trackLength)",
            ]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            print(
                String(
                    format: "%-58@ %10.0f bytes per ride",
                    "  minimal bookings after a fix each, rides.trackLength \(trackLength)" as NSString,
                    Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .nan))
        }
    }

    /// Resident bytes per ride for minimal bookings whose vehicles have each sent one accepted fix.
    func memoryAfterFixes(origin: Date, trackLength: Int) -> Double {
        _ = Self.loadTimeZones(origin)
        let before = residentBytes()
        var configuration = RideConfiguration()
        configuration.trackLength = trackLength
        var engine = RideEngine(configuration: configuration)
        let now = origin.addingTimeInterval(1)
        for index in 0..<rides {
            let ride = "r-\(index)"
            let latitude = 52.45 + Double(index % 1000) * 0.0001
            let longitude = 13.3 + Double(index / 1000) * 0.001
            let booking =
                #"{"rideIdentifier":"\#(ride)","vehicleId":"v-\#(index)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":\#(latitude),"longitude":\#(longitude)},"dropOffLocation":{"latitude":\#(latitude + 0.02),"longitude":\#(longitude)},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
            _ = engine.receive(topic: "rides/\(ride)/start", payload: Array(booking.utf8), now: origin)
            let fix =
                #"{"timestamp":"\#(Timestamps.format(now))","latitude":\#(latitude - 0.01),"longitude":\#(longitude),"speed":8}"#
            _ = engine.receive(topic: "fleet/vehicles/v-\(index)/position", payload: Array(fix.utf8), now: now)
        }
        precondition(engine.activeRideCount == rides && engine.counters.fixesAccepted == rides)
        return withExtendedLifetime(engine) { Double(residentBytes() - before) / Double(rides) }
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

    /// Loads what a worker loads once when a time zone is configured (the shipped catalog's areas name
    /// Europe/Berlin and Europe/Zurich; `rides.timeZone` is UTC without them): Foundation's zone tables, 2.4 to
    /// 4.5 MiB whatever the rides. Measured from the engine's creation it read as 23 bytes a ride at 100,000 rides
    /// and 46 at 50,000.
    /// - Returns: the resident bytes it took.
    static func loadTimeZones(_ date: Date) -> Int {
        let before = residentBytes()
        _ = AreaLearning.hourOfWeek(date, in: TimeZone(identifier: "Europe/Berlin"))
        return max(0, residentBytes() - before)
    }
}
