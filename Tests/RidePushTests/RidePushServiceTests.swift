import Foundation
import Logging
import RidePush
import RidePushService
import RideStatusKit
import ServiceLifecycle
import Testing
import WorkerGroup

/// The service's inbox of statuses: while its task falls behind the broker, a ride's older status is replaced
/// by the newer one rather than queued, so what waits is bounded by the rides subscribed ("while APNs is
/// slow or down, only the newest state per activity waits, so memory stays bounded", here for what comes in).
@Suite("ride-push service: what waits for its task")
struct RidePushServiceTests {
    func service() -> RidePushService {
        RidePushService(
            member: "push-test", settings: .init(),
            senders: .init(apns: { _ in .delivered }, fcm: nil, renew: { _ in }),
            broker: .init(subscribe: { _ in }, unsubscribe: { _ in }, publish: { _, _, _ in }),
            now: { Date() }, logger: Logger(label: "push-test"))
    }

    @Test(
        "A burst of one ride's statuses leaves one waiting, the newest; other rides keep their own; the task takes them"
    )
    func newestStatusPerRide() async throws {
        let service = service()
        for index in 0..<1000 { service.received(topic: "rides/r1/status", payload: Array("\(index)".utf8)) }
        service.received(topic: "rides/r2/status", payload: Array("r2".utf8))
        #expect(service.statusWaiting(topic: "rides/r1/status") == Array("999".utf8))
        #expect(service.statusWaiting(topic: "rides/r2/status") == Array("r2".utf8))
        // A stop neither replaces the waiting status (the completion its `end` shows) nor is replaced: it queues
        // behind it, and what comes after the stop cannot take the waiting status's place either.
        service.received(topic: "rides/r2/status", payload: [])
        service.received(topic: "rides/r2/status", payload: Array("after the stop".utf8))
        #expect(service.statusWaiting(topic: "rides/r2/status") == Array("r2".utf8))
        service.received(topic: "rides/r3/status", payload: [])  // a stop with nothing waiting: in order, not kept
        #expect(service.statusWaiting(topic: "rides/r3/status") == nil)
        // A presence or a record is not a status: it keeps its place in the order of events.
        service.received(topic: "ridestatus/push/members/other", payload: [])
        #expect(service.statusWaiting(topic: "ridestatus/push/members/other") == nil)

        // Once the task runs, it takes what waits (each undecodable here: counted and logged, not pushed).
        let topics = ["rides/r1/status", "rides/r2/status"]
        let running = Task {
            try await ServiceGroup(configuration: .init(services: service.services, logger: Logger(label: "push-test")))
                .run()
        }
        defer { running.cancel() }
        try await Self.waitUntil { topics.allSatisfy { service.statusWaiting(topic: $0) == nil } }
        // A status that comes after the task took the last one waits again, on its own, and is taken.
        service.received(topic: "rides/r1/status", payload: Array("1000".utf8))
        try await Self.waitUntil { service.statusWaiting(topic: "rides/r1/status") == nil }
    }

    /// Polls `condition` until it holds, failing after 60 s: in a full parallel run on 2 cores other suites hold the cooperative pool for seconds (16.9 s once).
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("the service's task did not take the waiting statuses within 60 s")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
