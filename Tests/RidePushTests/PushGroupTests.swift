import Foundation
import RidePush
import RideStatusKit
import Testing
import WorkerGroup

/// A member's view of the group with its start delay behind it: its own presence heard at `start`, ticked past
/// the delay.
private func started(_ id: String, at start: Date, seed: UInt64 = 1) -> PushGroup {
    var group = PushGroup(selfID: id, seed: seed)
    _ = group.heardSelf(now: start)
    _ = group.tick(now: start + group.settings.startDelay)
    return group
}

private func online(_ incarnation: UInt64, at time: Date) -> GroupMembership.Sighting {
    GroupMembership.Sighting(online: true, incarnation: incarnation, seenAt: time.timeIntervalSince1970)
}

/// Rides named `ride-0`, `ride-1`, … until `count` of them belong to `member` among `members`.
private func rides(ownedBy member: String, among members: [String], count: Int) -> [String] {
    let ownership = Ownership(members: members)
    let owned = (0..<10_000).lazy.map { "ride-\($0)" }.filter { ownership.owner(ofRide: $0) == member }
    return Array(owned.prefix(count))
}

private func record(_ device: PushDevice) -> PushGroup.Record {
    PushGroup.Record(device: device, expires: .distantFuture)
}

@Suite("ride-push's group: processes share the rides by ownership, registrations live in the broker")
struct PushGroupTests {
    let start = Date(timeIntervalSince1970: 1_795_340_000)

    @Test("Nothing is served before the start delay after its own presence came back; then every owned ride is")
    func startDelay() throws {
        var group = PushGroup(selfID: "push-a")
        let ride = "ride-1"
        #expect(group.record(ride: ride, key: phone.recordKey, record(phone), now: start).subscribe.isEmpty)
        _ = group.heardSelf(now: start)
        #expect(group.tick(now: start + 1).subscribe.isEmpty, "the others may not have seen this member yet")
        #expect(!group.isServing(now: start + 1))
        let serving = group.tick(now: start + group.settings.startDelay)
        #expect(serving.subscribe == [ride])
        #expect(group.planner.devices(of: ride) == [phone])
        #expect(group.tick(now: start + 10).subscribe.isEmpty, "served once, not on every tick")
        // Its retained status comes; the first push goes within a second (the ride may have had an owner before).
        var maker = StatusMaker()
        maker.ride = ride
        maker.start = start + 8
        let status = maker.next(.confirmed, at: 0)
        var pushes = group.status(status, now: start + 10.2).pushes
        if pushes.isEmpty { pushes = group.tick(now: start + 11).pushes }
        #expect(pushes.map(\.sequence) == [status.sequence])
    }

    @Test("G1: two members serve disjoint rides, and together every ride with a record")
    func disjoint() throws {
        let members = ["push-a", "push-b"]
        var a = started("push-a", at: start)
        var b = started("push-b", at: start)
        _ = a.presence(of: "push-b", online(1, at: start), now: start)
        _ = b.presence(of: "push-a", online(1, at: start), now: start)
        let now = start + 5
        var servedByA: Set<String> = []
        var servedByB: Set<String> = []
        let all = (0..<40).map { "ride-\($0)" }
        for ride in all {
            servedByA.formUnion(a.record(ride: ride, key: phone.recordKey, record(phone), now: now).subscribe)
            servedByB.formUnion(b.record(ride: ride, key: phone.recordKey, record(phone), now: now).subscribe)
        }
        #expect(servedByA.isDisjoint(with: servedByB))
        #expect(servedByA.union(servedByB) == Set(all))
        let ownership = Ownership(members: members)
        #expect(servedByA == Set(all.filter { ownership.owner(ofRide: $0) == "push-a" }))
    }

