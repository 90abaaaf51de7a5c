import Foundation
import MQTTClient
import RideDomain
import RideStatusTesting
import Testing
import WorkerGroup

import struct RideStatusKit.RideStatus
import struct RideStatusKit.RideTopics

@testable import RideStatusService

/// The handover's wiring in the service (G1, G3, G4), on the in-memory broker: which rides a worker serves
/// beside another member, what it keeps for the rides it does not serve, and fencing. The real broker and
/// real processes are in `GroupEndToEndTests`.
@Suite("Groups of workers in memory (G1, G3, G4)")
struct GroupInMemoryTests {
    typealias Running = ServiceInMemoryTests.Running

    /// A ride that `owner` owns in the group of `members`.
    static func ride(ownedBy owner: String, among members: [String], prefix: String) -> String {
        let ownership = Ownership(members: members)
        return (0...).lazy.map { "\(prefix)-\($0)" }.first { ownership.owner(ofRide: $0) == owner }!
    }

    static func presence(_ state: String, incarnation: Int) -> String {
        #"{"state":"\#(state)","since":"2026-11-25T10:00:00.000Z","version":"test","incarnation":\#(incarnation)}"#
    }

    /// w-mem running and ready beside w-other, whose retained presence says it is online.
    static func besideLiveOther(
        interval: Double, clock: ManualClock? = nil, configure: (inout WorkerSettings) -> Void = { _ in }
    ) async throws -> Running {
        let broker = InMemoryBroker()
        broker.publish("ridestatus/workers/w-other", Self.presence("online", incarnation: 1), retain: true)
        let running = try Running(interval: interval, broker: broker, clock: clock, configure: configure)
        try await running.ready()
        return running
    }

    /// w-mem running beside a live w-other, with a ride of its own started and its state written.
    static func ownRideBesideOther(
        prefix: String, vehicle: String, clock: ManualClock? = nil,
        configure: (inout WorkerSettings) -> Void = { _ in }
    ) async throws -> (running: Running, ride: String, stateTopic: String) {
        let running = try await Self.besideLiveOther(interval: 0.2, clock: clock, configure: configure)
        let broker = running.broker
        let ride = Self.ride(ownedBy: "w-mem", among: ["w-mem", "w-other"], prefix: prefix)
        broker.publish("rides/\(ride)/start", booking(ride: ride, vehicle: vehicle))
        let topic = RideTopics().state(ride: ride)
        do {
            try await running.waitFor("its state") { broker.retained(topic) != nil }
        } catch {
            let overview = running.worker.overview()
            let published = broker.published.map(\.topic)
            Issue.record(
                "no state: members \(overview.members), rides \(overview.activeRides), ready \(overview.ready); filters \(broker.subscribedFilters.sorted()); published \(published.suffix(12))"
            )
            throw error
        }
        return (running, ride, topic)
    }

