import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import RideStatusService
import Testing

/// The shipped catalog, so the tests prove what users get.
let shippedCatalog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("config/ride-options.yaml").path

/// Quotes (3.4) through the built worker and a real mosquitto.
@Suite("ride options end to end (3.4)", .serialized)
struct RideOptionsEndToEndTests {
    static let replies = "replies/rider/quotes"

    func quoteWorker(_ broker: TestBroker) throws -> WorkerProcess {
        try WorkerProcess(broker: broker, interval: 5, extra: ["--set", "rideOptions.catalog=\(shippedCatalog)"])
    }

    func request(
        from start: Coordinate = pickupPoint, to end: Coordinate = dropOffPoint, partySize: Int? = nil,
        locale: String? = nil
    ) -> String {
        var text =
            #"{"pickupLocation":{"latitude":\#(start.latitude),"longitude":\#(start.longitude),"name":"Alexanderplatz"},"dropOffLocation":{"latitude":\#(end.latitude),"longitude":\#(end.longitude)}"#
        if let partySize { text += #","partySize":\#(partySize)"# }
        if let locale { text += #","locale":"\#(locale)""# }
        return text + "}"
    }

    /// Publishes a request with a response topic and correlation data; returns the reply with that data.
    func ask(_ observer: Observer, _ payload: String, correlation: [UInt8]) async throws -> JSONValue {
        try await observer.publish(
            "ride-options/request", payload,
            properties: MQTTProperties(responseTopic: Self.replies, correlationData: correlation))
        let messages = try await observer.waitFor("quote reply \(correlation)") { messages in
            messages.contains { $0.topic == Self.replies && $0.properties.correlationData == correlation }
        }
        let reply = try #require(
            messages.first { $0.topic == Self.replies && $0.properties.correlationData == correlation })
        #expect(reply.properties.contentType == "application/json")
        return try JSONParser.parse(reply.payload)
    }

    func amount(_ value: JSONValue?) -> Decimal? { value?.stringValue.flatMap { Decimal(string: $0) } }

    @Test("3.4: a quote over the broker echoes the correlation data and carries every field")
    func quoteWithEveryField() async throws {
        try await withTestBroker { broker in
            let worker = try quoteWorker(broker)
            try await worker.start()
            let observer = try await Observer(broker, filters: [Self.replies])
            let reply = try await ask(observer, request(partySize: 2, locale: "de"), correlation: [0xC0, 0xFF, 0xEE])
            #expect(reply["code"]?.stringValue == "success")
            let expiration = try #require(reply["expirationDate"].flatMap(Timestamps.parse))
            #expect(expiration.timeIntervalSinceNow > 100 && expiration.timeIntervalSinceNow <= 121, "timeToLive 120 s")
            guard case .array(let options)? = reply["rideOptions"] else {
                Issue.record("no rideOptions array")
                return
            }
            // Party size 2 rules out the one-seat Compact; names and the quote's texts are German.
            #expect(options.compactMap { $0["name"]?.stringValue } == ["Komfort", "Großraum"])
            for option in options {
                #expect(option["estimatedPickupDate"].flatMap(Timestamps.parse) != nil)
                #expect(option["expirationDate"]?.stringValue == reply["expirationDate"]?.stringValue)
                let range = try #require(option["priceRange"])
                #expect(range["currencyCode"]?.stringValue == "EUR")
                guard case .array(let items)? = option["fareLineItems"] else {
                    Issue.record("no fareLineItems")
                    continue
                }
                let total = items.compactMap { amount($0["price"]) }.reduce(0, +)
                let low = try #require(amount(range["minimumPrice"]))
                let high = try #require(amount(range["maximumPrice"]))
                #expect(low <= total && total <= high, "line items add up to an estimate inside the range")
                #expect(items.first?["title"]?.stringValue == "Grundpreis")
            }
            let suv = options[1]
            guard case .array(let tiers)? = suv["availablePartySizeOptions"] else {
                Issue.record("SUV has no party sizes")
                return
            }
            #expect(tiers.compactMap { $0["sizeDescription"]?.stringValue } == ["2–3 Personen", "4–6 Personen"])
            #expect(tiers.first?["partySizeRange"]?["location"]?.doubleValue == 2)
            #expect(tiers.first?["partySizeRange"]?["length"]?.doubleValue == 1)
            #expect(suv["availablePartySizeOptionsSelectionPrompt"]?.stringValue == "Wie viele Personen?")
            #expect(
                options[0]["disclaimerMessage"]?.stringValue == "Das Fahrzeug befördert bis zu 4 Fahrgäste.",
                "fixed capacity")
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("3.4: no service in area, party-size filtering, malformed requests, booking by localized name")
    func failuresAndBookingByName() async throws {
        try await withTestBroker { broker in
            let worker = try quoteWorker(broker)
            try await worker.start()
            let observer = try await Observer(
                broker, filters: [Self.replies, "ridestatus/deadletter", "rides/+/status"])
            let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
            let outside = try await ask(observer, request(from: paris, to: pickupPoint), correlation: [1])
            #expect(outside["code"]?.stringValue == "failureNoServiceInArea")
            #expect(outside["rideOptions"] == .array([]))
            #expect(outside["expirationDate"]?.stringValue != nil)

            let five = try await ask(observer, request(partySize: 5), correlation: [2])
            guard case .array(let options)? = five["rideOptions"] else {
                Issue.record("no rideOptions")
                return
            }
            #expect(options.compactMap { $0["name"]?.stringValue } == ["SUV"])
            let tooMany = try await ask(observer, request(partySize: 9), correlation: [3])
            #expect(tooMany["code"]?.stringValue == "failure")
            #expect(tooMany["reason"]?.stringValue == "partySizeTooLarge")

            let malformed = try await ask(observer, #"{"pickupLocation":{"latitude":52.5}}"#, correlation: [4])
            #expect(malformed["code"]?.stringValue == "failure")
            #expect(
                malformed["reason"]?.stringValue == "invalidField" || malformed["reason"]?.stringValue == "missingField"
            )
            try await observer.waitFor("dead letter for the malformed request (3.5)") { messages in
                messages.contains {
                    $0.topic == "ridestatus/deadletter"
                        && (try? JSONParser.parse($0.payload))?["topic"]?.stringValue == "ride-options/request"
                }
            }

            // Booking by name (3.4): "Kompakt" with no image and no fare runs on the catalog's.
            let localized = booking(ride: "r-de", vehicle: "v-de")
                .replacingOccurrences(of: #""name":"Compact""#, with: #""name":"Kompakt""#)
                .replacingOccurrences(of: #","mapAnnotationImage":"https://assets.example/cars/compact.png""#, with: "")
                .replacingOccurrences(
                    of: #","fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#,
                    with: "")
            try await observer.publish("rides/r-de/start", localized)
            try await observer.waitFor("status of the ride booked by its German name") { _ in
                !observer.statuses("r-de").isEmpty
            }
            let status = try #require(observer.statuses("r-de").first)
            // V4: the catalog's canonical name; the rider's spelling stays as localizedName.
            #expect(status["rideOption"]?["name"]?.stringValue == "Compact")
            #expect(status["rideOption"]?["localizedName"]?.stringValue == "Kompakt")
            #expect(status["vehicle"]?["mapAnnotationImage"]?.stringValue == "https://assets.example/cars/compact.png")
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("3.4/E1: the pickup estimate follows the live fleet as a vehicle moves closer")
    func liveFleetEstimate() async throws {
        try await withTestBroker { broker in
            let observer = try await Observer(broker, filters: [Self.replies])
            func availability(_ coordinate: Coordinate) -> String {
                #"{"available":true,"rideOptionName":"Compact","location":{"latitude":\#(coordinate.latitude),"longitude":\#(coordinate.longitude),"speed":0,"timestamp":"\#(Timestamps.format(Date()))"}}"#
            }
            // Retained before the worker starts: the worker learns the fleet when it subscribes.
            try await observer.publish(
                "fleet/vehicles/v-near/availability", availability(pickupPoint.moved(metres: 5000, bearing: 45)),
                retain: true)
            let worker = try quoteWorker(broker)
            try await worker.start()
            func compactPickupDelay(_ correlation: UInt8) async throws -> Double {
                let asked = Date()
                let reply = try await ask(observer, request(), correlation: [correlation])
                guard case .array(let options)? = reply["rideOptions"],
                    let date = options.first(where: { $0["name"]?.stringValue == "Compact" })?["estimatedPickupDate"]
                        .flatMap(Timestamps.parse)
                else { throw TimedOut(what: "a Compact option") }
                return date.timeIntervalSince(asked)
            }
            // E1: 5 km x 1.3 detour at the 5 m/s floor = 1300 s.
            let far = try await compactPickupDelay(1)
            #expect(abs(far - 1300) < 5, "far: \(far) s")
            try await observer.publish(
                "fleet/vehicles/v-near/availability", availability(pickupPoint.moved(metres: 500, bearing: 45)),
                retain: true)
            var near = far
            for attempt in 2...40 where near > 200 {
                near = try await compactPickupDelay(UInt8(attempt))
            }
            #expect(abs(near - 130) < 5, "near: \(near) s")
            // Taken off the market: back to the catalog's default wait of 600 s.
            try await observer.publish("fleet/vehicles/v-near/availability", #"{"available":false}"#, retain: true)
            var gone = near
            for attempt in 41...80 where gone < 500 {
                gone = try await compactPickupDelay(UInt8(attempt))
            }
            #expect(abs(gone - 600) < 5, "no vehicle: \(gone) s")
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("3.4: an invalid catalog stops start-up naming the entry")
    func invalidCatalog() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let shipped = try String(contentsOfFile: shippedCatalog, encoding: .utf8)
        let broken = shipped.replacingOccurrences(of: "{upTo: 6, surcharge: 8.00}", with: "{upTo: 6, surcharge: 1.00}")
        #expect(broken != shipped)
        let file = directory.appendingPathComponent("ride-options.yaml")
        try broken.write(to: file, atomically: true, encoding: .utf8)
        let log = directory.appendingPathComponent("worker.log")
        let process = try ChildProcess(
            executable: WorkerProcess.executable,
            arguments: ["--set", "rideOptions.catalog=\(file.path)", "--metrics-port", "0"], output: log)
        #expect(await process.exited(within: 10))
        #expect(process.exitCode == 2)
        let message = try String(contentsOf: log, encoding: .utf8)
        #expect(
            message.contains("options[2] (SUV): fares.berlin: partyTiers: prices must not decrease"), "\(message)")
    }

    @Test("3.4: the shipped catalog loads, and YAML amounts are read exactly")
    func shippedCatalogLoads() throws {
        let catalog = try RideOptionCatalog.load(path: shippedCatalog)
        #expect(catalog.options.map(\.name) == ["Compact", "Comfort", "SUV"])
        #expect(catalog.areas.map(\.currencyCode) == ["EUR", "CHF", "EUR"])
        #expect(catalog.options[0].fares["berlin"]?.perKilometer == Decimal(string: "1.10"))
        #expect(catalog.option(named: "Kompakt")?.name == "Compact")
        #expect(catalog.area(containing: pickupPoint)?.name == "berlin")
        #expect(catalog.area(containing: Coordinate(latitude: 52.475, longitude: 13.405)) == nil, "a hole")
        #expect(throws: RideOptionCatalog.FileProblem.self) {
            try RideOptionCatalog.parse(yaml: "areas: []\noptions: []\n")
        }
        // E1: each area's hours of the week in its own time zone; a name that is none is refused.
        #expect(
            catalog.areas.map { $0.timeZone?.identifier } == ["Europe/Berlin", "Europe/Zurich", "Europe/Helsinki"])
        // make run's city, on scripts/roads.sh's streets.
        #expect(catalog.area(containing: Coordinate(latitude: 60.1716, longitude: 24.9443))?.name == "helsinki")
        let shipped = try String(contentsOfFile: shippedCatalog, encoding: .utf8)
        let wrongZone = shipped.replacingOccurrences(of: "timeZone: Europe/Zurich", with: "timeZone: Europe/Zurik")
        #expect(wrongZone != shipped)
        do {
            _ = try RideOptionCatalog.parse(yaml: wrongZone)
            Issue.record("a catalog with an unknown time zone loaded")
        } catch {
            #expect(
                "\(error)".contains("areas[1] (zurich): timeZone 'Europe/Zurik' is not an IANA time zone"), "\(error)")
        }
    }
}
