import Foundation
import PropertyBased
import Testing

import struct RideStatusKit.DeadLetter

@testable import RideDomain

/// What the rider sees survives a change of owner (G3, V5, L5): the state a new owner reads carries a known
/// location, the ride's own detour factor, and the newest of two copies is the one served.
@Suite("Handover continuity: location, detour factor, newest state (G3, V5)")
struct HandoverContinuityTests {
    /// The state a new owner would read: the last one the engine asked to write, taken over (G3).
    static func takeOver(
        _ state: Ride, into engine: inout RideEngine, now: Date, configuration: RideConfiguration = .init()
    ) throws -> [RideAction] {
        var ride = try Ride.restored(
            topicRide: state.rideIdentifier, payload: state.durableState(), now: now, configuration: configuration)
        ride.takeOver(sequenceBlock: configuration.sequenceBlock)
        var actions = engine.restore(ride, now: now)
        engine.makeAllDue(now: now)
        actions += engine.tick(now: now)
        return actions
    }

    static func lastState(_ actions: [RideAction]) -> Ride? {
        actions.compactMap { if case .publish(_, let state?, _) = $0 { state } else { nil } }.last
    }

    @Test("V5, G3: the first status with a location writes the state; a new owner starts from that location")
    func firstLocationIsWritten() throws {
        var harness = Harness()
        var written = Self.lastState(harness.start(at: t0) + harness.engine.tick(now: t0.addingTimeInterval(0.1)))
        #expect(written?.location == nil, "the booking's state: no location yet")
        let place = pickup.moved(metres: 900, bearing: 90)
        let actions =
            harness.fix(at: t0.addingTimeInterval(2), place, speed: 8)
            + harness.engine.tick(now: t0.addingTimeInterval(6))
        let located = try #require(actions.statuses.first { $0.vehicle.location != nil })
        written = Self.lastState(actions) ?? written
        #expect(written?.location != nil, "V5: the state is written with the first located status")
        var successor = RideEngine()
        let state = try #require(written)
        let first = try #require(
            try Self.takeOver(state, into: &successor, now: t0.addingTimeInterval(7)).statuses.first)
        #expect(first.vehicle.location?.coordinate == located.vehicle.location?.coordinate)
        #expect(first.sequence > located.sequence, "C5 across owners")
    }

    @Test("G3, E1: a new owner keeps the ride's detour factor; a state of an older shape takes the area's")
    func detourFactorTravels() throws {
        var starting = RideConfiguration()
        starting.detourFactor = 1.1
        var harness = Harness(configuration: starting)
        let state = try #require(
            Self.lastState(harness.start(at: t0) + harness.engine.tick(now: t0.addingTimeInterval(0.1))))
        var other = RideConfiguration()
        other.detourFactor = 1.6
        var successor = RideEngine(configuration: other)
        _ = try Self.takeOver(state, into: &successor, now: t0.addingTimeInterval(1), configuration: other)
        #expect(successor.ride("r-1")?.detourFactor == 1.1, "G3: the ETA does not jump with the new owner's factor")
        // A state written before shape 6 has no factor: the new owner gives the ride its area's.
        var text = String(decoding: state.durableState(), as: UTF8.self)
        text = text.replacingOccurrences(of: #","detourFactor":1.1"#, with: "")
        #expect(!text.contains("detourFactor"))
        var older = RideEngine(configuration: other)
        _ = older.restore(topic: "ridestatus/state/r-1", ride: "r-1", payload: Array(text.utf8), now: t0)
        #expect(older.ride("r-1")?.detourFactor == 1.6)
    }

    @Test("A2, E1: a stored detour factor outside 1...5 is refused, naming the rule")
    func detourFactorChecked() throws {
        var harness = Harness()
        let state = try #require(
            Self.lastState(harness.start(at: t0) + harness.engine.tick(now: t0.addingTimeInterval(0.1))))
        let text = String(decoding: state.durableState(), as: UTF8.self).replacingOccurrences(
            of: #""detourFactor":1.3"#, with: #""detourFactor":9"#)
        #expect(text.contains(#""detourFactor":9"#))
        var engine = RideEngine()
        let actions = engine.restore(topic: "ridestatus/state/r-1", ride: "r-1", payload: Array(text.utf8), now: t0)
        #expect(actions.deadLetters.first?.detail.contains("detourFactor") == true)
        #expect(engine.ride("r-1") == nil)
    }

    @Test("A2, E1: a stored stop share outside 0...1 is refused, naming the rule")
    func stopShareChecked() throws {
        var harness = Harness()
        let state = try #require(
            Self.lastState(harness.start(at: t0) + harness.engine.tick(now: t0.addingTimeInterval(0.1))))
        let text = String(decoding: state.durableState(), as: UTF8.self).replacingOccurrences(
            of: #""drivenMetres":"#, with: #""stopShare":1.5,"drivenMetres":"#)
        #expect(text.contains(#""stopShare":1.5"#))
        var engine = RideEngine()
        let actions = engine.restore(topic: "ridestatus/state/r-1", ride: "r-1", payload: Array(text.utf8), now: t0)
        #expect(actions.deadLetters.first?.detail.contains("stopShare") == true)
        #expect(engine.ride("r-1") == nil)
        // Within 0...1 it is kept.
        let good = text.replacingOccurrences(of: #""stopShare":1.5"#, with: #""stopShare":0.4"#)
        _ = engine.restore(topic: "ridestatus/state/r-1", ride: "r-1", payload: Array(good.utf8), now: t0)
        #expect(engine.ride("r-1")?.stopShare == 0.4)
    }

    @Test("G3: a release write ties with the block write before it on epoch and ceiling; the sequence decides")
    func newerBreaksTieOnSequence() throws {
        var harness = Harness()
        let block = try #require(
            Self.lastState(harness.start(at: t0) + harness.engine.tick(now: t0.addingTimeInterval(0.1))))
        var release = block
        release.sequence = block.sequence + 3
        #expect(release.sequenceCeiling == block.sequenceCeiling && release.epoch == block.epoch)
        #expect(release.isNewer(than: block))
        #expect(!block.isNewer(than: release))
        #expect(!block.isNewer(than: block))
    }

    @Test("V5, G3: after a ride's first located status, no status of it shows no location, across random handovers")
    func neverBlankAcrossOwners() async {
        // Steps: 0 a fix at a random place, 1 a wait, 2 a handover to a fresh engine from the last state written.
        let steps = zip(Gen.int(in: 0...9), Gen.double(in: -2000...2000), Gen.double(in: 0.5...6)).array(of: 1...40)
        await propertyCheck(count: 300, input: steps) { steps in
            var engine = RideEngine()
            var now = t0
            var actions = engine.receive(topic: "rides/r-1/start", payload: bookingJSON(), now: now)
            actions += engine.tick(now: now.addingTimeInterval(0.1))
            var state = Self.lastState(actions)
            var seenLocation = actions.statuses.contains { $0.vehicle.location != nil }
            for (kind, metres, seconds) in steps {
                now = now.addingTimeInterval(seconds)
                switch kind {
                case 0..<5:
                    let place = pickup.moved(metres: 1500 + metres, bearing: 90)
                    actions = engine.receive(
                        topic: "fleet/vehicles/v-1/position", payload: fixJSON(at: now, place, speed: 8), now: now)
                case 5..<8:
                    actions = []
                default:
                    guard let current = state else { continue }
                    engine = RideEngine()
                    actions = (try? Self.takeOver(current, into: &engine, now: now)) ?? []
                }
                actions += engine.tick(now: now)
                state = Self.lastState(actions) ?? state
                for status in actions.statuses {
                    if seenLocation {
                        #expect(status.vehicle.location != nil, "V5: sequence \(status.sequence) lost the location")
                    }
                    seenLocation = seenLocation || status.vehicle.location != nil
                }
            }
        }
    }
}
