import Foundation
import Locking
import Logging
import RidePush
import RideStatusKit
import Testing
import WorkerGroup

@testable import RidePushService

/// The core's wiring, alone: events in, and what comes out on the streams the small services read, and the replies
/// a registration gets. The machines are tested alone in PushMachinesTests; this checks that the core joins them.
@Suite("ride-push's core: events in, broker writes, changes, pushes and replies out")
struct PushCoreTests {
    typealias Refusal = RidePushService.RegistrationRefusal

    final class Replies: Sendable {
        let answers = Locked([Result<Bool, Refusal>]())
        var reply: @Sendable (Result<Bool, Refusal>) -> Void {
            { answer in self.answers.withLock { $0.append(answer) } }
        }
        var last: Result<Bool, Refusal>? { answers.withLock { $0.last } }
    }

    @Test("G1 and registrations: refusals while off; announced once subscribed; a stored record is served, pushed")
    func wiring() async throws {
        let (input, inputContinuation) = AsyncStream.makeStream(of: RidePushService.Event.self)
        let (changes, changeContinuation) = AsyncStream.makeStream(of: BrokerChange.self)
        let (writes, writeContinuation) = AsyncStream.makeStream(of: BrokerWrite.self)
        let (deliveries, deliveryContinuation) = AsyncStream.makeStream(of: Delivery.self)
        var inputs = input.makeAsyncIterator()
        var changed = changes.makeAsyncIterator()
        var written = writes.makeAsyncIterator()
        var delivered = deliveries.makeAsyncIterator()
        var groupSettings = PushGroup.Settings()
        groupSettings.startDelay = 0
        var settings = RidePushService.Settings()
        settings.group = groupSettings
        let topics = settings.topics
        var state = PushCore.State(
            member: "p1", settings: settings, enabled: [.apns: true, .fcm: false],
            group: PushGroup(selfID: "p1", settings: groupSettings),
            outputs: .init(
                input: inputContinuation, changes: changeContinuation, writes: writeContinuation,
                deliveries: deliveryContinuation),
            inbox: Locked(PushInbox(topics: topics)), metrics: PushMetrics(), logger: Logger(label: "push-core-test"))
        var maker = StatusMaker()
        let now = maker.start
        let replies = Replies()

        state.handle(.register(android, ride: maker.ride, expires: .distantFuture, reply: replies.reply), now: now)
        #expect(replies.last == .failure(.serviceOff(.fcm)), "no FCM sender")
        state.handle(.register(phone, ride: maker.ride, expires: .distantFuture, reply: replies.reply), now: now)
        #expect(replies.last == .failure(.brokerUnavailable), "not connected")

        // G1: announced once connected and subscribed, straight to the client.
        state.handle(.connected(incarnation: 7), now: now)
        state.handle(.groupSubscribed, now: now)
        guard case .presence(let topic, let payload) = await written.next() else {
            Issue.record("the presence is written once connected and subscribed")
            return
        }
        #expect(topic == topics.pushMember("p1"))
        let sighting = try #require(PushInbox.sighting(payload, now: now) ?? nil)
        #expect(sighting.online && sighting.incarnation == 7)
        // Its own presence back: it serves (start delay 0) once a tick has run.
        state.handle(.message(topic: topic, payload: payload), now: now)
        state.handle(.tick, now: now)

        // A registration: the record written with a time limit, applied once stored, before the reply.
        state.handle(.register(phone, ride: maker.ride, expires: .distantFuture, reply: replies.reply), now: now)
        guard case .record(let recordTopic, let record, let then) = await written.next() else {
            Issue.record("the registration's record is written")
            return
        }
        #expect(recordTopic == topics.pushDevice(ride: maker.ride, key: phone.recordKey) && !record.isEmpty)
        then(true)
        guard let stored = await inputs.next(), case .stored = stored else {
            Issue.record("a stored record comes back to the core")
            return
        }
        #expect(replies.answers.withLock { $0.count } == 2, "no answer before the record is applied")
        state.handle(stored, now: now)
        #expect(replies.last == .success(true), "a new registration")
        guard case .subscribe(let ride) = await changed.next() else {
            Issue.record("the ride's statuses are subscribed")
            return
        }
        #expect(ride == maker.ride)

        // A status of the ride: its push goes to the senders; its outcome frees the slot.
        let status = maker.next(.approachingPickup, at: 1, arrival: 240)
        state.handle(
            .message(topic: topics.status(ride: maker.ride), payload: Array(try JSONEncoder.rideStatus.encode(status))),
            now: now + 1)
        guard case .push(let push) = await delivered.next() else {
            Issue.record("the status is pushed")
            return
        }
        #expect(push.device == phone && push.sequence == status.sequence && state.queue.inFlight == 1)
        state.handle(.outcome(push, .delivered), now: now + 2)
        #expect(state.queue.inFlight == 0)

        // An unregistration: its record's deletion written, no answer before the broker stored it.
        let lost = Replies()
        state.handle(.unregister(phone, ride: maker.ride, reply: lost.reply), now: now + 3)
        guard case .record = await written.next() else {
            Issue.record("the unregistration's record deletion is written")
            return
        }
        #expect(lost.last == nil, "answered before the broker stored the deletion")
    }

    @Test("A registration's answer is given once; one dropped unanswered says ride-push is stopping")
    func answerOnce() async {
        let first = await withCheckedContinuation { continuation in
            let answer = Answer(continuation)
            answer(.success(true))
            answer(.failure(.brokerUnavailable))  // a second answer is ignored, not a second resume
        }
        #expect(first == .success(true))
        let dropped = await withCheckedContinuation { continuation in
            _ = Answer(continuation)  // released unanswered
        }
        #expect(dropped == .failure(.shuttingDown))
    }
}
