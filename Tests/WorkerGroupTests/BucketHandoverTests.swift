import Testing
import WorkerGroup

/// G3, G4: which buckets a worker serves as members join, leave and die, decided alone with a hand-driven clock.
@Suite("BucketHandover: buckets released, loaded and served as the group changes (G3, G4)")
struct BucketHandoverTests {
    /// The buckets `member` owns among `members`.
    func buckets(of member: String, among members: [String]) -> [Int] {
        Ownership(members: members).buckets(of: member)
    }

    func released(_ actions: [BucketHandover.Action]) -> [Int] {
        var result: [Int] = []
        for case .release(let buckets) in actions { result += buckets }
        return result
    }
    func loads(_ actions: [BucketHandover.Action]) -> [Int] {
        var result: [Int] = []
        for case .load(let buckets, _) in actions { result += buckets }
        return result
    }
    func dropped(_ actions: [BucketHandover.Action]) -> [Int] {
        var result: [Int] = []
        for case .drop(let buckets) in actions { result += buckets }
        return result
    }
    /// The generation of the load in `actions`.
    func generation(_ actions: [BucketHandover.Action]) -> Int {
        for case .load(_, let generation) in actions { return generation }
        return -1
    }
    func served(_ actions: [BucketHandover.Action]) -> [Int] {
        var result: [Int] = []
        for case .serve(let buckets) in actions { result += buckets }
        return result
    }
    func resumed(_ actions: [BucketHandover.Action]) -> [Int] {
        var result: [Int] = []
        for case .resume(let buckets) in actions { result += buckets }
        return result
    }

