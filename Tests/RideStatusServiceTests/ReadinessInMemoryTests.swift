import Foundation
import MQTTClient
import RideDomain
import RideStatusService
import RideStatusTesting
import Testing

import struct RideStatusKit.RideTopics

/// L8 and L6 on the in-memory broker, whose transport can hold SUBACKs back: the retained `online` and
/// `/readyz` come only once the broker has taken every control and request subscription, on the first
/// connection and on every later one, so a booking published the instant `online` appears is never lost.
@Suite("Readiness: online means subscribed (L8, L6)")
struct ReadinessInMemoryTests {
    typealias Running = ServiceInMemoryTests.Running

    static let presenceTopic = "ridestatus/workers/w-mem"
    static let controls = RideTopics().controlFilters + ["rides/+/status/get", "ride-options/request"]

    /// The `online` presences the worker published so far, by incarnation.
    func births(_ running: Running) -> [Double] {
        running.broker.published.filter { $0.topic == Self.presenceTopic && !$0.payload.isEmpty }.compactMap {
            guard let value = try? JSONParser.parse($0.payload), value["state"]?.stringValue == "online" else {
                return nil
            }
            return value["incarnation"]?.doubleValue
        }
    }

    /// Releases the SUBACKs in flight, round after round, until `filter` is in flight (or `limit` rounds).
    func release(until filter: String, _ running: Running) async throws {
        try await running.waitFor("\(filter) in flight") {
            if running.transport.filtersInFlight.contains(filter) { return true }
            running.transport.releaseAcknowledgements()
            return false
        }
    }

    @Test("L8, L6: with SUBACKs held, a drop mid-recovery and a clean-session reconnect, online waits for them")
    func onlineWaitsForSubscriptions() async throws {
        let clock = ManualClock()
        let running = try Running(clock: clock, prepare: { $0.holdAcknowledgements() })
        // Recovery goes on as its own SUBACKs are released, until the control subscriptions are in flight.
        try await release(until: "rides/+/start", running)
        #expect(births(running).isEmpty, "L8: no online while the control subscriptions are in flight")
        #expect(!running.worker.isReady)
        // The connection drops with those SUBSCRIBE packets in flight, and the broker forgets the session.
        running.transport.drop()
        running.transport.reconnect(cleanSession: true)
        try await running.waitFor("the restoration in flight") {
            Set(running.transport.filtersInFlight).isSuperset(of: Self.controls)
        }
        // A while, a heartbeat's interval (10 s) and more: still nothing announced, nothing ready.
        try await clock.advance(by: .seconds(11))
        #expect(births(running).isEmpty, "L8: no online before the restoration is acknowledged")
        #expect(!running.worker.isReady)
        running.transport.holdAcknowledgements(false)
        running.transport.releaseAcknowledgements()
        try await running.waitFor("online") { !births(running).isEmpty }
        // The instant online appears, the broker holds every control subscription: a booking is never lost.
        #expect(running.broker.subscribedFilters.isSuperset(of: Self.controls))
        running.broker.publish("rides/r-1/start", booking(ride: "r-1", vehicle: "v-1"))
        try await running.waitFor("the booking's status") { !running.statuses("r-1").isEmpty }
        #expect(births(running) == [2], "one birth, with the incarnation of the connection it is true for")
        try await running.ready()

        // A second clean-session reconnect with SUBACKs held: not ready, no new birth, until they are released.
        running.transport.holdAcknowledgements()
        running.transport.drop()
        running.transport.reconnect(cleanSession: true)
        try await running.waitFor("the restoration in flight") { !running.transport.filtersInFlight.isEmpty }
        // The worker hears of the drop through its event stream: /readyz turns false then, and stays false.
        try await running.waitFor("not ready") { !running.worker.isReady }
        try await clock.advance(by: .seconds(11))
        #expect(!running.worker.isReady, "L8: /readyz is false until this connection's subscriptions are back")
        #expect(births(running) == [2])
        running.transport.holdAcknowledgements(false)
        running.transport.releaseAcknowledgements()
        try await running.waitFor("online again") { births(running) == [2, 3] }
        running.broker.publish("rides/r-2/start", booking(ride: "r-2", vehicle: "v-2"))
        try await running.waitFor("the second booking's status") { !running.statuses("r-2").isEmpty }
        try await running.ready()
        await running.stop()
    }

    @Test("L8: a refused control subscription keeps the worker offline; it is tried again until acknowledged")
    func refusedControlIsRetried() async throws {
        let clock = ManualClock()
        let running = try Running(clock: clock, prepare: { $0.refuseSubscriptions(to: ["rides/+/start"]) })
        try await running.waitFor("the control subscriptions tried") {
            running.broker.subscribedFilters.contains("rides/+/stop")
        }
        // Retried after 0.25 s, then 0.5 s, 1 s, 2 s: refused each time.
        try await clock.advance(by: .seconds(4))
        #expect(running.transport.refusedSubscribeCount >= 4, "tried again while refused")
        #expect(births(running).isEmpty, "L8: not online while the broker refuses rides/+/start")
        #expect(!running.worker.isReady)
        running.transport.refuseSubscriptions(to: [])
        // The next retry, 4 s after the last (the pause doubles).
        try await clock.advance(by: .seconds(8))
        try await running.waitFor("online after the retry") { !births(running).isEmpty }
        #expect(running.broker.subscribedFilters.contains("rides/+/start"))
        running.broker.publish("rides/r-1/start", booking(ride: "r-1", vehicle: "v-1"))
        try await running.waitFor("the booking's status") { !running.statuses("r-1").isEmpty }

        // A restoration that refuses a control filter: offline on that connection until the retry succeeds.
        running.transport.refuseSubscriptions(to: ["rides/+/cancel"])
        running.transport.drop()
        running.transport.reconnect()
        // The worker hears of the drop through its event stream; then the retries, all refused.
        try await running.waitFor("not ready") { !running.worker.isReady }
        try await clock.advance(by: .seconds(4))
        #expect(births(running) == [1], "no birth for the connection that lacks rides/+/cancel")
        #expect(!running.worker.isReady)
        running.transport.refuseSubscriptions(to: [])
        try await clock.advance(by: .seconds(8))
        try await running.waitFor("online after the retry") { births(running) == [1, 2] }
        await running.stop()
    }
}
