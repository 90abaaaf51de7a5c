import Foundation
import PropertyBased
import RideDomain
import Testing

import enum RideStatusKit.RidePhase

/// Random sequences of fixes and events over a few rides and vehicles.
enum Step: Sendable, CustomStringConvertible {
    case fix(vehicle: Int, north: Double, east: Double, speed: Double)
    case event(ride: Int, kind: Int)
    case cancel(ride: Int)
    case assign(ride: Int, vehicle: Int)
    case start(ride: Int, vehicle: Int)
    case stop(ride: Int)
    case wait(seconds: Double)

    var description: String {
        switch self {
        case .fix(let v, let n, let e, let s): "fix(v\(v), \(Int(n)), \(Int(e)), \(s))"
        case .event(let r, let k): "event(r\(r), \(k))"
        case .cancel(let r): "cancel(r\(r))"
        case .assign(let r, let v): "assign(r\(r), v\(v))"
        case .start(let r, let v): "start(r\(r), v\(v))"
        case .stop(let r): "stop(r\(r))"
        case .wait(let s): "wait(\(s))"
        }
    }
}

/// One step from six raw numbers: which kind, then its arguments.
let stepGenerator = zip(
    Gen.int(in: 0...99), Gen.int(in: 0...3), Gen.int(in: -1...2), Gen.double(in: -3500...3500),
    Gen.double(in: -3500...3500), Gen.double(in: 0...40)
).map { kind, ride, vehicle, north, east, scalar -> Step in
    let someVehicle = max(0, vehicle)
    switch kind {
    case 0..<45: return .fix(vehicle: someVehicle, north: north, east: east, speed: scalar * 15 / 40)
    case 45..<60: return .event(ride: ride, kind: someVehicle)
    case 60..<64: return .cancel(ride: ride)
    case 64..<70: return .assign(ride: ride, vehicle: someVehicle)
    case 70..<80: return .start(ride: ride, vehicle: vehicle)
    case 80..<85: return .stop(ride: ride)
    default: return .wait(seconds: max(0.1, scalar))
    }
}

/// Runs `steps` and checks the invariants after each one.
func runAndCheck(_ steps: [Step]) {
    var harness = Harness()
    var now = t0
    var lastPhase: [String: RidePhase] = [:]
    var lastSequence: [String: Int] = [:]
    var lastIssued: [String: Date] = [:]
    var stopped: Set<String> = []
    for step in steps {
        now = now.addingTimeInterval(1)
        var actions: [RideAction] = []
        switch step {
        case .fix(let vehicle, let north, let east, let speed):
            let point = pickup.moved(metres: north, bearing: 0).moved(metres: east, bearing: 90)
            actions = harness.fix(vehicle: "v-\(vehicle)", at: now, point, speed: speed)
        case .event(let ride, let kind):
            actions = harness.event(
                ["arrivedAtPickup", "passengerOnBoard", "arrivedAtDropOff"][kind], ride: "r-\(ride)", at: now)
        case .cancel(let ride):
            actions = harness.send("rides/r-\(ride)/cancel", bytes(#"{"canceledBy":"user"}"#), at: now)
        case .assign(let ride, let vehicle):
            actions = harness.send("rides/r-\(ride)/assign", bytes(#"{"vehicleId":"v-\#(vehicle)"}"#), at: now)
        case .start(let ride, let vehicle):
            actions = harness.start(ride: "r-\(ride)", vehicle: vehicle < 0 ? nil : "v-\(vehicle)", at: now)
            if !actions.statuses.isEmpty {
                // A new booking under an identifier whose ride was stopped is a new ride.
                stopped.remove("r-\(ride)")
                lastPhase["r-\(ride)"] = nil
                lastSequence["r-\(ride)"] = nil
            }
        case .stop(let ride):
            actions = harness.send("rides/r-\(ride)/stop", [], at: now)
            if actions.contains(.clear(ride: "r-\(ride)")) { stopped.insert("r-\(ride)") }
        case .wait(let seconds):
            now = now.addingTimeInterval(seconds)
            actions = harness.engine.tick(now: now)
            for case .clear(let ride, _) in actions { stopped.insert(ride) }
        }
        for status in actions.statuses {
            let id = status.rideIdentifier
            #expect(!stopped.contains(id), "nothing after stop (L2)")
            if let previous = lastPhase[id] { #expect(status.phase >= previous, "phase never goes back (P1-P6)") }
            lastPhase[id] = status.phase
            #expect(
                (status.phase == .completed) == (status.completionStatus != nil), "completed iff completion status (V3)"
            )
            if let previous = lastSequence[id] { #expect(status.sequence > previous, "C5 sequence") }
            lastSequence[id] = status.sequence
            if let previous = lastIssued[id] { #expect(status.issuedAt >= previous, "C5 issuedAt") }
            lastIssued[id] = status.issuedAt
            #expect(StatusValidator.violation(of: status, bookedRide: id) == nil, "every emitted status passes V1-V6")
        }
    }
    for ride in 0...3 { harness.send("rides/r-\(ride)/stop", [], at: now) }
    #expect(harness.engine.activeRideCount == 0, "no ride state after every ride is stopped (L2)")
    #expect(harness.engine.subscribedVehicleCount == 0, "no vehicle subscription after every ride is stopped (L3)")
    #expect(harness.engine.scheduledRideCount == 0, "no cadence entry after stop (L2)")
}

@Suite("Property-based: random fixes and events")
struct PropertyTests {
    @Test("P1-P6, V3, C5, L2, L3 invariants over 1,000 random sequences")
    func invariants() async {
        await propertyCheck(count: 1000, input: stepGenerator.array(of: 1...60)) { steps in
            runAndCheck(steps)
        }
    }
}
