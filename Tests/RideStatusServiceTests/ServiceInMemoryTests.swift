import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain
import RideStatusTesting
import ServiceLifecycle
import Synchronization
import Testing
import WorkerGroup

import struct RideStatusKit.RideTopics

@testable import RideStatusService

/// The service's own logic in process, on the in-memory broker: recovery, reconnects, the cadence's
/// wake-ups, A1, A2 and the goodbye. Fast and free of sockets, so it also runs under ThreadSanitizer.
@Suite("RideStatusService in memory")
struct ServiceInMemoryTests {
    /// A worker running in a `ServiceGroup` (connection first, as the executable does) on its own broker.
    struct Running {
        let broker: InMemoryBroker
        let transport: InMemoryTransport
        let worker: RideStatusService<InMemoryTransport>
        let group: ServiceGroup
        let task: Task<Void, any Error>
        /// The worker's clock when the test drives it (``advance(_:)``); real time otherwise.
        let clock: ManualClock?

        /// - Parameter prepare: runs on the worker's transport before the worker starts.
        /// - Parameter configure: changes the worker's settings before it starts.
        /// - Parameter clock: a manual clock for the worker's time: it moves only in ``advance(_:)`` and, a little
        ///   at each look, in ``waitFor(_:timeout:_:)``.
        init(
            interval: Double = 20, broker: InMemoryBroker = InMemoryBroker(), reportInterval: Duration = .seconds(1),
            clock: ManualClock? = nil, prepare: (InMemoryTransport) -> Void = { _ in },
            configure: (inout WorkerSettings) -> Void = { _ in }
        ) throws {
            self.clock = clock
            var settings = WorkerSettings()
            settings.workerID = "w-mem"
            settings.ride.updateInterval = interval
            configure(&settings)
            self.broker = broker
            transport = broker.transport()
            prepare(transport)
            worker = try RideStatusService(
                settings: settings, transport: transport, version: "test",
                logger: ProcessInfo.processInfo.environment["RUNNING_LOG"] == nil
                    ? Logger(label: "mem", factory: { _ in SwiftLogNoOpLogHandler() })
                    : Logger(label: "mem", factory: { StreamLogHandler.standardError(label: $0) }),
                reportInterval: reportInterval,
                time: clock?.workerTime ?? .system)
            group = ServiceGroup(
                configuration: .init(
                    services: [.init(service: worker.connection), .init(service: worker)],
                    logger: Logger(label: "group", factory: { _ in SwiftLogNoOpLogHandler() })))
            let group = self.group
            task = Task { try await group.run() }
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = try? await task.value
        }

        /// The statuses of `ride` published so far, decoded.
        func statuses(_ ride: String) -> [JSONValue] {
            broker.published.filter { $0.topic == "rides/\(ride)/status" && !$0.payload.isEmpty }.compactMap {
                try? JSONParser.parse($0.payload)
            }
        }