    @Test("A newcomer's presence takes its rides from a member at once; the newcomer waits out its start delay")
    func join() throws {
        var a = started("push-a", at: start)
        let moving = rides(ownedBy: "push-b", among: ["push-a", "push-b"], count: 3)
        let staying = rides(ownedBy: "push-a", among: ["push-a", "push-b"], count: 3)
        for ride in moving + staying { _ = a.record(ride: ride, key: phone.recordKey, record(phone), now: start + 4) }
        #expect((moving + staying).allSatisfy { a.planner.serves(ride: $0) })
        let seen = a.presence(of: "push-b", online(1, at: start + 5), now: start + 5)
        #expect(Set(seen.unsubscribe) == Set(moving), "the lost rides go at once")
        #expect(seen.deleteRecords.isEmpty && seen.removed.isEmpty, "their registrations stay, for the new owner")
        #expect(staying.allSatisfy { a.planner.serves(ride: $0) })

        var b = PushGroup(selfID: "push-b")
        for ride in moving + staying { _ = b.record(ride: ride, key: phone.recordKey, record(phone), now: start + 5) }
        _ = b.presence(of: "push-a", online(1, at: start), now: start + 5)
        _ = b.heardSelf(now: start + 5)
        #expect(b.tick(now: start + 6).subscribe.isEmpty)
        let serving = b.tick(now: start + 5 + b.settings.startDelay)
        #expect(Set(serving.subscribe) == Set(moving))
    }

    @Test("C5 across a handover: a member's will hands its rides over at once, pushed above every old timestamp")
    func will() throws {
        var b = started("push-b", at: start)
        _ = b.presence(of: "push-a", online(1, at: start), now: start)
        let ride = try #require(rides(ownedBy: "push-a", among: ["push-a", "push-b"], count: 1).first)
        _ = b.record(ride: ride, key: phone.recordKey, record(phone), now: start + 4)
        #expect(!b.planner.serves(ride: ride))
        let killedAt = start + 30
        // Both heartbeats keep coming back until the kill.
        _ = b.presence(of: "push-a", online(1, at: killedAt - 1), now: killedAt - 1)
        _ = b.heardSelf(now: killedAt - 1)
        let gone = b.presence(
            of: "push-a", GroupMembership.Sighting(online: false, incarnation: 1, seenAt: nil), now: killedAt)
        #expect(gone.subscribe == [ride])
        // The retained status: the old owner had pushed it with timestamp issuedAt (at most).
        var maker = StatusMaker()
        maker.ride = ride
        maker.start = killedAt - 3
        let status = maker.next(.approachingPickup, at: 0)
        // The old owner's timestamps were at most one above the later of its clock and the state's issuedAt: the
        // new owner waits for the next second and goes above that.
        #expect(b.status(status, now: killedAt).pushes.isEmpty)
        let push = try #require(b.tick(now: killedAt + 1).pushes.first)
        #expect(push.timestamp > Int(killedAt.timeIntervalSince1970) + 1)
        #expect(push.timestamp > Int(status.issuedAt.timeIntervalSince1970) + 1)
        #expect(push.priority == .urgent)
    }

    @Test("A member that loses the broker serves nothing, keeps the records, and serves again after its delay")
    func disconnection() throws {
        var a = started("push-a", at: start)
        _ = a.record(ride: "ride-1", key: phone.recordKey, record(phone), now: start + 4)
        let lost = a.disconnected()
        #expect(lost.unsubscribe == ["ride-1"] && lost.deleteRecords.isEmpty && lost.removed.isEmpty)
        #expect(a.recordCount == 1)
        _ = a.heardSelf(now: start + 60)
        #expect(a.tick(now: start + 61).subscribe.isEmpty)
        #expect(a.tick(now: start + 60 + a.settings.startDelay).subscribe == ["ride-1"])
    }

    @Test("A record deleted in the broker removes its device; a removal by the planner deletes the record")
    func recordLifecycle() throws {
        var a = started("push-a", at: start)
        var maker = StatusMaker()
        maker.ride = "ride-1"
        _ = a.record(ride: "ride-1", key: phone.recordKey, record(phone), now: start + 4)
        _ = a.record(ride: "ride-1", key: android.recordKey, record(android), now: start + 4)
        let deleted = a.record(ride: "ride-1", key: android.recordKey, nil, now: start + 5)
        #expect(deleted.removed == [Removed(ride: "ride-1", device: android, reason: .requested)])
        #expect(deleted.deleteRecords.isEmpty, "already gone from the broker")

        let push = try #require(a.status(maker.next(.confirmed, at: 5), now: start + 5).pushes.first)
        let gone = a.outcome(.unregistered, of: push, now: start + 6)
        #expect(gone.removed.map(\.reason) == [.unregistered])
        #expect(gone.deleteRecords == [.init(ride: "ride-1", key: phone.recordKey)])
        #expect(gone.unsubscribe == ["ride-1"] && a.recordCount == 0)
    }

