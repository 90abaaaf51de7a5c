import Foundation
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter

@Suite("Telemetry acceptance: T1-T7")
struct TelemetryRulesTests {
    let start = pickup.moved(metres: 3000, bearing: 90)

    @Test("T1: out-of-range or non-finite coordinates are invalidCoordinates; (0, 0) is nullIsland")
    func coordinates() {
        var harness = Harness()
        harness.start()
        let topic = harness.topics.position(vehicle: "v-1")
        let outOfRange = bytes(#"{"timestamp":"\#(iso(t0))","latitude":123.4,"longitude":13.4}"#)
        let letters = harness.send(topic, outOfRange, at: t0).deadLetters
        #expect(letters.map(\.reason) == [.invalidCoordinates])
        #expect(letters.first?.detail.contains("123.4") == true)
        #expect(
            harness.send(topic, bytes(#"{"timestamp":"\#(iso(t0))","latitude":0,"longitude":0}"#), at: t0).reasons == [
                .nullIsland
            ])
        #expect(
            harness.send(topic, bytes(#"{"timestamp":"\#(iso(t0))","latitude":52,"longitude":-181}"#), at: t0).reasons
                == [.invalidCoordinates])
        #expect(harness.engine.rides["r-1"]?.location == nil)
    }

    @Test("T2: fixes too far in the future or too old are rejected")
    func timestamps() {
        var harness = Harness()
        harness.start()
        let topic = harness.topics.position(vehicle: "v-1")
        #expect(
            harness.send(topic, fixJSON(at: t0.addingTimeInterval(31), start), at: t0).reasons == [.timestampInFuture])
        #expect(
            harness.send(topic, fixJSON(at: t0.addingTimeInterval(-301), start), at: t0).reasons == [.timestampTooOld])
        #expect(harness.send(topic, fixJSON(at: t0.addingTimeInterval(29), start), at: t0).deadLetters.isEmpty)
    }

    @Test("T3: a fix not newer than the last accepted one is dropped silently and counted, even when old (before T2)")
    func duplicatesAndReordering() {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0, start)
        let location = harness.engine.rides["r-1"]?.location
        let topic = harness.topics.position(vehicle: "v-1")
        #expect(harness.send(topic, fixJSON(at: t0, start), at: t0.addingTimeInterval(1)).isEmpty)
        // Late redelivery of an old fix: a duplicate, never a timestampTooOld dead letter.
        #expect(
            harness.send(topic, fixJSON(at: t0.addingTimeInterval(-10), start), at: t0.addingTimeInterval(400)).isEmpty)
        #expect(harness.engine.counters.fixesDuplicate == 2)
        #expect(harness.engine.rides["r-1"]?.location == location)
    }

    @Test("T4: an implied speed above maxSpeed is impossibleSpeed")
    func impossibleSpeed() {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0, start)
        let jump = start.moved(metres: 1000, bearing: 0)
        let actions = harness.fix(at: t0.addingTimeInterval(10), jump)
        #expect(actions.reasons == [.impossibleSpeed])
        #expect(harness.engine.rides["r-1"]?.location?.coordinate == start)
        #expect(harness.fix(at: t0.addingTimeInterval(20), start.moved(metres: 100, bearing: 0)).deadLetters.isEmpty)
    }

    @Test("T5: horizontalAccuracy above maxAccuracy is poorAccuracy")
    func poorAccuracy() {
        var harness = Harness()
        harness.start()
        let payload = fixJSON(at: t0, start, accuracy: 150)
        #expect(harness.send(harness.topics.position(vehicle: "v-1"), payload, at: t0).reasons == [.poorAccuracy])
    }

    @Test("T6: negative speed and course outside [0, 360) are treated as absent; T7 derives them")
    func absentAndDerivedMotion() throws {
        let decoder = InputDecoder()
        let fix = try #require(
            try decoder.telemetry(
                vehicleId: "v-1",
                payload: bytes(#"{"timestamp":"\#(iso(t0))","latitude":52.5,"longitude":13.4,"speed":-1,"course":360}"#)
            ))
        #expect(fix.speed == nil && fix.course == nil)

        var harness = Harness()
        harness.start()
        harness.fix(at: t0, start)
        let north = start.moved(metres: 100, bearing: 0)
        harness.send(
            harness.topics.position(vehicle: "v-1"),
            bytes(
                #"{"timestamp":"\#(iso(t0.addingTimeInterval(10)))","latitude":\#(north.latitude),"longitude":\#(north.longitude),"speed":-3,"course":400}"#
            ),
            at: t0.addingTimeInterval(10))
        let location = try #require(harness.engine.rides["r-1"]?.location)
        #expect(abs((location.speed ?? 0) - 10) < 0.1, "T7: 100 m in 10 s")
        #expect(abs(location.course ?? 99) < 0.5 || abs((location.course ?? 0) - 360) < 0.5, "T7: heading north")
    }

    @Test("OwnTracks: location converted (vel km/h, cog), other _types ignored without dead letter")
    func ownTracks() throws {
        let decoder = InputDecoder()
        let fix = try #require(
            try decoder.telemetry(
                vehicleId: "v-1",
                payload: bytes(
                    #"{"_type":"location","lat":52.52,"lon":13.40,"tst":1795341000,"vel":36,"cog":90,"acc":8}"#)))
        #expect(fix.coordinate == Coordinate(latitude: 52.52, longitude: 13.40))
        #expect(fix.timestamp == t0)
        #expect(fix.speed == 10)
        #expect(fix.course == 90 && fix.horizontalAccuracy == 8)
        #expect(
            try decoder.telemetry(vehicleId: "v-1", payload: bytes(#"{"_type":"transition","event":"enter"}"#)) == nil)
        var harness = Harness()
        harness.start()
        #expect(harness.send("fleet/vehicles/v-1/position", bytes(#"{"_type":"waypoint"}"#), at: t0).isEmpty)
        #expect(harness.engine.counters.fixesIgnored == 1)
    }
}