        /// Generous: these take milliseconds, but a machine busy with the end-to-end tests (which block threads of
        /// the cooperative pool in their synchronous waits) can hold a task back for seconds.
        func waitFor(_ what: String, timeout: Double = 30, _ condition: () -> Bool) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while !condition() {
                guard Date() < deadline else {
                    // What the worker was at, for a timeout that a loaded machine cannot explain.
                    let overview = worker.overview()
                    let state = worker.core.withLock { core in
                        "lifecycle \(core.lifecycle.state), view \(core.handover.machine.viewFormed), serving \(core.handover.machine.servingCount), arriving \(core.handover.machine.pendingCount), kept \(core.handover.recent.count), planned wake \(core.plannedWake)"
                    }
                    throw TimedOut(
                        what:
                            "\(what) (members \(overview.members), rides \(overview.activeRides), ready \(overview.ready); \(state); clock sleepers \(clock?.deadlines ?? []); last published \(broker.published.suffix(6).map(\.topic)))"
                    )
                }
                if let clock {
                    // The worker's time moves on a little at each look, about as fast as real time (a group's
                    // silence limit is 30 s: a test must not outrun it).
                    try await clock.advance(by: .milliseconds(5))
                    try await Task.sleep(for: .milliseconds(1))
                } else {
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
        }

        /// Moves the worker's manual clock on by `duration` (its cadence, heartbeat and handover ticks run at
        /// each of their times), after every message published so far is handled.
        /// - Parameter strict: wait at each stop until every task woken sleeps again, however long that takes
        ///   on a loaded machine (for tests whose loops always sleep again).
        func advance(_ duration: Duration, strict: Bool = false) async throws {
            guard let clock else { preconditionFailure("advance needs a Running made with a ManualClock") }
            try await handled()
            try await clock.advance(by: duration, settle: strict ? nil : .milliseconds(50))
        }

        /// Waits until every message published to the worker so far is handled: a quote request travels the
        /// same stream, in order, and is answered on its own response topic (A1) once the worker reaches it.
        func handled() async throws {
            let topic = "replies/probe/\(UUID().uuidString)"
            broker.publish(
                RideTopics().rideOptionsRequest, Array("{}".utf8),
                properties: MQTTProperties(responseTopic: topic, correlationData: [1]))
            let deadline = Date().addingTimeInterval(30)
            while !broker.published.contains(where: { $0.topic == topic }) {
                guard Date() < deadline else { throw TimedOut(what: "the worker reached the probe") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }

        func ready() async throws { try await waitFor("ready") { worker.isReady } }
    }

    @Test("L5, C5: a retained state restores; the next status continues its sequence; ready only after recovery")
    func recovery() async throws {
        // A ride's state as a worker wrote it: taken from the engine, sequence 41.
        var engine = RideEngine()
        let actions = engine.receive(
            topic: "rides/r-1/start", payload: Array(booking(ride: "r-1", vehicle: "v-1").utf8), now: Date())
        var state = try #require(
            actions.compactMap { if case .publish(_, let ride, _) = $0 { ride } else { nil } }.first)
        for _ in 0..<40 { _ = state.nextStatus(now: Date(), configuration: RideConfiguration()) }
        let broker = InMemoryBroker()
        broker.publish(RideTopics().state(ride: "r-1"), state.durableState(), retain: true)

        let running = try Running(broker: broker)
        try await running.ready()
        try await running.waitFor("the restored ride's status") { !running.statuses("r-1").isEmpty }
        #expect(running.statuses("r-1").first?["sequence"]?.doubleValue == 42)
        #expect(running.statuses("r-1").first?["phase"]?.stringValue == "confirmed")
        // L3: the restored ride's vehicle is followed: a fix 100 m out at 8 m/s makes it approachingPickup (P2).
        var time = Date().addingTimeInterval(-20)
        for _ in 0..<200 where running.statuses("r-1").last?["phase"]?.stringValue != "approachingPickup" {
            time = time.addingTimeInterval(0.1)
            broker.publish(
                "fleet/vehicles/v-1/position",
                fix("v-1", pickupPoint.moved(metres: 100, bearing: 90), at: time, speed: 8))
            try await running.handled()
        }
        #expect(running.statuses("r-1").last?["phase"]?.stringValue == "approachingPickup")
        await running.stop()
    }

    @Test("L5, C5: recovery reads the retained status too: the location and sequence since the last state write")
    func recoveryReadsRetainedStatus() async throws {
        // A ride as a worker left it: its state written with the first status, and again with the first located
        // one (V5, G3: reserving sequences up to 2 + 12 - 1 = 13), then three statuses without a state write, the
        // vehicle 300 m further on in the last one.
        var engine = RideEngine()
        let start = Date().addingTimeInterval(-60)
        var state: [UInt8] = []
        var status: [UInt8] = []
        func keep(_ actions: [RideAction]) {
            for case .publish(let published, let ride, _) in actions {
                if let ride { state = ride.durableState() }
                status = published.encoded()
            }
        }
        keep(
            engine.receive(
                topic: "rides/r-1/start", payload: Array(booking(ride: "r-1", vehicle: "v-1").utf8), now: start))
        var stateWrites = engine.counters.statesWritten
        for step in 1...4 {
            if step == 2 {
                #expect(engine.counters.statesWritten == stateWrites + 1, "V5: the first located status writes")
                stateWrites = engine.counters.statesWritten
            }
            let time = start.addingTimeInterval(5 * Double(step))
            let place = pickupPoint.moved(metres: 2000 - 100 * Double(step), bearing: 90)
            keep(
                engine.receive(
                    topic: "fleet/vehicles/v-1/position", payload: Array(fix("v-1", place, at: time, speed: 8).utf8),
                    now: time))
            keep(engine.tick(now: time.addingTimeInterval(0.1)))
        }
        #expect(engine.ride("r-1")?.sequence == 5)
        #expect(engine.counters.statesWritten == stateWrites, "no state write within the block")
        let last = try #require(engine.ride("r-1")?.location)
        let broker = InMemoryBroker()
        broker.publish(RideTopics().state(ride: "r-1"), state, retain: true)
        broker.publish("rides/r-1/status", status, retain: true)

        let running = try Running(broker: broker)
        try await running.ready()
        // The first status on the topic is the retained one this test put there.
        try await running.waitFor("the restored ride's status") { running.statuses("r-1").count > 1 }
        let resumed = running.statuses("r-1")[1]
        // C5: above every sequence the state reserved (13), so above the retained status's too.
        #expect(resumed["sequence"]?.doubleValue == 14)
        // L5: the last location, from the retained status, not the older one in the state.
        #expect(resumed["vehicle"]?["location"]?["latitude"]?.doubleValue == last.coordinate.latitude)
        #expect(resumed["vehicle"]?["location"]?["longitude"]?.doubleValue == last.coordinate.longitude)
        // The worker reads statuses only while it recovers: its own (and later ones) do not come back to it.
        try await running.waitFor("the status subscription dropped") {
            !running.broker.subscribedFilters.contains("rides/+/status")
        }
        await running.stop()
    }

    @Test("C1, C5: a broker that takes nothing holds the cadence back, not memory; then each ride publishes its newest")
    func backpressure() async throws {
        let running = try Running(interval: 0.2, clock: ManualClock())
        try await running.ready()
        let rides = (1...20).map { "r-\($0)" }
        for ride in rides { running.broker.publish("rides/\(ride)/start", booking(ride: ride, vehicle: nil)) }
        try await running.waitFor("every ride's cadence") { rides.allSatisfy { running.statuses($0).count >= 3 } }
        // The broker falls behind: no room to publish. Many intervals pass; nothing is produced to wait anywhere.
        running.transport.setPublishRoom(0)
        try await running.advance(.milliseconds(300))
        // Rides' messages only: the presence heartbeat (G1, every 10 s) goes whatever the room, and under
        // ThreadSanitizer this test runs long enough for one to fall here (a CI run caught it).
        let presences = "\(RideTopics().serviceName)/workers/"
        func ridesPublished() -> Int {
            // Not the presences, nor the replies to the probes of ``Running/handled()``.
            running.broker.published.filter {
                !$0.topic.hasPrefix(presences) && !$0.topic.hasPrefix("replies/")
                    && $0.topic != RideTopics().rideOptionsRequest
            }.count
        }
        let before = ridesPublished()
        let statusesBefore = running.broker.published.filter { $0.topic.hasSuffix("/status") }.count
        try await running.advance(.seconds(1.5))
        #expect(ridesPublished() == before, "\(ridesPublished() - before) published")
        // A little room, all of it inside the reserve the cadence leaves to inputs: the cadence still waits,
        // and a phase change (C2) goes out at once.
        running.transport.setPublishRoom(RideStatusService<InMemoryTransport>.inputReserve / 2)
        running.broker.publish("rides/r-1/cancel", #"{"canceledBy":"user"}"#)
        try await running.waitFor("the cancellation") {
            running.statuses("r-1").last?["phase"]?.stringValue == "completed"
        }
        try await running.advance(.seconds(0.5))
        let statusesNow = running.broker.published.filter { $0.topic.hasSuffix("/status") }.count
        #expect(statusesNow == statusesBefore + 1, "the cancellation's status and no cadence")
        // No room at all: a new booking's first status waits as its ride, not as a message (its state too).
        running.transport.setPublishRoom(0)
        running.broker.publish("rides/r-21/start", booking(ride: "r-21", vehicle: nil))
        try await running.advance(.seconds(0.5))
        #expect(running.statuses("r-21").isEmpty)
        #expect(!running.broker.published.contains { $0.topic == RideTopics().state(ride: "r-21") })
        // Room again: every ride publishes, once, its newest status, in sequence order (C5); the booking
        // that waited writes its state before its first status.
        let counts = Dictionary(uniqueKeysWithValues: rides.map { ($0, running.statuses($0).count) })
        running.transport.setPublishRoom(.max)
        try await running.waitFor("every ride again") {
            rides.allSatisfy { running.statuses($0).count > counts[$0]! } && !running.statuses("r-21").isEmpty
        }
        let r21 = running.broker.published.map(\.topic).filter { $0.hasSuffix("/r-21") || $0.hasSuffix("/r-21/status") }
        #expect(r21.prefix(2) == [RideTopics().state(ride: "r-21"), "rides/r-21/status"], "\(r21)")
        for ride in rides {
            let sequences = running.statuses(ride).compactMap { $0["sequence"]?.doubleValue }
            #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "\(ride): \(sequences)")
        }
        await running.stop()
    }

    @Test("C4: after a drop and a reconnect every ride publishes at once, without a second recovery")
    func reconnect() async throws {
        let running = try Running(interval: 20)
        try await running.ready()
        for ride in ["r-1", "r-2"] { running.broker.publish("rides/\(ride)/start", booking(ride: ride, vehicle: nil)) }
        try await running.waitFor("two rides") {
            running.statuses("r-1").count == 1 && running.statuses("r-2").count == 1
        }
        running.transport.drop()
        running.transport.reconnect()
        // Long before the 20 s cadence: the reconnect itself publishes.
        try await running.waitFor("republished") {
            running.statuses("r-1").count == 2 && running.statuses("r-2").count == 2
        }
        #expect(running.statuses("r-1").map { $0["sequence"]?.doubleValue } == [1, 2])
        let markers = running.broker.published.filter { $0.topic == "ridestatus/workers/w-mem/recovery" }
        #expect(markers.count == 2, "one view marker, one recovery marker: a reconnect does not recover again")
        await running.stop()
    }

    @Test(
        "G5, C4: after a lapse nothing for the rides goes out until the lease marker is back; then every ride, a clear dropped at the lapse again, and online"
    )
    func leaseLapse() async throws {
        let running = try Running(interval: 20)
        try await running.ready()
        for ride in ["r-1", "r-2"] { running.broker.publish("rides/\(ride)/start", booking(ride: ride, vehicle: nil)) }
        try await running.waitFor("two rides") {
            running.statuses("r-1").count == 1 && running.statuses("r-2").count == 1
        }
        let lease = "ridestatus/workers/w-mem/lease"
        let presence = "ridestatus/workers/w-mem"
        // The lapse leaves the worker fenced; a stop waits in its session and is handled on the next connection
        // before the marker is back, so its clear is dropped by the fence.
        running.transport.lapseLease(passing: [lease, presence, "ridestatus/workers/w-mem/load"])
        try await running.waitFor("the lapse seen") { running.transport.isFenced && !running.transport.isConnected }
        running.broker.publish("rides/r-2/stop", "")
        let before = running.broker.published.count
        running.transport.reconnect()
        try await running.waitFor("confirmed and republished") {
            !running.transport.isFenced && running.statuses("r-1").count == 2
        }
        #expect(running.worker.core.withLock { $0.engine.ride("r-2") == nil }, "the stop was handled")
        let after = Array(running.broker.published.dropFirst(before))
        let marker = try #require(after.firstIndex { $0.topic == lease && !$0.payload.isEmpty }, "a lease marker")
        let republished = try #require(after.firstIndex { $0.topic == "rides/r-1/status" && !$0.payload.isEmpty })
        #expect(marker < republished, "G5: the marker went out before anything for the rides")
        #expect(
            after.contains { $0.topic == "rides/r-2/status" && $0.payload.isEmpty && $0.retain },
            "the clear dropped at the lapse is sent again at the confirmation")
        try await running.waitFor("online again") {
            running.broker.published.last { $0.topic == presence }.map { String(decoding: $0.payload, as: UTF8.self) }?
                .contains("online") == true
        }
        #expect(running.statuses("r-1").map { $0["sequence"]?.doubleValue } == [1, 2])
        await running.stop()
    }

    @Test("A2: a ride state deleted or overwritten by another client is written again at once")
    func stateRewritten() async throws {
        let running = try Running()
        try await running.ready()
        running.broker.publish("rides/r-1/start", booking(ride: "r-1", vehicle: nil))
        try await running.waitFor("the state") { running.broker.retained(RideTopics().state(ride: "r-1")) != nil }
        let own = try #require(running.broker.retained(RideTopics().state(ride: "r-1"))?.payload)
        running.broker.publish(RideTopics().state(ride: "r-1"), [], retain: true)
        try await running.waitFor("the state written again") {
            running.broker.retained(RideTopics().state(ride: "r-1"))?.payload == own
        }
        running.broker.publish(RideTopics().state(ride: "r-1"), #"{"forged":true}"#, retain: true)
        try await running.waitFor("the forgery replaced") {
            running.broker.retained(RideTopics().state(ride: "r-1"))?.payload == own
        }
        await running.stop()
    }

    @Test("C1, C6: the cadence sleeps until a ride is due and wakes for one that starts while it sleeps")
    func cadenceWakes() async throws {
        // Metrics reports 60 s apart: the only thing that can wake the idle loop in time is the start itself.
        let clock = ManualClock()
        let running = try Running(interval: 0.3, reportInterval: .seconds(60), clock: clock)
        try await running.ready()
        // The loop asleep with nothing due, until its next report.
        try await running.advance(.seconds(1))
        #expect(clock.deadlines.contains { $0 >= .seconds(59) }, "\(clock.deadlines)")
        running.broker.publish("rides/r-1/start", booking(ride: "r-1", vehicle: nil))
        // Strict: on a loaded machine the woken loop may take longer than the clock's usual 50 ms pause to
        // sleep again, and the clock must not run ahead of it.
        try await running.advance(.seconds(1.5), strict: true)
        let times = running.statuses("r-1").compactMap { $0["issuedAt"]?.stringValue.flatMap(Timestamps.parse) }
        let gaps = zip(times.dropFirst(), times).map { $0.timeIntervalSince($1) }
        // A loop that missed the wake-up would sleep until its next report, a minute away: no second status.
        // On the manual clock the cadence keeps C1 to the millisecond (the times are the clock's, written in
        // milliseconds: a gap may round to 0.301 s).
        #expect(times.count >= 5, "\(times.count) statuses")
        #expect(gaps.allSatisfy { $0 <= 0.3 + 0.002 }, "gaps \(gaps)")
        await running.stop()
    }

    @Test("A1, 3.5: a reply asked for outside replies/ is not sent; a dead letter says why")
    func replyTopicRefused() async throws {
        let running = try Running()
        try await running.ready()
        running.broker.publish(
            "ride-options/request", Array(#"{"pickupLocation":{"latitude":52.52,"longitude":13.41}}"#.utf8),
            properties: MQTTProperties(responseTopic: "rides/r-9/status", correlationData: [1]))
        try await running.waitFor("a dead letter") {
            running.broker.published.contains { $0.topic == "ridestatus/deadletter" }
        }
        #expect(!running.broker.published.contains { $0.topic == "rides/r-9/status" })
        let letter = try JSONParser.parse(
            try #require(running.broker.published.first { $0.topic == "ridestatus/deadletter" }).payload)
        #expect(letter["reason"]?.stringValue == "invalidField")
        #expect(letter["detail"]?.stringValue?.contains("A1") == true)
        await running.stop()
    }

    @Test("L8: a graceful shutdown leaves presence offline, retained, and the worker stops")
    func goodbye() async throws {
        let running = try Running()
        try await running.ready()
        let online = try #require(running.broker.retained("ridestatus/workers/w-mem"))
        #expect(String(decoding: online.payload, as: UTF8.self).contains(#""online""#))
        await running.stop()
        let offline = try #require(running.broker.retained("ridestatus/workers/w-mem"))
        #expect(String(decoding: offline.payload, as: UTF8.self).contains(#""offline""#))
        #expect(!running.transport.isConnected)
    }
}
