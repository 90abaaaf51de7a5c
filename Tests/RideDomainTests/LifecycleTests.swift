import Foundation
import RideDomain
import Testing
import WorkerGroup

import enum RideStatusKit.Identifier
import struct RideStatusKit.RideTopics

@Suite("Lifecycle L1-L7 (domain side)")
struct LifecycleTests {
    @Test("L1: start for an active ride changes nothing, is counted and sends no dead letter")
    func idempotentStart() {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        let before = harness.engine.rides
        let again = harness.start(at: t0.addingTimeInterval(2))
        #expect(again.isEmpty)
        #expect(harness.engine.rides == before)
        #expect(harness.engine.counters.duplicateStarts == 1)
    }

    @Test(
        "L2: stop ends the ride: zero-length retained status, state and cadence freed; idempotent; empty payload is {}")
    func stop() {
        var harness = Harness()
        harness.start()
        let actions = harness.send("rides/r-1/stop", [], at: t0.addingTimeInterval(1))
        #expect(actions.contains(.clear(ride: "r-1")))
        #expect(actions.contains(.unsubscribe(vehicle: "v-1")))
        #expect(actions.statuses.isEmpty)
        #expect(harness.engine.activeRideCount == 0 && harness.engine.scheduledRideCount == 0)
        #expect(harness.engine.tick(now: t0.addingTimeInterval(60)).isEmpty, "no status after stop")
        #expect(harness.send("rides/r-1/stop", bytes("{}"), at: t0.addingTimeInterval(2)).isEmpty)
        #expect(harness.send("rides/r-404/stop", bytes(#"{"reason":"x"}"#), at: t0).isEmpty)
        #expect(harness.send("rides/r-1/status/get", [], at: t0).isEmpty)
        #expect(
            String(decoding: harness.engine.statusReply(for: "r-1"), as: UTF8.self)
                == #"{"code":"failure","reason":"unknownRide"}"#)
    }

