import Foundation
import RideDomain
import Testing
import WorkerGroup

import struct RideStatusKit.DeadLetter
import enum RideStatusKit.Identifier
import struct RideStatusKit.RideTopics

@Suite("Inputs: I1-I3 and the reason codes of 3.5")
struct InputRulesTests {
    @Test("I1: identifiers outside the alphabet or length are rejected, never echoed into a topic")
    func identifiers() {
        #expect(Identifier.isValid("r-7f3a"))
        #expect(Identifier.isValid("a.b_c:d-e"))
        #expect(Identifier.isValid(String(repeating: "a", count: 64)))
        for bad in ["", "-r", "r/1", "r+1", "r#", "r 1", "r\u{0}", String(repeating: "a", count: 65), "räd"] {
            #expect(!Identifier.isValid(bad), "\(bad) must be rejected")
        }
        var harness = Harness()
        let actions = harness.send("rides/bad id/start", bookingJSON(ride: "bad id"), at: t0)
        #expect(actions.reasons == [.invalidIdentifier])
        #expect(harness.engine.activeRideCount == 0)
        #expect(actions.allSatisfy { if case .subscribe = $0 { false } else { true } })
        // A vehicle id with a wildcard in a booking is rejected before it could become a subscription.
        let wildcard = harness.send("rides/r-2/start", bookingJSON(ride: "r-2", vehicle: "v+1"), at: t0)
        #expect(wildcard.reasons == [.invalidIdentifier])
    }

