import Foundation
import RidePush
import RideStatusKit
import Testing
import WorkerGroup

/// ride-push's small machines, alone: the inbox (what waits, what a message reads as), the connection (when this
/// process announces itself and may serve) and the send queue (how many pushes are in flight).
@Suite("ride-push's inbox, connection and send queue")
struct PushMachinesTests {
    let topics = RideTopics()
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("The inbox keeps the newest status per ride; a stop seals it and goes in order; other topics go in order")
    func inboxWaits() {
        var inbox = PushInbox(topics: topics)
        #expect(inbox.arrived(topic: "rides/r1/status", payload: [1]) == .waits)
        #expect(inbox.arrived(topic: "rides/r1/status", payload: [2]) == .replaced)
        #expect(inbox.arrived(topic: "rides/r2/status", payload: []) == .inOrder, "a stop with nothing waiting")
        #expect(inbox.arrived(topic: "ridestatus/push/members/m", payload: [3]) == .inOrder)
        #expect(inbox.waiting(topic: "rides/r1/status") == [2])
        #expect(inbox.arrived(topic: "rides/r1/status", payload: []) == .inOrder, "the stop queues behind")
        #expect(inbox.arrived(topic: "rides/r1/status", payload: [4]) == .inOrder, "sealed: after the stop, in order")
        #expect(inbox.waiting(topic: "rides/r1/status") == [2], "the completion the stop's end shows")
        #expect(inbox.take(topic: "rides/r1/status") == [2])
        #expect(inbox.take(topic: "rides/r1/status") == nil, "taken once")
        #expect(inbox.arrived(topic: "rides/r1/status", payload: [5]) == .waits, "waits again once taken")
    }

    @Test("V1, A2, G1: what each message reads as; a status of another ride and a record by hand do not read")
    func inboxReads() throws {
        var maker = StatusMaker()
        let status = maker.next(.approachingPickup, at: 0)
        let topic = topics.status(ride: maker.ride)
        let statusBytes = Array(try JSONEncoder.rideStatus.encode(status))
        guard
            case .status(let ride, let read) = PushInbox.read(
                topic: topic, payload: statusBytes, topics: topics, now: now)
        else {
            Issue.record("a status reads as one")
            return
        }
        #expect(ride == maker.ride && read.sequence == status.sequence)
        guard case .stop(maker.ride) = PushInbox.read(topic: topic, payload: [], topics: topics, now: now) else {
            Issue.record("an empty status is a stop")
            return
        }
        guard
            case .unreadableStatus("other", _) = PushInbox.read(
                topic: topics.status(ride: "other"), payload: statusBytes, topics: topics, now: now)
        else {
            Issue.record("a status naming another ride does not read")
            return
        }
        let presence = Presence(state: .online, since: now, version: "v", incarnation: 7, at: now).encoded()
        guard
            case .presence("m1", let sighting?) = PushInbox.read(
                topic: topics.pushMember("m1"), payload: presence, topics: topics, now: now)
        else {
            Issue.record("a presence reads as one")
            return
        }
        #expect(sighting.online && sighting.incarnation == 7)
        guard
            case .unreadablePresence("m1", 2) = PushInbox.read(
                topic: topics.pushMember("m1"), payload: [0x7B, 0x7D], topics: topics, now: now)
        else {
            Issue.record("a presence without a state does not read")
            return
        }
        let record = PushGroup.Record(device: phone, expires: now.addingTimeInterval(600))
        let recordTopic = topics.pushDevice(ride: "r1", key: phone.recordKey)
        guard
            case .record("r1", phone.recordKey, let back?) = PushInbox.read(
                topic: recordTopic, payload: record.encoded(), topics: topics, now: now)
        else {
            Issue.record("a record reads as one")
            return
        }
        #expect(back.device == phone)
        guard
            case .unreadableRecord("r1", .keyMismatch) = PushInbox.read(
                topic: topics.pushDevice(ride: "r1", key: android.recordKey), payload: record.encoded(), topics: topics,
                now: now)
        else {
            Issue.record("a record under another device's key does not read")
            return
        }
        guard case .other = PushInbox.read(topic: "elsewhere/x", payload: [1], topics: topics, now: now) else {
            Issue.record("a topic that is none of ride-push's")
            return
        }
    }

