import Foundation
import PropertyBased
import RideDomain
import Testing
import WorkerGroup

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.FareLineItem
import struct RideStatusKit.Money
import struct RideStatusKit.Place
import struct RideStatusKit.RideOptionsRequest
import struct RideStatusKit.RideStatus

/// A catalog like `config/ride-options.yaml`, built in code so the domain tests need no YAML.
func testCatalog() -> RideOptionCatalog {
    func ring(_ pairs: [(Double, Double)]) -> [Coordinate] {
        pairs.map { Coordinate(latitude: $0.1, longitude: $0.0) }
    }
    let berlin = ServiceArea(
        name: "berlin", currencyCode: "EUR",
        polygons: [
            [
                ring([(13.09, 52.38), (13.77, 52.38), (13.77, 52.68), (13.09, 52.68), (13.09, 52.38)]),
                ring([(13.39, 52.469), (13.42, 52.469), (13.42, 52.481), (13.39, 52.481), (13.39, 52.469)]),
            ]
        ])
    let tokyo = ServiceArea(
        name: "tokyo", currencyCode: "JPY",
        polygons: [
            [ring([(139.5, 35.5), (139.9, 35.5), (139.9, 35.8), (139.5, 35.8), (139.5, 35.5)])],
            [ring([(135.4, 34.6), (135.6, 34.6), (135.6, 34.8), (135.4, 34.8), (135.4, 34.6)])],
        ])
    let compact = CatalogOption(
        name: "Compact", localizedNames: ["de": "Kompakt", "fr": "Compacte"], capacity: 1,
        disclaimer: "Vehicle can carry only 1 passenger.", mapAnnotationImage: "https://assets.example/compact.png",
        pricing: .fixed,
        fares: [
            "berlin": FareTable(baseCharge: 2.5, perKilometer: 1.1, perMinute: 0.2, minimumFare: 6),
            "tokyo": FareTable(baseCharge: 500, perKilometer: 300, perMinute: 40, minimumFare: 730),
        ])
    let comfort = CatalogOption(
        name: "Comfort", localizedNames: ["de": "Komfort"], capacity: 4,
        mapAnnotationImage: "https://assets.example/comfort.png",
        fares: [
            "berlin": FareTable(
                baseCharge: 3.5, perKilometer: 1.5, perMinute: 0.3, minimumFare: 8,
                surcharges: [.init(title: "Service fee", amount: 0.5)],
                discounts: [.init(title: "Launch discount", percent: 10)])
        ])
    let suv = CatalogOption(
        name: "SUV", localizedNames: ["de": "Großraum"], capacity: 6,
        mapAnnotationImage: "https://assets.example/suv.png",
        fares: [
            "berlin": FareTable(
                baseCharge: 4, perKilometer: 1.8, perMinute: 0.35, minimumFare: 10,
                surcharges: [.init(title: "SUV surcharge", amount: 2)],
                partyTiers: [.init(upTo: 1, surcharge: 0), .init(upTo: 3, surcharge: 4), .init(upTo: 6, surcharge: 8)])
        ])
    return RideOptionCatalog(areas: [berlin, tokyo], options: [compact, comfort, suv])
}

func optionsRequest(
    from start: Coordinate = pickup, to end: Coordinate = dropOff, partySize: Int? = nil, locale: String? = nil
) -> RideOptionsRequest {
    RideOptionsRequest(
        pickupLocation: Place(coordinate: start), dropOffLocation: Place(coordinate: end), partySize: partySize,
        locale: locale)
}

func sum(_ items: [FareLineItem]) -> Decimal { items.reduce(Decimal(0)) { $0 + $1.price } }

@Suite("Ride options (3.4): pricing, tiers, areas, expiration, the live fleet")
struct RideOptionTests {
    let catalog = testCatalog()
    let single: (sizes: ClosedRange<Int>, surcharge: Decimal) = (1...1, 0)

    // MARK: Pricing

    @Test("3.4: line items are base, distance and time, rounded to cents, and add up to the price")
    func lineItems() {
        let table = catalog.options[0].fares["berlin"]!
        let quote = table.quote(metres: 10_000, seconds: 1200, party: single, currency: "EUR")
        #expect(quote.lineItems.map(\.title) == ["Base fare", "Distance (10.0 km)", "Time (20 min)"])
        #expect(quote.lineItems.map(\.price) == [Decimal(string: "2.50")!, 11, 4])
        #expect(quote.total == Decimal(string: "17.50")!)
        #expect(sum(quote.lineItems) == quote.total)
        #expect(quote.lineItems.allSatisfy { $0.currencyCode == "EUR" })
    }

