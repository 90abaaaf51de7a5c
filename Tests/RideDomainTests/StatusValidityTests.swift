import Foundation
import RideDomain
import Testing

import struct RideStatusKit.CompletionStatus
import struct RideStatusKit.Money
import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus
import enum RideStatusKit.Rule
import struct RideStatusKit.VehicleLocation

@Suite("Status validity V1-V7 and the JSON of 3.3")
struct StatusValidityTests {
    func validStatus() throws -> RideStatus {
        var harness = Harness()
        return try #require(harness.start().statuses.first)
    }

    @Test("V1: rideIdentifier must be the booking's")
    func rideIdentifier() throws {
        var status = try validStatus()
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
        status.rideIdentifier = "r-2"
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V1)
    }

    @Test("V2: phase is one of the six; unknown does not decode")
    func phases() throws {
        #expect(
            RidePhase.allCases.map(\.rawValue) == [
                "received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed",
            ])
        #expect(RidePhase(rawValue: "unknown") == nil)
        let json = try JSONParser.parse(try validStatus().encoded())
        #expect(RidePhase(rawValue: json["phase"]?.stringValue ?? "") != nil)
    }

    @Test("V3: completionStatus iff completed, and internally consistent")
    func completionConsistency() throws {
        var status = try validStatus()
        status.completionStatus = .completed(payment: nil, feedbackType: [], tipping: [])
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V3)
        status.phase = .completed
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
        status.completionStatus?.canceled = true
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V3)
        status.completionStatus = .canceled(by: .user, fee: nil)
        status.completionStatus?.canceledBy = nil
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V3)
        status.completionStatus = .completed(payment: nil, feedbackType: [.rate], tipping: [])
        status.completionStatus?.missedPickup = true
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V3)
        status.completionStatus = .completed(payment: nil, feedbackType: [.rate], tipping: [])
        status.completionStatus?.outstanding = true
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V3)
        // V3's feedbackType is rate and tip by construction: no other value exists, and none reads from text.
        #expect(CompletionStatus.FeedbackType.allCases == [.rate, .tip])
        #expect(CompletionStatus.FeedbackType(rawValue: "stars") == nil)
        status.phase = .ongoing
        status.completionStatus = nil
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
    }

    @Test("V4: rideOption.name non-empty and estimatedPickupDate valid")
    func rideOption() throws {
        var status = try validStatus()
        status.rideOption.name = "  "
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V4)
        var harness = Harness()
        let blank = String(decoding: bookingJSON(), as: UTF8.self).replacingOccurrences(
            of: #""name":"Compact""#, with: #""name":"""#)
        #expect(harness.send("rides/r-1/start", bytes(blank), at: t0).reasons == [.invalidField])
    }

    @Test("V5: from confirmed on a map annotation image and a valid vehicle location once known; null before")
    func vehicle() throws {
        var status = try validStatus()
        #expect(status.vehicle.location == nil, "no position known yet: null, and still published")
        status.vehicle.mapAnnotationImage = nil
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V5)
        status.phase = .received
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
        var located = try validStatus()
        located.vehicle.location = VehicleLocation(
            coordinate: Coordinate(latitude: 95, longitude: 0), course: nil, speed: nil, horizontalAccuracy: nil,
            timestamp: t0)
        #expect(StatusValidator.violation(of: located, bookedRide: "r-1")?.rule == .V5)
        // The configured default image fills a booking without one.
        var configuration = RideConfiguration()
        configuration.mapAnnotationImages = ["Compact": "https://assets.example/default.png"]
        var harness = Harness(configuration: configuration)
        let noImage = String(decoding: bookingJSON(), as: UTF8.self)
            .replacingOccurrences(of: #","mapAnnotationImage":"https://assets.example/cars/compact.png""#, with: "")
        let statuses = harness.send("rides/r-1/start", bytes(noImage), at: t0).statuses
        #expect(statuses.first?.vehicle.mapAnnotationImage == "https://assets.example/default.png")
    }

    @Test("V6: money non-negative with ISO 4217 codes; drop-off not before pickup")
    func moneyAndDates() throws {
        var status = try validStatus()
        status.completionStatus = .canceled(by: .user, fee: Money(amount: -1, currencyCode: "EUR"))
        status.phase = .completed
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V6)
        status.completionStatus = .canceled(by: .user, fee: Money(amount: 1, currencyCode: "eur"))
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1")?.rule == .V6)
        var dates = try validStatus()
        dates.estimatedDropOffDate = dates.estimatedPickupDate?.addingTimeInterval(-1)
        #expect(StatusValidator.violation(of: dates, bookedRide: "r-1")?.rule == .V6)
    }

    @Test(
        "V5 at intake: a booking that could never publish is invalidBooking; an assignment that would is invalidField")
    func neverPublishableRefused() throws {
        var harness = Harness()
        let noImage = String(decoding: bookingJSON(ride: "r-1"), as: UTF8.self)
            .replacingOccurrences(of: #","mapAnnotationImage":"https://assets.example/cars/compact.png""#, with: "")
        // With a vehicle it starts confirmed, where V5 needs an image that neither the booking nor the
        // configuration gives: refused, instead of taken in to publish nothing for up to 6 h.
        let refused = harness.send("rides/r-1/start", bytes(noImage), at: t0).deadLetters
        #expect(refused.map(\.reason) == [.invalidBooking])
        #expect(refused.first?.detail.contains("mapAnnotationImage") == true)
        #expect(refused.first?.detail.contains("V5") == true)
        #expect(harness.engine.activeRideCount == 0)
        // Without a vehicle it is received (V5 does not apply yet); an assign that brings no image is refused
        // and leaves the ride as it was, one that brings one confirms it.
        let received = bytes(
            String(decoding: bookingJSON(ride: "r-2", vehicle: nil), as: UTF8.self)
                .replacingOccurrences(of: #","mapAnnotationImage":"https://assets.example/cars/compact.png""#, with: "")
        )
        #expect(harness.send("rides/r-2/start", received, at: t0).statuses.map(\.phase) == [.received])
        let bare = harness.send("rides/r-2/assign", bytes(#"{"vehicleId":"v-2"}"#), at: t0.addingTimeInterval(1))
        #expect(bare.reasons == [.invalidField])
        #expect(bare.statuses.isEmpty && !bare.contains(.subscribe(vehicle: "v-2")))
        #expect(harness.phase("r-2") == .received && harness.engine.rides["r-2"]?.vehicleId == nil)
        let withImage = harness.send(
            "rides/r-2/assign",
            bytes(#"{"vehicleId":"v-2","vehicle":{"mapAnnotationImage":"https://a.example/c.png"}}"#),
            at: t0.addingTimeInterval(2))
        #expect(withImage.statuses.map(\.phase) == [.confirmed])
    }

    @Test(
        "V7: an invalid status is never published; the last valid one is republished, logged with its rule and counted")
    func fallback() throws {
        // Intake refuses what could never publish, so an invalid status can only come from state the intake
        // checks never saw: here a ride state whose image went missing (an older release, a hand edit).
        var harness = Harness()
        let first = try #require(harness.start().statuses.first)
        let ride = try #require(harness.engine.rides["r-1"])
        var document = try #require(
            try JSONSerialization.jsonObject(with: Data(ride.durableState())) as? [String: Any])
        var vehicle = try #require(document["vehicle"] as? [String: Any])
        #expect(vehicle.removeValue(forKey: "mapAnnotationImage") != nil)
        document["vehicle"] = vehicle
        let state = try JSONSerialization.data(withJSONObject: document)
        var restarted = Harness()
        _ = restarted.engine.restore(try Ride.decodeDurableState(Array(state)), now: t0.addingTimeInterval(1))
        let actions = restarted.engine.publishAll(now: t0.addingTimeInterval(1))
        let invalid = actions.compactMap { if case .invalidStatus(_, let violation) = $0 { violation } else { nil } }
        #expect(invalid.map(\.rule) == [.V5])
        let republished = actions.statuses
        #expect(republished.count == 1)
        #expect(republished.first?.vehicle.mapAnnotationImage == first.vehicle.mapAnnotationImage, "the last valid one")
        #expect((republished.first?.sequence ?? 0) > first.sequence)
        #expect(restarted.engine.counters.invalidStatuses == 1)
    }

    @Test("3.3: exact field names, RFC 3339 UTC milliseconds, money as strings, nulls as in the example")
    func encoding() throws {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(2), pickup.moved(metres: 3000, bearing: 90), speed: 7.9)
        let status = try #require(harness.engine.tick(now: t0.addingTimeInterval(5.14)).statuses.first)
        let json = try JSONParser.parse(status.encoded())
        guard case .object(let members) = json else { Issue.record("not an object"); return }
        // The contract's fields, the two E1's range adds, and E2's source (docs/CONTRACT-NOTES.md): nothing else.
        #expect(
            Set(members.keys) == [
                "rideIdentifier", "phase", "completionStatus", "vehicle", "driver", "rideOption", "estimatedPickupDate",
                "estimatedPickupEndDate", "estimatedDropOffDate", "pickupLocation", "dropOffLocation", "waypoints",
                "scheduledPickupTime", "sequence", "issuedAt", "stale", "estimatedPickupDateLatest",
                "estimatedDropOffDateLatest", "estimateSource",
            ])
        #expect(json["estimateSource"] == .string("estimate"), "E2: no route, no navigation: E1's estimate")
        #expect(json["estimatedPickupDateLatest"]?.stringValue?.hasSuffix("Z") == true)
        #expect(
            json["completionStatus"] == .null && json["estimatedPickupEndDate"] == .null
                && json["scheduledPickupTime"] == .null)
        #expect(json["issuedAt"]?.stringValue == "2026-11-22T09:50:05.140Z")
        #expect(json["vehicle"]?["location"]?["speed"] == .number(7.9))
        #expect(json["vehicle"]?["location"]?["timestamp"]?.stringValue == "2026-11-22T09:50:02.000Z")
        #expect(json["rideOption"]?["priceRange"]?["minimumPrice"]?.stringValue == "12.00")
        #expect(json["rideOption"]?["fareLineItems"]?.arrayCount == 1)
        #expect(json["driver"]?["rating"]?.stringValue == "4.9")
        #expect(json["pickupLocation"]?["name"]?.stringValue == "Alexanderplatz")
        let completed = String(
            decoding: harness.send(
                "rides/r-1/cancel",
                bytes(#"{"canceledBy":"user","cancellationFee":{"amount":"5","currencyCode":"EUR"}}"#),
                at: t0.addingTimeInterval(6)
            ).statuses[0].encoded(), as: UTF8.self)
        #expect(
            completed.contains(
                #""completionStatus":{"completed":false,"canceled":true,"missedPickup":false,"outstanding":true,"canceledBy":"user","paymentAmount":{"amount":"5.00","currencyCode":"EUR"},"feedbackType":[],"defaultTippingOptions":[]}"#
            ))
    }
}

