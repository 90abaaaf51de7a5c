import Benchmark
import Foundation
import RideDomain
import Synchronization

import struct RideStatusKit.TelemetryFix

// The domain's hot paths, one operation each (scaled by 1,000 where one is too short to time), with
// Foundation's JSONDecoder on the same payload as the comparison: the project's one harness for them
// (`make bench-domain`). Memory per active ride alone is measured by `ride-bench memory`, a plain process:
// the malloc interposer here adds a header to every allocation.

let origin = Date(timeIntervalSince1970: 1_795_341_000)
let activeRides = 100_000

/// A native telemetry payload (3.1) of vehicle v-0042, `index` seconds after `origin`.
func nativeFix(_ index: Int) -> [UInt8] {
    let time = Timestamps.format(origin.addingTimeInterval(Double(index)))
    let latitude = 52.5 + Double(index % 1000) * 0.0001
    return Array(
        #"{"vehicleId":"v-0042","timestamp":"\#(time)","latitude":\#(latitude),"longitude":13.404954,"speed":8.3,"course":92.5,"horizontalAccuracy":4.0,"sequence":\#(index)}"#
            .utf8)
}

/// An engine with `activeRides` rides, each with a vehicle of its own (a minimal booking, as in 3.2).
func engineWithActiveRides() -> RideEngine {
    var engine = RideEngine()
    for index in 0..<activeRides {
        let latitude = 52.45 + Double(index % 1000) * 0.0001
        let longitude = 13.3 + Double(index / 1000) * 0.001
        let booking =
            #"{"rideIdentifier":"r-\#(index)","vehicleId":"v-\#(index)","rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":\#(latitude),"longitude":\#(longitude)},"dropOffLocation":{"latitude":\#(latitude + 0.02),"longitude":\#(longitude)},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
        _ = engine.receive(topic: "rides/r-\(index)/start", payload: Array(booking.utf8), now: origin)
    }
    precondition(engine.activeRideCount == activeRides)
    return engine
}

/// One confirmed ride `r-1` with a minimal booking (3.2), for the per-status benchmarks.
func oneRide(configuration: RideConfiguration) -> Ride {
    let booking = Array(
        #"{"rideIdentifier":"r-1","vehicleId":"v-1","rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(origin.addingTimeInterval(600)))"},"pickupLocation":{"latitude":52.52,"longitude":13.41},"dropOffLocation":{"latitude":52.51,"longitude":13.38},"vehicle":{"mapAnnotationImage":"https://assets.example/cars/compact.png"}}"#
            .utf8)
    return Ride(
        booking: try! InputDecoder().booking(rideIdentifier: "r-1", payload: booking), fare: nil, now: origin,
        configuration: configuration)
}

/// The fields of the native telemetry shape, for Foundation's decoder.
struct NativeFix: Decodable {
    var vehicleId: String?
    var timestamp: String
    var latitude: Double
    var longitude: Double
    var speed: Double?
    var course: Double?
    var horizontalAccuracy: Double?
    var sequence: Int?
}

/// State that lives across a benchmark's iterations; the runner calls one benchmark at a time.
struct ApplyState {
    var engine = RideEngine()
    var round = 0
}

let benchmarks: @Sendable () -> Void = {
    let perOperation = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(3))
    let payloads = (0..<1000).map(nativeFix)
    let configuration = RideConfiguration()

    Benchmark("T1-T7: decode + accept a native fix", configuration: perOperation) { benchmark in
        let decoder = InputDecoder()
        var track = VehicleTrack()
        var accepted = 0
        for index in benchmark.scaledIterations {
            if index % payloads.count == 0 { track = VehicleTrack() }
            guard let fix = try? decoder.telemetry(vehicleId: "v-0042", payload: payloads[index % payloads.count])
            else { continue }
            if case .accepted(let fix) = TelemetryAcceptance.evaluate(
                fix, track: track, now: fix.timestamp, configuration: configuration)
            {
                track.record(fix)
                accepted += 1
            }
        }
        precondition(accepted == benchmark.scaledIterations.count, "every fix is accepted")
    }

    Benchmark("comparison: Foundation JSONDecoder alone, same payload", configuration: perOperation) { benchmark in
        let decoder = JSONDecoder()
        for index in benchmark.scaledIterations {
            blackHole(try? decoder.decode(NativeFix.self, from: Data(payloads[index % payloads.count])))
        }
    }

    let applyState = Mutex(ApplyState())
    Benchmark(
        "P2-P5, E1: apply an accepted fix, 100,000 active rides", configuration: perOperation,
        closure: { benchmark in
            applyState.withLock { state in
                for index in benchmark.scaledIterations {
                    let ride = index % activeRides
                    if ride == 0 { state.round += 1 }
                    let fix = TelemetryFix(
                        vehicleId: "v-\(ride)", timestamp: origin.addingTimeInterval(Double(state.round)),
                        coordinate: Coordinate(
                            latitude: 52.40 + Double(ride % 1000) * 0.0001 - Double(state.round) * 0.00001,
                            longitude: 13.3 + Double(ride / 1000) * 0.001),
                        speed: 9, course: 0, horizontalAccuracy: 5)
                    blackHole(state.engine.receive(fix: fix, now: fix.timestamp))
                }
            }
        },
        setup: { applyState.withLock { $0 = ApplyState(engine: engineWithActiveRides()) } },
        teardown: { applyState.withLock { $0 = ApplyState() } })

    Benchmark("V1-V6: build + validate + encode a status", configuration: perOperation) { benchmark in
        var ride = oneRide(configuration: configuration)
        var bytes = 0
        for index in benchmark.scaledIterations {
            let status = ride.nextStatus(
                now: origin.addingTimeInterval(Double(index) * 0.001), configuration: configuration)
            if StatusValidator.violation(of: status, bookedRide: "r-1") == nil { bytes += status.encoded().count }
        }
        precondition(bytes > 0)
    }

    // L5: the durable state written with the statuses that persist it (JSONWriter; it was JSONEncoder, about
    // 36k a second, before this release).
    Benchmark("L5: encode the durable state", configuration: perOperation) { benchmark in
        var ride = oneRide(configuration: configuration)
        _ = ride.nextStatus(now: origin, configuration: configuration)
        var bytes = 0
        for _ in benchmark.scaledIterations { bytes += ride.durableState().count }
        precondition(bytes > 0)
    }

    // C6: one 50 ms tick of the scheduler with 100,000 rides at a 5 s interval (about 1,000 due rides a tick);
    // its share of a core is the tick's time divided by 50 ms.
    let scheduler = Mutex((scheduler: CadenceScheduler(), now: 0.0))
    Benchmark(
        "C6: one 50 ms scheduler tick, 100,000 rides at 5 s",
        configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(3)),
        closure: { benchmark in
            scheduler.withLock { state in
                for _ in benchmark.scaledIterations {
                    state.now += 0.05
                    for ride in state.scheduler.popDue(now: state.now) {
                        state.scheduler.schedule(ride, at: state.now + 5)
                    }
                }
            }
        },
        setup: {
            scheduler.withLock { state in
                for ride in 0..<activeRides { state.scheduler.schedule(ride, at: Double(ride % 5000) / 1000) }
            }
        })
}