    @Test("3.4: a short ride pays the minimum fare as its own line item")
    func minimumFare() {
        let table = catalog.options[0].fares["berlin"]!
        let quote = table.quote(metres: 500, seconds: 60, party: single, currency: "EUR")
        #expect(quote.lineItems.last?.title == "Minimum fare")
        #expect(quote.lineItems.last?.price == Decimal(string: "2.75")!)
        #expect(quote.total == 6)
    }

    @Test("3.4: surcharges add and discounts subtract, each as a line item")
    func surchargesAndDiscounts() {
        let table = catalog.options[1].fares["berlin"]!
        let quote = table.quote(metres: 10_000, seconds: 1200, party: (1...4, 0), currency: "EUR")
        #expect(
            quote.lineItems.map(\.title) == [
                "Base fare", "Distance (10.0 km)", "Time (20 min)", "Service fee", "Launch discount",
            ])
        #expect(quote.lineItems.last?.price == Decimal(string: "-2.50")!)
        #expect(quote.total == Decimal(string: "22.50")!)
    }

    @Test("3.4: money is rounded per currency (JPY has no minor unit)")
    func roundingPerCurrency() {
        let table = catalog.options[0].fares["tokyo"]!
        let quote = table.quote(metres: 3_333, seconds: 401, party: single, currency: "JPY")
        for item in quote.lineItems {
            #expect(item.price == Money(amount: item.price, currencyCode: "JPY").rounded.amount)
        }
        #expect(sum(quote.lineItems) == quote.total)
    }

    @Test(
        "3.4: for any ride, line items add up to the estimate, which lies in the price range", .timeLimit(.minutes(1)))
    func lineItemsAddUp() async {
        let quoter = RideOptionQuoter(catalog: catalog)
        await propertyCheck(
            count: 300, input: Gen.double(in: 100...30_000), Gen.double(in: 0...359), Gen.int(in: 1...6)
        ) {
            metres, bearing, party in
            let end = pickup.moved(metres: metres, bearing: bearing)
            let reply = quoter.quote(optionsRequest(to: end, partySize: party), now: t0)
            #expect(reply.code == .success)
            for option in reply.rideOptions {
                let range = try #require(option.priceRange)
                let total = sum(option.fareLineItems)
                #expect(range.minimumPrice <= total && total <= range.maximumPrice, "\(option.name)")
                #expect(range.minimumPrice >= 0)
            }
        }
    }

    // MARK: Tiers

    @Test("3.4: tier prices never decrease with party size, for any ride")
    func tiersNeverDecrease() async {
        let quoter = RideOptionQuoter(catalog: catalog)
        await propertyCheck(count: 300, input: Gen.double(in: 100...30_000), Gen.double(in: 0...359)) {
            metres, bearing in
            let reply = quoter.quote(optionsRequest(to: pickup.moved(metres: metres, bearing: bearing)), now: t0)
            let suv = try #require(reply.rideOptions.first { $0.name == "SUV" })
            let tiers = try #require(suv.availablePartySizeOptions)
            #expect(tiers.count == 3)
            for (lower, higher) in zip(tiers, tiers.dropFirst()) {
                #expect(lower.priceRange!.minimumPrice <= higher.priceRange!.minimumPrice)
                #expect(lower.priceRange!.maximumPrice <= higher.priceRange!.maximumPrice)
            }
        }
    }

    @Test("3.4: party sizes as in Apple's SUV example: ranges, descriptions, prompt, overall range")
    func partySizeOptions() throws {
        let reply = RideOptionQuoter(catalog: catalog).quote(optionsRequest(), now: t0)
        let suv = try #require(reply.rideOptions.first { $0.name == "SUV" })
        let tiers = try #require(suv.availablePartySizeOptions)
        #expect(tiers.map { [$0.partySizeRange.location, $0.partySizeRange.length] } == [[1, 0], [2, 1], [4, 2]])
        #expect(tiers.map(\.sizeDescription) == ["1 person", "2-3 people", "4-6 people"])
        #expect(suv.availablePartySizeOptionsSelectionPrompt == "Choose a party size")
        #expect(suv.priceRange?.minimumPrice == tiers.first?.priceRange?.minimumPrice)
        #expect(suv.priceRange?.maximumPrice == tiers.last?.priceRange?.maximumPrice)
        #expect(suv.disclaimerMessage == nil)
        // Fixed capacity: a disclaimer instead of party sizes (Apple's Compact example), fixed price.
        let compact = try #require(reply.rideOptions.first { $0.name == "Compact" })
        #expect(compact.availablePartySizeOptions == nil)
        #expect(compact.disclaimerMessage == "Vehicle can carry only 1 passenger.")
        #expect(compact.priceRange?.minimumPrice == compact.priceRange?.maximumPrice)
        #expect(compact.usesMeteredFare == false)
        let comfort = try #require(reply.rideOptions.first { $0.name == "Comfort" })
        #expect(comfort.disclaimerMessage == "Vehicle can carry up to 4 passengers.")
        #expect(comfort.priceRange!.minimumPrice < comfort.priceRange!.maximumPrice, "metered: a range")
    }

    @Test("3.4: the party size filters options by capacity and tiers by size")
    func partySizeFiltering() throws {
        let quoter = RideOptionQuoter(catalog: catalog)
        let two = quoter.quote(optionsRequest(partySize: 2), now: t0)
        #expect(two.rideOptions.map(\.name) == ["Comfort", "SUV"])
        let suv = try #require(two.rideOptions.last)
        #expect(suv.availablePartySizeOptions?.map(\.partySizeRange.location) == [2, 4])
        #expect(suv.priceRange == suv.availablePartySizeOptions?.first?.priceRange, "the party's own tier")
        #expect(suv.fareLineItems.contains { $0.title == "Extra passengers (2-3 people)" })
        let five = quoter.quote(optionsRequest(partySize: 5), now: t0)
        #expect(five.rideOptions.map(\.name) == ["SUV"])
        #expect(five.rideOptions[0].availablePartySizeOptions?.count == 1)
        #expect(five.rideOptions[0].availablePartySizeOptionsSelectionPrompt == nil, "one tier left: no choice")
        let seven = quoter.quote(optionsRequest(partySize: 7), now: t0)
        #expect(seven.code == .failure)
        #expect(seven.reason == "partySizeTooLarge")
        #expect(seven.rideOptions.isEmpty)
    }

    @Test("3.4: a catalog whose tier prices decrease, or that is otherwise wrong, names the entry")
    func catalogProblems() {
        var catalog = testCatalog()
        #expect(catalog.problems().isEmpty)
        catalog.options[2].fares["berlin"]!.partyTiers[2].surcharge = 1
        catalog.options[1].localizedNames["fr"] = "kompakt"
        catalog.areas[0].currencyCode = "euro"
        catalog.options[0].fares["mars"] = FareTable(baseCharge: 1, perKilometer: 1, perMinute: 1)
        let problems = catalog.problems()
        #expect(
            problems.contains { $0.hasPrefix("options[2] (SUV): fares.berlin: partyTiers: prices must not decrease") })
        #expect(problems.contains { $0.hasPrefix("options[1] (Comfort): name 'kompakt' is also a name of Compact") })
        #expect(problems.contains { $0.hasPrefix("areas[0] (berlin): currencyCode 'euro'") })
        #expect(problems.contains { $0.hasPrefix("options[0] (Compact): fares.mars: no service area") })
    }

    // MARK: Areas and expiration

    @Test("3.4: a pickup outside every area, or in a hole, gets failureNoServiceInArea; MultiPolygon works")
    func serviceAreas() {
        let quoter = RideOptionQuoter(catalog: catalog)
        let paris = Coordinate(latitude: 48.8566, longitude: 2.3522)
        #expect(quoter.quote(optionsRequest(from: paris, to: pickup), now: t0).code == .failureNoServiceInArea)
        let tempelhof = Coordinate(latitude: 52.475, longitude: 13.405)
        let hole = quoter.quote(optionsRequest(from: tempelhof, to: pickup), now: t0)
        #expect(hole.code == .failureNoServiceInArea)
        #expect(hole.rideOptions.isEmpty)
        let osaka = Coordinate(latitude: 34.69, longitude: 135.50)
        let japan = quoter.quote(optionsRequest(from: osaka, to: osaka.moved(metres: 4000, bearing: 10)), now: t0)
        #expect(japan.code == .success)
        #expect(japan.rideOptions.map(\.name) == ["Compact"], "only options with a fare table for the area")
        #expect(japan.rideOptions[0].priceRange?.currencyCode == "JPY", "the area's currency")
    }

    @Test("3.4: the reply and every option expire after the time to live")
    func expiration() {
        var catalog = testCatalog()
        catalog.quotes.timeToLive = 90
        let reply = RideOptionQuoter(catalog: catalog).quote(optionsRequest(), now: t0)
        #expect(reply.expirationDate == t0.addingTimeInterval(90))
        #expect(reply.rideOptions.allSatisfy { $0.expirationDate == t0.addingTimeInterval(90) })
        let json = String(decoding: reply.encoded(), as: UTF8.self)
        #expect(json.contains(#""expirationDate":"2026-11-22T09:51:30.000Z""#))
    }

    @Test("3.4: localized names by locale, falling back to the language, then the default")
    func localizedNames() {
        let quoter = RideOptionQuoter(catalog: catalog)
        #expect(
            quoter.quote(optionsRequest(locale: "de"), now: t0).rideOptions.map(\.name) == [
                "Kompakt", "Komfort", "Großraum",
            ])
        #expect(quoter.quote(optionsRequest(locale: "de_CH"), now: t0).rideOptions.first?.name == "Kompakt")
        #expect(quoter.quote(optionsRequest(locale: "ja"), now: t0).rideOptions.first?.name == "Compact")
        #expect(catalog.option(named: "kompakt")?.name == "Compact", "booking by name ignores case")
        #expect(catalog.option(named: "Grossraum")?.name == "SUV", "ß folds to ss, as Swiss spelling writes it")
        #expect(catalog.option(named: "Großraumwagen") == nil)
        #expect(catalog.option(named: "GROẞRAUM")?.name == "SUV")
    }

    @Test("3.4: a quote's texts follow its locale: titles, party sizes, prompt, disclaimers; English else")
    func localizedTexts() throws {
        var localized = testCatalog()
        localized.options[1].fares["berlin"]?.surcharges[0].localizedTitles = ["de": "Servicegebühr"]
        localized.options[1].fares["berlin"]?.discounts[0].localizedTitles = ["de": "Eröffnungsrabatt"]
        localized.options[0].localizedDisclaimers = ["de": "Nur 1 Fahrgast."]
        let quoter = RideOptionQuoter(catalog: localized)
        let english = quoter.quote(optionsRequest(), now: t0).rideOptions
        let german = quoter.quote(optionsRequest(locale: "de-AT"), now: t0).rideOptions
        let french = quoter.quote(optionsRequest(locale: "fr"), now: t0).rideOptions
        let spanish = quoter.quote(optionsRequest(locale: "es"), now: t0).rideOptions
        #expect(english[1].fareLineItems.map(\.title).first == "Base fare")
        let germanTitles = german[1].fareLineItems.map(\.title)
        #expect(germanTitles.first == "Grundpreis")
        #expect(germanTitles.contains("Servicegebühr") && germanTitles.contains("Eröffnungsrabatt"), "\(germanTitles)")
        #expect(
            germanTitles.contains { $0.hasPrefix("Strecke (") && $0.contains(",") }, "decimal comma: \(germanTitles)")
        #expect(french[1].fareLineItems.first?.title == "Prise en charge")
        #expect(french[1].fareLineItems.contains { $0.title == "Service fee" }, "no French title: the catalog's own")
        #expect(spanish.map { $0.fareLineItems.map(\.title) } == english.map { $0.fareLineItems.map(\.title) })
        // The words change, never the money.
        for options in [german, french, spanish] {
            #expect(options.map { sum($0.fareLineItems) } == english.map { sum($0.fareLineItems) })
            #expect(options.map(\.priceRange) == english.map(\.priceRange))
        }
        #expect(german[0].disclaimerMessage == "Nur 1 Fahrgast.")
        #expect(french[0].disclaimerMessage == "Vehicle can carry only 1 passenger.", "the catalog's default")
        #expect(german[1].disclaimerMessage == "Das Fahrzeug befördert bis zu 4 Fahrgäste.", "built in")
        let suv = try #require(german.first { $0.name == "Großraum" })
        #expect(suv.availablePartySizeOptions?.map(\.sizeDescription) == ["1 Person", "2–3 Personen", "4–6 Personen"])
        #expect(suv.availablePartySizeOptionsSelectionPrompt == "Personenzahl wählen", "the built-in prompt")
        let frenchSUV = try #require(french.first { $0.name == "SUV" })
        #expect(frenchSUV.availablePartySizeOptions?.last?.sizeDescription == "4 à 6 personnes")
    }

    // MARK: The live fleet

    @Test("3.4/E1: the pickup estimate follows the nearest available vehicle of the class")
    func liveFleetEstimate() throws {
        var quoter = RideOptionQuoter(catalog: catalog)
        let decoder = InputDecoder()
        func availability(_ coordinate: Coordinate, option: String = "Compact", at date: Date = t0) -> [UInt8] {
            bytes(
                #"{"available":true,"rideOptionName":"\#(option)","location":{"latitude":\#(coordinate.latitude),"longitude":\#(coordinate.longitude),"timestamp":"\#(iso(date))"}}"#
            )
        }
        func compactPickup(_ now: Date = t0) -> Date? {
            quoter.quote(optionsRequest(), now: now).rideOptions.first { $0.name == "Compact" }?.estimatedPickupDate
        }
        #expect(compactPickup() == t0.addingTimeInterval(600), "none known: the default wait")
        try quoter.receiveAvailability(
            vehicleId: "v-far", payload: availability(pickup.moved(metres: 5000, bearing: 90)), decoder: decoder,
            now: t0)
        let far = try #require(compactPickup())
        // E1: 5 km x 1.3 detour at the 5 m/s floor.
        #expect(abs(far.timeIntervalSince(t0) - 1300) < 1)
        try quoter.receiveAvailability(
            vehicleId: "v-far", payload: availability(pickup.moved(metres: 500, bearing: 90)), decoder: decoder, now: t0
        )
        let near = try #require(compactPickup())
        #expect(abs(near.timeIntervalSince(t0) - 130) < 1, "the same vehicle moved closer")
        // Another class does not count for Compact; localized names resolve to the class.
        try quoter.receiveAvailability(
            vehicleId: "v-suv", payload: availability(pickup, option: "Großraum"), decoder: decoder, now: t0)
        #expect(compactPickup() == near)
        let suvPickup = quoter.quote(optionsRequest(), now: t0).rideOptions.first { $0.name == "SUV" }?
            .estimatedPickupDate
        #expect(suvPickup == t0)
        // Unavailable leaves the index; stale positions do not count and are pruned.
        try quoter.receiveAvailability(
            vehicleId: "v-far", payload: bytes(#"{"available":false}"#), decoder: decoder, now: t0)
        #expect(compactPickup() == t0.addingTimeInterval(600))
        try quoter.receiveAvailability(
            vehicleId: "v-old", payload: availability(pickup, at: t0.addingTimeInterval(-400)), decoder: decoder,
            now: t0)
        #expect(compactPickup() == t0.addingTimeInterval(600), "older than availabilityMaxAge")
        #expect(quoter.pruneFleet(now: t0) == 1)
        #expect(quoter.fleet.count == 1)
    }

    @Test("3.4: bad availability messages are rejections with reason codes, never crashes")
    func badAvailability() {
        var quoter = RideOptionQuoter(catalog: catalog)
        let decoder = InputDecoder()
        let cases: [(String, DeadLetter.Reason)] = [
            ("{nope", .malformedJSON),
            (#"{"rideOptionName":"Compact"}"#, .missingField),
            (#"{"available":"yes"}"#, .invalidField),
            (
                #"{"available":true,"rideOptionName":"Hovercraft","location":{"latitude":52.5,"longitude":13.4}}"#,
                .invalidField
            ),
            (
                #"{"available":true,"rideOptionName":"Compact","location":{"latitude":95,"longitude":13.4}}"#,
                .invalidCoordinates
            ),
            (
                #"{"available":true,"rideOptionName":"Compact","location":{"latitude":52.5,"longitude":13.4,"timestamp":"\#(iso(t0.addingTimeInterval(600)))"}}"#,
                .timestampInFuture
            ),
        ]
        for (payload, reason) in cases {
            #expect(throws: Rejection.self) {
                try quoter.receiveAvailability(vehicleId: "v-1", payload: bytes(payload), decoder: decoder, now: t0)
            }
            do {
                try quoter.receiveAvailability(vehicleId: "v-1", payload: bytes(payload), decoder: decoder, now: t0)
            } catch {
                #expect(error.reason == reason, "\(payload)")
            }
        }
        #expect(quoter.fleet.count == 0)
    }

    @Test("3.4: malformed requests are rejections with a reason code")
    func malformedRequests() {
        let decoder = InputDecoder()
        let cases: [(String, DeadLetter.Reason)] = [
            ("", .malformedJSON),
            (#"{"dropOffLocation":{"latitude":52.5,"longitude":13.4}}"#, .missingField),
            (
                #"{"pickupLocation":{"latitude":152.5,"longitude":13.4},"dropOffLocation":{"latitude":52.5,"longitude":13.4}}"#,
                .invalidCoordinates
            ),
            (
                #"{"pickupLocation":{"latitude":52.5,"longitude":13.4},"dropOffLocation":{"latitude":52.5,"longitude":13.4},"partySize":0}"#,
                .invalidField
            ),
        ]
        for (payload, reason) in cases {
            do {
                _ = try decoder.rideOptionsRequest(payload: bytes(payload))
                Issue.record("accepted: \(payload)")
            } catch {
                #expect(error.reason == reason, "\(payload)")
            }
        }
    }

    // MARK: Booking by name

    @Test("3.4: a booking by an option's localized name gets the catalog's image, fare and name (V4, V5, P5)")
    func bookingByLocalizedName() throws {
        var harness = Harness()
        harness.engine = RideEngine(catalog: catalog)
        let text = String(decoding: bookingJSON(fare: ""), as: UTF8.self)
            .replacingOccurrences(of: #""name":"Compact""#, with: #""name":"kompakt""#)
            .replacingOccurrences(of: #","mapAnnotationImage":"https://assets.example/cars/compact.png""#, with: "")
        let actions = harness.send("rides/r-1/start", bytes(text), at: t0)
        let status = try #require(actions.statuses.first, "\(actions)")
        // V4: the catalog's canonical name downstream; the rider's spelling stays as localizedName.
        #expect(status.rideOption.name == "Compact")
        #expect(status.rideOption.localizedName == "kompakt")
        #expect(status.vehicle.mapAnnotationImage == "https://assets.example/compact.png")
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
        let completed = try #require(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(60)).statuses.first)
        _ = completed
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(120))
        let done = try #require(harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(720)).statuses.first)
        // P5: Compact is a fixed price: the rider pays what the quote for this pickup and drop-off
        // said (it paid the metered 4.50 before: base + 10 minutes, no distance driven without fixes).
        let quoted = try #require(
            RideOptionQuoter(catalog: catalog).quote(optionsRequest(), now: t0).rideOptions.first {
                $0.name == "Compact"
            })
        #expect(quoted.priceRange?.minimumPrice == quoted.priceRange?.maximumPrice, "a fixed price")
        #expect(done.completionStatus?.paymentAmount?.amount == quoted.priceRange?.minimumPrice)
        #expect(done.rideOption.fareLineItems == quoted.fareLineItems, "the quote's breakdown")
        #expect(status.rideOption.usesMeteredFare == false, "the status says a fixed price is not metered")
    }

    /// The state of an SUV booked for 3 by the catalog's name, with the quote's party sizes, picked up: written
    /// by this release's writer, as `Golden/durable-state-v8-catalog.json` keeps it (`RECORD_GOLDEN=1` writes it).
    func catalogDurableState() throws -> Data {
        var harness = Harness()
        harness.engine = RideEngine(catalog: catalog)
        let text =
            #"{"rideIdentifier":"r-1","vehicleId":"v-1","rideOption":{"name":"SUV","estimatedPickupDate":"\#(iso(t0.addingTimeInterval(480)))","disclaimerMessage":"Car seats on request","specialPricing":"Launch week"},"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude),"name":"Alexanderplatz","address":"Alexanderplatz 1, Berlin"},"dropOffLocation":{"latitude":\#(dropOff.latitude),"longitude":\#(dropOff.longitude)},"waypoints":[{"latitude":52.515,"longitude":13.39}],"scheduledPickupTime":{"startDate":"\#(iso(t0.addingTimeInterval(300)))","endDate":"\#(iso(t0.addingTimeInterval(900)))"},"vehicle":{"registrationPlate":"B-RS 3003"},"partySize":3}"#
        try #require(harness.send("rides/r-1/start", bytes(text), at: t0).statuses.first != nil)
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(60))
        let ride = try #require(harness.engine.ride("r-1"))
        // The booking's option with the quote's party sizes: a state an earlier release restored keeps them.
        let quoted = try #require(
            RideOptionQuoter(catalog: catalog).quote(optionsRequest(partySize: 3), now: t0).rideOptions.last)
        var state = try #require(try JSONSerialization.jsonObject(with: Data(ride.durableState())) as? [String: Any])
        var booking = try #require(state["bookingBox"] as? [String: Any])
        var option = try #require(booking["rideOption"] as? [String: Any])
        option["availablePartySizeOptions"] = try (quoted.availablePartySizeOptions ?? []).map { tier in
            let range = try #require(tier.priceRange)
            return [
                "location": tier.partySizeRange.location, "length": tier.partySizeRange.length,
                "sizeDescription": tier.sizeDescription,
                "priceRange": [
                    "minimumPrice": NSDecimalNumber(decimal: range.minimumPrice),
                    "maximumPrice": NSDecimalNumber(decimal: range.maximumPrice), "currencyCode": range.currencyCode,
                ],
            ] as [String: Any]
        }
        option["availablePartySizeOptionsSelectionPrompt"] = "Choose a party size"
        booking["rideOption"] = option
        state["bookingBox"] = booking
        let restored = try Ride.decodeDurableState(Array(try JSONSerialization.data(withJSONObject: state)))
        let object = try JSONSerialization.jsonObject(with: Data(restored.durableState()))
        return try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    }

    @Test("L5: a catalog ride's state (party sizes, catalog pricing, schedule) reads and writes back the same")
    func catalogDurableStateGolden() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Golden/durable-state-v8-catalog.json")
        if ProcessInfo.processInfo.environment["RECORD_GOLDEN"] == "1" { try catalogDurableState().write(to: file) }
        let written = try Data(contentsOf: file)
        let ride = try Ride.decodeDurableState(Array(written))
        let option = ride.booking.rideOption
        #expect(option.name == "SUV" && option.disclaimerMessage == "Car seats on request")
        #expect(option.specialPricing == "Launch week")
        #expect(
            option.availablePartySizeOptions?.map { [$0.partySizeRange.location, $0.partySizeRange.length] } == [
                [2, 1], [4, 2],
            ])
        #expect(option.availablePartySizeOptions?.first?.priceRange?.currencyCode == "EUR")
        #expect(option.availablePartySizeOptionsSelectionPrompt == "Choose a party size")
        let fare = try #require(ride.booking.fare)
        let pricing = try #require(fare.catalog, "a booking by the catalog's name keeps the option's pricing")
        #expect(pricing.partySizes == 2...3 && pricing.partySurcharge == 4 && fare.perMinute == Decimal(string: "0.35"))
        #expect(ride.booking.partySize == 3 && ride.booking.waypoints.count == 1)
        #expect(ride.booking.pickupLocation.address == "Alexanderplatz 1, Berlin")
        #expect(ride.booking.scheduledPickupTime?.endDate == t0.addingTimeInterval(900))
        #expect(ride.phase == .pickup)
        let before = try #require(try JSONSerialization.jsonObject(with: written) as? NSDictionary)
        let after = try #require(try JSONSerialization.jsonObject(with: Data(ride.durableState())) as? NSDictionary)
        #expect(before == after, "the durable shape (L5) is exactly this release's")
        #expect(
            try JSONSerialization.jsonObject(with: catalogDurableState()) as? NSDictionary == before,
            "today's worker writes this state for this ride")
    }

    /// A ride booked by `option`'s name with no fare of its own, picked up a minute in, driven for ten minutes
    /// without fixes (no distance), completed: its first and last statuses.
    func catalogRide(
        _ option: String, partySize: Int = 1, from start: Coordinate = pickup, to end: Coordinate = dropOff
    ) throws -> (first: RideStatus, done: RideStatus) {
        var harness = Harness()
        harness.engine = RideEngine(catalog: catalog)
        let text =
            #"{"rideIdentifier":"r-1","vehicleId":"v-1","rideOption":{"name":"\#(option)","estimatedPickupDate":"\#(iso(t0.addingTimeInterval(480)))"},"pickupLocation":{"latitude":\#(start.latitude),"longitude":\#(start.longitude)},"dropOffLocation":{"latitude":\#(end.latitude),"longitude":\#(end.longitude)},"vehicle":{},"partySize":\#(partySize)}"#
        let first = try #require(harness.send("rides/r-1/start", bytes(text), at: t0).statuses.first)
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(60))
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(120))
        let done = try #require(harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(720)).statuses.first)
        let items = done.rideOption.fareLineItems
        #expect(
            items.reduce(Decimal(0)) { $0 + $1.price } == done.completionStatus?.paymentAmount?.amount,
            "P5: the line items add up to paymentAmount exactly")
        return (first, done)
    }

    @Test(
        "P5: a catalog booking pays the option's whole pricing: minimum fare, surcharges, discount, party tier, a fixed price in JPY; the items add up"
    )
    func catalogPricing() throws {
        func money(_ text: String) -> Decimal { Decimal(string: text)! }
        // Comfort, metered: 3.50 base + 0.00 distance + 10 min x 0.30 + 0.50 service fee = 7.00, under the 8.00
        // minimum: +1.00; then 10 % off: -0.80. 7.20 EUR.
        let comfort = try catalogRide("Comfort")
        #expect(comfort.first.rideOption.usesMeteredFare == true)
        #expect(comfort.first.rideOption.fareLineItems.isEmpty, "metered: the breakdown comes at completion")
        #expect(comfort.done.completionStatus?.paymentAmount?.amount == money("7.20"))
        #expect(
            comfort.done.rideOption.fareLineItems.map(\.title) == [
                "Base fare", "Distance (0.0 km)", "Time (10 min)", "Service fee", "Minimum fare", "Launch discount",
            ])
        #expect(comfort.done.rideOption.fareLineItems.last?.price == money("-0.80"))
        // SUV for 3: the 2-3 people tier's 4.00 on top: 4.00 + 3.50 (10 min) + 2.00 surcharge + 4.00 = 13.50.
        let suv = try catalogRide("Großraum", partySize: 3)
        #expect(suv.done.rideOption.name == "SUV")
        #expect(suv.done.completionStatus?.paymentAmount?.amount == money("13.50"))
        #expect(suv.done.rideOption.fareLineItems.contains { $0.title == "Extra passengers (2-3 people)" })
        // Compact in Tokyo: a fixed price in yen, no minor unit, equal to the quote for the same trip.
        let shinjuku = Coordinate(latitude: 35.6909, longitude: 139.7003)
        let shibuya = Coordinate(latitude: 35.6580, longitude: 139.7016)
        let yen = try catalogRide("Compact", from: shinjuku, to: shibuya)
        let quote = try #require(
            RideOptionQuoter(catalog: catalog).quote(optionsRequest(from: shinjuku, to: shibuya), now: t0)
                .rideOptions.first { $0.name == "Compact" })
        let paid = try #require(yen.done.completionStatus?.paymentAmount)
        #expect(paid.currencyCode == "JPY" && paid.amount == quote.priceRange?.minimumPrice)
        #expect(!paid.amountString.contains("."), "JPY has no minor unit: \(paid.amountString)")
        #expect(yen.done.rideOption.fareLineItems == quote.fareLineItems, "a fixed price's breakdown is its quote's")
        #expect(yen.first.rideOption.fareLineItems.isEmpty, "before completion: the items the booking brought")
    }

    @Test("L5, P5: a catalog fare survives a restart: the restored ride pays the fixed price it was booked at")
    func catalogFareRestored() throws {
        var harness = Harness()
        harness.engine = RideEngine(catalog: catalog)
        let text =
            #"{"rideIdentifier":"r-1","vehicleId":"v-1","rideOption":{"name":"Compact","estimatedPickupDate":"\#(iso(t0.addingTimeInterval(480)))"},"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude)},"dropOffLocation":{"latitude":\#(dropOff.latitude),"longitude":\#(dropOff.longitude)},"vehicle":{}}"#
        let started = harness.send("rides/r-1/start", bytes(text), at: t0)
        let states = started.compactMap { action -> Ride? in
            if case .publish(_, let state?, _) = action { return state } else { return nil }
        }
        let state = try #require(states.first)
        let fixed = try #require(state.booking.fare?.fixedLineItems)
        // A worker started without the catalog (or with new prices): the ride keeps what it was booked at.
        var restarted = Harness()
        #expect(
            restarted.engine.restore(
                topic: "ridestatus/state/r-1", ride: "r-1", payload: state.durableState(), now: t0.addingTimeInterval(1)
            ).deadLetters == [])
        restarted.event("arrivedAtPickup", at: t0.addingTimeInterval(60))
        restarted.event("passengerOnBoard", at: t0.addingTimeInterval(120))
        let done = try #require(restarted.event("arrivedAtDropOff", at: t0.addingTimeInterval(900)).statuses.first)
        #expect(done.completionStatus?.paymentAmount?.amount == fixed.reduce(Decimal(0)) { $0 + $1.price })
        #expect(done.rideOption.fareLineItems == fixed)
        #expect(done.rideOption.usesMeteredFare == false)
    }
}