    @Test("G1: a push member's presence reads as the workers read theirs: an incarnation a day ahead is refused")
    func presenceChecks() {
        func payload(_ incarnation: Int) -> [UInt8] {
            Presence(state: .online, since: now, version: "v", incarnation: incarnation, at: now).encoded()
        }
        let started = 1_800_000_000_000  // this host's clock, in milliseconds: a connection's incarnation
        #expect(PushInbox.sighting(payload(started), now: now)??.incarnation == UInt64(started))
        #expect(PushInbox.sighting(payload(started + 86_000_000), now: now)??.online == true, "a clock ahead")
        #expect(PushInbox.sighting(payload(started + 86_401_000), now: now) == nil, "more than a day ahead")
        #expect(PushInbox.sighting(payload(-1), now: now) == nil)
        #expect(PushInbox.sighting(Array("{\"state\":\"here\"}".utf8), now: now) == nil)
        guard case .some(.none) = PushInbox.sighting([], now: now) else {
            Issue.record("an empty presence is a deleted one, not one that does not read")
            return
        }
    }

    @Test("G1: announced only once connected and subscribed; the heartbeat on ticks; serving on its own presence")
    func connection() {
        var connection = PushConnection(heartbeat: 5)
        #expect(connection.tick(now: now) == nil, "nothing to announce before a connection")
        #expect(
            connection.connected(incarnation: 9, now: now) == nil, "not before the group is subscribed")
        #expect(connection.isConnected)
        #expect(connection.subscribedGroup(now: now + 1) == .announce(incarnation: 9, since: now))
        #expect(connection.tick(now: now + 3) == nil, "the heartbeat is not due")
        #expect(connection.tick(now: now + 6) == .announce(incarnation: 9, since: now))
        #expect(connection.heard(own: .init(online: true, incarnation: 8)) == nil, "an older connection's")
        #expect(connection.heard(own: .init(online: false, incarnation: 9)) == nil, "its will")
        #expect(connection.heard(own: nil) == nil)
        #expect(connection.heard(own: .init(online: true, incarnation: 9)) == .heardSelf)
        #expect(connection.disconnected() == .stopServing)
        #expect(!connection.isConnected)
        #expect(connection.heard(own: .init(online: true, incarnation: 9)) == nil, "heard after the connection ended")
        #expect(connection.tick(now: now + 20) == nil)
        #expect(
            connection.connected(incarnation: 10, now: now + 30) == .announce(incarnation: 10, since: now + 30),
            "a reconnect announces at once: the subscriptions are the broker's")
    }

    @Test("At most `limit` pushes in flight; each finish starts the next in order; a long queue compacts")
    func sendQueue() throws {
        var maker = StatusMaker()
        let status = maker.next(.approachingPickup, at: 0)
        func push(_ sequence: Int) -> Push {
            Push(
                ride: maker.ride, device: phone, event: .update, priority: .routine,
                state: RideActivityAttributes.ContentState(status: status), sequence: sequence, timestamp: sequence,
                staleDate: nil, dismissalDate: nil, relevanceScore: 50)
        }
        var queue = SendQueue(limit: 2)
        #expect(queue.add((1...3).map(push)).map(\.sequence) == [1, 2])
        #expect(queue.inFlight == 2 && queue.waitingCount == 1)
        #expect(queue.add([push(4)]).isEmpty, "full")
        #expect(queue.finished().map(\.sequence) == [3])
        #expect(queue.finished().map(\.sequence) == [4])
        #expect(queue.finished().isEmpty && queue.inFlight == 1 && queue.waitingCount == 0)
        var long = SendQueue(limit: 1)
        _ = long.add((1...5000).map(push))
        var sent = [1]
        while long.waitingCount > 0 { sent += long.finished().map(\.sequence) }
        #expect(sent == Array(1...5000), "every push once, in order, across compactions")
    }
}
