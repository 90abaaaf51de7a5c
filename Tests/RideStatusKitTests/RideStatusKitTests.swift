import Foundation
import MosquittoTesting
import RideDomain
import RideJSON
import RideStatusKit
import Testing

/// RideStatusKit against the real thing: the worker's own output (the golden ride and a live engine), the
/// contract's JSON Schemas, and the domain's reason codes, phases and topic names, so that the library cannot
/// drift from the worker it describes.
@Suite("RideStatusKit: the client library")
struct RideStatusKitTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let decoder = JSONDecoder.rideStatus
    let encoder = JSONEncoder.rideStatus

    /// The golden ride's statuses (recorded from the engine: every phase, the completion with its payment).
    func goldenStatuses() throws -> [Data] {
        let data = try Data(contentsOf: Self.root.appendingPathComponent("Tests/RideDomainTests/Golden/full-ride.json"))
        let array = try #require(try JSONSerialization.jsonObject(with: data) as? [Any])
        return try array.map { try JSONSerialization.data(withJSONObject: $0) }
    }

    /// Validates documents against docs/schema with the reference validator (the same check as SchemaTests).
    func validate(_ schema: String, _ documents: [Data]) async throws {
        let (code, output) = try await validateJSON(schema: schema, documents: documents.map { Array($0) })
        #expect(code == 0, "\(schema): \(output)")
    }

    // MARK: Statuses

    @Test("3.3: every golden status decodes, and encodes back to JSON the schema accepts and that decodes equal")
    func goldenRoundTrip() async throws {
        let documents = try goldenStatuses()
        #expect(documents.count >= 10)
        var encoded: [Data] = []
        var phases: Set<RideStatusKit.RidePhase> = []
        for document in documents {
            let status = try decoder.decode(RideStatusKit.RideStatus.self, from: document)
            phases.insert(status.phase)
            let again = try encoder.encode(status)
            #expect(try decoder.decode(RideStatusKit.RideStatus.self, from: again) == status)
            encoded.append(again)
        }
        #expect(phases.count >= 5, "the golden ride goes through the phases: \(phases)")
        try await validate("ride-status.schema.json", encoded)
    }

    @Test("3.3, V3, P5: a live engine's statuses decode with the same phase, sequence, times and payment")
    func workerOutput() throws {
        let t0 = Date(timeIntervalSince1970: 1_795_341_000)
        var engine = RideEngine()
        let topics = engine.topics
        var statuses: [RideStatusKit.RideStatus] = []
        func send(_ topic: String, _ text: String, _ seconds: Double) {
            for action in engine.receive(topic: topic, payload: Array(text.utf8), now: t0.addingTimeInterval(seconds)) {
                if case .publish(let status, _, _) = action { statuses.append(status) }
            }
        }
        let booking =
            #"{"rideIdentifier":"r-kit","vehicleId":"v-kit","rideOption":{"name":"Compact","estimatedPickupDate":"2026-11-22T09:58:00.000Z","priceRange":{"minimumPrice":"12.00","maximumPrice":"15.00","currencyCode":"EUR"}},"pickupLocation":{"latitude":52.5219,"longitude":13.4132,"name":"Alexanderplatz"},"dropOffLocation":{"latitude":52.5096,"longitude":13.3759},"vehicle":{"registrationPlate":"B-RS 1042","mapAnnotationImage":"https://assets.example/cars/compact.png"},"driver":{"displayName":"Ada L.","rating":"4.9"},"fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}}"#
        send(topics.control(.start, ride: "r-kit"), booking, 0)
        send(
            topics.position(vehicle: "v-kit"),
            #"{"vehicleId":"v-kit","timestamp":"\#(Timestamps.format(t0.addingTimeInterval(5)))","latitude":52.52,"longitude":13.41,"speed":8,"course":200}"#,
            5)
        send(topics.control(.event, ride: "r-kit"), #"{"type":"arrivedAtPickup"}"#, 60)
        send(topics.control(.event, ride: "r-kit"), #"{"type":"passengerOnBoard"}"#, 90)
        send(topics.control(.event, ride: "r-kit"), #"{"type":"arrivedAtDropOff"}"#, 900)
        #expect(statuses.map(\.phase.rawValue).contains("completed"))
        for original in statuses {
            let decoded = try decoder.decode(RideStatusKit.RideStatus.self, from: Data(original.encoded()))
            #expect(decoded.rideIdentifier == original.rideIdentifier)
            #expect(decoded.phase.rawValue == original.phase.rawValue)
            #expect(decoded.sequence == original.sequence)
            #expect(abs(decoded.issuedAt.timeIntervalSince(original.issuedAt)) < 0.001)
            #expect(decoded.vehicle.location?.course == original.vehicle.location?.course)
            #expect(decoded.completionStatus?.completed == original.completionStatus?.completed)
            if let payment = original.completionStatus?.paymentAmount {
                #expect(decoded.completionStatus?.paymentAmount?.amount == payment.amount)
                #expect(decoded.completionStatus?.paymentAmount?.currencyCode == payment.currencyCode)
            }
        }
        // The kit's subscriber rule (C5): a later status supersedes an earlier one.
        let kitStatuses = try statuses.map {
            try decoder.decode(RideStatusKit.RideStatus.self, from: Data($0.encoded()))
        }
        #expect(zip(kitStatuses.dropFirst(), kitStatuses).allSatisfy { $0.supersedes($1) })
        // L7: the status/get reply, both ways.
        let reply = try decoder.decode(StatusReply.self, from: Data(engine.statusReply(for: "r-none")))
        #expect(reply == .unknownRide)
        guard
            case .status(let current) = try decoder.decode(
                StatusReply.self, from: Data(engine.statusReply(for: "r-kit")))
        else {
            Issue.record("the reply for an active ride is its status")
            return
        }
        #expect(current.sequence == statuses.last?.sequence)
    }

    // MARK: Every other payload

    @Test("3.1, 3.2, 3.4, 3.5, G1: every payload the kit encodes validates against its schema and decodes back")
    func payloads() async throws {
        let now = Date(timeIntervalSince1970: 1_795_341_000.25)
        let option = RideStatusKit.RideOption(
            name: "Compact", estimatedPickupDate: now.addingTimeInterval(300),
            priceRange: .init(minimumPrice: 12, maximumPrice: 15, currencyCode: "EUR"),
            fareLineItems: [.init(title: "Base fare", price: Decimal(string: "2.5")!, currencyCode: "EUR")],
            usesMeteredFare: true)
        let place = RideStatusKit.Place(latitude: 52.5219, longitude: 13.4132, name: "Alexanderplatz")
        func check<Value: Codable & Equatable>(_ value: Value, _ schema: String) async throws {
            let data = try encoder.encode(value)
            #expect(try decoder.decode(Value.self, from: data) == value, "\(schema)")
            try await validate(schema, [data])
        }
        try await check(
            RideStatusKit.TelemetryFix(
                vehicleId: "v-1", timestamp: now, latitude: 52.52, longitude: 13.4, speed: 8.3, course: 92.5,
                horizontalAccuracy: 4),
            "telemetry.schema.json")
        try await check(
            RideStatusKit.Booking(
                rideIdentifier: "r-7f3a", vehicleId: "v-0042", phase: .confirmed, rideOption: option,
                pickupLocation: place, dropOffLocation: .init(latitude: 52.5096, longitude: 13.3759),
                vehicle: .init(registrationPlate: "B-RS 1042"), driver: .init(displayName: "Ada L."), partySize: 1,
                fare: .init(
                    baseCharge: Decimal(string: "2.50")!, perKilometer: Decimal(string: "1.10")!,
                    perMinute: Decimal(string: "0.20")!, currencyCode: "EUR")),
            "booking.schema.json")
        try await check(
            RideStatusKit.Assignment(vehicleId: "v-9", vehicle: .init(model: "Prius"), driver: .init(rating: "4.8")),
            "assign.schema.json")
        try await check(RideStatusKit.DriverEvent(type: .arrivedAtPickup, timestamp: now), "event.schema.json")
        try await check(
            RideStatusKit.VehicleEvent(rideIdentifier: "r-7f3a", type: .passengerOnBoard, timestamp: now),
            "vehicle-event.schema.json")
        try await check(
            RideStatusKit.Cancellation(
                canceledBy: .user, cancellationFee: .init(amount: Decimal(string: "3.5")!, currencyCode: "EUR")),
            "cancel.schema.json")
        try await check(RideStatusKit.Stop(reason: "archived"), "stop.schema.json")
        try await check(
            RideStatusKit.Availability(
                available: true, rideOptionName: "Compact",
                location: .init(latitude: 52.52, longitude: 13.4, course: 90, speed: 0, timestamp: now)),
            "availability.schema.json")
        try await check(
            RideStatusKit.DeadLetter(
                topic: "fleet/vehicles/v-1/position", reason: .malformedJSON, detail: "I1: not JSON", receivedAt: now,
                payloadBytes: 3, payloadPrefix: "{{{"),
            "dead-letter.schema.json")
        try await check(
            RideStatusKit.Presence(state: .online, since: now, version: "0.1.0", incarnation: 3, at: now),
            "presence.schema.json")
        try await check(
            RideStatusKit.RideOptionsRequest(
                pickupLocation: place, dropOffLocation: place, partySize: 2, locale: "fr-CH"),
            "ride-options-request.schema.json")
        try await check(
            RideStatusKit.RideOptionsReply(code: .success, rideOptions: [option], expirationDate: now),
            "ride-options-reply.schema.json")
    }

    @Test("3.4, 3.5: a quote reply and a dead letter written by the domain decode with the kit")
    func domainReplies() throws {
        let now = Date(timeIntervalSince1970: 1_795_341_000)
        let reply = RideStatusKit.RideOptionsReply(
            code: .success,
            rideOptions: [
                RideStatusKit.RideOption(
                    name: "Comfort", estimatedPickupDate: now.addingTimeInterval(420),
                    priceRange: RideStatusKit.PriceRange(
                        minimumPrice: Decimal(string: "990")!, maximumPrice: Decimal(string: "1200")!,
                        currencyCode: "JPY"), usesMeteredFare: false)
            ], expirationDate: now.addingTimeInterval(60))
        let decoded = try decoder.decode(RideStatusKit.RideOptionsReply.self, from: Data(reply.encoded()))
        #expect(decoded.code == .success)
        #expect(decoded.rideOptions.first?.priceRange?.minimumPrice == 990)
        #expect(decoded.rideOptions.first?.usesMeteredFare == false)
        // JPY has no minor units: the kit writes whole yen, as the worker does.
        let text = String(decoding: try encoder.encode(decoded), as: UTF8.self)
        #expect(text.contains(#""minimumPrice":"990""#), "\(text)")

        var engine = RideEngine()
        let actions = engine.receive(topic: "fleet/vehicles/v-1/position", payload: Array("{oops".utf8), now: now)
        let letters = actions.compactMap { action -> RideStatusKit.DeadLetter? in
            if case .deadLetter(let letter) = action { return letter }
            return nil
        }
        let letter = try #require(letters.first)  // the domain writes it; the kit reads it back
        let kitLetter = try decoder.decode(RideStatusKit.DeadLetter.self, from: Data(letter.encoded()))
        #expect(kitLetter.reason == .malformedJSON)
        #expect(kitLetter.topic == "fleet/vehicles/v-1/position")
    }

    // MARK: One source of truth

    @Test("2, P1-P8: one topic table: every topic the kit builds, the worker's parser reads back as what it names")
    func oneTopicTable() {
        for topics in [
            RideTopics(),
            RideTopics(fleetPrefix: "f", ridesPrefix: "r", serviceName: "s", rideOptionsPrefix: "o", replyPrefix: "p"),
        ] {
            #expect(topics.parse(topics.position(vehicle: "v-1")) == .position(vehicle: "v-1"))
            #expect(topics.parse(topics.availability(vehicle: "v-1")) == .availability(vehicle: "v-1"))
            #expect(topics.parse(topics.vehicleEvent(vehicle: "v-1")) == .vehicleEvent(vehicle: "v-1"), "A3")
            for kind in RideTopics.Control.allCases {
                #expect(topics.parse(topics.control(kind, ride: "r-1")) == .control(kind, ride: "r-1"))
            }
            #expect(topics.parse(topics.status(ride: "r-1")) == .status(ride: "r-1"))
            #expect(topics.parse(topics.statusRequest(ride: "r-1")) == .statusRequest(ride: "r-1"))
            #expect(topics.parse(topics.rideOptionsRequest) == .rideOptionsRequest)
            #expect(topics.parse(topics.presence(worker: "w-1")) == .presence(worker: "w-1"))
            #expect(topics.parse(topics.released(worker: "w-1")) == .released(worker: "w-1"))
            #expect(topics.parse(topics.priors(key: "berlin")) == .priors(key: "berlin"))
            #expect(topics.parse(topics.state(ride: "r-1")) == .state(ride: "r-1"), "L5, G3: under its own bucket")
            #expect(topics.parse(topics.legacyState(ride: "r-1")) == .state(ride: "r-1", legacy: true))
            #expect(topics.parse(topics.deadLetter) == .unknown, "the worker's output, never its input")
            #expect(
                topics.parse(topics.pushMember("m")) == .unknown && topics.parse(topics.reply(client: "c")) == .unknown)
            #expect(topics.ride(ofStatusTopic: topics.status(ride: "r-9")) == "r-9")
            #expect(topics.replyTopicProblem(topics.reply(client: "c")) == nil, "A1")
        }
        #expect(RideTopics().ride(ofStatusTopic: "rides/a/b/status") == nil)
        #expect(RideTopics().ride(ofStatusTopic: "fleet/vehicles/v/position") == nil)
    }

    @Test("P1: phases order as a ride moves through them, received first and completed last")
    func phaseOrder() {
        let phases = RideStatusKit.RidePhase.allCases
        #expect(phases.sorted() == phases && phases.first == .received && phases.last == .completed)
        #expect(RideStatusKit.RidePhase.pickup < .ongoing && !(RideStatusKit.RidePhase.ongoing < .pickup))
    }

    // MARK: The SiriKit tables

    @Test("V1: phases map to INRidePhase's raw values (never unknown, 0) and back")
    func phaseTable() {
        let apple: [RideStatusKit.RidePhase: Int] = [
            .received: 1, .confirmed: 2, .ongoing: 3, .completed: 4, .approachingPickup: 5, .pickup: 6,
        ]
        for phase in RideStatusKit.RidePhase.allCases {
            #expect(IntentsMapping.phaseRawValue(phase) == apple[phase])
            #expect(IntentsMapping.phase(rawValue: IntentsMapping.phaseRawValue(phase)) == phase)
        }
        #expect(IntentsMapping.phase(rawValue: 0) == nil)
        #expect(IntentsMapping.phase(rawValue: 7) == nil)
    }

    @Test("V3, P5-P7: each completion status picks its INRideCompletionStatus factory")
    func completionTable() {
        let fare = RideStatusKit.Money(amount: Decimal(string: "14.20")!, currencyCode: "EUR")
        let cases: [(RideStatusKit.CompletionStatus, IntentsMapping.Completion)] = [
            (.init(completed: true, feedbackType: [.rate, .tip]), .completed(feedback: [.rate, .tip])),
            (.init(completed: true), .completed(feedback: [])),
            (.init(completed: true, paymentAmount: fare), .settled(fare)),
            (.init(completed: true, outstanding: true, paymentAmount: fare), .outstanding(fare)),
            (.init(completed: true, canceled: true, canceledBy: .user), .canceledByUser),
            (.init(completed: true, canceled: true, canceledBy: .service, paymentAmount: fare), .canceledByService),
            (.init(completed: true, canceled: true, missedPickup: true, canceledBy: .service), .canceledMissedPickup),
        ]
        for (status, expected) in cases { #expect(IntentsMapping.completion(status) == expected, "\(status)") }
    }

    // MARK: Encodings

    @Test(
        "Times: written in UTC with milliseconds; read from RFC 3339 with or without fractions or offsets, or epoch seconds"
    )
    func times() throws {
        let date = Date(timeIntervalSince1970: 1_795_341_001.25)
        #expect(ContractTime.format(date) == "2026-11-22T09:50:01.250Z")
        #expect(ContractTime.parse("2026-11-22T09:50:01.250Z") == date)
        #expect(ContractTime.parse("2026-11-22T10:50:01+01:00") == Date(timeIntervalSince1970: 1_795_341_001))
        #expect(ContractTime.parse("yesterday") == nil)
        #expect(ContractTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: 951_782_400.5)) == "2000-02-29T00:00:00.500Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: 1e300)) == "9999-12-31T23:59:59.999Z", "no trap")
        #expect(ContractTime.format(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.000Z", "no trap")
        // Proleptic Gregorian years before Foundation's calendar cuts over to the Julian one (Python's datetime).
        #expect(ContractTime.format(Date(timeIntervalSince1970: -30_610_224_000.001)) == "0999-12-31T23:59:59.999Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00.000Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: -12_220_199_999.993)) == "1582-10-04T12:00:00.007Z")
        #expect(ContractTime.format(Date(timeIntervalSince1970: 253_402_300_799.999)) == "9999-12-31T23:59:59.999Z")
        // Against an independent oracle: Foundation's Gregorian calendar in UTC, from 1600 to 9999.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        for _ in 0..<2000 {
            let milliseconds = Int64.random(in: -11_676_096_000_000...253_402_300_799_999)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let wholeSeconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
            let parts = calendar.dateComponents(
                [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: Double(wholeSeconds)))
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.year!, parts.month!, parts.day!, parts.hour!,
                parts.minute!, parts.second!, Int(milliseconds - wholeSeconds * 1000))
            #expect(ContractTime.format(date) == expected, "\(milliseconds) ms")
        }
        // A time read from the wire writes back the same text (the fraction's nearest Double is not truncated).
        for text in ["2026-11-22T09:58:41.695Z", "2026-11-22T09:52:28.500Z", "2026-12-31T23:59:59.999Z"] {
            #expect(ContractTime.format(try #require(ContractTime.parse(text))) == text)
        }
        struct Stamp: Codable { var at: Date }
        #expect(try decoder.decode(Stamp.self, from: Data(#"{"at":1795341001.25}"#.utf8)).at == date)
        #expect(throws: DecodingError.self) { try decoder.decode(Stamp.self, from: Data(#"{"at":"soon"}"#.utf8)) }
    }

    @Test("Money: decimal strings in the currency's minor units, rounded half away from zero; never a float")
    func money() throws {
        #expect(DecimalText.format(Decimal(string: "4.2")!, scale: 2) == "4.20")
        #expect(DecimalText.format(Decimal(string: "1234.5")!, scale: 0) == "1235")
        #expect(DecimalText.format(Decimal(string: "-2.345")!, scale: 2) == "-2.35")
        #expect(DecimalText.format(Decimal(string: "0.1")!, scale: 3) == "0.100")
        #expect(DecimalText.format(Decimal(string: "-0.004")!, scale: 2) == "0.00")
        #expect(DecimalText.format(Decimal(string: "0.0000001")!, scale: 2) == "0.00")
        #expect(DecimalText.format(Decimal(string: "-0.0000001")!, scale: 2) == "0.00")
        #expect(DecimalText.format(Decimal(string: "-0.005")!, scale: 2) == "-0.01")
        #expect(DecimalText.parse("1٢") == nil, "only ASCII digits")
        // V6: exactly the schemas' pattern ^-?[0-9]+(\.[0-9]+)?$, which the worker's inputs are read with too.
        for text in ["1.", ".5", "-", "-.5", "1.2.3", "+1", "1e3", " 1", "1,5", "--1", "1-", ""] {
            #expect(DecimalText.parse(text) == nil, "'\(text)'")
        }
        #expect(DecimalText.parse("-0.50") == Decimal(string: "-0.5") && DecimalText.parse("007") == 7)
        // Every amount the worker writes reads back exactly, across magnitudes and currencies.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let value = Decimal(Int.random(in: -10_000_000...10_000_000, using: &generator)) / 1000
            for code in ["EUR", "JPY", "KWD"] {
                let text = DecimalText.format(value, currency: code)
                var rounded = Decimal()
                var input = value
                NSDecimalRound(&rounded, &input, DecimalText.minorUnits(of: code), .plain)
                #expect(DecimalText.parse(text) == rounded, "\(value) \(code): \(text)")
            }
        }
        #expect(DecimalText.minorUnits(of: "JPY") == 0 && DecimalText.minorUnits(of: "KWD") == 3)
        #expect(DecimalText.minorUnits(of: "EUR") == 2 && DecimalText.minorUnits(of: "CLP") == 0)
        #expect(
            Money.isValidCurrencyCode("EUR") && !Money.isValidCurrencyCode("eur") && !Money.isValidCurrencyCode("EURO"))
        let money = try decoder.decode(
            RideStatusKit.Money.self, from: Data(#"{"amount":"0.10","currencyCode":"EUR"}"#.utf8))
        #expect(money.amount == Decimal(string: "0.1"))  // exact: 0.1 as a Double is not
        #expect(throws: DecodingError.self) {
            try decoder.decode(RideStatusKit.Money.self, from: Data(#"{"amount":"1,5","currencyCode":"EUR"}"#.utf8))
        }
    }
}