    /// The ride's retained state as w-other writes it on taking the ride over: under epoch 2, far above (its
    /// ceiling 500).
    static func takenOver(_ broker: InMemoryBroker, topic: String) throws -> String {
        let own = String(decoding: try #require(broker.retained(topic)).payload, as: UTF8.self)
        let ceiling = try #require(try JSONParser.parse(Array(own.utf8))["sequenceCeiling"]?.doubleValue)
        return own.replacingOccurrences(of: #""epoch":1"#, with: #""epoch":2"#)
            .replacingOccurrences(of: #""sequenceCeiling":\#(Int(ceiling))"#, with: #""sequenceCeiling":500"#)
    }

    /// After a lift above `floor`: two more statuses above it, the ride still served here (its vehicle subscribed).
    static func expectGoingOnAbove(_ floor: Int, ride: String, vehicle: String, running: Running) async throws {
        try await running.waitFor("statuses going on above it") {
            running.statuses(ride).compactMap(\.sequence).filter { $0 > floor + 1 }.count >= 2
        }
        #expect(
            running.broker.subscribedFilters.contains("fleet/vehicles/\(vehicle)/position"), "L3: still served here")
    }

    /// This worker's own retained state of `ride` after a few statuses: its text, ceiling and epoch.
    static func ownState(_ running: Running, ride: String, topic: String) async throws
        -> (text: String, ceiling: Int, epoch: Double)
    {
        try await running.waitFor("a few statuses") { running.statuses(ride).count >= 3 }
        let text = String(decoding: try #require(running.broker.retained(topic)).payload, as: UTF8.self)
        let parsed = try JSONParser.parse(Array(text.utf8))
        return (
            text, Int(try #require(parsed["sequenceCeiling"]?.doubleValue)), try #require(parsed["epoch"]?.doubleValue)
        )
    }

    /// The ceiling of the state retained on `topic`; nil for none.
    static func retainedCeiling(_ broker: InMemoryBroker, _ topic: String) -> Double? {
        broker.retained(topic).flatMap { try? JSONParser.parse($0.payload)["sequenceCeiling"]?.doubleValue }
    }

    /// `state` (this worker's own) as another client would write it, reserving up to `ceiling` instead.
    static func reserving(_ state: String, from own: Int, to ceiling: Int) throws -> String {
        let written = state.replacingOccurrences(
            of: #""sequenceCeiling":\#(own)"#, with: #""sequenceCeiling":\#(ceiling)"#)
        try #require(written.contains(#""sequenceCeiling":\#(ceiling)"#))
        return written
    }

    /// The ride taken over by w-other (``takenOver(_:topic:)``) is served here again: a block above the ceiling
    /// it read (C5, G3: the state may lag by one write), under an epoch above w-other's (G2), its vehicle
    /// subscribed again (L3).
    static func expectServedAgain(_ ride: String, vehicle: String, running: Running) async throws {
        try await running.waitFor("the ride served again") {
            running.statuses(ride).contains { ($0.sequence ?? 0) > 500 }
        }
        let resumed = running.statuses(ride).compactMap(\.sequence).filter { $0 > 500 }.min()
        #expect(resumed == 500 + RideConfiguration().sequenceBlock + 1, "\(String(describing: resumed))")
        let again = running.broker.published.filter { $0.topic == "rides/\(ride)/status" && !$0.payload.isEmpty }
            .last
        #expect(again?.properties.userProperties.contains { $0 == ("epoch", "3") } == true, "G2: above w-other's 2")
        try await running.waitFor("its vehicle subscribed again (L3)") {
            running.broker.subscribedFilters.contains("fleet/vehicles/\(vehicle)/position")
        }
    }

    @Test(
        "G1, G3: beside a live member a worker serves only its own rides, keeps the others' control messages, and replays them when their owner leaves"
    )
    func servesOwnRidesAndReplays() async throws {
        let running = try await Self.besideLiveOther(interval: 0.3)
        let broker = running.broker
        let members = ["w-mem", "w-other"]
        let mine = Self.ride(ownedBy: "w-mem", among: members, prefix: "r-mine")
        let theirs = Self.ride(ownedBy: "w-other", among: members, prefix: "r-theirs")
        broker.publish("rides/\(mine)/start", booking(ride: mine, vehicle: nil))
        broker.publish("rides/\(theirs)/start", booking(ride: theirs, vehicle: nil))
        broker.publish("rides/\(theirs)/assign", #"{"vehicleId":"v-9"}"#)
        try await running.waitFor("statuses of its own ride") { running.statuses(mine).count >= 3 }
        #expect(running.statuses(theirs).isEmpty, "G1: the other member's ride is not published here")
        #expect(!broker.subscribedFilters.contains("fleet/vehicles/v-9/position"), "L3, G1: nor its vehicle")

        // The other member dies (its will): its ride arrives here with the start and the assign kept for it.
        broker.publish("ridestatus/workers/w-other", Self.presence("offline", incarnation: 1), retain: true)
        try await running.waitFor("the replayed ride") { running.statuses(theirs).count >= 2 }
        try await running.waitFor("the assigned vehicle subscribed (the assign replayed after the start)") {
            broker.subscribedFilters.contains("fleet/vehicles/v-9/position")
        }
        let owned = broker.published.filter { $0.topic == "rides/\(theirs)/status" }
        #expect(owned.allSatisfy { $0.properties.userProperties.contains { $0 == ("worker", "w-mem") } })
        await running.stop()
    }

    @Test(
        "A3, G1, G3: a vehicle's driver event is routed by the ride in its payload: kept for another member's ride, replayed when it arrives; an unreadable one refused once, by the vehicle's bucket's owner"
    )
    func vehicleEventsRoutedByRide() async throws {
        let running = try await Self.besideLiveOther(interval: 0.3)
        let broker = running.broker
        let members = ["w-mem", "w-other"]
        let theirs = Self.ride(ownedBy: "w-other", among: members, prefix: "r-a3")
        broker.publish("rides/\(theirs)/start", booking(ride: theirs, vehicle: "v-9"))
        broker.publish("fleet/vehicles/v-9/event", #"{"rideIdentifier":"\#(theirs)","type":"arrivedAtPickup"}"#)
        // Unreadable events (no ride to route by), from a vehicle whose bucket each member owns.
        let ownership = Ownership(members: members)
        let vehicles = (0...).lazy.map { "v-x\($0)" }
        let mineVehicle = vehicles.first { ownership.owner(ofRide: $0) == "w-mem" }!
        let theirVehicle = vehicles.first { ownership.owner(ofRide: $0) == "w-other" }!
        broker.publish("fleet/vehicles/\(mineVehicle)/event", #"{"type":"arrivedAtPickup"}"#)
        broker.publish("fleet/vehicles/\(theirVehicle)/event", #"{"type":"arrivedAtPickup"}"#)
        let letters = {
            broker.published.filter { $0.topic == "ridestatus/deadletter" }.map {
                String(decoding: $0.payload, as: UTF8.self)
            }
        }
        try await running.waitFor("the unreadable event of its vehicle's bucket refused") {
            letters().contains { $0.contains("fleet/vehicles/\(mineVehicle)/event") }
        }
        try await running.handled()
        #expect(letters().count == 1, "once in the group, not by every member: \(letters())")
        #expect(letters().first?.contains(#""reason":"missingField""#) == true)
        #expect(running.statuses(theirs).isEmpty, "G1: the other member's ride is not published here")

        // The other member dies: its ride arrives here, and the vehicle's event kept for it is replayed after the
        // start: the ride reaches pickup (P3) with no dead letter.
        broker.publish("ridestatus/workers/w-other", Self.presence("offline", incarnation: 1), retain: true)
        try await running.waitFor("the kept vehicle event replayed (P3)") {
            running.statuses(theirs).contains { $0.phase == "pickup" }
        }
        // The other member never refused the unreadable event of its vehicle's bucket (it is a presence here, not a
        // worker): that bucket is this worker's now, so the kept event is refused here, once. The vehicle's event
        // for the ride was the assigned vehicle's: no dead letter.
        try await running.waitFor("the kept unreadable event refused by its bucket's new owner") {
            letters().contains { $0.contains("fleet/vehicles/\(theirVehicle)/event") }
        }
        #expect(letters().count == 2, "\(letters())")
        #expect(!letters().contains { $0.contains("v-9") }, "\(letters())")
        await running.stop()
    }

    @Test("G4: a state written under a newer epoch by another worker stops this worker publishing the ride at once")
    func fencedByNewerEpoch() async throws {
        let running = try Running(interval: 0.2, clock: ManualClock())
        try await running.ready()
        running.broker.publish("rides/r-f/start", booking(ride: "r-f", vehicle: nil))
        let topic = RideTopics().state(ride: "r-f")
        try await running.waitFor("the state") { running.broker.retained(topic) != nil }
        func retained() -> String { String(decoding: running.broker.retained(topic)?.payload ?? [], as: UTF8.self) }
        let own = retained()
        #expect(own.contains(#""epoch":1"#), "a ride's first owner gives it epoch 1 (G2)")
        // A write that is not a newer owner's (here a forged epoch 0) is undone (A2).
        let forged = own.replacingOccurrences(of: #""epoch":1"#, with: #""epoch":0"#)
        running.broker.publish(topic, forged, retain: true)
        try await running.waitFor("the forged write undone") {
            retained() != forged && retained().contains(#""epoch":1"#)
        }
        let newer = retained().replacingOccurrences(of: #""epoch":1"#, with: #""epoch":2"#)
        running.broker.publish(topic, newer, retain: true)
        try await running.handled()
        let count = running.statuses("r-f").count
        try await running.advance(.seconds(1))
        #expect(running.statuses("r-f").count == count, "G4: no status in 5 intervals after the newer epoch was seen")
        #expect(retained() == newer, "the new owner's state stays")
        await running.stop()
    }

    @Test("G3, G4: a fenced ride that ended meanwhile (its state deleted) stays ended when its bucket comes back")
    func fencedThenEnded() async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(
            prefix: "r-end", vehicle: "v-e", clock: ManualClock())
        let broker = running.broker
        broker.publish(topic, try Self.takenOver(broker, topic: topic), retain: true)
        try await running.waitFor("the ride fenced off (G4)") {
            !broker.subscribedFilters.contains("fleet/vehicles/v-e/position")
        }
        // w-other stopped the ride (its state deleted), then released the bucket.
        broker.publish(topic, "", retain: true)
        broker.publish(
            "ridestatus/workers/w-other/released", #"{"buckets":[\#(Ownership.bucket(of: mine))],"incarnation":1}"#)
        // A read again would go through a load's marker, a round trip with nothing to observe when it does not
        // happen: a second of the worker's time, its cadence (0.2 s) and handover ticks run through.
        try await running.advance(.seconds(1))
        #expect(!running.statuses(mine).contains { ($0.sequence ?? 0) > 500 }, "not served again")
        #expect(broker.retained(topic) == nil, "and no state written for it")
        await running.stop()
    }

    @Test("G3, G4: a second ride of the bucket fenced off after the read again ended is read again for itself")
    func lateSecondFence() async throws {
        let (running, first, topic) = try await Self.ownRideBesideOther(prefix: "r-one", vehicle: "v-1")
        let broker = running.broker
        let bucket = Ownership.bucket(of: first)
        let second = (0...).lazy.map { "r-two-\($0)" }.first { Ownership.bucket(of: $0) == bucket }!
        broker.publish("rides/\(second)/start", booking(ride: second, vehicle: "v-2"))
        let secondTopic = RideTopics().state(ride: second)
        try await running.waitFor("its state") { broker.retained(secondTopic) != nil }
        broker.publish(topic, try Self.takenOver(broker, topic: topic), retain: true)
        broker.publish("ridestatus/workers/w-other/released", #"{"buckets":[\#(bucket)],"incarnation":1}"#)
        try await Self.expectServedAgain(first, vehicle: "v-1", running: running)
        #expect(!running.statuses(second).contains { ($0.sequence ?? 0) > 500 }, "still held, still its own")
        // The fence of the second ride arrives late (another subscription): the release is still remembered.
        broker.publish(secondTopic, try Self.takenOver(broker, topic: secondTopic), retain: true)
        try await Self.expectServedAgain(second, vehicle: "v-2", running: running)
        await running.stop()
    }

    @Test(
        "G3, G4, C5: a ride fenced off by a worker whose view lacked this one is served again when that worker releases its bucket, whichever comes first, above what was seen even when the retained copy lags",
        arguments: ["fence first", "notice first", "retained copy lagging"])
    func fencedThenReleasedBack(order: String) async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(prefix: "r-back", vehicle: "v-b")
        let broker = running.broker
        // w-other, seeing w-mem gone for a while (this worker never saw its own will), took the ride over under
        // epoch 2 far above (ceiling 500); seeing w-mem again, it released the ride's bucket back.
        let taken = try Self.takenOver(broker, topic: topic)
        let notice = #"{"buckets":[\#(Ownership.bucket(of: mine))],"incarnation":1}"#
        if order == "notice first" {
            // The notice and the state travel on different subscriptions: a clustered broker may swap them.
            broker.publish("ridestatus/workers/w-other/released", notice)
            broker.publish(topic, taken, retain: true)
        } else {
            // A NATS node whose retained copy lags delivers w-other's write live but answers the read again with
            // this worker's own older state: the ride still continues above what was seen.
            broker.publish(topic, taken, retain: order != "retained copy lagging")
            try await running.waitFor("the ride fenced off (G4)") {
                !broker.subscribedFilters.contains("fleet/vehicles/v-b/position")
            }
            broker.publish("ridestatus/workers/w-other/released", notice)
        }
        try await Self.expectServedAgain(mine, vehicle: "v-b", running: running)
        await running.stop()
    }

    @Test(
        "C5, G3: two workers took a ride over from the same read under one epoch; when the other releases it, its floor lifts this worker's numbering above the other's at once, and the ride stays served here"
    )
    func sameEpochTakerLiftedByTheOthersFloor() async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(prefix: "r-lift", vehicle: "v-l")
        let broker = running.broker
        try await running.waitFor("a few statuses") { running.statuses(mine).count >= 3 }
        let own = String(decoding: try #require(broker.retained(topic)).payload, as: UTF8.self)
        let epoch = try #require(try JSONParser.parse(Array(own.utf8))["epoch"]?.doubleValue)
        // w-other served the ride too, under the same epoch, up to 500 (its views split from this worker's); now
        // that they agree, it releases the bucket with its floor, as its last state and notice say.
        let bucket = Ownership.bucket(of: mine)
        broker.publish(
            "ridestatus/workers/w-other/released",
            #"{"buckets":[\#(bucket)],"incarnation":1,"floors":[[\#(bucket),\#(Int(epoch)),500]]}"#)
        try await running.waitFor("the next status above the other's 500") {
            running.statuses(mine).contains { ($0.sequence ?? 0) > 500 }
        }
        let sequences = running.statuses(mine).compactMap(\.sequence)
        let lifted = try #require(sequences.firstIndex { $0 > 500 })
        #expect(sequences[lifted] == 501, "the first status after the lift: \(sequences.suffix(4))")
        #expect(sequences[..<lifted].allSatisfy { $0 < 100 }, "\(sequences)")
        // Its state, written before that status, reserves above it under the same epoch: no fencing, no new owner.
        try await running.waitFor("the state reserving above 501") {
            Self.retainedCeiling(broker, topic).map { $0 >= 501 } ?? false
        }
        let state = try JSONParser.parse(try #require(broker.retained(topic)).payload)
        #expect(state["epoch"]?.doubleValue == epoch)
        try await Self.expectGoingOnAbove(500, ride: mine, vehicle: "v-l", running: running)
        await running.stop()
    }

    @Test(
        "C5, G3: another worker's write of a ride held here, under its epoch and above its copy, is a second taker's reservation (views split): the ride numbers on above its ceiling, nothing rewritten, and stays served here when that worker dies with no notice (-9)"
    )
    func sameEpochWriteLiftsTheHolder() async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(prefix: "r-sw", vehicle: "v-sw")
        let broker = running.broker
        let (own, ceiling, epoch) = try await Self.ownState(running, ride: mine, topic: topic)
        // w-other took the ride over from the same read (its view lacked this worker) and reserved up to 500.
        let foreign = try Self.reserving(own, from: ceiling, to: 500)
        let before = broker.published.count
        broker.publish(topic, foreign, retain: true)
        try await running.waitFor("the next status above its 500") {
            running.statuses(mine).contains { ($0.sequence ?? 0) > 500 }
        }
        let sequences = running.statuses(mine).compactMap(\.sequence)
        let lifted = try #require(sequences.firstIndex { $0 > 500 })
        #expect(sequences[lifted] == 501, "\(sequences.suffix(4))")
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "C5: \(sequences)")
        // No rewrite of the copy below the other's (A2 would have written this worker's own copy back, its ceiling
        // the one read above): each write of its own since is a reservation, above that ceiling (one may have raced
        // the other's write at the cadence), and the one before 501 reserves above 501, all under the same epoch.
        let writes = broker.published[before...].filter {
            $0.topic == topic && $0.properties.userProperties.contains { $0 == ("worker", "w-mem") }
        }.compactMap { try? JSONParser.parse($0.payload) }
        let ceilings = writes.compactMap { $0["sequenceCeiling"]?.doubleValue }
        #expect(!ceilings.isEmpty && ceilings.allSatisfy { $0 > Double(ceiling) }, "no rewrite: \(ceilings)")
        #expect(ceilings.contains { $0 > 501 }, "\(ceilings)")
        #expect(writes.allSatisfy { $0["epoch"]?.doubleValue == epoch }, "no fencing, no new owner")
        // w-other is killed with -9: no notice. This worker goes on above all it could have shown.
        broker.publish("ridestatus/workers/w-other", Self.presence("offline", incarnation: 1), retain: true)
        try await Self.expectGoingOnAbove(500, ride: mine, vehicle: "v-sw", running: running)
        await running.stop()
    }

    @Test(
        "A2, C5: a write of a held ride under its epoch reserving past half the numbers is a forgery, written over; the ride numbers on as before"
    )
    func implausibleCeilingWrittenOver() async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(prefix: "r-fg", vehicle: "v-fg")
        let broker = running.broker
        let (own, ceiling, _) = try await Self.ownState(running, ride: mine, topic: topic)
        let forged = try Self.reserving(own, from: ceiling, to: 9_007_199_254_740_000)
        broker.publish(topic, forged, retain: true)
        try await running.waitFor("its own state written back") {
            Self.retainedCeiling(broker, topic).map { $0 < 1000 } ?? false
        }
        let count = running.statuses(mine).count
        try await running.waitFor("two more statuses") { running.statuses(mine).count >= count + 2 }
        let sequences = running.statuses(mine).compactMap(\.sequence)
        #expect(sequences.allSatisfy { $0 < 1000 }, "not lifted: \(sequences)")
        await running.stop()
    }

    @Test(
        "C5, G3, G4: rides lifted by a notice that came before the states that fence them continue, served again, above what this worker had reserved, not only above the fencing worker's copy",
        arguments: [true, false])
    func liftedThenFenced(readsStatuses: Bool) async throws {
        // Without the retained statuses' read (NATS, or worker.takeoverReadsStatuses off) only what this worker
        // reserved tells the second ride's serve how far it had gone; with it, its last status tells too.
        let (running, first, firstTopic) = try await Self.ownRideBesideOther(prefix: "r-lf", vehicle: "v-f1") {
            $0.takeoverReadsStatuses = readsStatuses
        }
        let broker = running.broker
        let bucket = Ownership.bucket(of: first)
        let second = (0...).lazy.map { "r-lg-\($0)" }.first { Ownership.bucket(of: $0) == bucket }!
        broker.publish("rides/\(second)/start", booking(ride: second, vehicle: "v-f2"))
        let secondTopic = RideTopics().state(ride: second)
        try await running.waitFor("its state") { broker.retained(secondTopic) != nil }
        // w-other took both rides over under epoch 2 (ceiling 500) while its view lacked this worker, and now
        // releases their bucket: its notice, with the bucket's floor of 5000, comes before its states.
        let copies = [
            first: try Self.takenOver(broker, topic: firstTopic),
            second: try Self.takenOver(broker, topic: secondTopic),
        ]
        broker.publish(
            "ridestatus/workers/w-other/released",
            #"{"buckets":[\#(bucket)],"incarnation":1,"floors":[[\#(bucket),1,5000]]}"#)
        try await running.waitFor("both lifted above 5000") {
            [first, second].allSatisfy { ride in running.statuses(ride).contains { ($0.sequence ?? 0) > 5000 } }
        }
        func epochs(_ ride: String) -> [String] {
            broker.published.filter { $0.topic == "rides/\(ride)/status" && !$0.payload.isEmpty }.compactMap {
                $0.properties.userProperties.first { $0.0 == "epoch" }?.1
            }
        }
        // The first ride's state fences it, and it is served again (the bucket's floor still heard); the second's
        // comes after that serve used the floor up: only what this worker reserved keeps it above 5000.
        broker.publish(firstTopic, try #require(copies[first]), retain: true)
        try await running.waitFor("the first served again under epoch 3") { epochs(first).contains("3") }
        broker.publish(secondTopic, try #require(copies[second]), retain: true)
        try await running.waitFor("the second served again under epoch 3") { epochs(second).contains("3") }
        try await running.waitFor("a second status of each") {
            epochs(first).filter { $0 == "3" }.count >= 2 && epochs(second).filter { $0 == "3" }.count >= 2
        }
        for ride in [first, second] {
            let sequences = running.statuses(ride).compactMap(\.sequence)
            #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "C5, \(ride): \(sequences)")
        }
        await running.stop()
    }

    @Test(
        "G3, G4: a worker declared dead while cut off (its own will) drops its rides and gets them back by the handover, above the new owner's"
    )
    func declaredDeadRejoins() async throws {
        let (running, mine, topic) = try await Self.ownRideBesideOther(prefix: "r-mine", vehicle: "v-m")
        let broker = running.broker
        // Cut off: the broker publishes its will; w-other takes the ride over and writes it under epoch 2,
        // far above (its ceiling 500).
        running.transport.drop()
        broker.publish("ridestatus/workers/w-mem", Self.presence("offline", incarnation: 1), retain: true)
        let taken = try Self.takenOver(broker, topic: topic)
        broker.publish(topic, taken, retain: true)
        running.transport.reconnect()
        try await running.waitFor("the ride dropped and its vehicle unsubscribed") {
            !broker.subscribedFilters.contains("fleet/vehicles/v-m/position")
        }
        // w-other sees the new birth and releases every bucket that is w-mem's again.
        let buckets = Ownership(members: ["w-mem", "w-other"]).buckets(of: "w-mem")
        broker.publish(
            "ridestatus/workers/w-other/released",
            #"{"buckets":[\#(buckets.map(String.init).joined(separator: ","))],"incarnation":1}"#)
        try await Self.expectServedAgain(mine, vehicle: "v-m", running: running)
        await running.stop()
    }

    @Test("G1: a worker whose clock is behind the incarnation it announced before reconnects above it")
    func clockBehind() async throws {
        let broker = InMemoryBroker()
        // Its presence from a run when the clock was ahead.
        broker.publish("ridestatus/workers/w-mem", Self.presence("offline", incarnation: 5_000), retain: true)
        let running = try Running(interval: 0.5, broker: broker)
        try await running.ready()
        try await running.waitFor("an incarnation above the announced one") {
            running.transport.incarnation > 5_000
                && (try? JSONParser.parse(broker.retained("ridestatus/workers/w-mem")?.payload ?? []))?[
                    "incarnation"]?.doubleValue.map { $0 > 5_000 } == true
        }
        let birth = try JSONParser.parse(try #require(broker.retained("ridestatus/workers/w-mem")).payload)
        #expect(birth["state"]?.stringValue == "online", "its birth, which the group now takes for the newest")
        await running.stop()
    }

    @Test("G1: a retained 'online' whose will was lost (a ghost, heard from an hour ago) owns nothing")
    func ghostOwnsNothing() async throws {
        let broker = InMemoryBroker()
        let hourAgo = Timestamps.format(Date().addingTimeInterval(-3600))
        broker.publish(
            "ridestatus/workers/w-ghost",
            #"{"state":"online","since":"\#(hourAgo)","version":"old","incarnation":1,"at":"\#(hourAgo)"}"#,
            retain: true)
        let running = try Running(interval: 0.3, broker: broker)
        try await running.ready()
        let ghosts = Self.ride(ownedBy: "w-ghost", among: ["w-ghost", "w-mem"], prefix: "r-ghost")
        broker.publish("rides/\(ghosts)/start", booking(ride: ghosts, vehicle: nil))
        try await running.waitFor("the ride the ghost would own, served here") { running.statuses(ghosts).count >= 2 }
        await running.stop()
    }

    @Test(
        "G3, V5: a ride taken over from a dead member starts from the location its last status showed, not its state's")
    func takeoverReadsRetainedStatus() async throws {
        // w-other served the ride: its state written with the first located status, then three statuses with the
        // car further on and no state write (within the block). Then w-other dies without releasing anything.
        let members = ["w-mem", "w-other"]
        let ride = Self.ride(ownedBy: "w-other", among: members, prefix: "r-taken")
        var engine = RideEngine()
        let start = Date().addingTimeInterval(-60)
        var state: Ride?
        var last: RideStatus?
        func keep(_ actions: [RideAction]) {
            for case .publish(let status, let written, _) in actions {
                if let written { state = written }
                last = status
            }
        }
        keep(
            engine.receive(
                topic: "rides/\(ride)/start", payload: Array(booking(ride: ride, vehicle: "v-t").utf8), now: start))
        for step in 1...4 {
            let time = start.addingTimeInterval(5 * Double(step))
            let place = pickupPoint.moved(metres: 2000 - 150 * Double(step), bearing: 90)
            keep(
                engine.receive(
                    topic: "fleet/vehicles/v-t/position", payload: Array(fix("v-t", place, at: time, speed: 8).utf8),
                    now: time))
            keep(engine.tick(now: time.addingTimeInterval(0.1)))
        }
        let written = try #require(state)
        let shown = try #require(last?.vehicle.location)
        #expect(written.location != nil && written.location?.coordinate != shown.coordinate, "the state lags")

        let broker = InMemoryBroker()
        broker.publish("ridestatus/workers/w-other", Self.presence("online", incarnation: 1), retain: true)
        broker.publish(RideTopics().state(ride: ride), written.durableState(), retain: true)
        broker.publish("rides/\(ride)/status", try #require(last).encoded(), retain: true)
        let running = try Running(interval: 0.3, broker: broker)
        try await running.ready()
        #expect(running.statuses(ride).count == 1, "G1: only the retained status; the ride is w-other's")
        broker.publish("ridestatus/workers/w-other", Self.presence("offline", incarnation: 1), retain: true)
        try await running.waitFor("the ride taken over") { running.statuses(ride).count >= 2 }
        let first = running.statuses(ride)[1]
        #expect(first["vehicle"]?["location"]?["latitude"]?.doubleValue == shown.coordinate.latitude)
        #expect(first["vehicle"]?["location"]?["longitude"]?.doubleValue == shown.coordinate.longitude)
        #expect((first.sequence ?? 0) > (last?.sequence ?? .max), "C5 across owners")
        try await running.waitFor("the status subscription dropped after the read") {
            !broker.subscribedFilters.contains("rides/\(ride)/status")
        }
        await running.stop()
    }
}
