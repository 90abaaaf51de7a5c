import Testing
import WorkerGroup

/// G1 membership from presence messages and wills (L8), with the incarnation rule that keeps late wills out.
@Suite("GroupMembership: presence and wills in, member changes out (G1, L8)")
struct GroupMembershipTests {
    typealias Sighting = GroupMembership.Sighting

    @Test("G1: a worker alone is the whole group; a birth joins, a will leaves")
    func joinAndLeave() {
        var group = GroupMembership(selfID: "w-a")
        #expect(group.members == ["w-a"])
        let join = group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 100))
        #expect(join == .init(joined: ["w-b"], left: [], members: ["w-a", "w-b"]))
        #expect(group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 100)) == nil, "repeat")
        let leave = group.received(worker: "w-b", presence: Sighting(online: false, incarnation: 100))
        #expect(leave == .init(joined: [], left: ["w-b"], members: ["w-a"]))
    }

    @Test("L8, G1: a will that arrives after the worker's rebirth is stale and changes nothing")
    func lateWill() {
        var group = GroupMembership(selfID: "w-a")
        _ = group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 100))
        // w-b's connection dropped and it reconnected at once: its new birth comes before the old will.
        #expect(group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 205)) == nil)
        #expect(group.received(worker: "w-b", presence: Sighting(online: false, incarnation: 100)) == nil)
        #expect(group.isMember("w-b"))
        // Its current connection's will does count.
        #expect(group.received(worker: "w-b", presence: Sighting(online: false, incarnation: 205))?.left == ["w-b"])
    }

    @Test("G1: within one incarnation offline is final; a rebirth with a larger one joins again")
    func offlineIsFinal() {
        var group = GroupMembership(selfID: "w-a")
        _ = group.received(worker: "w-b", presence: Sighting(online: false, incarnation: 7))
        #expect(group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 7)) == nil)
        #expect(!group.isMember("w-b"))
        #expect(group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 8))?.joined == ["w-b"])
    }

    @Test("G1: a deleted presence (zero-length retained) is a leave; this worker stays in its own view")
    func deletedAndSelf() {
        var group = GroupMembership(selfID: "w-a")
        _ = group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 1))
        #expect(group.received(worker: "w-b", presence: nil)?.left == ["w-b"])
        #expect(group.received(worker: "w-z", presence: nil) == nil, "unknown worker deleted: nothing")
        // Its own will, seen after a reconnect, does not take a running worker out of its own view.
        #expect(group.received(worker: "w-a", presence: Sighting(online: false, incarnation: 3)) == nil)
        #expect(group.members == ["w-a"])
    }

    @Test("G1: two workers that have seen the same presences compute the same owners, whatever the order")
    func sameViewsSameOwners() {
        var first = GroupMembership(selfID: "w-a")
        var second = GroupMembership(selfID: "w-c")
        let births: [(String, UInt64)] = [("w-a", 10), ("w-b", 11), ("w-c", 12)]
        for (worker, incarnation) in births {
            _ = first.received(worker: worker, presence: Sighting(online: true, incarnation: incarnation))
        }
        for (worker, incarnation) in births.reversed() {
            _ = second.received(worker: worker, presence: Sighting(online: true, incarnation: incarnation))
        }
        #expect(first.members == second.members)
        #expect(Ownership(members: first.members) == Ownership(members: second.members))
    }

    @Test("G4: two members with different views disagree only on the buckets of the member one has not seen")
    func differentViews() {
        var early = GroupMembership(selfID: "w-a")
        var late = GroupMembership(selfID: "w-b")
        _ = early.received(worker: "w-b", presence: Sighting(online: true, incarnation: 1))
        _ = late.received(worker: "w-a", presence: Sighting(online: true, incarnation: 1))
        // w-c is born; w-a has seen it, w-b not yet.
        _ = early.received(worker: "w-c", presence: Sighting(online: true, incarnation: 1))
        let earlyOwners = Ownership(members: early.members)
        let lateOwners = Ownership(members: late.members)
        for bucket in 0..<Ownership.bucketCount {
            let one = earlyOwners.owner(ofBucket: bucket)
            let other = lateOwners.owner(ofBucket: bucket)
            if one != other { #expect(one == "w-c", "bucket \(bucket): only w-c's buckets are in question") }
        }
    }

    @Test("G1: a member silent past the limit (its will lost) leaves the view; a fresh presence brings it back")
    func silence() {
        var group = GroupMembership(selfID: "w-a", silenceLimit: 30)
        let first = group.received(
            worker: "w-b", presence: Sighting(online: true, incarnation: 9, seenAt: 100), now: 100)
        #expect(first?.members == ["w-a", "w-b"])
        let beat = group.received(
            worker: "w-b", presence: Sighting(online: true, incarnation: 9, seenAt: 110), now: 110)
        #expect(beat == nil, "a heartbeat changes nothing")
        #expect(group.heardSelf(at: 140) == nil, "30 s since its last heartbeat: still a member")
        #expect(group.heardSelf(at: 140.5)?.left == ["w-b"])
        #expect(group.members == ["w-a"], "this worker never leaves its own view")
        let back = group.received(
            worker: "w-b", presence: Sighting(online: true, incarnation: 9, seenAt: 141), now: 141)
        #expect(back?.joined == ["w-b"], "alive after all (a partition healed)")
        // A retained ghost read at start: heard from long ago, never a member.
        #expect(
            group.received(worker: "w-g", presence: Sighting(online: true, incarnation: 3, seenAt: 10), now: 150) == nil
        )
        #expect(!group.isMember("w-g"))
    }

    @Test("G1: while the broker is frozen nobody is heard, this worker included: nobody is taken for dead")
    func frozenBroker() {
        var group = GroupMembership(selfID: "w-a", silenceLimit: 30)
        _ = group.received(worker: "w-b", presence: Sighting(online: true, incarnation: 9, seenAt: 100), now: 100)
        _ = group.heardSelf(at: 101)
        // 60 s of a frozen broker: the clock runs, no heartbeat comes back, not even this worker's.
        #expect(group.tick(now: 161) == nil)
        #expect(group.members == ["w-a", "w-b"])
    }
}
