import Foundation
import Testing
import WorkerGroup

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideStatus

@testable import RideDomain

/// C5, L5: the durable state is written on changes that matter and once per sequence block, not with every
/// status; a restart continues above the block's ceiling and takes the last location from the retained status.
@Suite("C5, L5: durable state in sequence blocks")
struct DurableStateWritesTests {
    /// What the broker keeps for one ride, as the worker's executor writes it: the state (when the engine asks
    /// for one) first, then the status.
    struct Retained {
        var state: [UInt8]?
        var status: [UInt8]?
        var published: [Int] = []
        var states = 0
        /// Every state written, oldest first (a lagging read takes the one before the last).
        var written: [[UInt8]] = []

        mutating func apply(_ actions: [RideAction]) {
            for case .publish(let status, let state, _) in actions {
                if let state {
                    self.state = state.durableState()
                    written.append(self.state!)
                    states += 1
                }
                self.status = status.encoded()
                published.append(status.sequence)
            }
        }
    }

    /// An ongoing ride driven for `seconds`: a fix every second towards the drop-off and the cadence ticking.
    func drive(_ harness: inout Harness, _ retained: inout Retained, from start: Date, seconds: Int) {
        for second in 1...seconds {
            let time = start.addingTimeInterval(Double(second))
            let position = toward(pickup, dropOff, metres: 10 * Double(second))
            retained.apply(harness.fix(at: time, position, speed: 10))
            retained.apply(harness.engine.tick(now: time))
        }
    }

    /// G3: the first sequence a new owner numbers after reading `state` and taking the ride over with `block`.
    func successorsFirstSequence(
        reading state: [UInt8], block: Int, floor: SequenceFloor? = nil, at now: Date
    ) throws -> Int {
        var ride = try Ride.restored(topicRide: "r-1", payload: state, now: now, configuration: RideConfiguration())
        ride.takeOver(sequenceBlock: block, floor: floor)
        var successor = RideEngine()
        _ = successor.restore(ride, now: now)
        return try #require(successor.publishAll(now: now).statuses.first).sequence
    }

    /// The next status after a restart from what the broker retained.
    func restart(_ retained: Retained, at now: Date) throws -> (RideEngine, RideStatus) {
        var engine = RideEngine()
        let state = try #require(retained.state)
        #expect(engine.restore(topic: "ridestatus/state/r-1", ride: "r-1", payload: state, now: now).deadLetters == [])
        if let status = retained.status {
            #expect(engine.noteRetainedStatus(topic: "rides/r-1/status", ride: "r-1", payload: status, now: now) == [])
        }
        engine.mergeRetainedStatuses()
        let resumed = try #require(engine.publishAll(now: now).statuses.first)
        return (engine, resumed)
    }

