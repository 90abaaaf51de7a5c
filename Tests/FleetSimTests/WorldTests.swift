import FleetModel
import Foundation
import RideDomain
import Testing

import struct RideStatusKit.RideTopics

@testable import FleetSim

/// fleet-sim's simulated fleet (the classes of real driving of the recorded city trips, `--driving classes`), stepped a second at a
/// time with no broker: what it publishes is what a worker reads, so each promise of its documentation is checked
/// on the messages themselves.
@Suite("fleet-sim: the simulated fleet drives and reports as it says")
struct WorldTests {
    static let berlin = Coordinate(latitude: 52.52, longitude: 13.405)

    /// One vehicle's view of a run: every message it published with the second it went out, and its stage after
    /// each tick.
    struct Trace {
        var messages: [(second: Int, message: OutgoingMessage)] = []
        var stages: [World.Stage] = []
    }

    /// When every run starts: the world's idle timers count from it, so a seed gives the same run every time.
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Runs `world` for `seconds` ticks of one second from ``start``, and returns each vehicle's trace: its topics'
    /// messages, and its rides' control messages.
    static func run(_ world: inout World, seconds: Int) -> [String: Trace] {
        var traces: [String: Trace] = [:]
        var driver: [String: String] = [:]  // ride -> vehicle, from the tick it was booked
        for second in 1...seconds {
            let messages = world.step(now: start.addingTimeInterval(Double(second)), dt: 1)
            for vehicle in world.vehicles { if let ride = vehicle.ride { driver[ride] = vehicle.id } }
            for message in messages {
                // `rides/{ride}/{kind}` (the ride's car), `fleet/vehicles/{vehicle}/{kind}` (that car).
                let levels = message.topic.split(separator: "/").map(String.init)
                let vehicle =
                    levels.first == world.topics.ridesPrefix && levels.count == 3
                    ? driver[levels[1]] : levels.count == 4 && levels[1] == "vehicles" ? levels[2] : nil
                guard let vehicle else { continue }
                traces[vehicle, default: Trace()].messages.append((second, message))
            }
            for vehicle in world.vehicles { traces[vehicle.id, default: Trace()].stages.append(vehicle.stage) }
        }
        return traces
    }

    /// The stretches of seconds (1-based, as the messages) in which `stands` holds, but for one still under way
    /// when the run ended.
    static func stretches(_ stages: [World.Stage], _ stands: (World.Stage) -> Bool) -> [ClosedRange<Int>] {
        var result: [ClosedRange<Int>] = []
        var first: Int?
        for (offset, stage) in stages.enumerated() {
            if stands(stage) {
                if first == nil { first = offset + 1 }
            } else if let start = first {
                result.append(start...offset)
                first = nil
            }
        }
        return result
    }

    static func isFix(_ message: OutgoingMessage) -> Bool { message.topic.hasSuffix("/position") }

    static func waiting(_ stage: World.Stage) -> Bool {
        if case .waiting = stage { true } else { false }
    }

    static func done(_ stage: World.Stage) -> Bool {
        if case .done = stage { true } else { false }
    }

