import Foundation
import RideDomain
import Testing

import struct RideStatusKit.RideStatus

/// Recorded fixes and events in, the exact statuses out, compared byte for byte and structurally with
/// `Golden/full-ride.json`. Set `RECORD_GOLDEN=1` to write the file anew after an intended change.
@Suite("Golden: a recorded ride")
struct GoldenTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Golden/full-ride.json")

    /// The recorded inputs: a booking, a drive to the pickup, a wait, events, a drive towards the drop-off,
    /// cadence ticks and a stop, each at a fixed time.
    func replay() -> [RideStatus] {
        var harness = Harness()
        var statuses = harness.start().statuses
        let start = pickup.moved(metres: 1200, bearing: 60)
        var time = t0
        for step in 1...130 {
            time = t0.addingTimeInterval(Double(step))
            let covered = min(1200, Double(step) * 10)
            let speed = covered < 1200 ? 10.0 : 0
            statuses += harness.fix(at: time, toward(start, pickup, metres: covered), speed: speed).statuses
            statuses += harness.engine.tick(now: time).statuses
        }
        statuses += harness.event("passengerOnBoard", at: time.addingTimeInterval(30)).statuses
        for step in 1...20 {
            time = t0.addingTimeInterval(160 + Double(step) * 3)
            statuses += harness.fix(at: time, toward(pickup, dropOff, metres: Double(step) * 30), speed: 10).statuses
            statuses += harness.engine.tick(now: time).statuses
        }
        statuses += harness.event("arrivedAtDropOff", at: time.addingTimeInterval(1)).statuses
        harness.send("rides/r-1/stop", [], at: time.addingTimeInterval(2))
        return statuses
    }

    @Test("the statuses of a recorded ride are exactly the golden ones (P1-P5, E1, C1, C2, C5, V1-V6)")
    func fullRide() throws {
        var writer = JSONWriter()
        writer.beginArray()
        for status in replay() { status.write(to: &writer) }
        writer.endArray()
        if ProcessInfo.processInfo.environment["RECORD_GOLDEN"] == "1" {
            try Data(writer.bytes).write(to: Self.file)
        }
        let recorded = Array(try Data(contentsOf: Self.file))
        // Byte for byte too: the writer's own output (a change in how a number, a time or an escape is written
        // shows here even where the parsed values agree).
        #expect(writer.bytes == recorded, "the statuses' bytes differ from the recorded ones")
        let expected = try JSONParser.parse(recorded)
        let actual = try JSONParser.parse(writer.bytes)
        guard case .array(let want) = expected, case .array(let got) = actual else {
            Issue.record("golden file is not an array")
            return
        }
        #expect(got.count == want.count)
        for (index, (gotStatus, wantStatus)) in zip(got, want).enumerated() where gotStatus != wantStatus {
            Issue.record("status \(index) differs from the golden one")
            break
        }
        #expect(
            Set(got.compactMap { $0["phase"]?.stringValue }) == [
                "confirmed", "approachingPickup", "pickup", "ongoing", "completed",
            ])
    }
}