    @Test("C5, L5: the state is written with the first status, on every phase or crew change, and once per block")
    func writesPerBlock() {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        #expect(retained.states == 1, "the booking is written with the first status")
        // The cadence alone: 120 statuses at the 5 s interval write the state once per 12 (sequenceBlock).
        for step in 1...120 { retained.apply(harness.engine.tick(now: t0.addingTimeInterval(5 * Double(step)))) }
        #expect(retained.published.count == 121)
        #expect(retained.states == 1 + 10, "\(retained.states) state writes for 121 statuses")
        // An assignment of another vehicle writes it at once (no phase change); so does a phase change (C2).
        var now = t0.addingTimeInterval(601)
        retained.apply(
            harness.send(
                "rides/r-1/assign", bytes(#"{"vehicleId":"v-2","driver":{"displayName":"Grace H."}}"#), at: now))
        #expect(retained.states == 12 && harness.engine.ride("r-1")?.vehicleId == "v-2")
        now += 1
        retained.apply(harness.event("arrivedAtPickup", at: now))
        #expect(retained.states == 13 && harness.engine.ride("r-1")?.phase == .pickup)
        // The engine counts what it asks for (the worker's ridestatus_state_writes_total).
        #expect(harness.engine.counters.statesWritten == retained.states)
    }

    @Test("C5, G3: a change's shorter block never lowers the ceiling: a later state is never taken for an older")
    func ceilingNeverLowers() throws {
        var harness = Harness()
        // Seven rides: the last one's slot (6) shortens a change's block by 6 of the 12 (the spread is by slot).
        for index in 0..<7 { harness.start(ride: "r-\(index)", vehicle: "v-\(index)") }
        var ceilings: [Int] = []
        var time = t0
        for second in 1...30 {
            time = t0.addingTimeInterval(Double(second * 5))
            _ = harness.engine.tick(now: time)
            ceilings.append(try #require(harness.engine.ride("r-6")).sequenceCeiling)
        }
        // A phase change mid-block (its block would end below the one already reserved).
        harness.send("rides/r-6/event", bytes(#"{"type":"arrivedAtPickup"}"#), at: time.addingTimeInterval(1))
        ceilings.append(try #require(harness.engine.ride("r-6")).sequenceCeiling)
        #expect(zip(ceilings, ceilings.dropFirst()).allSatisfy { $0 <= $1 }, "\(ceilings)")
        #expect(try #require(harness.engine.ride("r-6")).sequence <= ceilings.last!, "C5: every status under it")
    }

    /// A ride driven to its drop-off for 400 s, a fix and a tick every 5 s; `each` sees the old owner's engine,
    /// what the broker retained, the time and the second, after each step.
    func driveOldOwner(_ each: (RideEngine, Retained, Date, Int) throws -> Void) throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        retained.apply(harness.fix(at: t0.addingTimeInterval(1), pickup, speed: 0))
        retained.apply(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(2)))
        retained.apply(harness.event("passengerOnBoard", at: t0.addingTimeInterval(3)))
        for second in stride(from: 5, through: 400, by: 5) {
            let time = t0.addingTimeInterval(Double(3 + second))
            retained.apply(harness.fix(at: time, toward(pickup, dropOff, metres: 10 * Double(second)), speed: 10))
            retained.apply(harness.engine.tick(now: time))
            try each(harness.engine, retained, time, second)
        }
    }

    @Test(
        "C5, G3: a new owner that read the state one write behind (a clustered broker's lagging copy) numbers above all the old owner reserved"
    )
    func takeOverAboveLaggingState() throws {
        var checked = 0
        var reusedWithoutTheBlock = 0
        try driveOldOwner { engine, retained, time, second in
            guard retained.written.count >= 2 else { return }
            // Everything the old owner may publish before it writes again: up to the ceiling of its last write.
            let reserved = try #require(engine.ride("r-1")).sequenceCeiling
            let lagging = retained.written[retained.written.count - 2]
            let first = try successorsFirstSequence(
                reading: lagging, block: RideConfiguration().sequenceBlock, at: time)
            #expect(first > reserved, "at \(second) s: \(first) after \(reserved) reserved")
            var taken = try Ride.restored(
                topicRide: "r-1", payload: lagging, now: time, configuration: RideConfiguration())
            taken.takeOver(sequenceBlock: RideConfiguration().sequenceBlock)
            #expect(taken.epoch == engine.ride("r-1")!.epoch + 1, "G2: one epoch more")
            checked += 1
            if try successorsFirstSequence(reading: lagging, block: 0, at: time) <= reserved {
                reusedWithoutTheBlock += 1
            }
        }
        #expect(checked >= 70)
        // The check can fail: read one write behind, continuing just above the ceiling read reuses numbers.
        #expect(reusedWithoutTheBlock >= 10, "\(reusedWithoutTheBlock)")
    }

    @Test(
        "C5, G2, G3: a new owner that read the state many writes behind (a NATS node's stale cache) numbers above the old owner's release floor"
    )
    func takeOverAboveFloor() throws {
        var checked = 0
        var reusedWithoutTheFloor = 0
        try driveOldOwner { engine, retained, time, second in
            let reserved = try #require(engine.ride("r-1")).sequenceCeiling
            // The floor the old owner's notice would carry, read off its engine as a release does.
            let floor = try #require(engine.sequenceFloors()[Ownership.bucket(of: "r-1")])
            // The broker's copy is the very first state written, however many writes came after it.
            let first = try #require(retained.written.first)
            let block = RideConfiguration().sequenceBlock
            let successor = try successorsFirstSequence(reading: first, block: block, floor: floor, at: time)
            #expect(successor > reserved, "at \(second) s: \(successor) after \(reserved) reserved")
            var taken = try Ride.restored(
                topicRide: "r-1", payload: first, now: time, configuration: RideConfiguration())
            taken.takeOver(sequenceBlock: block, floor: floor)
            #expect(taken.epoch == engine.ride("r-1")!.epoch + 1, "G2: one epoch above the floor's")
            checked += 1
            if try successorsFirstSequence(reading: first, block: block, at: time) <= reserved {
                reusedWithoutTheFloor += 1
            }
        }
        #expect(checked == 80)
        // The check can fail: a read many writes behind, with only the block, reuses numbers.
        #expect(reusedWithoutTheFloor >= 40, "\(reusedWithoutTheFloor)")
    }

    @Test(
        "C5, G3: two workers that take the ride over from the same read (views split) number apart: the later one above every status the earlier can have issued"
    )
    func takersFromTheSameRead() throws {
        var checked = 0
        var reusedWithoutTheClock = 0
        try driveOldOwner { engine, retained, time, second in
            // The old owner died; both survivors read its last state, one a second after the other, as the
            // service serves a ride taken from a live group: the block, and the ride's age as a floor.
            let state = try #require(retained.written.last)
            let block = RideConfiguration().sequenceBlock
            func taker(at now: Date, clock: Bool) throws -> Int {
                let ride = try Ride.restored(
                    topicRide: "r-1", payload: state, now: now, configuration: RideConfiguration())
                let floor = clock ? SequenceFloor(epoch: 0, ceiling: ride.clockCeiling(at: now)) : nil
                return try successorsFirstSequence(reading: state, block: block, floor: floor, at: now)
            }
            let earlier = try taker(at: time, clock: true)
            // The earlier taker's statuses in that second: at most one per 0.1 s (``takeoverNumbersPerSecond``).
            let earliersLast = earlier + 9
            let later = try taker(at: time.addingTimeInterval(1), clock: true)
            #expect(later > earliersLast, "at \(second) s: \(later) after the earlier taker's \(earliersLast)")
            // Its age times 10: t0 is the booking, so 3 s plus the drive, plus the second.
            #expect(later - block - 1 == Int(Double(3 + second + 1) * 10), "\(later)")
            checked += 1
            if try taker(at: time.addingTimeInterval(1), clock: false) <= earliersLast { reusedWithoutTheClock += 1 }
        }
        #expect(checked == 80)
        // The check can fail: from the same read, with the block alone, the later taker reuses the earlier's numbers.
        #expect(reusedWithoutTheClock == 80, "\(reusedWithoutTheClock)")
    }

    /// A ride started and published three times, 5 s apart: the harness, what it retained, and the time.
    func threeStatusesIn() -> (harness: Harness, retained: Retained, time: Date) {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        var time = t0
        for _ in 0..<3 {
            time += 5
            retained.apply(harness.engine.tick(now: time))
        }
        return (harness, retained, time)
    }

    @Test(
        "C5, G3: rides lifted above another worker's release floor number their next status above it, the state reserving first, under their own epoch; one above its floor, or of another bucket, is left"
    )
    func liftedAboveAFloor() throws {
        var (harness, retained, time) = threeStatusesIn()
        let before = try #require(harness.engine.ride("r-1"))
        let bucket = Ownership.bucket(of: "r-1")
        let other = (bucket + 1) % Ownership.bucketCount
        let unchanged = [
            harness.engine.liftSequences(above: [:]),
            harness.engine.liftSequences(above: [bucket: SequenceFloor(epoch: 1, ceiling: before.sequence)]),
            harness.engine.liftSequences(above: [other: SequenceFloor(epoch: 1, ceiling: 500)]),
        ]
        #expect(unchanged.map(\.count) == [0, 0, 0])
        #expect(harness.engine.ride("r-1") == before, "a floor at or below the ride's numbers, or elsewhere")
        let lifted = harness.engine.liftSequences(above: [bucket: SequenceFloor(epoch: 4, ceiling: 500)])
        // The state to write at once says the floor as its sequence and ceiling, under the ride's own epoch: a
        // restart from it alone continues above 500. It reserves no block: the next status's state must be newer.
        let written = try #require(lifted.first)
        #expect(lifted.count == 1 && written.epoch == before.epoch)
        #expect(written.version == StateVersion(epoch: before.epoch, ceiling: 500, sequence: 500))
        let fromLift = try successorsFirstSequence(reading: written.durableState(), block: 0, at: time)
        #expect(fromLift > 500, "\(fromLift)")
        time += 5
        let actions = harness.engine.tick(now: time)
        var published: [(sequence: Int, state: Ride?)] = []
        for case .publish(let status, let state, _) in actions { published.append((status.sequence, state)) }
        #expect(published.map(\.sequence) == [501], "above the floor's ceiling of 500")
        // The state goes with it, written before it, reserving a block above 501 under the ride's own epoch: the
        // floor's epoch is the other worker's business (a newer one fences this worker by its state, G4).
        let state = try #require(published.first?.state)
        #expect(state.sequenceCeiling >= 501 && state.epoch == before.epoch, "\(state.version)")
        #expect(state.version > written.version, "the status's state is the newer copy")
        retained.apply(actions)
        let (_, resumed) = try restart(retained, at: time + 1)
        #expect(resumed.sequence > 501, "a restart continues above the lift: \(resumed.sequence)")
    }

    @Test(
        "C5, G3: a ride lifted to the ceiling another taker reserved under its epoch numbers its next status above it, its state reserving first; a number at or below its own, or an unknown ride, lifts nothing"
    )
    func liftedToAnotherTakersCeiling() throws {
        var (harness, _, time) = threeStatusesIn()
        let before = try #require(harness.engine.ride("r-1"))
        // Nothing at or below its own numbers (an older copy), nor for a ride not held.
        #expect(harness.engine.liftSequence(of: "r-1", above: before.sequence) == nil)
        #expect(harness.engine.liftSequence(of: "r-1", above: before.sequence - 1) == nil)
        #expect(harness.engine.liftSequence(of: "r-unknown", above: 500) == nil)
        #expect(harness.engine.ride("r-1") == before)
        // The other taker's state: this epoch, reserved up to 500.
        let other = StateVersion(epoch: before.epoch, ceiling: 500, sequence: 489)
        let lifted = harness.engine.liftSequence(of: "r-1", above: other.ceiling)
        #expect(try #require(lifted).version == StateVersion(epoch: before.epoch, ceiling: 500, sequence: 500))
        time += 5
        var published: [(sequence: Int, state: Ride?)] = []
        for case .publish(let status, let state, _) in harness.engine.tick(now: time) {
            published.append((status.sequence, state))
        }
        #expect(published.map(\.sequence) == [501], "above all the other taker could show")
        // Its state goes first, reserving above 501 under its own epoch: newer than the other's, which it lifts in
        // turn (a reader comparing the two copies takes this one).
        let state = try #require(published.first?.state)
        #expect(state.sequenceCeiling > 501 && state.epoch == before.epoch, "\(state.version)")
        #expect(state.version > other)
    }

    @Test(
        "C5, G3: after a lift, the state a change writes (its block shortened by slot) is newer than the one the lift wrote, whatever the ride's slot"
    )
    func liftThenChange() throws {
        var harness = Harness()
        let rides = (1...7).map { "r-\($0)" }
        for ride in rides { harness.start(ride: ride, vehicle: "v-\(ride)") }
        var time = t0 + 5
        _ = harness.engine.tick(now: time)
        let floors = Dictionary(
            rides.map { (Ownership.bucket(of: $0), SequenceFloor(epoch: 1, ceiling: 500)) },
            uniquingKeysWith: { a, _ in a })
        let lifted = Dictionary(
            harness.engine.liftSequences(above: floors).map { ($0.rideIdentifier, $0.version) },
            uniquingKeysWith: { a, _ in a })
        #expect(lifted.count == rides.count)
        // A change right after (the driver at the pickup: P3), its state's block shorter by up to half by slot.
        time += 1
        var checked = 0
        for ride in rides {
            for case .publish(let status, let state?, _) in harness.event("arrivedAtPickup", ride: ride, at: time) {
                let extra = try #require(lifted[ride])
                #expect(status.sequence == 501)
                #expect(state.version > extra, "\(ride): \(state.version) after the lift's \(extra)")
                checked += 1
            }
        }
        #expect(checked == rides.count)
    }

    @Test("C5, G3: statuses with no room give their numbers back, so the next state reserves one block, not more")
    func deferredKeepsOneBlock() throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        var time = t0
        var deferrals = 0
        // The cadence until a block's state write is due; that status and its state find no room, three times.
        while deferrals < 3 {
            time += 5
            let actions = harness.engine.tick(now: time)
            if actions.contains(where: { if case .publish(_, _?, _) = $0 { true } else { false } }),
                retained.written.count >= 1
            {
                harness.engine.deferStatus(of: "r-1", stateDropped: true, now: time)
                deferrals += 1
            } else {
                retained.apply(actions)
            }
        }
        time += 0.5
        retained.apply(harness.engine.tick(now: time))  // room again: the state, then the status
        let reserved = try #require(harness.engine.ride("r-1")).sequenceCeiling
        let first = try successorsFirstSequence(
            reading: retained.written[retained.written.count - 2], block: RideConfiguration().sequenceBlock, at: time)
        #expect(first > reserved, "\(first) after \(reserved) reserved, read one write behind")
    }

    @Test("C5: sequenceBlock 1 writes the state before every status, as releases before shape 4 did")
    func blockOfOne() {
        var configuration = RideConfiguration()
        configuration.sequenceBlock = 1
        var harness = Harness(configuration: configuration)
        var retained = Retained()
        retained.apply(harness.start())
        for step in 1...20 { retained.apply(harness.engine.tick(now: t0.addingTimeInterval(5 * Double(step)))) }
        #expect(retained.states == retained.published.count && retained.states == 21)
        configuration.sequenceBlock = 0
        #expect(configuration.problems().map(\.key) == ["sequenceBlock"])
    }

    @Test(
        "L5, C5: killed after any publish (state and status, or the state alone), a restart never reuses a sequence and keeps the last location"
    )
    func killAnywhere() throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        retained.apply(harness.fix(at: t0.addingTimeInterval(1), pickup, speed: 0))
        retained.apply(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(2)))
        retained.apply(harness.event("passengerOnBoard", at: t0.addingTimeInterval(3)))
        var kills = 0
        let start = t0.addingTimeInterval(3)
        for second in 1...150 {
            let time = start.addingTimeInterval(Double(second))
            let before = retained
            retained.apply(harness.fix(at: time, toward(pickup, dropOff, metres: 10 * Double(second)), speed: 10))
            retained.apply(harness.engine.tick(now: time))
            guard retained.published.count > before.published.count else { continue }
            let seen = try #require(retained.published.max())
            // Killed after the status left: the retained status is the newest, and it carries the location.
            let (_, resumed) = try restart(retained, at: time.addingTimeInterval(1))
            #expect(resumed.sequence > seen, "killed at \(second) s: \(resumed.sequence) after \(seen)")
            let last = try #require(harness.engine.ride("r-1")?.location)
            #expect(resumed.vehicle.location?.coordinate == last.coordinate, "L5: the last location intact")
            #expect(resumed.phase == .ongoing)
            // Killed between the state and its status: the status never reached the broker.
            var lost = retained
            lost.status = before.status
            let (_, afterLoss) = try restart(lost, at: time.addingTimeInterval(1))
            #expect(afterLoss.sequence > seen)
            kills += 1
        }
        #expect(kills >= 30, "the cadence published at least every 5 s")
        #expect(retained.states < retained.published.count / 5, "\(retained.states) of \(retained.published.count)")
    }

    @Test(
        "C1, C5: a status with no room at the broker waits as its ride: due at once, its dropped state written with the next, no sequence reused"
    )
    func deferred() throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        retained.apply(harness.engine.tick(now: t0.addingTimeInterval(5)))
        // A phase change (C2) the broker has no room for: neither its state nor its status leaves.
        let arrived = t0.addingTimeInterval(7)
        let dropped = harness.event("arrivedAtPickup", at: arrived)
        let droppedStatus = try #require(dropped.statuses.first)
        #expect(dropped.contains { if case .publish(_, let state, _) = $0 { state != nil } else { false } })
        harness.engine.deferStatus(of: "r-1", stateDropped: true, now: arrived)
        let due = harness.engine.hasDue(now: arrived)
        #expect(due, "due at once, not an interval later")
        // Room again: the ride's newest status, above the dropped one, with its state in front (the broker's
        // ceiling is still the one written before the drop).
        let later = arrived.addingTimeInterval(0.5)
        let resent = harness.engine.tick(now: later)
        guard case .publish(let status, let state, let gap)? = resent.first else {
            Issue.record("no status after the room came back: \(resent)")
            return
        }
        // C5: the number that never left is given back, above every number that did.
        #expect(status.sequence == droppedStatus.sequence && status.phase == .pickup)
        #expect(status.sequence > (retained.published.max() ?? 0))
        #expect(state?.phase == .pickup, "the dropped state is written with the next status")
        #expect(
            gap.map { abs($0 - 2.5) < 1e-6 } == true, "gap from the last status that left: \(String(describing: gap))")
        retained.apply(resent)
        // A cadence status without a state that could not leave: the next needs none either (same block).
        let cadence = harness.engine.tick(now: later.addingTimeInterval(5))
        #expect(cadence.statuses.count == 1)
        harness.engine.deferStatus(of: "r-1", stateDropped: false, now: later.addingTimeInterval(5))
        let again = harness.engine.tick(now: later.addingTimeInterval(5.1))
        #expect(again.contains { if case .publish(_, nil, _) = $0 { true } else { false } })
        retained.apply(again)
        // The engine counts what left (ridestatus_statuses_published_total, ridestatus_state_writes_total).
        #expect(harness.engine.counters.statusesPublished == retained.published.count)
        #expect(harness.engine.counters.statesWritten == retained.states)
        #expect(harness.engine.counters.statusesDeferred == 2)
        // Killed now: the restart continues above everything numbered, published or not.
        let (_, resumed) = try restart(retained, at: later.addingTimeInterval(6))
        #expect(resumed.sequence > (retained.published.max() ?? 0) && resumed.phase == .pickup)
    }