    @Test("I1, G1: where the broker refuses '.' in topic names (NATS), a vehicle id with one is refused visibly")
    func dotsInTopics() {
        var configuration = RideConfiguration()
        configuration.dotsInTopics = false
        var harness = Harness(configuration: configuration)
        let dotted = harness.send("rides/r-1/start", bookingJSON(ride: "r-1", vehicle: "v.1"), at: t0)
        #expect(dotted.reasons == [.invalidIdentifier])
        #expect(dotted.deadLetters.first?.detail.contains("dotsInTopics") == true)
        #expect(harness.engine.activeRideCount == 0 && harness.engine.subscribedVehicleCount == 0)
        #expect(harness.send("rides/r-2/start", bookingJSON(ride: "r-2", vehicle: "v-2"), at: t0).reasons.isEmpty)
        let assign = harness.send("rides/r-2/assign", Array(#"{"vehicleId":"v.3"}"#.utf8), at: t0)
        #expect(assign.reasons == [.invalidIdentifier])
        #expect(harness.engine.ride("r-2")?.vehicleId == "v-2", "the refused assignment changes nothing")
        // With the default, I1 as written: '.' is allowed.
        var plain = Harness()
        #expect(plain.send("rides/r-1/start", bookingJSON(ride: "r-1", vehicle: "v.1"), at: t0).reasons.isEmpty)
    }

    @Test("I2: too large, empty, not UTF-8, not JSON or not an object is rejected and changes no ride")
    func malformedPayloads() {
        var harness = Harness()
        harness.start()
        let before = harness.engine.rides
        let topic = harness.topics.position(vehicle: "v-1")
        #expect(harness.send(topic, [UInt8](repeating: 0x20, count: 16_385), at: t0).reasons == [.payloadTooLarge])
        #expect(harness.send(topic, [], at: t0).reasons == [.malformedJSON])
        #expect(harness.send(topic, [0x7B, 0xFF, 0xFE, 0x7D], at: t0).reasons == [.malformedJSON])
        #expect(harness.send(topic, bytes("{\"latitude\": 52.5,"), at: t0).reasons == [.malformedJSON])
        #expect(harness.send(topic, bytes("[1,2,3]"), at: t0).reasons == [.malformedJSON])
        #expect(harness.send(topic, bytes("\"text\""), at: t0).reasons == [.malformedJSON])
        #expect(harness.engine.rides == before)
    }

    @Test("I3: an identifier inside a payload must equal the one in its topic")
    func identifierMismatch() {
        var harness = Harness()
        #expect(harness.send("rides/r-1/start", bookingJSON(ride: "r-2"), at: t0).reasons == [.identifierMismatch])
        harness.start()
        let fix = fixJSON(vehicle: "v-9", at: t0, pickup)
        #expect(harness.send("fleet/vehicles/v-1/position", fix, at: t0).reasons == [.identifierMismatch])
        #expect(
            harness.send("rides/r-1/cancel", bytes(#"{"rideIdentifier":"r-9","canceledBy":"user"}"#), at: t0).reasons
                == [.identifierMismatch])
    }

    @Test("3.5: missingField, invalidField, unknownRide and invalidBooking name what is wrong")
    func reasonCodes() {
        var harness = Harness()
        let missing = harness.send("rides/r-1/start", bytes(#"{"rideIdentifier":"r-1"}"#), at: t0).deadLetters
        #expect(missing.map(\.reason) == [.missingField])
        #expect(missing.first?.detail.contains("rideOption") == true)
        let moneyAsNumber = bookingJSON(
            fare: #","fare":{"baseCharge":2.5,"perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#)
        let invalid = harness.send("rides/r-1/start", moneyAsNumber, at: t0).deadLetters
        #expect(invalid.map(\.reason) == [.invalidField])
        #expect(invalid.first?.detail.contains("baseCharge") == true)
        let badTime = bytes(
            String(decoding: bookingJSON(), as: UTF8.self).replacingOccurrences(
                of: "2026-11-22T09:58", with: "yesterday"))
        #expect(harness.send("rides/r-1/start", badTime, at: t0).reasons == [.invalidField])
        #expect(harness.send("rides/r-9/assign", bytes(#"{"vehicleId":"v-2"}"#), at: t0).reasons == [.unknownRide])
        #expect(
            harness.send("rides/r-9/event", bytes(#"{"type":"arrivedAtPickup"}"#), at: t0).reasons == [.unknownRide])
        #expect(harness.send("rides/r-9/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0).reasons == [.unknownRide])
        harness.start()
        #expect(harness.send("rides/r-1/event", bytes(#"{"type":"teleported"}"#), at: t0).reasons == [.invalidField])
        #expect(harness.send("rides/r-1/cancel", bytes(#"{"canceledBy":"driver"}"#), at: t0).reasons == [.invalidField])
        let samePlace = String(decoding: bookingJSON(ride: "r-3"), as: UTF8.self)
            .replacingOccurrences(
                of: #""latitude":52.5096,"longitude":13.3759"#, with: #""latitude":52.5219,"longitude":13.4132"#)
        #expect(harness.send("rides/r-3/start", bytes(samePlace), at: t0).reasons == [.invalidBooking])
    }

    @Test(
        "V6 at intake: negative prices, fares and fees are invalidField naming the field; a discount line item is fine")
    func negativeMoney() throws {
        var harness = Harness()
        let negativeMinimum = String(decoding: bookingJSON(ride: "r-1"), as: UTF8.self)
            .replacingOccurrences(of: #""minimumPrice":"12.00""#, with: #""minimumPrice":"-12.00""#)
        let range = harness.send("rides/r-1/start", bytes(negativeMinimum), at: t0).deadLetters
        #expect(range.map(\.reason) == [.invalidField])
        #expect(range.first?.detail.contains("rideOption.priceRange.minimumPrice") == true)
        let negativeBase = bookingJSON(
            ride: "r-2",
            fare: #","fare":{"baseCharge":"-100.00","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#)
        let fare = harness.send("rides/r-2/start", negativeBase, at: t0).deadLetters
        #expect(fare.map(\.reason) == [.invalidField])
        #expect(fare.first?.detail.contains("fare.baseCharge") == true)
        // V6: an amount is the schemas' decimal string exactly; a point with no digit on a side is no amount.
        for (index, text) in [".5", "1.", "1e2", "+1"].enumerated() {
            let loose = bookingJSON(
                ride: "r-loose-\(index)",
                fare:
                    #","fare":{"baseCharge":"\#(text)","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#)
            let letters = harness.send("rides/r-loose-\(index)/start", loose, at: t0).deadLetters
            #expect(letters.map(\.reason) == [.invalidField], "\(text)")
        }
        #expect(harness.engine.activeRideCount == 0, "no booking was taken in")
        // A negative line item is a discount (V6): accepted, and every status of the ride is valid.
        let discount = String(decoding: bookingJSON(ride: "r-3"), as: UTF8.self)
            .replacingOccurrences(
                of: #""fareLineItems":[{"title":"Base fare","price":"2.50","currencyCode":"EUR"}]"#,
                with:
                    #""fareLineItems":[{"title":"Base fare","price":"2.50","currencyCode":"EUR"},{"title":"Promo","price":"-1.00","currencyCode":"EUR"}]"#
            )
        let accepted = harness.send("rides/r-3/start", bytes(discount), at: t0)
        #expect(accepted.deadLetters.isEmpty)
        let status = try #require(accepted.statuses.first)
        #expect(status.rideOption.fareLineItems.map(\.price) == [Decimal(string: "2.50")!, -1])
        #expect(StatusValidator.violation(of: status, bookedRide: "r-3") == nil)
        let fee = harness.send(
            "rides/r-3/cancel", bytes(#"{"canceledBy":"user","cancellationFee":{"amount":"-5","currencyCode":"EUR"}}"#),
            at: t0)
        #expect(fee.reasons == [.invalidField])
        #expect(fee.deadLetters.first?.detail.contains("cancellationFee.amount") == true)
    }

    @Test("A1: replies only to topic names under the reply prefix, never onto a contract topic")
    func replyTopics() {
        let topics = RideTopics()
        #expect(topics.replyTopicProblem("replies/app-7/status") == nil)
        #expect(topics.replyTopicProblem("replies/x") == nil)
        for refused in [
            "rides/r-2/status", "ridestatus/state/r-2", "fleet/vehicles/v-1/position", "replies/", "replies",
            "replies/+", "replies/#", "repliesX/a", "replies/a\u{0}b", "ridestatus/deadletter",
        ] {
            #expect(topics.replyTopicProblem(refused)?.reason == .invalidField, "\(refused)")
            #expect(topics.replyTopicProblem(refused)?.detail.contains("A1") == true)
        }
        #expect(topics.replyTopicProblem(nil)?.reason == .missingField)
        var custom = RideTopics()
        custom.replyPrefix = "clients/answers"
        #expect(custom.replyTopicProblem("clients/answers/a") == nil)
        #expect(custom.replyTopicProblem("replies/a") != nil)
    }

    @Test("3.5: the dead-letter limit holds in every one-second window, for any arrival times")
    func deadLetterWindow() {
        var generator = SeededRandom(seed: 11)
        for limit in [1, 3, 10] {
            var limiter = DeadLetterLimiter(perSecond: Double(limit))
            var sent: [Double] = []
            var time = 0.0
            for _ in 0..<5_000 {
                time += Double(generator.next() % 1_000) / 4_000  // 0 to 0.25 s apart
                if limiter.allow(.malformedJSON, now: t0.addingTimeInterval(time)) { sent.append(time) }
            }
            // The window that starts at each sent letter holds at most `limit`: the one `limit` later is 1 s on.
            for index in sent.indices.dropLast(limit) { #expect(sent[index + limit] - sent[index] >= 1 - 1e-6) }
            #expect(sent.count > 100, "the limiter still lets letters through")
        }
    }

    @Test("3.5: dead letters carry topic, reason, detail, size and a UTF-8 or base64 prefix; rate limited per reason")
    func deadLetterShapeAndRateLimit() throws {
        let letter = DeadLetter(
            topic: "fleet/vehicles/v-1/position",
            rejection: Rejection(.invalidCoordinates, "latitude 123.4 out of range"),
            payload: bytes(#"{"latitude":123.4}"#), receivedAt: t0)
        let json = try JSONParser.parse(letter.encoded())
        #expect(json["reason"]?.stringValue == "invalidCoordinates")
        #expect(json["payloadBytes"]?.doubleValue == 18)
        #expect(json["payloadPrefix"]?.stringValue == #"{"latitude":123.4}"#)
        #expect(json["receivedAt"]?.stringValue == "2026-11-22T09:50:00.000Z")
        let binary = DeadLetter(
            topic: "t", rejection: Rejection(.malformedJSON, "x"), payload: [0xFF, 0x00, 0x01], receivedAt: t0)
        #expect(binary.payloadPrefix == "/wAB")

        var configuration = RideConfiguration()
        configuration.deadLettersPerSecond = 10
        var harness = Harness(configuration: configuration)
        var sent = 0
        for _ in 0..<50 { sent += harness.send("fleet/vehicles/v-1/position", bytes("nope"), at: t0).deadLetters.count }
        #expect(sent == 10)
        #expect(harness.engine.counters.rejections[.malformedJSON] == 50)
        #expect(harness.engine.counters.deadLettersSuppressed == 40)
        // A second later the bucket has refilled.
        #expect(
            harness.send("fleet/vehicles/v-1/position", bytes("nope"), at: t0.addingTimeInterval(1)).deadLetters.count
                == 1)
    }

    @Test("JSON parser: escapes, unicode, numbers, nesting limit")
    func parser() throws {
        let value = try JSONParser.parse(
            bytes(#"{"a":"x\"y\u00e9\ud83d\ude00","b":[1,-2.5,3e2,true,false,null],"c":{}}"#))
        #expect(value["a"]?.stringValue == "x\"yé😀")
        #expect(value["b"] == .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]))
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes(String(repeating: "[", count: 100))) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes("{\"a\":01}")) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes("{\"a\":1} x")) }
        #expect(try JSONParser.parse(bytes("52.520008")) == .number(52.520008))
    }

    @Test("times: RFC 3339 with any offset or epoch seconds in, UTC with milliseconds out")
    func times() {
        #expect(Timestamps.parse("2026-11-22T10:50:01.25+01:00") == Date(timeIntervalSince1970: 1_795_341_001.25))
        #expect(Timestamps.parse(JSONValue.number(1_795_341_001.25)) == Date(timeIntervalSince1970: 1_795_341_001.25))
        #expect(Timestamps.format(Date(timeIntervalSince1970: 1_795_341_001.25)) == "2026-11-22T09:50:01.250Z")
        #expect(Timestamps.parse("2026-02-30T00:00:00Z") == nil)
        #expect(Timestamps.parse("2026-11-22 09:50") == nil)
    }
}