@Suite("FleetIndex: the spatial index of available vehicles")
struct FleetIndexTests {
    @Test("3.4: nearest vehicles equal a brute-force search, through moves and removals")
    func matchesBruteForce() async {
        await propertyCheck(count: 200, input: Gen.int(in: 1...400), Gen.int(in: 0...1_000_000)) { vehicles, seed in
            Self.compareWithBruteForce(vehicles: vehicles, seed: seed)
        }
    }

    @Test("3.4: a vehicle just inside the search radius by the great circle is found (a case CI found)")
    func greatCircleEdge() {
        // The only vehicle in reach lay just inside 5,000 m by the great circle and just outside by the
        // flat-earth distance the index used to rank with.
        Self.compareWithBruteForce(vehicles: 26, seed: 650_793)
    }

    static func compareWithBruteForce(vehicles: Int, seed: Int) {
        var random = SeededRandom(seed: UInt64(vehicles * 7919 + seed))
        var index = FleetIndex(cellDegrees: 0.01)
        var truth: [String: (Coordinate, String)] = [:]
        let center = Coordinate(latitude: 52.52, longitude: 13.40)
        for _ in 0..<(vehicles * 2) {
            let id = "v-\(Int(random.next() % UInt64(vehicles)))"
            if random.next() % 5 == 0 {
                index.remove(vehicleId: id)
                truth[id] = nil
            } else {
                let spot = center.moved(
                    metres: Double(random.next() % 8000), bearing: Double(random.next() % 360))
                let vehicleClass = random.next() % 3 == 0 ? "SUV" : "Compact"
                index.update(vehicleId: id, vehicleClass: vehicleClass, coordinate: spot, speed: nil, at: t0)
                truth[id] = (spot, vehicleClass)
            }
        }
        #expect(index.count == truth.count)
        for _ in 0..<5 {
            let query = center.moved(metres: Double(random.next() % 9000), bearing: Double(random.next() % 360))
            let found = index.nearest("Compact", to: query, limit: 3, maxDistance: 5000, notBefore: t0)
            let expected = truth.filter { $0.value.1 == "Compact" }
                .map { (id: $0.key, distance: query.distance(to: $0.value.0)) }
                .filter { $0.distance <= 5000 }.sorted { $0.distance < $1.distance }.prefix(3)
            #expect(found.count == expected.count)
            for (got, want) in zip(found, expected) {
                // Equal distances may swap order; compare distances, which the ranking is about.
                #expect(abs(got.distance - want.distance) < 0.5, "\(got.vehicleId) vs \(want.id)")
            }
        }
    }
}
