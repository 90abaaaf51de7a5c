import Testing
import WorkerGroup

/// G6: the grant machine alone: a bucket is served only after its claim succeeded, under the claim's revision;
/// a lease counts from when its renewal was sent; a lapse or a lost broker stops every bucket at once; and, in a
/// simulation with a linearizable store, pauses and joins, no two workers ever serve one bucket at once.
@Suite("BucketGrants: ownership granted by etcd (G6)")
struct BucketGrantsTests {
    typealias Action = BucketGrants.Action

    static func claims(_ actions: [Action]) -> [[Int]] {
        actions.compactMap { if case .claim(let buckets, _) = $0 { buckets } else { nil } }
    }

    /// A lone worker's machine holding all 8,192 buckets under `lease` (granted at revision 2).
    static func holdingAll(_ id: String = "w-a", lease: Int64, configuration: BucketGrants.Configuration = .init())
        -> BucketGrants
    {
        var grants = BucketGrants(selfID: id, configuration: configuration)
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: lease, ttl: Int64(configuration.leaseTTL), sentAt: 0)
        for batch in claims(grants.membersRead([id], now: 0.1)) {
            _ = grants.claimAnswered(
                batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 2) }), lease: lease, now: 0.2)
        }
        return grants
    }

    @Test(
        "G6: a lone worker claims all 8,192 buckets in batches of 64 (two keys each) and serves each only once granted")
    func loneWorker() {
        var grants = BucketGrants(selfID: "w-a", configuration: .init(epochBase: 1000))
        #expect(grants.start(now: 0) == [.grantLease])
        #expect(grants.tick(now: 0.1) == [], "one lease request at a time")
        #expect(grants.leaseGranted(id: 7, ttl: 10, sentAt: 0) == [.announce(lease: 7), .readMembers])
        let actions = grants.membersRead(["w-a"], now: 0.2)
        let batches = Self.claims(actions)
        #expect(batches.count == 128 && batches.allSatisfy { $0.count == 64 })
        #expect(Set(batches.joined()).count == Ownership.bucketCount)
        #expect(!actions.contains { if case .serve = $0 { true } else { false } }, "nothing is served before a grant")
        #expect(grants.granted.isEmpty)
        // Each batch's grant carries its transaction's revision, plus the store's base.
        let first = grants.claimAnswered(
            batches[0], granted: Dictionary(uniqueKeysWithValues: batches[0].map { ($0, 5) }), lease: 7, now: 0.3)
        #expect(first.first == .serve(Dictionary(uniqueKeysWithValues: batches[0].map { ($0, 1005) })))
        let second = grants.claimAnswered(
            batches[1], granted: Dictionary(uniqueKeysWithValues: batches[1].map { ($0, 6) }), lease: 7, now: 0.3)
        #expect(second.first == .serve(Dictionary(uniqueKeysWithValues: batches[1].map { ($0, 1006) })))
        #expect(grants.granted.count == 128)
    }

    /// A worker `w-b` holding a lease, with `w-a` (the last holder of every bucket) online.
    static func taker(releaseWait: Double = 10) -> (BucketGrants, [Int]) {
        var grants = BucketGrants(selfID: "w-b", configuration: .init(releaseWait: releaseWait))
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: 9, ttl: 10, sentAt: 0)
        _ = grants.presenceHeard(worker: "w-a", online: true, now: 0)
        let batch = claims(grants.membersRead(["w-b"], now: 0.1))[0]
        return (grants, batch)
    }

    static func served(_ actions: [Action]) -> [Int: UInt64] {
        actions.reduce(into: [:]) { all, action in if case .serve(let buckets) = action { all.merge(buckets) { $1 } } }
    }

    @Test("G5, G6: a bucket whose last holder is online waits for its release notice of that grant, then is served")
    func waitsForTheReleaseNotice() {
        var (grants, batch) = Self.taker()
        let previous = Dictionary(
            uniqueKeysWithValues: batch.map { ($0, BucketGrants.PreviousHolder.worker("w-a", epoch: 40)) })
        let answer = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        #expect(Self.served(answer).isEmpty, "nothing served while w-a may still write")
        #expect(answer.contains(.awaitRelease(batch, holder: "w-a")))
        #expect(grants.progress.awaitingRelease == batch.count)
        // A notice of an older grant, or from another worker, frees nothing; its own grant's notice frees it.
        #expect(Self.served(grants.releaseHeard(from: "w-a", epochs: [batch[0]: 39], now: 0.4)).isEmpty)
        #expect(Self.served(grants.releaseHeard(from: "w-c", epochs: [batch[0]: 40], now: 0.4)).isEmpty)
        #expect(Self.served(grants.releaseHeard(from: "w-a", epochs: [batch[0]: 40], now: 0.5)) == [batch[0]: 50])
        #expect(grants.progress.awaitingRelease == batch.count - 1)
    }

    @Test("G5, G6: a notice heard before the claim's answer counts; a holder offline (its will) frees its buckets")
    func noticeBeforeTheClaimAndTheWill() {
        var (grants, batch) = Self.taker()
        _ = grants.releaseHeard(from: "w-a", epochs: [batch[0]: 40], now: 0.2)
        let previous = Dictionary(
            uniqueKeysWithValues: batch.map { ($0, BucketGrants.PreviousHolder.worker("w-a", epoch: 40)) })
        let answer = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        #expect(Self.served(answer) == [batch[0]: 50])
        #expect(Self.served(grants.presenceHeard(worker: "w-a", online: true, now: 0.4)).isEmpty)
        let freed = Self.served(grants.presenceHeard(worker: "w-a", online: false, now: 0.5))
        #expect(freed == Dictionary(uniqueKeysWithValues: batch.dropFirst().map { ($0, 50) }))
        #expect(grants.progress.awaitingRelease == 0)
    }

    @Test("G5, G6: no wait for nobody, for this worker itself, or for a holder already offline; the wait's end serves")
    func waitsOnlyWhereNeededAndNotForever() {
        var (grants, batch) = Self.taker(releaseWait: 4)
        _ = grants.presenceHeard(worker: "w-gone", online: false, now: 0)
        var previous: [Int: BucketGrants.PreviousHolder] = [
            batch[0]: .none, batch[1]: .worker("w-b", epoch: 3), batch[2]: .worker("w-gone", epoch: 3),
            batch[3]: .unknown,
        ]
        for bucket in batch.dropFirst(4) { previous[bucket] = .worker("w-a", epoch: 7) }
        let answer = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 1)
        #expect(Set(Self.served(answer).keys) == Set(batch.prefix(3)))
        #expect(Self.served(grants.tick(now: 4.9)).isEmpty, "the lease renewed, the wait not over")
        _ = grants.leaseRenewed(9, ttl: 10, sentAt: 4.9, now: 4.9)
        let late = grants.tick(now: 5.0)
        #expect(Set(Self.served(late).keys) == Set(batch.dropFirst(3)))
        #expect(late.contains(.releaseWaitExpired(Array(batch.dropFirst(3)).sorted(), holders: ["unknown", "w-a"])))
    }

    @Test(
        "G6: a key bound to the lease that the worker did not know it held is claimed again if wanted, else given back")
    func leakedKeys() {
        var grants = Self.holdingAll(lease: 1)
        let theirs = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        _ = grants.membersRead(["w-a", "w-b"], now: 1)
        _ = grants.stopped(theirs, now: 1.1)
        grants.gaveBack(theirs, lease: 1)
        let audit = grants.tick(now: 6)
        #expect(audit.contains(.auditKeys(lease: 1)), "the keys are read back every \(BucketGrants.auditInterval) s")
        // A claim of two of w-b's buckets applied late: their keys are bound to this lease again. One of its own
        // buckets' keys is listed too, and known.
        let mine = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-a")[0]
        let actions = grants.keysHeld([theirs[0], theirs[1], mine], lease: 1, now: 6.1)
        #expect(actions.contains(.giveBack([theirs[0], theirs[1]], lease: 1)))
        #expect(grants.leakedKeys == 2)
        #expect(grants.keysHeld([theirs[0]], lease: 2, now: 6.2).isEmpty, "another lease's answer changes nothing")
    }

    @Test("G5, G6: a last holder never heard from is waited for; one heard offline is not")
    func unknownHolderIsWaitedFor() {
        var grants = BucketGrants(selfID: "w-b", configuration: .init(releaseWait: 10))
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: 9, ttl: 10, sentAt: 0)
        let batch = Self.claims(grants.membersRead(["w-b"], now: 0.1))[0]
        let previous = Dictionary(
            uniqueKeysWithValues: batch.map { ($0, BucketGrants.PreviousHolder.worker("w-new", epoch: 4)) })
        let answer = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        #expect(Self.served(answer).isEmpty, "its retained presence may not have arrived yet")
        #expect(Self.served(grants.presenceHeard(worker: "w-new", online: false, now: 0.5)).count == batch.count)
    }

    @Test("G5, G6: a grant given up while it waits is announced only once the wait for the holder before is over")
    func deferredNotice() {
        var (grants, batch) = Self.taker(releaseWait: 100)
        let previous = Dictionary(
            uniqueKeysWithValues: batch.map { ($0, BucketGrants.PreviousHolder.worker("w-a", epoch: 40)) })
        _ = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        // Its lease lapses while every bucket waits: nothing announced, for w-a may still write.
        let lapsed = grants.tick(now: 30)
        let announced: (([Action]) -> [Int: UInt64]) = { actions in
            actions.reduce(into: [:]) { all, action in
                if case .releaseGrants(let ended) = action { all.merge(ended) { $1 } }
            }
        }
        #expect(announced(lapsed).isEmpty)
        // w-a's notice for its grant ends the wait: this worker's own grants are announced now.
        let after = grants.releaseHeard(from: "w-a", epochs: [batch[0]: 40], now: 30.1)
        #expect(announced(after) == [batch[0]: 50])
        // Given back (under the lease it was taken with), a key is announced at the give-back's revision, unless
        // the bucket waits or is held again; under a lease lapsed since, nothing is.
        #expect(grants.gaveBack([batch[1]], lease: 9, revision: 70).isEmpty, "an earlier lease's give-back")
    }

    @Test("G5, G6: a give-back announces its buckets at its revision; not one still waiting for the holder before")
    func giveBackAnnounces() {
        var (grants, batch) = Self.taker()
        let previous: [Int: BucketGrants.PreviousHolder] = [batch[0]: .worker("w-a", epoch: 40)]
        _ = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        // Both leave before w-a is heard from: the waiting one is deferred, the served one stops and is given back.
        let leaving = grants.membersRead(["w-b", "w-z"], now: 0.5)
        let stopped = leaving.compactMap { action -> [Int]? in if case .stop(let b) = action { b } else { nil } }
            .joined()
        let moved = Set(stopped)
        guard moved.contains(batch[0]), let other = batch.dropFirst().first(where: moved.contains) else { return }
        _ = grants.stopped([batch[0], other], now: 0.6)
        let answer = grants.gaveBack([batch[0], other], lease: 9, revision: 60)
        #expect(answer == [.releaseGrants([other: 60])])
    }

    @Test("G5, G6: a bucket no longer wanted while it waits is given back unserved; a lapse forgets the waits")
    func waitingBucketLeaves() {
        var (grants, batch) = Self.taker()
        let previous = Dictionary(
            uniqueKeysWithValues: batch.map { ($0, BucketGrants.PreviousHolder.worker("w-a", epoch: 40)) })
        _ = grants.claimAnswered(
            batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 50) }), previous: previous, lease: 9,
            now: 0.3)
        let leaving = Set(Ownership(members: ["w-b", "w-c"]).buckets(of: "w-c")).intersection(batch).sorted()
        #expect(!leaving.isEmpty)
        let actions = grants.membersRead(["w-b", "w-c"], now: 0.5)
        #expect(actions.contains(.stop(leaving)))
        #expect(grants.progress.awaitingRelease == batch.count - leaving.count)
        #expect(
            Self.served(grants.presenceHeard(worker: "w-a", online: false, now: 0.6)).count == batch.count
                - leaving.count)
        let lapsed = grants.tick(now: 30)
        #expect(lapsed.contains { if case .stopAll = $0 { true } else { false } })
        #expect(grants.progress.awaitingRelease == 0)
    }

    @Test("G3, G6: a worker knows whether it ever read its group: a lapse forgets the members, not that it knew them")
    func membersOnceRead() {
        // The service keeps every control for buckets that may come here until they do: before the first read any
        // bucket may; after a lapse the others serve them, and the keep must not grow with all of theirs.
        var grants = BucketGrants(selfID: "w-a")
        _ = grants.start(now: 0)
        #expect(!grants.hasReadMembers)
        _ = grants.leaseGranted(id: 7, ttl: 10, sentAt: 0)
        _ = grants.membersRead(["w-a", "w-b"], now: 0.1)
        #expect(grants.hasReadMembers && !grants.wanted.isEmpty)
        _ = grants.tick(now: 60)
        #expect(grants.members.isEmpty && grants.wanted.isEmpty, "the lease lapsed by the clock")
        #expect(grants.hasReadMembers)
    }

    @Test("G6: a refused claim is tried again after a pause, not in a loop; a win no longer wanted is given back")
    func refusedAndUnwanted() {
        var grants = BucketGrants(selfID: "w-b", configuration: .init(claimBatch: 128))
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: 9, ttl: 10, sentAt: 0)
        // Its own key not read back (an announce lost): written again, and nothing wanted until it is read.
        #expect(grants.membersRead(["w-a"], now: 0) == [.announce(lease: 9)])
        let batches = Self.claims(grants.membersRead(["w-a", "w-b"], now: 0))
        #expect(!batches.isEmpty)
        // w-a still holds the first batch (it writes its rides' last states first): refused.
        #expect(Self.claims(grants.claimAnswered(batches[0], granted: [:], lease: 9, now: 0.1)).isEmpty)
        #expect(Self.claims(grants.tick(now: 0.3)).isEmpty, "not again before \(BucketGrants.claimRetry) s")
        #expect(Self.claims(grants.tick(now: 0.7)) == [batches[0]])
        // The members change while a claim is out: the won buckets no longer wanted go back at once, unserved.
        _ = grants.membersRead(["w-a"], now: 0.8)  // w-b's own key not read: it wants nothing
        let late = grants.claimAnswered(
            batches[0], granted: Dictionary(uniqueKeysWithValues: batches[0].map { ($0, 4) }), lease: 9, now: 0.9)
        #expect(late.contains(.giveBack(batches[0].sorted(), lease: 9)))
        #expect(!late.contains { if case .serve = $0 { true } else { false } })
        #expect(grants.granted.isEmpty)
    }

    @Test("G6: a member that joins makes the holder stop those buckets, then give them back")
    func joinStopsThenGivesBack() {
        var grants = Self.holdingAll(lease: 1)
        let moving = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        let actions = grants.membersRead(["w-a", "w-b"], now: 1.5)
        #expect(actions.contains(.stop(moving)))
        #expect(!actions.contains { if case .giveBack = $0 { true } else { false } }, "not before the stop is done")
        // Given back in transactions etcd takes: 128 keys each at most.
        let given = grants.stopped(moving, now: 1.6).compactMap { action -> [Int]? in
            if case .giveBack(let batch, 1) = action { batch } else { nil }
        }
        #expect(given.joined().sorted() == moving && given.allSatisfy { $0.count <= 128 } && given.count > 1)
        #expect(grants.granted.count == Ownership.bucketCount - moving.count)
    }

    @Test(
        "G6: the lease counts from when the renewal was sent, less the margin, and ends every bucket when it runs out")
    func leaseByTheClock() {
        var grants = BucketGrants(selfID: "w-a", configuration: .init(leaseTTL: 9, margin: 1))
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: 4, ttl: 9, sentAt: 0)
        #expect(grants.leaseLive(at: 7.9) && !grants.leaseLive(at: 8.0))
        for batch in Self.claims(grants.membersRead(["w-a"], now: 0.1)) {
            _ = grants.claimAnswered(
                batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 2) }), lease: 4, now: 0.2)
        }
        #expect(grants.tick(now: 3.1).contains(.renewLease(4)), "renewed every third of the TTL")
        // Sent at 3.1, answered (late) at 5: valid until 3.1 + 9 - 1, not 5 + 9 - 1.
        _ = grants.leaseRenewed(4, ttl: 9, sentAt: 3.1, now: 5)
        #expect(grants.leaseLive(at: 11.0) && !grants.leaseLive(at: 11.1))
        // A pause past that: the first tick after it stops everything and asks for a new lease.
        let actions = grants.tick(now: 20)
        #expect(actions.first.map { if case .stopAll = $0 { true } else { false } } == true)
        #expect(actions.contains(.grantLease))
        #expect(grants.granted.isEmpty && grants.lease == nil)
    }

    @Test("G6: a claim answered after its lease lapsed grants nothing under the new lease (found by the simulation)")
    func claimOfALapsedLease() {
        var grants = BucketGrants(selfID: "w-a", configuration: .init(leaseTTL: 6, margin: 1))
        _ = grants.start(now: 0)
        _ = grants.leaseGranted(id: 1, ttl: 6, sentAt: 0)
        let batch = Self.claims(grants.membersRead(["w-a"], now: 0.1))[0]
        _ = grants.tick(now: 6)  // lapsed by the clock with the claim still out
        _ = grants.leaseGranted(id: 2, ttl: 6, sentAt: 6)
        // Nothing served; the grants that claim made are announced ended (G5, G6: nobody waits for them).
        #expect(
            grants.claimAnswered(
                batch, granted: Dictionary(uniqueKeysWithValues: batch.map { ($0, 9) }), lease: 1, now: 6.2)
                == [.releaseGrants(Dictionary(uniqueKeysWithValues: batch.map { ($0, 9) }))])
        #expect(grants.granted.isEmpty)
        // Under the new lease the buckets are claimed again once the members are read.
        #expect(Self.claims(grants.membersRead(["w-a"], now: 6.3)).first == batch)
    }

    @Test("G6: a renewal answering TTL 0 (the lease expired in etcd) stops every bucket")
    func renewalRefused() {
        var grants = Self.holdingAll(lease: 4)
        let actions = grants.leaseRenewed(4, ttl: 0, sentAt: 3.4, now: 3.5)
        #expect(actions.first.map { if case .stopAll = $0 { true } else { false } } == true)
        #expect(grants.granted.isEmpty)
    }

    @Test(
        "G5, G6: a worker that lost the broker stops every bucket and revokes its lease, and claims nothing until resumed"
    )
    func brokerLostRevokes() {
        var grants = Self.holdingAll(lease: 4)
        let actions = grants.suspend(reason: "broker lease lapsed", now: 1)
        #expect(actions.count == 2 && actions.last == .revoke(4))
        #expect(grants.tick(now: 2) == [])
        #expect(grants.resume(now: 3) == [.grantLease])
        // Suspended again with that request out: its grant is revoked when it comes, and the next resume asks anew.
        _ = grants.suspend(reason: "broker lease lapsed again", now: 3.1)
        #expect(grants.leaseGranted(id: 5, ttl: 10, sentAt: 3) == [.revoke(5)])
        #expect(grants.resume(now: 4) == [.grantLease])
        // A second grant for one request (the first try reached etcd, its answer was lost) is revoked too.
        _ = grants.leaseGranted(id: 6, ttl: 10, sentAt: 4)
        #expect(grants.leaseGranted(id: 7, ttl: 10, sentAt: 4) == [.revoke(7)])
        #expect(grants.lease?.id == 6)
    }

    // MARK: - Simulation

    /// A linearizable store as etcd is one: leases that end at their TTL after the last renewal *received*, keys
    /// bound to them, revisions.
    struct Store {
        var revision: Int64 = 1
        var leases: [Int64: (owner: String, expiresAt: Double)] = [:]
        var members: [String: Int64] = [:]
        /// Each bucket's key: the lease it is bound to and the revision that wrote it.
        var buckets: [Int: (lease: Int64, revision: Int64)] = [:]
        var nextLease: Int64 = 100

        mutating func expire(now: Double) {
            for (id, lease) in leases where now >= lease.expiresAt { drop(id) }
        }
        mutating func drop(_ id: Int64) {
            leases[id] = nil
            members = members.filter { $0.value != id }
            buckets = buckets.filter { $0.value.lease != id }
            revision += 1
        }
    }

    struct Worker {
        var grants: BucketGrants
        var serving: Set<Int> = []
        var pausedUntil = -1.0
        var inbox: [(at: Double, apply: (inout Worker, Double) -> [Action])] = []
    }

    struct Request {
        var worker: Int
        var at: Double
        var sentAt: Double
        var action: Action
    }

    /// Checked against a broken machine: counting a renewal from when its answer came back (margin 0) gave 6,797
    /// and 14,345 bucket-steps served twice in seeds 2 and 6 of these eight.
    @Test(
        "G6: with pauses past the TTL, a join and random delays, no two workers ever serve one bucket at once",
        arguments: Array(1...8) as [UInt64])
    func simulation(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        func uniform(_ range: ClosedRange<Double>) -> Double {
            range.lowerBound + (range.upperBound - range.lowerBound) * Double(random.next() % 10_000) / 10_000
        }
        let configuration = BucketGrants.Configuration(leaseTTL: 6, margin: 1, membersInterval: 1, claimBatch: 128)
        var store = Store()
        var workers = ["w-a", "w-b", "w-c", "w-d"].map {
            Worker(grants: BucketGrants(selfID: $0, configuration: configuration))
        }
        var started: Set<Int> = []
        var requests: [Request] = []
        var overlaps = 0
        let step = 0.1

        func carryOut(_ actions: [Action], worker index: Int, now: Double) {
            for action in actions {
                switch action {
                case .serve(let buckets): workers[index].serving.formUnion(buckets.keys)
                case .stop(let buckets):
                    workers[index].serving.subtract(buckets)
                    // The rides' last states take a moment to write.
                    workers[index].inbox.append((now + uniform(0.05...0.3), { $0.grants.stopped(buckets, now: $1) }))
                case .stopAll: workers[index].serving = []
                default:
                    requests.append(Request(worker: index, at: now + uniform(0.01...0.4), sentAt: now, action: action))
                }
            }
        }

        /// The store answers one request when it arrives; the answer reaches the worker after another delay.
        func answer(_ request: Request, now: Double) {
            let index = request.worker
            let owner = workers[index].grants.selfID
            let back = now + uniform(0.01...0.4)
            // One answer in twenty of the lease's and the members' requests is lost (a time limit): the request
            // failed as far as the worker knows, whatever the store did. Not in the last twenty seconds, which
            // check that the group settles once the faults stop (a renewal lost at 85 s lapses a lease at 87 s).
            let action = request.action
            var losable = false
            switch action {
            case .grantLease, .renewLease, .readMembers: losable = true
            default: break
            }
            let lost = losable && now < 70 && random.next() % 20 == 0
            func reply(_ apply: @escaping (inout Worker, Double) -> [Action]) {
                if lost {
                    workers[index].inbox.append((back, { $0.grants.requestFailed(action, now: $1) }))
                } else {
                    workers[index].inbox.append((back, apply))
                }
            }
            switch request.action {
            case .grantLease:
                let id = store.nextLease
                store.nextLease += 1
                store.leases[id] = (owner, now + Double(configuration.leaseTTL))
                let sentAt = request.sentAt
                reply { worker, _ in
                    worker.grants.leaseGranted(id: id, ttl: Int64(configuration.leaseTTL), sentAt: sentAt)
                }
            case .renewLease(let id):
                var ttl: Int64 = 0
                if store.leases[id] != nil {
                    store.leases[id]?.expiresAt = now + Double(configuration.leaseTTL)
                    ttl = Int64(configuration.leaseTTL)
                }
                let sentAt = request.sentAt
                reply { $0.grants.leaseRenewed(id, ttl: ttl, sentAt: sentAt, now: $1) }
            case .announce(let id):
                if store.leases[id] != nil {
                    store.members[owner] = id
                    store.revision += 1
                }
            case .readMembers:
                let live = Array(store.members.keys)
                reply { $0.grants.membersRead(live, now: $1) }
            case .claim(let batch, let id):
                guard store.leases[id] != nil else {
                    reply { $0.grants.claimFailed(batch, lease: id, now: $1) }
                    break
                }
                // The executor's two steps: all or nothing, then the free ones of the batch; keys already bound to
                // this lease (a claim whose answer was lost) count as won at their own revision.
                var won: [Int: Int64] = [:]
                for bucket in batch where store.buckets[bucket]?.lease == id {
                    won[bucket] = store.buckets[bucket]!.revision
                }
                let free = batch.filter { store.buckets[$0] == nil }
                store.revision += 1
                for bucket in free {
                    store.buckets[bucket] = (id, store.revision)
                    won[bucket] = store.revision
                }
                // One answer in ten is lost on its way back (a time limit): the worker cannot know what was written.
                if random.next() % 10 == 0 {
                    reply { $0.grants.claimFailed(batch, lease: id, now: $1) }
                } else {
                    reply { [won] in $0.grants.claimAnswered(batch, granted: won, lease: id, now: $1) }
                }
            case .giveBack(let batch, let id):
                for bucket in batch where store.buckets[bucket]?.lease == id { store.buckets[bucket] = nil }
                store.revision += 1
                reply { worker, _ in
                    worker.grants.gaveBack(batch, lease: id)
                    return []
                }
            case .auditKeys(let id):
                let held = store.buckets.filter { $0.value.lease == id }.map(\.key)
                reply { $0.grants.keysHeld(held, lease: id, now: $1) }
            case .revoke(let id):
                if store.leases[id] != nil { store.drop(id) }
            default: break
            }
        }

        var now = 0.0
        while now < 90 {
            now += step
            store.expire(now: now)
            // Workers w-a to w-c start at once, w-d joins at 30 s; each may pause for up to 12 s (past the TTL).
            for index in workers.indices where !started.contains(index) && now >= (index == 3 ? 30 : 0) {
                started.insert(index)
                carryOut(workers[index].grants.start(now: now), worker: index, now: now)
            }
            if now < 70, random.next() % 100 == 0 {
                let index = Int(random.next() % UInt64(started.count))
                workers[index].pausedUntil = now + uniform(2...12)
            }
            let arrived = requests.filter { $0.at <= now }
            requests.removeAll { $0.at <= now }
            for request in arrived { answer(request, now: now) }
            for index in workers.indices where started.contains(index) && now >= workers[index].pausedUntil {
                let due = workers[index].inbox.filter { $0.at <= now }
                workers[index].inbox.removeAll { $0.at <= now }
                for message in due { carryOut(message.apply(&workers[index], now), worker: index, now: now) }
                carryOut(workers[index].grants.tick(now: now), worker: index, now: now)
            }
            // What each worker would publish now: a bucket it serves, while its lease is live by its own clock.
            // (A paused worker publishes nothing; on waking its first publish checks the lease first.)
            var publishing: [Set<Int>] = []
            for worker in workers where now >= worker.pausedUntil && worker.grants.leaseLive(at: now) {
                publishing.append(worker.serving)
            }
            for i in publishing.indices {
                for j in publishing.indices where j > i { overlaps += publishing[i].intersection(publishing[j]).count }
            }
        }
        #expect(overlaps == 0, "bucket-steps served by two workers at once (seed \(seed))")
        // Twenty seconds with no pause: every bucket is served by exactly its owner among the four.
        let owners = Ownership(members: workers.map(\.grants.selfID))
        for worker in workers {
            let expected = Set(owners.buckets(of: worker.grants.selfID))
            let extra = worker.serving.subtracting(expected).count
            let missing = expected.subtracting(worker.serving).count
            #expect(
                extra == 0 && missing == 0,
                "\(worker.grants.selfID), seed \(seed): \(extra) extra, \(missing) missing; members \(worker.grants.members), granted \(worker.grants.granted.count), paused until \(worker.pausedUntil), lease \(String(describing: worker.grants.lease)), \(worker.grants.progress)"
            )
        }
    }
}
