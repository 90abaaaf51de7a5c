import Testing

@testable import RideWatch

/// `make run`'s live view: what its ETA column shows in each phase.
@Suite("ride-watch's ETA column")
struct RideWatchTests {
    @Test("P before the pickup, D to the drop-off, a full bar at the pickup, never the drop-off's empty one there")
    func etaColumn() {
        let approaching = RideWatchCommand.etaColumn(phase: "approachingPickup", remaining: 60, total: 240)
        #expect(approaching.hasPrefix("[###############.....] P   60s"))
        let atPickup = RideWatchCommand.etaColumn(phase: "pickup", remaining: 900, total: 900)
        #expect(atPickup.hasPrefix("[####################] at pickup"))
        let riding = RideWatchCommand.etaColumn(phase: "ongoing", remaining: 450, total: 900)
        #expect(riding.hasPrefix("[##########..........] D  450s"))
        let none = RideWatchCommand.etaColumn(phase: "completed", remaining: nil, total: nil)
        #expect(none.hasPrefix("[....................]      -"))
        #expect(
            [approaching, atPickup, riding, none].allSatisfy { $0.count == RideWatchCommand.etaWidth },
            "one width, so that the columns after it line up")
    }
}