    @Test("C4: after a reconnect every ride is due at once; the cadence publishes them as the broker takes them")
    func allDue() {
        var harness = Harness()
        _ = harness.start()
        _ = harness.engine.tick(now: t0.addingTimeInterval(5))
        let now = t0.addingTimeInterval(6)
        let dueBefore = harness.engine.hasDue(now: now)
        harness.engine.makeAllDue(now: now)
        let dueAfter = harness.engine.hasDue(now: now)
        #expect(!dueBefore && dueAfter)
        #expect(harness.engine.tick(now: now, limit: 16).statuses.map(\.rideIdentifier) == ["r-1"])
    }

    @Test("L5, P5: the retained status brings the location since the state, and the distance driven to it")
    func retainedStatusMerges() throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        retained.apply(harness.fix(at: t0.addingTimeInterval(1), pickup, speed: 0))
        retained.apply(harness.event("arrivedAtPickup", at: t0.addingTimeInterval(2)))
        retained.apply(harness.event("passengerOnBoard", at: t0.addingTimeInterval(3)))
        let statesBefore = retained.states
        drive(&harness, &retained, from: t0.addingTimeInterval(3), seconds: 40)
        #expect(retained.states == statesBefore, "40 s of cadence fit in one block")
        let live = try #require(harness.engine.ride("r-1"))
        let now = t0.addingTimeInterval(44)