    @Test("G1: a worker serves nothing before its first view; alone, every bucket once loaded")
    func alone() {
        var handover = BucketHandover(selfID: "w-a", releaseTimeout: 6)
        #expect(handover.serving.isEmpty)
        let actions = handover.membersChanged(["w-a"], now: 0)
        #expect(loads(actions).count == Ownership.bucketCount)
        #expect(served(actions).isEmpty, "not before the states are loaded")
        #expect(
            served(handover.loaded(loads(actions), generation: generation(actions), now: 0.1)).count
                == Ownership.bucketCount)
        #expect(handover.pending.isEmpty)
    }

    /// A worker that serves every bucket, alone.
    func servingAlone(_ id: String) -> BucketHandover {
        var handover = BucketHandover(selfID: id, releaseTimeout: 6)
        let actions = handover.membersChanged([id], now: 0)
        _ = handover.loaded(loads(actions), generation: generation(actions), now: 0)
        return handover
    }

    @Test("G3, G4: on a join the old owner releases exactly the buckets the newcomer wins, at once")
    func joinReleases() {
        var old = servingAlone("w-a")
        let actions = old.membersChanged(["w-a", "w-b"], now: 1)
        let moved = buckets(of: "w-b", among: ["w-a", "w-b"])
        #expect(released(actions) == moved, "G4: it stops serving them at once")
        #expect(loads(actions).isEmpty && served(actions).isEmpty)
        #expect(old.serving == Set(buckets(of: "w-a", among: ["w-a", "w-b"])))
    }

    @Test("G3, C5: a newcomer waits for the old owner's release, then loads the released states; or a timeout")
    func joinWaitsForRelease() {
        var newcomer = BucketHandover(selfID: "w-b", releaseTimeout: 6)
        // Its first view already holds w-a, which serves everything: what w-b wins comes from a live owner.
        let actions = newcomer.membersChanged(["w-a", "w-b"], now: 1)
        let mine = buckets(of: "w-b", among: ["w-a", "w-b"])
        #expect(actions.isEmpty, "nothing loaded before w-a has written its last states: \(actions)")
        #expect(newcomer.pending == mine)
        let first = newcomer.released([mine[0]], by: "w-a", now: 1.5)
        #expect(loads(first) == [mine[0]] && served(first).isEmpty, "the released bucket is loaded, not yet served")
        #expect(newcomer.released([mine[1]], by: "w-x", now: 1.5).isEmpty, "only the previous owner releases")
        #expect(served(newcomer.loaded([mine[0]], generation: generation(first), now: 1.6)) == [mine[0]])
        #expect(newcomer.membersChanged(["w-b", "w-a"], now: 2).isEmpty, "the same members again: nothing")
        // The rest never come: after the timeout it loads them anyway (G4: one interval at most).
        #expect(newcomer.tick(now: 6.9).isEmpty)
        let late = newcomer.tick(now: 7.0)
        #expect(loads(late) == Array(mine.dropFirst()))
        #expect(newcomer.tick(now: 7.1).isEmpty, "asked for once")
        #expect(served(newcomer.loaded(loads(late), generation: generation(late), now: 7.2)) == Array(mine.dropFirst()))
        #expect(newcomer.lastServeWait == 6.2, "from the view at 1 to the serve at 7.2")
        #expect(newcomer.pending.isEmpty)
        #expect(newcomer.serving == Set(mine))
    }

    @Test("G3: after a death (the will) the survivors serve the dead worker's buckets as soon as they are loaded")
    func deathServesAfterLoad() {
        var survivor = BucketHandover(selfID: "w-a", releaseTimeout: 6)
        #expect(survivor.membersChanged(["w-a", "w-b", "w-c"], now: 0).isEmpty, "w-b and w-c serve them now")
        let late = survivor.tick(now: 6)
        _ = survivor.loaded(loads(late), generation: generation(late), now: 6)
        let before = survivor.serving
        #expect(before == Set(buckets(of: "w-a", among: ["w-a", "w-b", "w-c"])))
        let actions = survivor.membersChanged(["w-a", "w-c"], now: 10)
        let gained = Set(buckets(of: "w-a", among: ["w-a", "w-c"])).subtracting(before)
        #expect(Set(loads(actions)) == gained)
        #expect(released(actions).isEmpty, "a leave never takes buckets from a member that stays")
        let three = Ownership(members: ["w-a", "w-b", "w-c"])
        #expect(gained.allSatisfy { three.owner(ofBucket: $0) == "w-b" }, "only the dead worker's buckets move")
        #expect(
            Set(served(survivor.loaded(Array(gained), generation: generation(actions), now: 10.3))) == gained,
            "no release to wait for")
    }

    @Test("G3: a previous owner that leaves while the newcomer waits for it is waited for no more")
    func ownerLeavesWhileWaiting() {
        var newcomer = BucketHandover(selfID: "w-b", releaseTimeout: 6)
        let actions = newcomer.membersChanged(["w-a", "w-b"], now: 1)
        #expect(actions.isEmpty)
        let waiting = newcomer.pending
        // w-a's SIGTERM: it released its rides, then its goodbye; here only the goodbye is seen.
        let after = newcomer.membersChanged(["w-b"], now: 2)
        #expect(Set(loads(after)) == Set(0..<Ownership.bucketCount), "every bucket, the waited-for ones too")
        #expect(Set(waiting).isSubset(of: Set(loads(after))))
        #expect(served(after).isEmpty)
        _ = newcomer.loaded(loads(after), generation: generation(after), now: 2.2)
        #expect(newcomer.serving.count == Ownership.bucketCount)
    }

    @Test("G4: a bucket lost while still arriving is dropped without a release; never two owners by this worker")
    func lostWhileArriving() {
        var worker = BucketHandover(selfID: "w-b", releaseTimeout: 6)
        _ = worker.membersChanged(["w-a", "w-b"], now: 1)
        let first = worker.released(worker.pending, by: "w-a", now: 1.05)
        let gained = loads(first)
        // w-c joins before the load is done and wins some of those buckets.
        let actions = worker.membersChanged(["w-a", "w-b", "w-c"], now: 1.1)
        let toC = Set(gained).intersection(buckets(of: "w-c", among: ["w-a", "w-b", "w-c"]))
        #expect(!toC.isEmpty)
        #expect(released(actions).isEmpty, "nothing of them was served")
        #expect(Set(dropped(actions)) == toC, "what was loaded of them is forgotten, nothing written")
        #expect(Set(worker.pending).isDisjoint(with: toC))
        let served = served(worker.loaded(gained, generation: generation(first), now: 1.2) + worker.tick(now: 20))
        #expect(Set(served).isDisjoint(with: toC))
        #expect(worker.serving == Set(buckets(of: "w-b", among: ["w-a", "w-b", "w-c"])))
    }

    @Test("G3, C5: a late report of an earlier load does not count for a bucket lost and gained again since")
    func staleLoad() {
        var worker = BucketHandover(selfID: "w-b", releaseTimeout: 6)
        let first = worker.membersChanged(["w-b"], now: 0)
        // w-c joins and leaves again before the first load is done: the buckets it held are loaded anew.
        _ = worker.membersChanged(["w-b", "w-c"], now: 0.1)
        let again = worker.membersChanged(["w-b"], now: 0.2)
        let reloaded = loads(again)
        #expect(!reloaded.isEmpty && generation(again) != generation(first))
        let early = served(worker.loaded(loads(first), generation: generation(first), now: 0.3))
        #expect(Set(early).isDisjoint(with: reloaded), "the first load's report does not serve the reloaded buckets")
        #expect(Set(served(worker.loaded(reloaded, generation: generation(again), now: 0.4))) == Set(reloaded))
        #expect(worker.serving.count == Ownership.bucketCount)
    }

    @Test(
        "G3, G4: a served bucket another worker released here is read again, then its missing rides served again; once"
    )
    func reclaim() {
        // w-a serves its buckets beside w-b; w-b's view lacked w-a for a while, and it served some of them.
        var worker = servingAlone("w-a")
        _ = worker.membersChanged(["w-a", "w-b"], now: 1)
        let mine = buckets(of: "w-a", among: ["w-a", "w-b"])
        let theirs = buckets(of: "w-b", among: ["w-a", "w-b"])
        let fenced = [mine[3], mine[1], mine[1]]
        let read = worker.reclaim(fenced + [theirs[0]], now: 1.5)
        #expect(loads(read) == [mine[1], mine[3]], "only served buckets, each once, in order")
        #expect(worker.isReclaiming(mine[1]) && !worker.isReclaiming(theirs[0]) && !worker.isReclaiming(mine[0]))
        #expect(worker.reclaim([mine[1]], now: 1.6).isEmpty, "a bucket already being read is not read twice")
        #expect(worker.serving == Set(mine), "the bucket stays served meanwhile: its other rides go on")
        #expect(worker.pending.isEmpty, "nothing arrives")
        // A report of another load does not end the read.
        #expect(resumed(worker.loaded([mine[1]], generation: generation(read) + 1, now: 2)).isEmpty)
        let done = worker.loaded([mine[1], mine[3]], generation: generation(read), now: 2.1)
        #expect(resumed(done) == [mine[1], mine[3]] && served(done).isEmpty)
        #expect(!worker.isReclaiming(mine[1]) && worker.serving == Set(mine))
        #expect(resumed(worker.loaded([mine[1]], generation: generation(read), now: 2.2)).isEmpty, "once")
    }

    @Test("G3, G4: a read again that does not end is asked for anew after five release timeouts, not left for ever")
    func reclaimRetried() {
        var worker = servingAlone("w-a")
        let first = worker.reclaim([7], now: 10)
        #expect(loads(worker.tick(now: 10 + 5 * 6 - 0.1)).isEmpty, "not before")
        let again = worker.tick(now: 10 + 5 * 6)
        #expect(loads(again) == [7] && generation(again) != generation(first))
        #expect(resumed(worker.loaded([7], generation: generation(first), now: 41)).isEmpty, "the first read is over")
        #expect(resumed(worker.loaded([7], generation: generation(again), now: 41)) == [7])
    }

    @Test("G3, G4: a bucket lost while it is read again is released; a late report of that read resumes nothing")
    func reclaimLost() {
        var worker = servingAlone("w-a")
        let lost = buckets(of: "w-b", among: ["w-a", "w-b"])[0]
        let kept = buckets(of: "w-a", among: ["w-a", "w-b"])[0]
        let read = worker.reclaim([lost, kept], now: 0.5)
        #expect(Set(loads(read)) == [lost, kept])
        let actions = worker.membersChanged(["w-a", "w-b"], now: 1)
        #expect(released(actions).contains(lost), "a served bucket lost is released as any other")
        #expect(!worker.isReclaiming(lost) && worker.isReclaiming(kept))
        #expect(resumed(worker.loaded([lost, kept], generation: generation(read), now: 2)) == [kept])
    }

    @Test("G3, V5: a bucket its live previous owner released arrives released; one from a dead owner does not")
    func arrivesReleased() {
        // w-b joins w-a: w-a is alive, so w-b waits for its release of each bucket.
        var joining = BucketHandover(selfID: "w-b", releaseTimeout: 6)
        _ = joining.membersChanged(["w-a"], now: 0)
        let waiting = joining.membersChanged(["w-a", "w-b"], now: 1)
        #expect(loads(waiting).isEmpty, "a live previous owner is waited for")
        let mine = buckets(of: "w-b", among: ["w-a", "w-b"])
        let half = Array(mine.prefix(mine.count / 2))
        let actions = joining.released(half, by: "w-a", now: 2)
        #expect(Set(loads(actions)) == Set(half))
        #expect(half.allSatisfy(joining.arrivesReleased))
        #expect(!mine.dropFirst(mine.count / 2).contains(where: joining.arrivesReleased), "not released yet")
        // The rest is waited for no more: loaded from states that may lag, not released.
        let late = joining.tick(now: 8)
        #expect(Set(loads(late)) == Set(mine.dropFirst(mine.count / 2)))
        #expect(!mine.dropFirst(mine.count / 2).contains(where: joining.arrivesReleased))
        // w-a dies while w-b and w-c serve: its buckets arrive at w-b from no release.
        var survivor = servingAlone("w-b")
        _ = survivor.membersChanged(["w-a", "w-b"], now: 10)
        let death = survivor.membersChanged(["w-b"], now: 20)
        #expect(!loads(death).isEmpty && !loads(death).contains(where: survivor.arrivesReleased))
    }

    @Test(
        "G6: granted buckets load at once (no previous owner is waited for), serve once loaded, and release when no longer granted"
    )
    func grantedByAnAuthority() {
        var machine = BucketHandover(selfID: "w-a", releaseTimeout: 5)
        let first = machine.granted([1, 2, 3], now: 0)
        #expect(loads(first) == [1, 2, 3])
        #expect(served(first).isEmpty, "nothing is served before its states are read")
        #expect(served(machine.loaded([1, 2, 3], generation: generation(first), now: 0.5)) == [1, 2, 3])
        // Bucket 3 is no longer granted, 4 is: 3 is released (its rides write their last states), 4 loads.
        let next = machine.granted([1, 2, 4], now: 1)
        #expect(released(next) == [3])
        #expect(loads(next) == [4])
        #expect(machine.serving == [1, 2])
        // Everything lost at once (the grants were given back): every served bucket is released, the arriving one
        // dropped unserved.
        let none = machine.granted([], now: 2)
        #expect(released(none) == [1, 2])
        #expect(dropped(none) == [4])
    }
}