    @Test("The device cap counts the broker's records; surplus records the owner refuses are deleted")
    func cap() throws {
        var a = started("push-a", at: start)
        let limit = a.settings.planner.maximumDevicesPerRide
        let devices = try (0...limit).map { try PushDevice(service: .apns, token: String(format: "%064x", $0 + 1)) }
        for device in devices.prefix(limit) {
            #expect(a.refusal(of: device, ride: "ride-1") == nil)
            _ = a.record(ride: "ride-1", key: device.recordKey, record(device), now: start + 4)
        }
        #expect(a.refusal(of: devices[limit], ride: "ride-1") == .tooManyDevices)
        #expect(a.refusal(of: devices[0], ride: "ride-1") == nil, "a known device registers again")
        // Another member accepted one more at the same time: the owner refuses it and deletes its record.
        let surplus = a.record(ride: "ride-1", key: devices[limit].recordKey, record(devices[limit]), now: start + 5)
        #expect(surplus.deleteRecords == [.init(ride: "ride-1", key: devices[limit].recordKey)])
        #expect(surplus.refusedRecords.map(\.refusal) == [.tooManyDevices])
        #expect(a.recordCount == limit)
    }

    @Test("An expired registration is removed by its owner and its record deleted")
    func expiry() throws {
        var a = started("push-a", at: start)
        let expiring = PushGroup.Record(device: phone, expires: start + 40)
        _ = a.record(ride: "ride-1", key: phone.recordKey, expiring, now: start + 4)
        #expect(a.tick(now: start + 20).deleteRecords.isEmpty)
        _ = a.heardSelf(now: start + 35)
        let expired = a.tick(now: start + 40)
        #expect(expired.removed.map(\.reason) == [.expired])
        #expect(expired.deleteRecords == [.init(ride: "ride-1", key: phone.recordKey)])
    }

    @Test("A member that stops hearing its own presence stops serving: the others may have taken its rides")
    func selfSilence() throws {
        var a = started("push-a", at: start)
        _ = a.record(ride: "ride-1", key: phone.recordKey, record(phone), now: start + 4)
        _ = a.heardSelf(now: start + 10)
        #expect(a.tick(now: start + 25).unsubscribe.isEmpty, "heard 15 s ago: still serving")
        #expect(a.tick(now: start + 26).unsubscribe == ["ride-1"])
        #expect(!a.isServing(now: start + 26) && a.recordCount == 1)
        _ = a.heardSelf(now: start + 40)
        #expect(a.tick(now: start + 40 + a.settings.startDelay).subscribe == ["ride-1"])
    }

    @Test("A ride with no status at all a minute after subscribing stopped during a handover: its records go")
    func missingStatus() throws {
        var a = started("push-a", at: start)
        _ = a.record(ride: "ride-1", key: phone.recordKey, record(phone), now: start + 4)
        _ = a.heardSelf(now: start + 50)
        #expect(a.tick(now: start + 60).removed.isEmpty)
        let gone = a.tick(now: start + 64)
        #expect(gone.removed.map(\.reason) == [.rideEnded] && gone.unsubscribe == ["ride-1"])
        #expect(gone.deleteRecords == [.init(ride: "ride-1", key: phone.recordKey)])
    }

    @Test("A2: a record read back from the broker is checked: its JSON, its token, its key")
    func recordCodec() throws {
        let written = PushGroup.Record(device: phone, expires: start)
        let read = try PushGroup.Record(payload: written.encoded(), key: phone.recordKey)
        #expect(read == written)
        #expect(phone.recordKey.count == 32 && !phone.recordKey.contains(phone.token.prefix(8)))
        #expect(phone.recordKey != android.recordKey)
        #expect(throws: PushGroup.Record.Problem.keyMismatch) {
            try PushGroup.Record(payload: written.encoded(), key: android.recordKey)
        }
        #expect(throws: PushGroup.Record.Problem.malformedRecord) {
            try PushGroup.Record(payload: Array(#"{"service":"apns"}"#.utf8), key: phone.recordKey)
        }
        let badToken = Array(#"{"service":"apns","token":"zz","expires":"2026-11-28T01:00:00Z"}"#.utf8)
        #expect(throws: PushGroup.Record.Problem.malformedToken) {
            try PushGroup.Record(payload: badToken, key: phone.recordKey)
        }
    }
}
