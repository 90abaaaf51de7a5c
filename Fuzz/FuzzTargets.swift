// libFuzzer targets for every decoder of the ride domain (issue 11). Not part of the Swift package: the
// script `scripts/fuzz.sh` compiles this file together with `Sources/RideDomain/*.swift` into one binary
// with `-sanitize=fuzzer,address`, and picks the target with RIDE_FUZZ_TARGET. A crash, a sanitizer report
// or a failed `check` here is a finding; each one found becomes a regression test in RideDomainTests.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Stops the fuzzer with a message: libFuzzer saves the input that got here.
func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        FileHandle.standardError.write(Data("fuzz check failed: \(message())\n".utf8))
        abort()
    }
}

let fuzzNow = Date(timeIntervalSince1970: 1_795_341_000)
let fuzzDecoder = InputDecoder()

/// The targets by name; each takes the raw input bytes.
let targets: [String: ([UInt8]) -> Void] = [
    // 3.1: the fast path and the general decoder must agree wherever the fast path answers.
    "telemetry": { payload in
        let general = Result { () throws(Rejection) in
            try fuzzDecoder.generalTelemetry(vehicleId: "v-1", payload: payload)
        }
        if case .some(.some(let fast)) = TelemetryFastPath.decode(vehicleId: "v-1", payload: payload) {
            guard case .success(let decoded) = general else {
                check(false, "fast path accepted what the general decoder rejects: \(general)")
                return
            }
            check(decoded == fast, "fast path \(fast) differs from general \(String(describing: decoded))")
        }
        _ = try? fuzzDecoder.telemetry(vehicleId: "v-1", payload: payload)
    },
    "booking": { payload in
        if let booking = try? fuzzDecoder.booking(rideIdentifier: "r-1", payload: payload) {
            // What the decoder lets in must build a ride and a status without trapping.
            var ride = Ride(
                booking: booking, fare: booking.fare.map(FareTerms.init), now: fuzzNow,
                configuration: RideConfiguration())
            let status = ride.nextStatus(now: fuzzNow, configuration: RideConfiguration())
            _ = StatusValidator.violation(of: status, bookedRide: "r-1")
            _ = status.encoded()
        }
    },
    "assign": { payload in _ = try? fuzzDecoder.assignment(rideIdentifier: "r-1", payload: payload) },
    "event": { payload in _ = try? fuzzDecoder.event(rideIdentifier: "r-1", payload: payload) },
    "cancel": { payload in _ = try? fuzzDecoder.cancellation(rideIdentifier: "r-1", payload: payload) },
    "stop": { payload in _ = try? fuzzDecoder.stop(rideIdentifier: "r-1", payload: payload) },
    // L7: `status/get` takes any object or nothing.
    "status-request": { payload in _ = try? fuzzDecoder.object(payload, emptyAsObject: true) },
    "quote-request": { payload in _ = try? fuzzDecoder.rideOptionsRequest(payload: payload) },
    "availability": { payload in _ = try? fuzzDecoder.availability(payload: payload, receivedAt: fuzzNow) },
    // L5, A2: the worker's own state read back from the broker; what passes must publish without trapping.
    "durable-state": { payload in
        if var ride = try? Ride.restored(
            topicRide: "r-1", payload: payload, now: fuzzNow, configuration: RideConfiguration())
        {
            var engine = RideEngine()
            _ = engine.restore(ride, now: fuzzNow)
            _ = engine.publishAll(now: fuzzNow)
            _ = engine.tick(now: fuzzNow.addingTimeInterval(30))
            _ = ride.nextStatus(now: fuzzNow.addingTimeInterval(60), configuration: RideConfiguration()).encoded()
        }
    },
    // L5, A2: a retained status read back at recovery merges into a restored ride or is refused; the ride
    // then publishes only valid statuses whose sequence is above its state's.
    "retained-status": { payload in
        var engine = FuzzEngine.shared
        let before = engine.ride("r-1")?.sequence ?? 0
        _ = engine.noteRetainedStatus(topic: "rides/r-1/status", ride: "r-1", payload: payload, now: fuzzNow)
        engine.mergeRetainedStatuses()
        for case .publish(let status, _, _) in engine.publishAll(now: fuzzNow.addingTimeInterval(1)) {
            check(
                StatusValidator.violation(of: status, bookedRide: status.rideIdentifier) == nil,
                "invalid status published after a merge")
            check(status.rideIdentifier != "r-1" || status.sequence > before, "sequence went back after a merge")
        }
    },
    // The whole engine: the first byte picks a topic, the rest is its payload, on top of two active rides.
    "engine": { input in
        var engine = FuzzEngine.shared
        let topics = [
            "rides/r-1/start", "rides/r-1/assign", "rides/r-1/event", "rides/r-1/cancel", "rides/r-1/stop",
            "fleet/vehicles/v-1/position", "rides/r-2/event", "fleet/vehicles/v-2/position", "rides/r-3/start",
        ]
        guard let first = input.first else { return }
        let payload = Array(input.dropFirst())
        let actions = engine.receive(topic: topics[Int(first) % topics.count], payload: payload, now: fuzzNow)
        for case .publish(let status, _, _) in actions {
            check(
                StatusValidator.violation(of: status, bookedRide: status.rideIdentifier) == nil,
                "invalid status published")
        }
        _ = engine.tick(now: fuzzNow.addingTimeInterval(6))
    },
]

/// Two active rides in known phases, the starting point of every `engine` input.
enum FuzzEngine {
    static let shared: RideEngine = {
        var engine = RideEngine()
        let booking = { (ride: String, vehicle: String) -> [UInt8] in
            Array(
                #"{"rideIdentifier":"\#(ride)","vehicleId":"\#(vehicle)","rideOption":{"name":"Compact","estimatedPickupDate":"2026-11-22T09:58:00.000Z"},"pickupLocation":{"latitude":52.5219,"longitude":13.4132},"dropOffLocation":{"latitude":52.5096,"longitude":13.3759},"vehicle":{"mapAnnotationImage":"https://assets.example/c.png"},"fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}}"#
                    .utf8)
        }
        _ = engine.receive(topic: "rides/r-1/start", payload: booking("r-1", "v-1"), now: fuzzNow)
        _ = engine.receive(topic: "rides/r-2/start", payload: booking("r-2", "v-2"), now: fuzzNow)
        _ = engine.receive(topic: "rides/r-2/event", payload: Array(#"{"type":"passengerOnBoard"}"#.utf8), now: fuzzNow)
        return engine
    }()
}

nonisolated(unsafe) var selected: (([UInt8]) -> Void)? = nil

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    let name = ProcessInfo.processInfo.environment["RIDE_FUZZ_TARGET"] ?? ""
    guard let target = targets[name] else {
        FileHandle.standardError.write(
            Data("set RIDE_FUZZ_TARGET to one of: \(targets.keys.sorted().joined(separator: ", "))\n".utf8))
        exit(2)
    }
    selected = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selected?(bytes)
    return 0
}
