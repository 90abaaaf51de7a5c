import Foundation
import MosquittoTesting
import RideDomain
import Testing

import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus

/// The encoder's output against the JSON Schemas in docs/schema (draft 2020-12), checked by Python's
/// `jsonschema` (the reference validator; installed by `make deps`).
@Suite("JSON Schemas of the contract")
struct SchemaTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Validates the documents against `schema` with the reference validator; its exit code and output.
    func validate(_ schema: String, _ documents: [[UInt8]]) async throws -> (Int32?, String) {
        try await validateJSON(schema: schema, documents: documents)
    }

    @Test(
        "every status the encoder emits, in every phase and completion, validates against ride-status.schema.json (V2, V3, V6)"
    )
    func statuses() async throws {
        var statuses: [RideStatus] = []
        var harness = Harness()
        statuses += harness.start(ride: "r-1").statuses
        statuses += harness.start(ride: "r-2", vehicle: nil).statuses
        statuses += harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 400, bearing: 90), speed: 9).statuses
        statuses += harness.event("arrivedAtPickup", at: t0.addingTimeInterval(60)).statuses
        statuses += harness.event("passengerOnBoard", at: t0.addingTimeInterval(90)).statuses
        statuses += harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(900)).statuses
        statuses +=
            harness.send(
                "rides/r-2/cancel",
                bytes(#"{"canceledBy":"user","cancellationFee":{"amount":"3.5","currencyCode":"EUR"}}"#),
                at: t0.addingTimeInterval(30)
            ).statuses
        harness.start(ride: "r-3", vehicle: "v-3")
        harness.event("arrivedAtPickup", ride: "r-3", at: t0.addingTimeInterval(2))
        statuses += harness.engine.tick(now: t0.addingTimeInterval(400)).statuses
        #expect(Set(statuses.map(\.phase)) == Set(RidePhase.allCases))
        let (code, output) = try await validate("ride-status.schema.json", statuses.map { $0.encoded() })
        #expect(code == 0, "\(output)")
        let replies = [harness.engine.statusReply(for: "r-3"), harness.engine.statusReply(for: "nope")]
        let (replyCode, replyOutput) = try await validate("status-get-reply.schema.json", replies)
        #expect(replyCode == 0, "\(replyOutput)")
    }

    @Test("dead letters validate against dead-letter.schema.json; the test inputs against the input schemas")
    func deadLettersAndInputs() async throws {
        var harness = Harness()
        harness.start()
        var letters = harness.send("fleet/vehicles/v-1/position", [0xFF, 0xFE], at: t0).deadLetters
        letters += harness.event("arrivedAtDropOff", at: t0).deadLetters
        #expect(try await validate("dead-letter.schema.json", letters.map { $0.encoded() }).0 == 0)
        #expect(try await validate("booking.schema.json", [bookingJSON(), bookingJSON(vehicle: nil)]).0 == 0)
        #expect(
            try await validate(
                "telemetry.schema.json",
                [fixJSON(at: t0, pickup), bytes(#"{"_type":"location","lat":52.5,"lon":13.4,"tst":1795341000}"#)]
            ).0 == 0)
    }

    @Test(
        "3.4: quote replies of every code validate against ride-options-reply.schema.json; requests and availability too"
    )
    func rideOptions() async throws {
        let quoter = RideOptionQuoter(catalog: testCatalog())
        let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
        let replies = [
            quoter.quote(optionsRequest(), now: t0), quoter.quote(optionsRequest(partySize: 2, locale: "de"), now: t0),
            quoter.quote(optionsRequest(from: paris, to: pickup), now: t0),
            quoter.quote(optionsRequest(partySize: 9), now: t0),
        ]
        #expect(Set(replies.map(\.code)) == [.success, .failureNoServiceInArea, .failure])
        let (code, output) = try await validate("ride-options-reply.schema.json", replies.map { $0.encoded() })
        #expect(code == 0, "\(output)")
        let request = bytes(
            #"{"pickupLocation":{"latitude":52.52,"longitude":13.41},"dropOffLocation":{"latitude":52.5,"longitude":13.37},"partySize":2}"#
        )
        #expect(try await validate("ride-options-request.schema.json", [request]).0 == 0)
        let available = bytes(
            #"{"available":true,"rideOptionName":"Compact","location":{"latitude":52.52,"longitude":13.41}}"#)
        #expect(try await validate("availability.schema.json", [available, bytes(#"{"available":false}"#)]).0 == 0)
        #expect(try await validate("availability.schema.json", [bytes(#"{"available":true}"#)]).0 != 0)
    }

    @Test("the schemas reject what the contract forbids (the check can fail)")
    func rejectsInvalid() async throws {
        var harness = Harness()
        let status = try #require(harness.start().statuses.first)
        let text = String(decoding: status.encoded(), as: UTF8.self)
        let unknownPhase = text.replacingOccurrences(of: #""phase":"confirmed""#, with: #""phase":"unknown""#)
        let moneyAsNumber = text.replacingOccurrences(of: #""minimumPrice":"12.00""#, with: #""minimumPrice":12"#)
        let localTime = text.replacingOccurrences(
            of: "\"issuedAt\":\"2026-11-22T09:50:00.000Z\"", with: "\"issuedAt\":\"2026-11-22T10:50:00+01:00\"")
        for invalid in [unknownPhase, moneyAsNumber, localTime] {
            #expect(invalid != text)
            #expect(try await validate("ride-status.schema.json", [bytes(invalid)]).0 != 0)
        }
    }
}
