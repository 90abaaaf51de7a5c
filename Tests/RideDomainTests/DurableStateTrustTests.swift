import Foundation
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter

/// A2, L5: the worker's own durable state, read back from the broker, passes the checks fresh input does.
@Suite("A2: durable state is checked like fresh input")
struct DurableStateTrustTests {
    /// A valid state document of an ongoing ride, as a mutable JSON object.
    func stateDocument() throws -> [String: Any] {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 800, bearing: 90), speed: 8)
        let ride = try #require(harness.engine.rides["r-1"])
        return try #require(try JSONSerialization.jsonObject(with: Data(ride.durableState())) as? [String: Any])
    }

    func restore(_ document: [String: Any], topicRide: String = "r-1") throws -> Result<Ride, Rejection> {
        let payload = Array(try JSONSerialization.data(withJSONObject: document))
        do throws(Rejection) {
            return .success(
                try Ride.restored(
                    topicRide: topicRide, payload: payload, now: t0.addingTimeInterval(10),
                    configuration: RideConfiguration()))
        } catch {
            return .failure(error)
        }
    }

    func rejection(_ document: [String: Any], topicRide: String = "r-1") throws -> Rejection? {
        if case .failure(let rejection) = try restore(document, topicRide: topicRide) { return rejection }
        return nil
    }

    @Test("A2, L5: a valid state restores with its phase, sequence and location")
    func validRestores() throws {
        let ride = try restore(try stateDocument()).get()
        #expect(ride.sequence >= 1 && ride.location != nil && ride.vehicleId == "v-1")
    }

    @Test("A2, C5: a sequence outside 0...2^53-1 is refused, never an arithmetic trap at the next status")
    func sequenceRange() throws {
        for value in [Int.max, -1, Ride.maxSequence + 1] {
            for field in ["sequence", "sequenceCeiling"] {
                var document = try stateDocument()
                document[field] = value
                let refused = try #require(try rejection(document))
                #expect(
                    refused.reason == .invalidField && refused.detail.contains("A2") && refused.detail.contains(field),
                    "\(field) \(value): \(refused)")
            }
        }
        var atMost = try stateDocument()
        atMost["sequence"] = Ride.maxSequence - 1
        var ride = try restore(atMost).get()
        #expect(
            ride.nextStatus(now: t0.addingTimeInterval(11), configuration: RideConfiguration()).sequence
                == Ride.maxSequence)
    }

    @Test("A2, I1, I3: every identifier checked, and the topic's ride id equal to the payload's")
    func identifiers() throws {
        var wildcard = try stateDocument()
        wildcard["vehicleId"] = "+"
        #expect(try rejection(wildcard)?.reason == .invalidIdentifier, "never subscribed as fleet/vehicles/+/...")
        #expect(try rejection(try stateDocument(), topicRide: "r-2")?.reason == .identifierMismatch)
        #expect(try rejection(try stateDocument(), topicRide: "a/b")?.reason == .invalidIdentifier)
    }

    @Test("A2, T1, T2, V6: places, past times, estimates and money in range")
    func ranges() throws {
        var future = try stateDocument()
        let started = try #require(Timestamps.parse(future["startedAt"] as? String ?? ""))
        future["startedAt"] = Timestamps.format(started.addingTimeInterval(86_400))
        #expect(try rejection(future)?.detail.contains("startedAt") == true)
        var huge = try stateDocument()
        huge["estimatedDropOffDate"] = 1e300
        #expect(try rejection(huge)?.detail.contains("estimatedDropOffDate") == true)
        var place = try stateDocument()
        var location = try #require(place["location"] as? [String: Any])
        var coordinate = try #require(location["coordinate"] as? [String: Any])
        coordinate["latitude"] = 123.4
        location["coordinate"] = coordinate
        place["location"] = location
        #expect(try rejection(place)?.reason == .invalidCoordinates)
        var money = try stateDocument()
        var booking = try #require(money["bookingBox"] as? [String: Any])
        var fare = try #require(booking["fare"] as? [String: Any])
        fare["baseCharge"] = -100
        booking["fare"] = fare
        money["bookingBox"] = booking
        #expect(try rejection(money)?.detail.contains("fare.baseCharge") == true)
        var distance = try stateDocument()
        distance["drivenMetres"] = -5
        #expect(try rejection(distance)?.detail.contains("drivenMetres") == true)
        // E1's cruise (shape 8): moving sums not negative, a prior within the learned speeds.
        var cruise = try stateDocument()
        (cruise["cruiseMetres"], cruise["cruiseSeconds"]) = (100, -1)
        #expect(try rejection(cruise)?.detail.contains("cruiseSeconds") == true)
        var prior = try stateDocument()
        prior["cruisePrior"] = 300
        #expect(try rejection(prior)?.detail.contains("cruisePrior") == true)
        var good = try stateDocument()
        (good["cruiseMetres"], good["cruiseSeconds"], good["cruisePrior"]) = (480, 48, 12.5)
        #expect(try rejection(good) == nil)
    }

    @Test("A2, L5: the state every earlier release wrote passes the checks (upgrades keep rides)")
    func earlierReleasesPass() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter {
            $0.hasPrefix("durable-state")
        }
        #expect(files.count >= 4)
        for file in files {
            let payload = Array(try Data(contentsOf: folder.appendingPathComponent(file)))
            let ride = try Ride.decodeDurableState(payload)
            do throws(Rejection) {
                _ = try Ride.restored(
                    topicRide: ride.rideIdentifier, payload: payload, now: t0.addingTimeInterval(86_400),
                    configuration: RideConfiguration())
            } catch {
                Issue.record("\(file): \(error.detail)")
            }
        }
    }

    @Test("A2: times the worker took must lie in this century: year 1 would make every duration absurd")
    func ancientTimes() throws {
        var document = try stateDocument()
        document["lastIssuedAt"] = -63_000_000_000.0  // seconds since 2001 (shapes 1 and 2): about the year 1
        #expect(try rejection(document)?.detail.contains("lastIssuedAt") == true)
        document["lastIssuedAt"] = "0001-01-01T00:00:00.000Z"  // the same in shape 3
        #expect(try rejection(document)?.detail.contains("lastIssuedAt") == true)
        document["lastIssuedAt"] = "yesterday"
        #expect(try rejection(document)?.reason == .malformedJSON, "a time that is not RFC 3339 does not decode")
    }

    @Test("A2, I2: empty, oversized or undecodable state is refused with a one-line reason")
    func undecodable() throws {
        func refuse(_ payload: [UInt8]) -> Rejection? {
            do throws(Rejection) {
                _ = try Ride.restored(
                    topicRide: "r-1", payload: payload, now: t0, configuration: RideConfiguration())
                return nil
            } catch {
                return error
            }
        }
        #expect(refuse([])?.reason == .malformedJSON)
        #expect(refuse(Array(repeating: 0x20, count: 70_000))?.reason == .payloadTooLarge)
        let missing = try #require(refuse(bytes(#"{"phase":"confirmed"}"#)))
        #expect(missing.reason == .malformedJSON && !missing.detail.contains("\n"), "\(missing.detail)")
    }

    @Test("A2: the engine dead-letters a refused state and keeps every healthy ride")
    func engineLeavesItAlone() throws {
        var engine = RideEngine()
        var good = try stateDocument()
        good["sequence"] = 7
        good["sequenceCeiling"] = 7
        let goodActions = engine.restore(
            topic: "ridestatus/state/r-1", ride: "r-1",
            payload: Array(try JSONSerialization.data(withJSONObject: good)),
            now: t0.addingTimeInterval(10))
        #expect(goodActions == [.subscribe(vehicle: "v-1")])
        var bad = try stateDocument()
        bad["sequence"] = Int.max
        let badActions = engine.restore(
            topic: "ridestatus/state/r-1", ride: "r-1", payload: Array(try JSONSerialization.data(withJSONObject: bad)),
            now: t0.addingTimeInterval(10))
        #expect(badActions.reasons == [.invalidField])
        #expect(engine.activeRideCount == 1 && engine.ride("r-1")?.sequence == 7)
    }
}