        // From the state alone, the ride would resume where the vehicle was when the state was written.
        var stateOnly = retained
        stateOnly.status = nil
        let (fromState, _) = try restart(stateOnly, at: now)
        #expect(fromState.ride("r-1")?.location?.coordinate != live.location?.coordinate)

        let (engine, resumed) = try restart(retained, at: now)
        let ride = try #require(engine.ride("r-1"))
        #expect(resumed.vehicle.location == live.location)
        // The live ride counts a fix once it is past the jitter threshold (at most 20 m) from the last counted;
        // the restored one counts straight to the retained location: they differ by at most that threshold.
        #expect(abs(ride.drivenMetres - live.drivenMetres) <= 20, "\(ride.drivenMetres) vs \(live.drivenMetres)")
        #expect(resumed.stale == false, "C3: the last fix time comes with the location")
        let lastIssued = try decodedIssuedAt(try #require(retained.status))
        #expect(resumed.issuedAt >= lastIssued, "C5: issuedAt never decreases")
    }

    @Test("A2: a retained status that fails the checks is dead-lettered; the ride resumes from its state alone")
    func retainedStatusChecked() throws {
        var harness = Harness()
        var retained = Retained()
        retained.apply(harness.start())
        let good = try #require(retained.status)
        let now = t0.addingTimeInterval(5)
        func edited(_ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
            var object = try #require(try JSONSerialization.jsonObject(with: Data(good)) as? [String: Any])
            change(&object)
            return Array(try JSONSerialization.data(withJSONObject: object))
        }
        let cases: [(String, [UInt8], DeadLetter.Reason, String)] = [
            ("not JSON", bytes("{"), .malformedJSON, "I2"),
            ("another ride", try edited { $0["rideIdentifier"] = "r-2" }, .identifierMismatch, "I3"),
            ("sequence too large", try edited { $0["sequence"] = 1e300 }, .invalidField, "C5"),
            ("sequence negative", try edited { $0["sequence"] = -1 }, .invalidField, "C5"),
            (
                "issued in the future", try edited { $0["issuedAt"] = iso(now.addingTimeInterval(3600)) },
                .invalidField,
                "T2"
            ),
            ("no stale", try edited { $0["stale"] = nil }, .invalidField, "stale"),
            (
                "location off the map",
                try edited { $0["vehicle"] = ["location": ["latitude": 91, "longitude": 13, "timestamp": iso(t0)]] },
                .invalidCoordinates, "T1"
            ),
        ]
        for (name, payload, reason, rule) in cases {
            var engine = RideEngine()
            _ = engine.restore(
                topic: "ridestatus/state/r-1", ride: "r-1", payload: try #require(retained.state), now: now)
            let actions = engine.noteRetainedStatus(topic: "rides/r-1/status", ride: "r-1", payload: payload, now: now)
            let letter = try #require(actions.deadLetters.first, "\(name)")
            #expect(letter.reason == reason, "\(name): \(letter.detail)")
            #expect(letter.detail.contains("A2") && letter.detail.contains(rule), "\(name): \(letter.detail)")
            #expect(engine.mergeRetainedStatuses() == 0)
            #expect(engine.publishAll(now: now).statuses.first?.sequence == RideConfiguration().sequenceBlock + 1)
        }
    }

    func decodedIssuedAt(_ status: [UInt8]) throws -> Date {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status)) as? [String: Any])
        let text = try #require(object["issuedAt"] as? String)
        return try #require(Timestamps.parse(text))
    }

    @Test("L5: the durable state's amounts are Decimal's own digits, remembered or not, for any value and spelling")
    func decimalDigits() {
        var generator = SeededRandom(seed: 12)
        var values: [Decimal] = [
            0, 1, -1, Decimal(string: "2.50")!, Decimal(string: "2.5")!, Decimal(string: "-0.35")!,
        ]
        values.append(Decimal(string: "1234567890123.456789")!)
        for _ in 0..<3000 {
            let significand = Int64.random(in: -10_000_000_000...10_000_000_000, using: &generator)
            let exponent = Int.random(in: -8...6, using: &generator)
            values.append(
                Decimal(
                    sign: significand < 0 ? .minus : .plus, exponent: exponent,
                    significand: Decimal(significand.magnitude)))
        }
        // Twice: the second pass reads what the first remembered (up to the memo's limit).
        for _ in 0..<2 {
            for value in values {
                #expect(String(decoding: DecimalDigits.digits(value), as: UTF8.self) == value.description, "\(value)")
            }
        }
    }
}
