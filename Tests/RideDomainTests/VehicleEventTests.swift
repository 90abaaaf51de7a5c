import Foundation
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideTopics
import enum RideStatusKit.Rule

/// A3: a driver event on the vehicle's own topic applies only while that vehicle is the ride's assigned vehicle;
/// otherwise it changes nothing and is dead-lettered `notAssignedVehicle`. P3-P5 and P8 hold as for dispatch's
/// events on `rides/{ride}/event`.
@Suite("A3: driver events bound to the assigned vehicle")
struct VehicleEventTests {
    func vehicleEvent(
        _ harness: inout Harness, _ type: String, from vehicle: String, ride: String = "r-1", at date: Date
    ) -> [RideAction] {
        harness.send(
            harness.topics.vehicleEvent(vehicle: vehicle), bytes(#"{"rideIdentifier":"\#(ride)","type":"\#(type)"}"#),
            at: date)
    }

    @Test("A3, P3, P4, P5: the assigned vehicle's events move its ride through pickup, ongoing and completed")
    func assignedVehicleMovesItsRide() {
        var harness = Harness()
        harness.start(at: t0)
        #expect(vehicleEvent(&harness, "arrivedAtPickup", from: "v-1", at: t0.addingTimeInterval(1)).reasons == [])
        #expect(harness.phase() == .pickup, "P3")
        #expect(vehicleEvent(&harness, "passengerOnBoard", from: "v-1", at: t0.addingTimeInterval(2)).reasons == [])
        #expect(harness.phase() == .ongoing, "P4")
        let done = vehicleEvent(&harness, "arrivedAtDropOff", from: "v-1", at: t0.addingTimeInterval(3))
        #expect(harness.phase() == .completed, "P5")
        #expect(done.statuses.last?.completionStatus?.completed == true)
    }

    @Test(
        "A3: another vehicle's event changes nothing and is dead-lettered notAssignedVehicle; a ride with no vehicle too"
    )
    func otherVehicleRefused() throws {
        var harness = Harness()
        harness.start(at: t0)
        let before = try #require(harness.engine.rides["r-1"])
        let refused = vehicleEvent(&harness, "arrivedAtPickup", from: "v-2", at: t0.addingTimeInterval(1))
        #expect(refused.reasons == [.notAssignedVehicle])
        #expect(refused.statuses.isEmpty, "nothing published")
        #expect(refused.deadLetters.first?.topic == "fleet/vehicles/v-2/event")
        #expect(refused.deadLetters.first?.detail.contains("A3") == true)
        #expect(DeadLetter.Reason.notAssignedVehicle.rule == .A3)
        #expect(harness.engine.rides["r-1"] == before, "the ride is exactly as it was")
        // A ride booked with no vehicle yet: no vehicle may move it.
        harness.start(ride: "r-2", vehicle: nil, at: t0)
        #expect(
            vehicleEvent(&harness, "arrivedAtPickup", from: "v-1", ride: "r-2", at: t0.addingTimeInterval(1)).reasons
                == [.notAssignedVehicle])
        #expect(harness.phase("r-2") == .received)
    }

    @Test("A3: a reassignment moves the right to the new vehicle; an event crossing its assign is refused")
    func reassignmentMovesTheRight() {
        var harness = Harness()
        harness.start(at: t0)
        // v-2's event overtakes its assign: judged against the assignment applied, v-1's.
        #expect(
            vehicleEvent(&harness, "arrivedAtPickup", from: "v-2", at: t0.addingTimeInterval(1)).reasons
                == [.notAssignedVehicle])
        harness.send(
            "rides/r-1/assign", bytes(#"{"vehicleId":"v-2","driver":{"displayName":"Bo K."}}"#),
            at: t0.addingTimeInterval(2))
        // The replaced vehicle's late event never applies.
        #expect(
            vehicleEvent(&harness, "arrivedAtPickup", from: "v-1", at: t0.addingTimeInterval(3)).reasons
                == [.notAssignedVehicle])
        #expect(harness.phase() != .pickup)
        #expect(vehicleEvent(&harness, "arrivedAtPickup", from: "v-2", at: t0.addingTimeInterval(4)).reasons == [])
        #expect(harness.phase() == .pickup, "P3 by the newly assigned vehicle")
    }

    @Test("A3, I1, I2, P8: unknownRide comes before notAssignedVehicle; bad payloads and out-of-phase events refused")
    func orderOfChecks() {
        var harness = Harness()
        harness.start(at: t0)
        let at = t0.addingTimeInterval(1)
        #expect(
            vehicleEvent(&harness, "arrivedAtPickup", from: "v-9", ride: "r-none", at: at).reasons == [.unknownRide])
        #expect(vehicleEvent(&harness, "arrivedAtDropOff", from: "v-1", at: at).reasons == [.eventNotAllowed], "P8")
        #expect(vehicleEvent(&harness, "arrivedAtDropOff", from: "v-2", at: at).reasons == [.notAssignedVehicle])
        #expect(vehicleEvent(&harness, "warp", from: "v-1", at: at).reasons == [.invalidField])
        let cases: [(String, [UInt8], DeadLetter.Reason)] = [
            ("fleet/vehicles/v-1/event", bytes(#"{"type":"arrivedAtPickup"}"#), .missingField),
            (
                "fleet/vehicles/v-1/event", bytes(#"{"rideIdentifier":"bad id!","type":"arrivedAtPickup"}"#),
                .invalidIdentifier
            ),
            (
                "fleet/vehicles/bad id!/event", bytes(#"{"rideIdentifier":"r-1","type":"arrivedAtPickup"}"#),
                .invalidIdentifier
            ),
            ("fleet/vehicles/v-1/event", bytes("not json"), .malformedJSON),
        ]
        for (topic, payload, reason) in cases {
            #expect(
                harness.send(topic, payload, at: at).reasons == [reason],
                "\(topic) \(String(decoding: payload, as: UTF8.self))")
        }
        #expect(harness.phase() == .confirmed || harness.phase() == .received, "no refused event moved the ride")
    }

    @Test("A3: the topic is parsed as a vehicle's event, and its filter is one level per vehicle")
    func topics() {
        let topics = RideTopics()
        #expect(topics.parse("fleet/vehicles/v-7/event") == .vehicleEvent(vehicle: "v-7"))
        #expect(topics.vehicleEvent(vehicle: "v-7") == "fleet/vehicles/v-7/event")
        #expect(topics.vehicleEventFilter == "fleet/vehicles/+/event")
        #expect(topics.parse("fleet/vehicles/v-7/event/x") == .unknown)
    }
}