    @Test("each class car sends a fix every 1 to 5 s of its own, jittered by up to 30 %; half send no speed")
    func sampling() throws {
        var world = World(
            seed: 31, vehicles: 40, center: Self.berlin, radius: 3000, ownTracksShare: 0, cancelRate: 0,
            badInputRate: 0, driving: .classes, start: Self.start)
        let traces = Self.run(&world, seconds: 600)
        var withSpeed = 0
        for vehicle in world.vehicles {
            let every = try #require(vehicle.profile.fixEvery, "\(vehicle.id): a class car has its own sampling")
            #expect((1...5).contains(every))
            let fixes = traces[vehicle.id]?.messages.filter { Self.isFix($0.message) } ?? []
            #expect(fixes.count > 600 / 7, "\(vehicle.id): fixes all along")
            // No gap longer than the jitter allows (every x 1.3, rounded); an arrival is reported at once, so
            // a gap may be shorter.
            let gaps = zip(fixes, fixes.dropFirst()).map { $1.second - $0.second }
            #expect(
                gaps.allSatisfy { $0 >= 1 && Double($0) <= (every * 1.3).rounded() }, "\(vehicle.id) \(every): \(gaps)")
            let speeds = fixes.map { String(decoding: $0.message.payload, as: UTF8.self).contains(#""speed":"#) }
            #expect(Set(speeds) == [vehicle.profile.reportsSpeed], "\(vehicle.id): speed in every fix or in none")
            if vehicle.profile.reportsSpeed { withSpeed += 1 }
        }
        #expect((12...28).contains(withSpeed), "about half of 40 report speed: \(withSpeed)")
        let kinds = Dictionary(grouping: world.vehicles, by: { $0.profile.kind })
        #expect(Set(kinds.keys) == [.arterial, .urban, .mixed], "the three classes")
    }

    @Test(
        "P3, P5: a class car reports its arrival at once and stands for three more fixes, at the pickup and at the drop-off; every ride started is stopped"
    )
    func arrivals() throws {
        var world = World(
            seed: 7, vehicles: 30, center: Self.berlin, radius: 2500, ownTracksShare: 0, cancelRate: 0,
            badInputRate: 0, driving: .classes, start: Self.start)
        let traces = Self.run(&world, seconds: 1800)
        var pickups = 0
        var dropOffs = 0
        for vehicle in world.vehicles where !vehicle.standby {
            let trace = try #require(traces[vehicle.id])
            let fixSeconds = Set(trace.messages.filter { Self.isFix($0.message) }.map(\.second))
            for (stands, label) in [(Self.waiting, "pickup"), (Self.done, "drop-off")] {
                for stretch in Self.stretches(trace.stages, stands) {
                    // The tick the car arrived on sends its arrival fix; three more while it stands.
                    #expect(
                        fixSeconds.contains(stretch.lowerBound),
                        "\(vehicle.id): the arrival at the \(label) is reported at once")
                    let standing = fixSeconds.filter { stretch.contains($0) }.count
                    #expect(
                        standing >= 4,
                        "\(vehicle.id) every \(vehicle.profile.fixEvery ?? 0) s: \(standing) fixes standing at the \(label) \(stretch)"
                    )
                    if label == "pickup" { pickups += 1 } else { dropOffs += 1 }
                }
            }
        }
        #expect(pickups > 20 && dropOffs > 15, "\(pickups) pickups, \(dropOffs) drop-offs")
        #expect(world.ridesStarted > 20)
        #expect(world.ridesStopped >= world.ridesStarted - world.vehicles.filter { $0.ride != nil }.count)
    }

    @Test("a canceled car pulls over: its fixes say it stands until the ride is stopped")
    func cancellation() throws {
        var world = World(
            seed: 3, vehicles: 20, center: Self.berlin, radius: 2500, ownTracksShare: 0, cancelRate: 60,
            badInputRate: 0, driving: .classes, start: Self.start)
        let traces = Self.run(&world, seconds: 900)
        var canceled = 0
        for vehicle in world.vehicles where vehicle.profile.reportsSpeed {
            let messages = traces[vehicle.id]?.messages ?? []
            for (index, entry) in messages.enumerated() where entry.message.topic.hasSuffix("/cancel") {
                canceled += 1
                let untilStop = messages[(index + 1)...].prefix { !$0.message.topic.hasSuffix("/stop") }
                let speeds = untilStop.filter { Self.isFix($0.message) }.map {
                    String(decoding: $0.message.payload, as: UTF8.self)
                }
                #expect(
                    speeds.allSatisfy { $0.contains(#""speed":0.0"#) }, "\(vehicle.id) after its cancel: \(speeds)")
            }
        }
        #expect(canceled > 3, "\(canceled) cancellations")
    }
}