extension JSONValue {
    var arrayCount: Int? { if case .array(let elements) = self { elements.count } else { nil } }
}

@Suite("JSONWriter: the exact bytes of 3.3")
struct JSONWriterTests {
    @Test("3.3: numbers, integers, literals, escapes and nesting are written exactly")
    func exactBytes() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("a")
        writer.number(52.520008)
        writer.key("b")
        writer.number(8)
        writer.key("c")
        writer.number(-0.5)
        writer.key("d")
        writer.integer(-1_234_567)
        writer.key("e")
        writer.integer(0)
        writer.key("f")
        writer.beginArray()
        writer.bool(true)
        writer.bool(false)
        writer.null()
        writer.number(.nan)
        writer.beginObject()
        writer.endObject()
        writer.endArray()
        writer.key(dynamic: "quote\"d")
        writer.string("line\nbreak\t\\ \u{01}")
        writer.date("t", t0.addingTimeInterval(0.25))
        writer.endObject()
        #expect(
            String(decoding: writer.bytes, as: UTF8.self)
                == #"{"a":52.520008,"b":8.0,"c":-0.5,"d":-1234567,"e":0,"f":[true,false,null,null,{}],"quote\"d":"line\nbreak\t\\ \u0001","t":"2026-11-22T09:50:00.250Z"}"#
        )
    }

    @Test("3.3: a writer that outgrows its buffer keeps every byte; integers of every length and at Int64's ends")
    func growthAndIntegers() throws {
        var writer = JSONWriter(capacity: 1)  // grows from its smallest buffer many times
        var expected = ""
        var value: Int64 = 1
        for digits in 1...19 {
            // The smallest with this many digits, its negative, and the largest (9, 99, ...; for 19 digits that
            // is Int.max, below).
            let largest = digits < 19 ? value * 10 - 1 : value
            writer.integer(Int(value))
            writer.integer(Int(-value))
            writer.integer(Int(largest))
            expected += (digits == 1 ? "" : ",") + "\(value),-\(value),\(largest)"
            if digits < 19 { value *= 10 }
        }
        writer.integer(Int.min)
        writer.integer(Int.max)
        writer.string(String(repeating: "\u{e9}x\"", count: 200))
        writer.time(Date(timeIntervalSince1970: 0))
        expected += ",\(Int.min),\(Int.max),\"" + String(repeating: "\u{e9}x\\\"", count: 200) + "\""
        expected += ",\"1970-01-01T00:00:00.000Z\""
        #expect(writer.count == writer.bytes.count)
        let text = String(decoding: writer.bytes, as: UTF8.self)
        #expect(text == expected)
        // The same values read back by Foundation's parser: the bytes are valid JSON.
        let parsed = try JSONSerialization.jsonObject(with: Data(("[" + text + "]").utf8)) as? [Any]
        #expect(parsed?.count == 19 * 3 + 4)
        // Keys grow the buffer too: 40 of them, each with its comma, quotes and colon.
        var keys = JSONWriter(capacity: 1)
        keys.beginObject()
        for index in 0..<40 {
            keys.key("a key long enough to pass the buffer's end")
            keys.integer(index)
        }
        keys.endObject()
        let members = (0..<40).map { #""a key long enough to pass the buffer's end":\#($0)"# }
        #expect(String(decoding: keys.bytes, as: UTF8.self) == "{" + members.joined(separator: ",") + "}")
    }
}