    @Test("L3: vehicle subscriptions are reference counted across rides and reassignment")
    func referenceCounting() {
        var harness = Harness()
        #expect(harness.start(ride: "r-1", vehicle: "v-1").contains(.subscribe(vehicle: "v-1")))
        #expect(!harness.start(ride: "r-2", vehicle: "v-1").contains(.subscribe(vehicle: "v-1")))
        #expect(!harness.send("rides/r-1/stop", [], at: t0).contains(.unsubscribe(vehicle: "v-1")))
        let reassigned = harness.send("rides/r-2/assign", bytes(#"{"vehicleId":"v-2"}"#), at: t0)
        #expect(reassigned.contains(.unsubscribe(vehicle: "v-1")))
        #expect(reassigned.contains(.subscribe(vehicle: "v-2")))
        #expect(harness.send("rides/r-2/stop", [], at: t0).contains(.unsubscribe(vehicle: "v-2")))
        #expect(harness.engine.subscribedVehicleCount == 0)
        // Fixes of a vehicle without an active ride change nothing.
        #expect(harness.fix(vehicle: "v-1", at: t0, pickup).isEmpty)
    }

    @Test("L4: completed rides are stopped after completedLinger; no ride outlives maxRideDuration")
    func expiry() {
        var harness = Harness()
        harness.start(ride: "r-1")
        harness.send("rides/r-1/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0.addingTimeInterval(1))
        harness.start(ride: "r-2", vehicle: "v-2")
        var cleared: [String: Date] = [:]
        var time = t0
        while time < t0.addingTimeInterval(7 * 3600) {
            time = time.addingTimeInterval(5)
            for case .clear(let ride, _) in harness.engine.tick(now: time) { cleared[ride] = time }
        }
        #expect(cleared["r-1"].map { $0.timeIntervalSince(t0) >= 121 && $0.timeIntervalSince(t0) <= 131 } == true)
        #expect(
            cleared["r-2"].map { $0.timeIntervalSince(t0) >= 6 * 3600 && $0.timeIntervalSince(t0) <= 6 * 3600 + 5 }
                == true)
        #expect(harness.engine.activeRideCount == 0 && harness.engine.subscribedVehicleCount == 0)
    }

    @Test("L5: a ride restored from its durable state resumes with phase, sequence and last location intact")
    func restore() throws {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 900, bearing: 90), speed: 9)
        var state: Ride?
        for case .publish(_, let saved?, _) in harness.event("arrivedAtPickup", at: t0.addingTimeInterval(2)) {
            state = saved
        }
        let saved = Data(try #require(state).durableState())
        let ride = try Ride.decodeDurableState(Array(saved))

        var restarted = Harness()
        let actions = restarted.engine.restore(ride, now: t0.addingTimeInterval(30))
        #expect(actions == [.subscribe(vehicle: "v-1")])
        let resumed = try #require(restarted.engine.tick(now: t0.addingTimeInterval(30)).statuses.first)
        #expect(resumed.phase == .pickup)
        // C5: statuses up to the ceiling the state reserved may have left before the restart: it continues above.
        #expect(resumed.sequence == (state?.sequenceCeiling ?? 0) + 1)
        #expect(resumed.sequence == (state?.sequence ?? 0) + RideConfiguration().sequenceBlock)
        #expect(resumed.vehicle.location?.coordinate == pickup.moved(metres: 900, bearing: 90))
        #expect(ride.lastValidStatus?.phase == .pickup, "V7's last valid status survives the restart")
        #expect(ride.lastValidStatus?.rideOption.name == "Compact")

        // State written before V7 kept only a snapshot (a `lastValidBox` field instead of `lastValid`) still
        // decodes: an upgrade loses no ride, only the V7 fallback until the next valid status.
        let text = String(decoding: saved, as: UTF8.self)
        #expect(text.contains(#""lastValid":"#))
        let older = text.replacingOccurrences(of: #""lastValid":"#, with: #""lastValidBox":"#)
        let upgraded = try Ride.decodeDurableState(Array(older.utf8))
        #expect(upgraded.phase == .pickup && upgraded.sequence == ride.sequence)
        #expect(upgraded.lastValidStatus == nil)

        // State written when a ride kept its whole booking (vehicle, driver and position too) decodes into
        // the booking terms it keeps now.
        var object = try #require(try JSONSerialization.jsonObject(with: saved) as? [String: Any])
        var whole = try #require(object["bookingBox"] as? [String: Any])
        whole["vehicleId"] = "v-1"
        whole["vehicle"] = ["registrationPlate": "B-RS 1042", "manufacturer": "Toyota", "model": "Prius"]
        whole["driver"] = ["displayName": "Ada L.", "rating": "4.9"]
        whole["vehicleLocation"] = [
            "coordinate": ["latitude": 52.52, "longitude": 13.41], "speed": 8, "timestamp": iso(t0),
        ]
        object["bookingBox"] = whole
        let withWholeBooking = try Ride.decodeDurableState(Array(try JSONSerialization.data(withJSONObject: object)))
        #expect(withWholeBooking.booking == ride.booking)
        #expect(withWholeBooking.phase == .pickup)
    }

    /// Durable state written by earlier releases (kept in `Golden/`), for an ongoing ride after a reassignment
    /// and a completed one with its payment: `v1` by the first releases (the whole booking and the whole last
    /// valid status), `v2` by the release before the compact ride storage.
    @Test(
        "L5, C5, G2, G3, E1: durable state written by every release decodes; this release writes shape 8 (the cruise)",
        arguments: [
            "v1-ongoing", "v1-completed", "v2-ongoing", "v2-completed", "v3-ongoing", "v3-completed", "v4-ongoing",
            "v4-completed", "v5-ongoing", "v5-completed", "v6-ongoing", "v6-completed", "v7-ongoing", "v7-completed",
            "v8-ongoing", "v8-completed",
        ])
    func durableStateFromPreviousRelease(name: String) throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
        let written = try Data(contentsOf: folder.appendingPathComponent("durable-state-\(name).json"))
        let ride = try Ride.decodeDurableState(Array(written))
        #expect(ride.vehicleId == "v-2" && ride.vehicle.registrationPlate == "B-RS 2001")
        #expect(ride.driver?.displayName == "Grace H.")
        #expect(ride.booking.fare?.perKilometer == Decimal(string: "1.10"))
        #expect(ride.booking.rideOption.usesMeteredFare == true, "an option with more than a name keeps it all")
        #expect(ride.lastValidStatus?.sequence == ride.sequence)
        if ride.phase == .completed {
            // P5: 2.50 + 1.10 x 0.985 km driven + 0.20 x 6.62 min = 4.906, rounded to the cent.
            #expect(ride.completion?.paymentAmount?.amountString == "4.91")
            #expect(ride.lastValidStatus?.completionStatus == ride.completion)
        } else {
            #expect(ride.phase == .ongoing && ride.completion == nil)
            #expect(ride.location?.speed == 11 && ride.smoothedSpeed != nil)
        }
        let again = ride.durableState()
        if ProcessInfo.processInfo.environment["RECORD_GOLDEN"] == "1", name.hasPrefix("v4") {
            let object = try JSONSerialization.jsonObject(with: Data(again))
            let pretty = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            let v5 = "durable-state-" + name.replacingOccurrences(of: "v4", with: "v5") + ".json"
            try pretty.write(to: folder.appendingPathComponent(v5))
        }
        let before = try #require(try JSONSerialization.jsonObject(with: written) as? NSDictionary)
        let after = try #require(try JSONSerialization.jsonObject(with: Data(again)) as? NSDictionary)
        #expect(after["version"] as? Int == Ride.durableStateVersion)
        #expect(after["startedAt"] is String, "times as RFC 3339, readable by other tools")
        if name.hasPrefix("v8") {
            #expect(before == after, "the durable shape (L5) is exactly this release's")
            #expect(ride.detourFactor == 1.3, "G3: the ride's detour factor is kept")
            if ride.phase == .ongoing {
                #expect(ride.cruisePrior == 12.5 && after["cruiseMetres"] as? Double == 480, "G3: the cruise is kept")
                var engine = RideEngine()
                engine.learning.learn(speed: 20, area: nil, at: t0, configuration: RideConfiguration())
                _ = engine.restore(ride, now: Date())
                #expect(engine.ride(ride.rideIdentifier)?.cruisePrior == 12.5, "G3: not the new owner's 20 m/s")
            }
        }
        if name.hasPrefix("v7") {
            // Shape 7 had no cruise: none is written back, and a new owner gives the ride its learned speed.
            #expect(before["cruiseSeconds"] == nil && after["cruiseSeconds"] == nil && ride.cruisePrior == nil)
            var engine = RideEngine()
            engine.learning.learn(speed: 20, area: nil, at: t0, configuration: RideConfiguration())
            _ = engine.restore(ride, now: Date())
            #expect(engine.ride(ride.rideIdentifier)?.cruisePrior == 20)
            #expect(ride.epoch == 1 && after["epoch"] as? Int == 1, "G2: the ownership epoch is kept")
            #expect(ride.detourFactor == 1.3, "G3: the ride's detour factor is kept")
            #expect(ride.stopShare == (ride.phase == .ongoing ? 0.2 : nil), "E1: the stop share is kept")
        }
        if name.hasPrefix("v6") {
            // Shape 6 had no stop share: none is written back, and the ride starts from rides.typicalStopShare.
            #expect(ride.stopShare == nil && before["stopShare"] == nil && after["stopShare"] == nil)
            #expect(ride.detourFactor == 1.3, "G3: the ride's detour factor is kept")
        }
        if name.hasPrefix("v5") {
            // Shape 5 had no detour factor: none is written back until an engine gives the ride its area's.
            #expect(before["detourFactor"] == nil && after["detourFactor"] == nil)
            var engine = RideEngine()
            _ = engine.restore(ride, now: Date())
            #expect(engine.ride(ride.rideIdentifier)?.detourFactor == RideConfiguration().detourFactor)
        }
        if name.hasPrefix("v4") || name.hasPrefix("v5") || name.hasPrefix("v6") || name.hasPrefix("v7")
            || name.hasPrefix("v8")
        {
            // G2: shape 4 had no epoch: the ride had one owner, epoch 1.
            #expect(ride.epoch == 1)
            if name.hasPrefix("v4") { #expect(before["epoch"] == nil && after["epoch"] as? Int == 1) }
            // C5: the golden state reserved numbers up to its ceiling; a restart continues above it.
            #expect(ride.sequenceCeiling == ride.sequence + 11)
            var engine = RideEngine()
            _ = engine.restore(ride, now: Date())
            #expect(engine.ride(ride.rideIdentifier)?.sequence == ride.sequenceCeiling)
        } else if name.hasPrefix("v3") {
            // Shape 3 was written with every status: the ceiling is the sequence itself.
            #expect(ride.sequenceCeiling == ride.sequence && before["sequenceCeiling"] == nil)
            #expect(after["sequenceCeiling"] as? Int == ride.sequence)
        } else if name.hasPrefix("v1") {
            #expect(before["booking"] != nil && before["lastValidStatus"] != nil)
            #expect(after["bookingBox"] != nil && after["lastValid"] != nil)
            #expect(after["booking"] == nil && after["lastValidStatus"] == nil)
            // The very first release wrote the same document without `legMetres` (derived from the booking).
            let first = try #require(before.mutableCopy() as? NSMutableDictionary)
            first.removeObject(forKey: "legMetres")
            let fromFirst = try Ride.decodeDurableState(Array(try JSONSerialization.data(withJSONObject: first)))
            #expect(fromFirst == ride)
        }
        // Written once, the state reads back to a ride that writes the same bytes again (times keep milliseconds).
        let reread = try Ride.decodeDurableState(again)
        #expect(reread.durableState() == again)
        #expect(reread.phase == ride.phase && reread.sequence == ride.sequence && reread.booking == ride.booking)
        #expect(reread.lastValidStatus?.sequence == ride.lastValidStatus?.sequence)
    }

    @Test("L6: redelivered duplicates of control messages change nothing")
    func duplicates() {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        let before = harness.engine.rides
        #expect(harness.start(at: t0.addingTimeInterval(2)).isEmpty)
        #expect(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(2)).isEmpty)
        #expect(harness.engine.rides == before)
        harness.send("rides/r-1/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0.addingTimeInterval(3))
        let canceled = harness.engine.rides
        #expect(
            harness.send("rides/r-1/cancel", bytes(#"{"canceledBy":"user"}"#), at: t0.addingTimeInterval(4)).isEmpty)
        #expect(harness.engine.rides == canceled)
    }

    @Test("L7: status/get answers the current status or failure/unknownRide")
    func statusRequest() throws {
        var harness = Harness()
        let published = try #require(harness.start().statuses.first)
        let reply = try JSONParser.parse(harness.engine.statusReply(for: "r-1"))
        #expect(reply["sequence"] == .number(Double(published.sequence)))
        #expect(reply["rideIdentifier"]?.stringValue == "r-1")
        let unknown = try JSONParser.parse(harness.engine.statusReply(for: "nope"))
        #expect(unknown["code"]?.stringValue == "failure" && unknown["reason"]?.stringValue == "unknownRide")
    }

    @Test("topics: the contract's names and parsing")
    func topics() {
        let topics = RideTopics()
        #expect(topics.position(vehicle: "v-1") == "fleet/vehicles/v-1/position")
        #expect(topics.status(ride: "r-1") == "rides/r-1/status")
        #expect(topics.parse("rides/r-1/status/get") == .statusRequest(ride: "r-1"))
        #expect(topics.parse("rides/r-1/assign") == .control(.assign, ride: "r-1"))
        #expect(topics.parse("fleet/vehicles/v-1/position") == .position(vehicle: "v-1"))
        #expect(topics.parse("ride-options/request") == .rideOptionsRequest)
        #expect(topics.parse("fleet/vehicles/v-1/availability") == .availability(vehicle: "v-1"))
        #expect(topics.state(ride: "r-7f3a") == "ridestatus/state/1727/r-7f3a", "G3: under the ride's bucket (5927)")
        #expect(topics.parse("ridestatus/state/1727/r-7f3a") == .state(ride: "r-7f3a"))
        #expect(topics.parse("ridestatus/state/r-1") == .state(ride: "r-1", legacy: true), "releases before groups")
        #expect(topics.parse("ridestatus/workers/w-1") == .presence(worker: "w-1"))
        #expect(topics.parse("ridestatus/workers/w-1/released") == .released(worker: "w-1"))
        #expect(topics.parse("rides/r-1/status") == .status(ride: "r-1"), "read back at recovery (L5)")
        #expect(topics.parse("rides//start") == .control(.start, ride: ""), "the engine rejects the empty id (I1)")
        for unknown in [
            "fleet/vehicles/v-1/position/x", "fleet/vehicles/v-1", "fleet/vehicles/v-1/speed", "rides/r-1/status/get/x",
            "rides/r-1", "rides/r-1/launch", "ridestatus/state/r-1/x", "other/thing", "",
            "ridestatus/state/0000/r-7f3a", "ridestatus/state/ffff/r-7f3a", "ridestatus/state/01727/r-7f3a",
            "ridestatus/state/1727/r-7f3a/x",
            "ridestatus/workers/w-1/recovery", "ridestatus/workers/w-1/released/x",
            "fleetx/vehicles/v-1/position",
        ] {
            #expect(topics.parse(unknown) == .unknown, "\(unknown)")
        }
        let custom = RideTopics(fleetPrefix: "acme/fleet", ridesPrefix: "acme/rides")
        #expect(custom.parse("acme/fleet/vehicles/v-9/position") == .position(vehicle: "v-9"))
        #expect(custom.parse("acme/rides/r-9/stop") == .control(.stop, ride: "r-9"))
        #expect(custom.parse("fleet/vehicles/v-9/position") == .unknown)
        #expect(
            topics.controlFilters == [
                "rides/+/start", "rides/+/assign", "rides/+/event", "rides/+/cancel", "rides/+/stop", "rides/+/route",
            ])
        #expect(
            topics.presence(worker: "w1") == "ridestatus/workers/w1" && topics.deadLetter == "ridestatus/deadletter")
        for unknown in ["rides/r-1/", "ride-options/request/x", "ride-options/requestx", "rides/r-1/stopx"] {
            #expect(topics.parse(unknown) == .unknown, "\(unknown)")
        }
        #expect(topics.parse("fleet/vehicles//position") == .position(vehicle: ""), "the engine rejects it (I1)")
        #expect(
            topics.parse("fleet/vehicles/vé-1/position") == .position(vehicle: "vé-1"), "the engine rejects it (I1)")
    }

    @Test("topics: every name the worker writes or reads parses back to what it names, for any valid id (I1)")
    func topicsRoundTrip() {
        var random = SeededRandom(seed: 12)
        let alphabet = Array("ABCXYZabcxyz0189._:-")
        let custom = RideTopics(fleetPrefix: "acme/fleet", ridesPrefix: "x", serviceName: "rs", rideOptionsPrefix: "q")
        for topics in [RideTopics(), custom] {
            #expect(topics.parse(topics.rideOptionsRequest) == .rideOptionsRequest)
            for _ in 0..<500 {
                let length = Int.random(in: 0..<64, using: &random)
                let id = "a" + String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
                #expect(Identifier.isValid(id))
                #expect(topics.parse(topics.position(vehicle: id)) == .position(vehicle: id))
                #expect(topics.parse(topics.availability(vehicle: id)) == .availability(vehicle: id))
                #expect(topics.parse(topics.status(ride: id)) == .status(ride: id))
                #expect(topics.parse(topics.statusRequest(ride: id)) == .statusRequest(ride: id))
                #expect(topics.parse(topics.state(ride: id)) == .state(ride: id))
                #expect(topics.parse(topics.legacyState(ride: id)) == .state(ride: id, legacy: true))
                #expect(topics.parse(topics.presence(worker: id)) == .presence(worker: id))
                #expect(topics.parse(topics.released(worker: id)) == .released(worker: id))
                for kind in RideTopics.Control.allCases {
                    #expect(topics.parse(topics.control(kind, ride: id)) == .control(kind, ride: id))
                }
            }
        }
        // I1 on substrings and at the length bounds.
        #expect(Identifier.isValid("r-1x".dropLast()) && !Identifier.isValid("-r1".dropFirst(0)))
        #expect(!Identifier.isValid(String(repeating: "a", count: 65)) && !Identifier.isValid(""))
    }
}
