import Foundation
import PropertyBased
import Testing

import struct RideStatusKit.TelemetryFix
import struct RideStatusKit.VehicleLocation

@testable import RideDomain

/// The compact storage every active ride uses must keep exactly the values it is given (L5: phase,
/// sequence and last location intact; E1 and P5 read these times and measurements back).
@Suite("Compact ride storage")
struct CompactStorageTests {
    struct Holder {
        @NaNBoxed var time: Date?
        @NaNBoxed var measure: Double?
        @PackedLocation var location: VehicleLocation?
    }

    /// Issue 3 (a ride within 1 KB at 100,000 rides, measured by `ride-bench memory`): the layout that keeps it
    /// there, held so that a new field shows here and not months later in a benchmark (E1's range took a
    /// ride from 941 to 1,086 bytes unnoticed). A field that must grow these says so in `docs/performance.md`.
    @Test("a ride's inline storage, its V7 snapshot and its range samples keep their measured sizes")
    func layout() {
        // 336 until G6: a grant's epoch is etcd's revision plus a base, so `epoch` is 64 bits and no longer fits
        // the padding after the leg (8 bytes a ride, 0.8 MB at 100,000 rides; docs/performance.md).
        #expect(MemoryLayout<Ride>.size <= 344, "\(MemoryLayout<Ride>.size) bytes")
        // A fix is copied a few times on its way in: above 128 bytes each copy calls memcpy (+3.9 % instructions a
        // fix when E2's two optionals took it to 129; one optional pair keeps it at 121).
        #expect(MemoryLayout<TelemetryFix>.size <= 128, "\(MemoryLayout<TelemetryFix>.size) bytes")
        // The booking's box: 16 bytes of header and at most 200 take malloc's 224-byte class (208, with E2's route
        // and the party size as `Int?`, took the 240-byte one).
        #expect(MemoryLayout<BookingTerms>.size <= 200, "\(MemoryLayout<BookingTerms>.size) bytes")
        #expect(MemoryLayout<Ride>.stride <= 344, "\(MemoryLayout<Ride>.stride) bytes")
        // The snapshot is boxed: 136 bytes and a 16-byte header fill malloc's 160-byte class; 137 take 176.
        #expect(MemoryLayout<LastValidStatus>.size <= 136, "\(MemoryLayout<LastValidStatus>.size) bytes")
        // The range's statuses per horizon (4 bytes) and the horizon last counted (1) took the ride from 328 to
        // 336 bytes, the stride from 328 to 336.
        #expect(MemoryLayout<ArrivalSamples>.size <= 54, "\(MemoryLayout<ArrivalSamples>.size) bytes")
    }

    @Test("L5: optional times, measurements and positions read back exactly, nil included")
    func roundTrips() async {
        let optionalDouble = Gen.double(in: -1e9...1e9).optional
        await propertyCheck(
            count: 1000, input: optionalDouble, optionalDouble, Gen.double(in: -90...90), optionalDouble
        ) { seconds, measure, latitude, course in
            let time = seconds.map { Date(timeIntervalSince1970: $0) }
            let location = VehicleLocation(
                coordinate: Coordinate(latitude: latitude, longitude: 13.4), course: course, speed: measure,
                horizontalAccuracy: nil, timestamp: time ?? Date(timeIntervalSince1970: 0))
            var holder = Holder(time: time, measure: measure, location: location)
            #expect(holder.time == time && holder.measure == measure && holder.location == location)
            holder.location = nil
            holder.time = nil
            #expect(holder.location == nil && holder.time == nil)
        }
        #expect(Holder(time: nil, measure: -0.0, location: nil).measure == 0)
    }

    @Test("the interner keeps one copy per distinct string, and at most its limit")
    func interner() {
        var interner = StringInterner(limit: 2)
        let image = "https://assets.example/cars/compact.png"
        #expect(interner.intern(String(image.utf8.map { Character(Unicode.Scalar($0)) })) == image)
        #expect(interner.intern(image) == image)
        #expect(interner.count == 1)
        _ = interner.intern("https://assets.example/cars/suv.png")
        #expect(interner.intern("https://assets.example/cars/van.png") == "https://assets.example/cars/van.png")
        #expect(interner.count == 2, "past the limit strings are kept as they come")
        #expect(interner.intern(nil as String?) == nil)
    }
}
