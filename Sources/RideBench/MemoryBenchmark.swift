import ArgumentParser
import Foundation
import RideDomain

/// Memory per active ride in a plain process (no malloc interposer), with minimal and with full bookings.
struct MemoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory", abstract: "Resident memory per active ride, minimal and full bookings.")

    @Option var rides = 100_000

    func run() throws {
        let origin = Date(timeIntervalSince1970: 1_795_341_000)
        print(
            "ride-bench memory: \(rides) active rides, release build (hot paths: make bench-domain, ordo-one/benchmark)"
        )
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

}
