import Foundation
import RideDomain
import Testing
import WorkerGroup

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.Money
import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus

/// Drives `vehicle` from `from` to `to` at `speed` m/s with one fix a second; returns the arrival time.
@discardableResult
func drive(
    _ harness: inout Harness, vehicle: String = "v-1", from: Coordinate, to: Coordinate, at start: Date,
    speed: Double = 10, collect: ((RideAction) -> Void)? = nil
) -> Date {
    let total = from.distance(to: to)
    var time = start
    var covered = 0.0
    while covered < total {
        covered = min(total, covered + speed)
        time = time.addingTimeInterval(1)
        let point = toward(from, to, metres: covered)
        let actions = harness.fix(vehicle: vehicle, at: time, point, speed: covered < total ? speed : 0)
        actions.forEach { collect?($0) }
    }
    // Stand still for a moment so that "slower than 1.5 m/s" holds.
    time = time.addingTimeInterval(1)
    harness.fix(vehicle: vehicle, at: time, to, speed: 0).forEach { collect?($0) }
    return time
}

@Suite("Phases P1-P8 and estimates E1")
struct PhaseRulesTests {
    let start = pickup.moved(metres: 3000, bearing: 90)

    @Test("P1: with a vehicle the ride starts confirmed (or the booking's phase), without it received until assign")
    func initialPhase() {
        var harness = Harness()
        let actions = harness.start(ride: "r-1", vehicle: "v-1")
        #expect(harness.phase("r-1") == .confirmed)
        #expect(actions.statuses.first?.phase == .confirmed)
        harness.send(
            "rides/r-2/start", bookingJSON(ride: "r-2", vehicle: "v-2", extra: #","phase":"received""#), at: t0)
        #expect(harness.phase("r-2") == .received)
        harness.start(ride: "r-3", vehicle: nil)
        #expect(harness.phase("r-3") == .received)
        let assigned = harness.send("rides/r-3/assign", bytes(#"{"vehicleId":"v-3"}"#), at: t0.addingTimeInterval(5))
        #expect(harness.phase("r-3") == .confirmed)
        #expect(assigned.contains(.subscribe(vehicle: "v-3")))
        // `unknown` cannot be emitted: it is not a phase of the model, and an unknown phase in a booking is refused.
        #expect(!RidePhase.allCases.map(\.rawValue).contains("unknown"))
        #expect(
            harness.send("rides/r-4/start", bookingJSON(ride: "r-4", extra: #","phase":"unknown""#), at: t0).reasons
                == [.invalidField])
    }

    @Test("P1: a booking without vehicleId starts received whatever phase it carries, and is never a dead letter")
    func bookedBeforeAssigned() throws {
        var harness = Harness()
        // The contract's own example booking says "phase": "confirmed"; dispatch books first and assigns later.
        let actions = harness.send(
            "rides/r-1/start", bookingJSON(ride: "r-1", vehicle: nil, extra: #","phase":"confirmed""#), at: t0)
        #expect(actions.deadLetters.isEmpty, "\(actions.deadLetters)")
        #expect(harness.phase("r-1") == .received)
        #expect(actions.statuses.map(\.phase) == [.received])
        let assigned = harness.send("rides/r-1/assign", bytes(#"{"vehicleId":"v-9"}"#), at: t0.addingTimeInterval(3))
        #expect(assigned.statuses.map(\.phase) == [.confirmed])
        #expect(assigned.contains(.subscribe(vehicle: "v-9")))
    }

    @Test("P5: arrivedAtDropOff in pickup completes the ride (steps may be skipped); before pickup it is P8")
    func dropOffFromPickup() throws {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(60))
        #expect(harness.phase() == .pickup)
        let actions = harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(700))
        #expect(actions.deadLetters.isEmpty)
        let status = try #require(actions.statuses.first)
        #expect(status.phase == .completed)
        let completion = try #require(status.completionStatus)
        #expect(completion.completed && !completion.canceled)
        // The booking's fare: base 2.50, no distance driven and no ride time without passengerOnBoard.
        #expect(completion.paymentAmount == Money(amount: Decimal(string: "2.50")!, currencyCode: "EUR"))
        #expect(StatusValidator.violation(of: status, bookedRide: "r-1") == nil)
    }

    @Test("P2: approachingPickup by distance (500 m) or by estimated time (120 s)")
    func approaching() {
        // A car that never stands (no stop share, E1): the pace is its speed.
        var configuration = RideConfiguration()
        configuration.typicalStopShare = 0
        var harness = Harness(configuration: configuration)
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), toward(pickup, start, metres: 1500), speed: 10)
        #expect(harness.phase() == .confirmed)
        // 550 m in 55 s: 10 m/s over the gap too.
        harness.fix(at: t0.addingTimeInterval(56), toward(pickup, start, metres: 950), speed: 10)
        #expect(harness.phase() == .confirmed, "950 m x 1.3 / 10 m/s = 123.5 s")
        // 900 m at 10 m/s x 1.3 detour = 117 s: within 120 s although farther than 500 m.
        harness.fix(at: t0.addingTimeInterval(61), toward(pickup, start, metres: 900), speed: 10)
        #expect(harness.phase() == .approachingPickup)

        var slow = Harness()
        slow.start()
        // 2 m/s: moving (above stoppedSpeed, so it starts the smoothed speed, E1), under the 5 m/s floor.
        slow.fix(at: t0.addingTimeInterval(1), toward(pickup, start, metres: 600), speed: 2)
        #expect(slow.phase() == .confirmed)
        slow.fix(at: t0.addingTimeInterval(100), toward(pickup, start, metres: 490), speed: 1)
        #expect(slow.phase() == .approachingPickup, "within 500 m")
    }

    @Test(
        "P3: pickup within 50 m and slower than 1.5 m/s, or on arrivedAtPickup; estimatedPickupEndDate = arrival + 300 s"
    )
    func pickupPhase() throws {
        var harness = Harness()
        harness.start()
        var arrival: Date?
        drive(&harness, from: start, to: pickup.moved(metres: 20, bearing: 90), at: t0) { action in
            if case .publish(let status, _, _) = action, status.phase == .pickup, arrival == nil {
                arrival = status.issuedAt
            }
        }
        #expect(harness.phase() == .pickup)
        let arrivedAt = try #require(arrival)
        let status = try #require(harness.engine.currentStatus(of: "r-1"))
        #expect(status.estimatedPickupEndDate == arrivedAt.addingTimeInterval(300))

        var moving = Harness()
        moving.start()
        moving.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 30, bearing: 90), speed: 8)
        #expect(moving.phase() == .approachingPickup, "inside the radius but still moving")
        moving.event("arrivedAtPickup", at: t0.addingTimeInterval(2))
        #expect(moving.phase() == .pickup)
    }

    @Test("P4: ongoing on passengerOnBoard, or when the vehicle leaves 2 x arrivalRadius after pickup")
    func ongoingPhase() {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        harness.fix(at: t0.addingTimeInterval(2), pickup.moved(metres: 80, bearing: 180), speed: 5)
        #expect(harness.phase() == .pickup, "80 m is inside 2 x 50 m")
        harness.fix(at: t0.addingTimeInterval(5), pickup.moved(metres: 120, bearing: 180), speed: 5)
        #expect(harness.phase() == .ongoing)

        var byEvent = Harness()
        byEvent.start()
        byEvent.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        byEvent.event("passengerOnBoard", at: t0.addingTimeInterval(2))
        #expect(byEvent.phase() == .ongoing)
    }

    @Test("P5: completed with a payment of base + per km + per minute when stopped at the drop-off")
    func completion() throws {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(60))
        harness.fix(at: t0.addingTimeInterval(61), pickup, speed: 0)
        let end = drive(&harness, from: pickup, to: dropOff, at: t0.addingTimeInterval(61), speed: 10)
        #expect(harness.phase() == .completed)
        let completion = try #require(harness.engine.currentStatus(of: "r-1")?.completionStatus)
        #expect(completion.completed && !completion.canceled && !completion.outstanding)
        #expect(completion.feedbackType == [.rate, .tip])
        let ride = try #require(harness.engine.rides["r-1"])
        let minutes = end.timeIntervalSince(t0.addingTimeInterval(60)) / 60
        let expected = 2.50 + 1.10 * ride.drivenMetres / 1000 + 0.20 * minutes
        let paid = NSDecimalNumber(decimal: try #require(completion.paymentAmount).amount).doubleValue
        #expect(abs(paid - expected) < 0.011, "paid \(paid), expected about \(expected)")
        #expect(completion.paymentAmount?.currencyCode == "EUR")

        var byEvent = Harness()
        byEvent.start(fare: false)
        byEvent.event("passengerOnBoard", at: t0.addingTimeInterval(1))
        byEvent.event("arrivedAtDropOff", at: t0.addingTimeInterval(600))
        let fallback = try #require(byEvent.engine.currentStatus(of: "r-1")?.completionStatus)
        #expect(
            fallback.paymentAmount == Money(amount: 12, currencyCode: "EUR"), "without a fare: the price range minimum")
    }

    @Test("P5: the distance charged is the distance driven, not GPS jitter while the car waits")
    func drivenDistanceIgnoresJitter() throws {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(2))
        // Two minutes at a red light: fixes every second scattered 4 m around the car (accuracy 5 m).
        var random = SeededRandom(seed: 7)
        for second in 3...122 {
            let jitter = pickup.moved(
                metres: Double.random(in: 0...4, using: &random), bearing: Double.random(in: 0..<360, using: &random))
            harness.fix(at: t0.addingTimeInterval(Double(second)), jitter, speed: 0)
        }
        let waited = try #require(harness.engine.rides["r-1"]).drivenMetres
        #expect(waited < 10, "fix to fix, the jitter summed to hundreds of metres; counted: \(waited)")
        // Then 600 m north at 10 m/s, a fix a second: counted within one threshold of the truth.
        for second in 1...60 {
            harness.fix(
                at: t0.addingTimeInterval(122 + Double(second)), pickup.moved(metres: Double(second) * 10, bearing: 0),
                speed: 10)
        }
        let driven = try #require(harness.engine.rides["r-1"]).drivenMetres - waited
        #expect(abs(driven - 600) <= 12, "driven \(driven) m of 600")
    }

    @Test("P5: fares are Decimal and rounded to the currency's minor unit")
    func fareRounding() {
        let fare = FareTerms(
            baseCharge: Decimal(string: "2.50")!, perKilometer: Decimal(string: "1.10")!,
            perMinute: Decimal(string: "0.20")!, currencyCode: "EUR")
        #expect(fare.price(drivenMetres: 1234, rideSeconds: 90).money.amountString == "4.16")
        let yen = FareTerms(baseCharge: 500, perKilometer: 333, perMinute: 7, currencyCode: "JPY")
        #expect(yen.price(drivenMetres: 1500, rideSeconds: 60).money.amountString == "1007")
        #expect(
            Money(amount: Decimal(string: "0.1")! + Decimal(string: "0.2")!, currencyCode: "EUR").amountString == "0.30"
        )
    }

    @Test("P6: pickup lasting past estimatedPickupEndDate completes as canceled + missedPickup")
    func missedPickup() throws {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        _ = harness.engine.tick(now: t0.addingTimeInterval(200))
        #expect(harness.phase() == .pickup)
        var time = t0.addingTimeInterval(200)
        var statuses: [RideStatus] = []
        while time < t0.addingTimeInterval(320) {
            time = time.addingTimeInterval(1)
            statuses += harness.engine.tick(now: time).statuses
        }
        #expect(harness.phase() == .completed)
        let completion = try #require(statuses.last?.completionStatus)
        #expect(
            completion.canceled && completion.missedPickup && completion.canceledBy == .service && !completion.completed
        )
    }

    @Test("P7: cancel gives completed + canceled + canceledBy; a fee is an outstanding payment")
    func cancellation() throws {
        var harness = Harness()
        harness.start()
        let actions = harness.send(
            "rides/r-1/cancel",
            bytes(
                #"{"canceledBy":"user","cancellationFee":{"amount":"5.00","currencyCode":"EUR"},"reason":"changed plans"}"#
            ),
            at: t0.addingTimeInterval(30))
        let completion = try #require(actions.statuses.first?.completionStatus)
        #expect(actions.statuses.first?.phase == .completed)
        #expect(completion.canceled && completion.canceledBy == .user && completion.outstanding)
        #expect(completion.paymentAmount == Money(amount: 5, currencyCode: "EUR"))
        var free = Harness()
        free.start()
        let serviceCancel = free.send("rides/r-1/cancel", bytes(#"{"canceledBy":"service"}"#), at: t0)
        #expect(serviceCancel.statuses.first?.completionStatus?.outstanding == false)
        #expect(serviceCancel.statuses.first?.completionStatus?.paymentAmount == nil)
    }

    @Test("P8: events that do not fit the phase are eventNotAllowed, naming the phase; the ride continues")
    func eventNotAllowed() {
        var harness = Harness()
        harness.start()
        let letters = harness.event("arrivedAtDropOff", at: t0.addingTimeInterval(1)).deadLetters
        #expect(letters.map(\.reason) == [.eventNotAllowed])
        #expect(letters.first?.detail.contains("confirmed") == true)
        #expect(harness.phase() == .confirmed)
        harness.start(ride: "r-2", vehicle: nil)
        #expect(harness.event("arrivedAtPickup", ride: "r-2", at: t0).reasons == [.eventNotAllowed])
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(2))
        #expect(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(3)).reasons == [.eventNotAllowed])
        #expect(harness.phase() == .ongoing)
    }

    @Test("phases never go backwards: a fix far from the pickup after pickup does not return to approaching")
    func neverBackwards() {
        var harness = Harness()
        harness.start()
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(1))
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(2))
        harness.fix(at: t0.addingTimeInterval(3), pickup.moved(metres: 30, bearing: 0), speed: 0)
        #expect(harness.phase() == .ongoing)
    }

    @Test("E1: estimates from distance x detour over smoothed speed (floor 5 m/s), never in the past")
    func estimates() throws {
        var harness = Harness()
        harness.start()
        let here = toward(pickup, start, metres: 2000)
        harness.fix(at: t0.addingTimeInterval(1), here, speed: 2)
        let ride = try #require(harness.engine.rides["r-1"])
        // Speed 2 m/s is under the 5 m/s floor.
        let expected = 2000 * 1.3 / 5
        #expect(abs(ride.estimatedPickupDate.timeIntervalSince(t0.addingTimeInterval(1)) - expected) < 1)
        let leg = pickup.distance(to: dropOff) * 1.3 / 5
        #expect(abs(try #require(ride.estimatedDropOffDate).timeIntervalSince(ride.estimatedPickupDate) - leg) < 1)
        let status = try #require(harness.engine.tick(now: t0.addingTimeInterval(6)).statuses.first)
        #expect(status.rideOption.estimatedPickupDate == status.estimatedPickupDate, "rideOption follows")

        // No fix for a long time: the booking's estimate is never reported in the past.
        var quiet = Harness()
        quiet.start()
        let late = t0.addingTimeInterval(3600)
        let lateStatus = try #require(
            quiet.engine.tick(now: late).statuses.first ?? quiet.engine.publishAll(now: late).statuses.first)
        #expect(try #require(lateStatus.estimatedPickupDate) >= late)
        #expect(try #require(lateStatus.estimatedDropOffDate) >= late)
        #expect(Estimator(detourFactor: 1.3, speedFloor: 5).travelTime(metres: 1000, speed: 20) == 65)
    }
}
