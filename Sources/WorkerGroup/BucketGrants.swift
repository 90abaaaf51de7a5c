/// G6: which buckets this worker may serve when a linearizable authority (etcd) grants them: a pure state
/// machine, the authority's answers and the clock in, actions out, tested alone. The service carries the actions
/// out over etcd's gateway and hands the grants to ``BucketHandover``.
///
/// - The worker holds one lease with a TTL. Its member key lives under that lease, so the members (for the
///   rendezvous hashing of ``Ownership``) are the workers whose leases are live, as etcd counts them: no retained
///   presence, no eventually consistent copy.
/// - A bucket it should own by the members it read is claimed by a transaction that writes the bucket's owner key
///   under its lease only if the key is absent. The bucket is served only after that transaction succeeded; its
///   epoch is the transaction's revision (plus the store's base, ``Configuration/epochBase``): unique, and it
///   grows with every grant.
/// - A bucket it should no longer own is stopped (its rides write their last states, as a release does), then
///   given back (its key deleted, only while it is bound to this worker's lease). The new owner's claim succeeds
///   only after that, or after this worker's lease ended: two workers never hold one bucket's grant.
/// - The lease counts from when this worker *sent* the request that renewed it, by its own monotonic clock, less
///   a margin: etcd's timer runs from when it received the request, never earlier. Once that time has passed,
///   every bucket stops at once, writing nothing (another worker may hold it by now), and a new lease is asked for.
/// - The two leases are tied: a worker that lost the broker (its G5 lease lapsed) revokes its etcd lease, so
///   that its buckets move now rather than at the TTL's end; one that lost etcd stops publishing (above).
/// - G5, G6: a grant ends in etcd before the old holder's last bytes have surely reached the broker: the network
///   or a proxy may still hold a status it wrote before its lease's end. So a bucket granted here that another
///   worker held before (etcd's record of its last holder, replaced by the claim) is served only once that holder
///   cannot write any more: its presence says offline (its will: the broker closed the connection that wrote; or
///   its goodbye, sent after its last write), or its release notice for that grant arrived (sent after its gate
///   closed, on the same connection, so after every status it wrote under the grant), or
///   ``Configuration/releaseWait`` has passed. A holder never heard from counts as online. A grant given up here
///   while it still waited is announced only once that wait is over, so the next holder waits for the one before.
public struct BucketGrants: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// The etcd lease's TTL, in seconds.
        public var leaseTTL: Int
        /// How long before the lease's end by this worker's clock it stops serving, in seconds.
        public var margin: Double
        /// How often the members are read, in seconds.
        public var membersInterval: Double
        /// Buckets per claim transaction (at most ``maximumClaimBatch``).
        public var claimBatch: Int
        /// Added to a grant's revision to make its epoch (the authority's base, from the store).
        public var epochBase: UInt64
        /// The longest a bucket granted here waits for its last holder to be offline or to send its release
        /// notice, in seconds: past it the bucket is served anyway (the broker never closed that holder's
        /// connection), and the wait's end is logged.
        public var releaseWait: Double

        /// Buckets per transaction at most: a claim writes two keys a bucket (its owner and its holder record),
        /// and etcd takes at most 128 operations in each list of one by default.
        public static let maximumClaimBatch = 64

        public init(
            leaseTTL: Int = 10, margin: Double = 1, membersInterval: Double = 1,
            claimBatch: Int = Self.maximumClaimBatch, epochBase: UInt64 = 0, releaseWait: Double = 10
        ) {
            precondition(Double(leaseTTL) > 2 * margin, "the lease's margin must leave it time to be renewed")
            self.leaseTTL = leaseTTL
            self.margin = margin
            self.membersInterval = membersInterval
            self.claimBatch = max(1, min(claimBatch, Self.maximumClaimBatch))
            self.epochBase = epochBase
            self.releaseWait = max(0, releaseWait)
        }
    }

    public enum Action: Sendable, Equatable {
        /// Ask the authority for a lease of ``Configuration/leaseTTL``; answer ``leaseGranted(id:ttl:sentAt:)``.
        case grantLease
        /// Write this worker's member key under the lease (overwriting its own earlier one).
        case announce(lease: Int64)
        /// Renew the lease once; answer ``leaseRenewed(ttl:sentAt:now:)``.
        case renewLease(Int64)
        /// Read the members' keys; answer ``membersRead(_:now:)``.
        case readMembers
        /// Claim these buckets under the lease, each only if nobody holds it; answer
        /// ``claimAnswered(_:granted:lease:now:)`` or ``claimFailed(_:lease:now:)``.
        case claim([Int], lease: Int64)
        /// Serve these buckets under these epochs: load their rides' states, then serve each above its epoch's
        /// first sequence (``SequenceNumbering``).
        case serve([Int: UInt64])
        /// Stop serving these buckets, writing each ride's last state (a release); answer ``stopped(_:now:)``.
        case stop([Int])
        /// Delete these buckets' keys, each only while bound to the lease; answer ``gaveBack(_:lease:)``. Then the
        /// group is told that every grant of them here up to the store's revision has ended (a release notice).
        case giveBack([Int], lease: Int64)
        /// G5, G6: stop every held bucket at once, writing nothing: the lease lapsed or was given up, and
        /// another worker may hold them now.
        /// `ended`: every bucket granted here until now, with its epoch (served or not), for the release notice.
        case stopAll(reason: String, ended: [Int: UInt64] = [:])
        /// End the lease now (its keys go with it): this worker cannot serve, and its buckets should move now.
        case revoke(Int64)
        /// Read which buckets' keys are bound to the lease; answer ``keysHeld(_:lease:now:)``.
        case auditKeys(lease: Int64)
        /// These buckets are granted here and wait for their last holder (offline, or its release notice) before
        /// they are served: for the log.
        case awaitRelease([Int], holder: String)
        /// Tell the group that these grants ended here, nothing written under them any more (a release notice).
        case releaseGrants([Int: UInt64])
        /// The wait for these buckets' last holder ran out: they are served now, though that holder may still
        /// write one late status (the broker never closed its connection). For the log and `/metrics`.
        case releaseWaitExpired([Int], holders: [String])
    }

    /// Who held a bucket before this worker's grant, as etcd's record of its last holder said.
    public enum PreviousHolder: Sendable, Equatable {
        /// Nobody, or this worker itself (its own earlier connection was closed when its current one opened).
        case none
        /// Another worker, under the grant of this epoch.
        case worker(String, epoch: UInt64)
        /// Not known (a claim whose answer was lost, or a record that does not read): waited for in full.
        case unknown
    }

    public let selfID: String
    public let configuration: Configuration
    /// The lease held, and when it ends by this worker's clock (less the margin).
    public private(set) var lease: (id: Int64, validUntil: Double)? { didSet { changes &+= 1 } }
    /// Whether the members were ever read: after a lapse ``members`` is empty again, but the worker knew its group.
    public private(set) var hasReadMembers = false
    /// The live members as last read, sorted; empty before the first read.
    public private(set) var members: [String] = [] { didSet { changes &+= 1 } }
    /// Buckets granted to this worker, with their epochs. Only these are served.
    public private(set) var granted: [Int: UInt64] = [:] { didSet { changes &+= 1 } }
    private var claiming: Set<Int> = [] { didSet { changes &+= 1 } }
    /// Buckets whose claim's answer was lost: their keys may be bound to this lease (``claimFailed(_:lease:now:)``).
    private var uncertain: Set<Int> = [] { didSet { changes &+= 1 } }
    /// Buckets whose last claim found another holder, and when: claimed again only after a pause (the holder
    /// gives it back after writing its rides' last states, or its lease ends), not in a loop.
    private var refusedAt: [Int: Double] = [:]
    private var stopping: Set<Int> = [] { didSet { changes &+= 1 } }
    /// A wait for a bucket's last holder (nil: not known) to stop writing under its grant of `epoch`, since when;
    /// `grant` is this worker's own grant of the bucket.
    private struct Wait {
        var holder: String?
        var epoch: UInt64
        var since: Double
        var grant: UInt64
    }
    /// Buckets granted and not yet served: their last holder may still write.
    private var awaiting: [Int: Wait] = [:]
    /// Grants this worker gave up while they still waited (or whose last holder is not known): their release
    /// notice goes out only once that wait is over, or the next holder would not wait for the one before.
    private var deferred: [Int: Wait] = [:]
    /// The newest release notice heard for each bucket: who sent it, for its grant of which epoch.
    private var releases: [Int: (worker: String, epoch: UInt64)] = [:]
    /// Each worker's presence as last heard: online or not. A worker never heard from counts as online (a fresh
    /// worker has not read the retained presences yet): its buckets wait for its notice or the wait's end.
    private var presences: [String: Bool] = [:]
    private var givingBack: Set<Int> = [] { didSet { changes &+= 1 } }
    private var askedForLease = false
    private var renewing = false
    private var lastRenewal = -Double.infinity
    private var lastMembersRead = -Double.infinity
    private var readingMembers = false
    private var auditing = false
    private var lastAudit = -Double.infinity
    /// How often the keys bound to the lease are read back, in seconds.
    public static let auditInterval = 5.0
    /// Whether this worker may hold buckets: false after ``suspend(now:)`` until ``resume(now:)``.
    private var active = true { didSet { changes &+= 1 } }
    /// Counts every change of what ``reconcile(now:)`` reads; it has nothing to do while the count is the one
    /// it last saw and no refused claim waits for its retry (measured: a tick of four workers in the
    /// simulation otherwise rebuilt sets of thousands of buckets every 0.1 s, and starved the other tests).
    private var changes = 0
    private var reconciled = -1

    public init(selfID: String, configuration: Configuration = Configuration()) {
        self.selfID = selfID
        self.configuration = configuration
    }

    /// Whether this worker holds a live lease at `now`.
    public func leaseLive(at now: Double) -> Bool { lease.map { now < $0.validUntil } ?? false }

    /// The buckets this worker should own by the members last read.
    public var wanted: Set<Int> {
        guard active, lease != nil, members.contains(selfID) else { return [] }
        return ownedByMembers
    }
    /// This worker's buckets by ``members``, computed when they change (a table of 8,192 buckets is not made
    /// again at every tick).
    private var ownedByMembers: Set<Int> = []

    /// Where the grants stand: for the log while they are on their way, and for `/metrics`.
    public struct Progress: Sendable, Equatable, CustomStringConvertible {
        public var wanted: Int
        public var granted: Int
        public var claiming: Int
        /// Claimed and found held by another worker (it gives them back after writing their rides' last states).
        public var refused: Int
        /// Granted, and waiting for their last holder to be offline or to send its release notice.
        public var awaitingRelease: Int = 0
        public var stopping: Int
        public var givingBack: Int
        public var description: String {
            "wanted \(wanted), granted \(granted), claiming \(claiming), refused \(refused), awaiting release \(awaitingRelease), stopping \(stopping), giving back \(givingBack)"
        }
    }

    public var progress: Progress {
        let wantedNow = wanted
        return Progress(
            wanted: wantedNow.count, granted: granted.count, claiming: claiming.count,
            refused: refusedAt.keys.filter { wantedNow.contains($0) && granted[$0] == nil }.count,
            awaitingRelease: awaiting.count, stopping: stopping.count, givingBack: givingBack.count)
    }

    // MARK: - Events

    /// Starts (or restarts) the cycle: a lease first.
    public mutating func start(now: Double) -> [Action] { tick(now: now) }

    /// The authority granted a lease of `ttl` seconds for the request sent at `sentAt`.
    public mutating func leaseGranted(id: Int64, ttl: Int64, sentAt: Double) -> [Action] {
        // Only the one lease asked for is taken: a second grant (a request sent again after a failure whose first
        // try reached etcd) would leave keys bound to a lease nobody renews.
        let asked = askedForLease
        askedForLease = false
        guard active, asked, lease == nil else { return [.revoke(id)] }
        lease = (id, sentAt + Double(ttl) - configuration.margin)
        lastRenewal = sentAt
        return [.announce(lease: id), .readMembers]
    }

    /// The lease's renewal sent at `sentAt` answered `ttl` seconds; 0: the lease is gone.
    public mutating func leaseRenewed(_ renewed: Int64, ttl: Int64, sentAt: Double, now: Double) -> [Action] {
        guard let held = lease, held.id == renewed else { return [] }  // a renewal of a lease lapsed since
        renewing = false
        guard ttl > 0 else { return lapse(reason: "etcd no longer knows lease \(held.id) (it expired)", now: now) }
        // Past its end by this worker's clock the lease has lapsed, whatever a late answer says: the publishing
        // side stopped at that end (a clear it held back must not be forgotten by a lease that goes on).
        guard now < held.validUntil else {
            return lapse(
                reason: "lease \(held.id) ran out by this worker's clock before its renewal came back", now: now)
        }
        lease = (held.id, max(held.validUntil, sentAt + Double(ttl) - configuration.margin))
        return tick(now: now)
    }

    /// A request to the authority failed (no member answered in time): the lease runs out by the clock unless a
    /// later request succeeds.
    public mutating func requestFailed(_ request: Action, now: Double) -> [Action] {
        switch request {
        case .grantLease: askedForLease = false
        case .renewLease(let id) where id == lease?.id: renewing = false
        case .readMembers: readingMembers = false
        case .auditKeys: auditing = false
        default: break
        }
        return tick(now: now)
    }

    /// The members' keys as read: each live worker's id.
    public mutating func membersRead(_ read: [String], now: Double) -> [Action] {
        readingMembers = false
        hasReadMembers = true
        let sorted = Array(Set(read)).sorted()
        if sorted != members {
            members = sorted
            ownedByMembers = Set(Ownership(members: sorted).buckets(of: selfID))
        }
        // Its own key missing (the announce failed, or has not landed yet): written again, or it never gets a share.
        if let held = lease, !members.contains(selfID) { return [.announce(lease: held.id)] + reconcile(now: now) }
        return reconcile(now: now)
    }

    /// A claim of `batch` under `claimLease` answered: the buckets granted, each with the revision of the
    /// transaction that wrote its key (its grant; a key found already bound to this lease, written by a claim whose
    /// answer was lost, counts with its own revision). The rest were held by another worker and are claimed again
    /// after a pause. An answer for a lease lapsed since grants nothing: its keys end with that lease.
    public mutating func claimAnswered(
        _ batch: [Int], granted won: [Int: Int64], previous: [Int: PreviousHolder] = [:], lease claimLease: Int64,
        now: Double
    ) -> [Action] {
        guard lease?.id == claimLease else {
            // Granted under a lease lapsed since: never served, but its claim replaced the holder record.
            var ended: [Int: UInt64] = [:]
            for (bucket, revision) in won {
                let epoch = configuration.epochBase + UInt64(max(revision, 0))
                if let wait = wait(for: previous[bucket], bucket: bucket, grant: epoch, now: now) {
                    deferred[bucket] = wait
                } else {
                    ended[bucket] = epoch
                }
            }
            return ended.isEmpty ? [] : [.releaseGrants(ended)]
        }
        for bucket in batch {
            claiming.remove(bucket)
            uncertain.remove(bucket)
            if won[bucket] == nil { refusedAt[bucket] = now } else { refusedAt[bucket] = nil }
        }
        guard !won.isEmpty else { return reconcile(now: now) }
        let wantedNow = wanted
        var serve: [Int: UInt64] = [:]
        var unwanted: [Int] = []
        var waits: [String: [Int]] = [:]
        for (bucket, revision) in won.sorted(by: { $0.key < $1.key }) {
            let epoch = configuration.epochBase + UInt64(max(revision, 0))
            granted[bucket] = epoch
            // This worker's own earlier grant, given up while it waited: the same wait goes on.
            var wait = wait(for: previous[bucket], bucket: bucket, grant: epoch, now: now)
            if case .worker(selfID, _)? = previous[bucket], let earlier = deferred.removeValue(forKey: bucket) {
                wait = Wait(holder: earlier.holder, epoch: earlier.epoch, since: earlier.since, grant: epoch)
            }
            guard wantedNow.contains(bucket) && leaseLive(at: now) else {
                if let wait { deferred[bucket] = wait }
                unwanted.append(bucket)
                continue
            }
            if let wait {
                awaiting[bucket] = wait
                waits[wait.holder ?? "unknown", default: []].append(bucket)
            } else {
                serve[bucket] = epoch
            }
        }
        var actions: [Action] = serve.isEmpty ? [] : [.serve(serve)]
        actions += waits.sorted { $0.key < $1.key }.map { .awaitRelease($0.value, holder: $0.key) }
        // Won after the members changed again: served by nobody here, given back at once.
        if let held = lease, !unwanted.isEmpty {
            for bucket in unwanted {
                granted[bucket] = nil
                givingBack.insert(bucket)
            }
            actions.append(.giveBack(unwanted.sorted(), lease: held.id))
        }
        return actions + reconcile(now: now)
    }

    /// A claim under `claimLease` could not be sent or its answer was lost (a time limit): etcd may have written
    /// the keys or not. Wanted, they are claimed again (a key found bound to this lease is won); no longer wanted,
    /// they are given back, so that no key is left bound to a live lease that does not know it holds it.
    public mutating func claimFailed(_ batch: [Int], lease claimLease: Int64, now: Double) -> [Action] {
        guard lease?.id == claimLease else { return [] }
        for bucket in batch {
            claiming.remove(bucket)
            uncertain.insert(bucket)
            refusedAt[bucket] = now  // tried again after the same pause as a refusal: etcd may be electing
        }
        return tick(now: now)
    }

    /// The service stopped serving these buckets (their last states are written): their keys are given back.
    public mutating func stopped(_ buckets: [Int], now: Double) -> [Action] {
        let done = buckets.filter { stopping.remove($0) != nil }
        for bucket in done { granted[bucket] = nil }
        guard let held = lease, !done.isEmpty else { return reconcile(now: now) }
        for bucket in done { givingBack.insert(bucket) }
        return batches(of: done.sorted()).map { .giveBack($0, lease: held.id) } + reconcile(now: now)
    }

    /// G5, G6: `worker`'s release notice: it stopped writing for these buckets, each granted to it under the
    /// epoch given, and anything it wrote under those grants came before the notice on its connection.
    public mutating func releaseHeard(from worker: String, epochs: [Int: UInt64], now: Double) -> [Action] {
        guard worker != selfID else { return [] }
        for (bucket, epoch) in epochs where (releases[bucket]?.epoch ?? 0) <= epoch {
            releases[bucket] = (worker, epoch)
        }
        return endWaits(now: now) { bucket, wait in
            wait.holder == worker && epochs[bucket].map { $0 >= wait.epoch } == true
        }
    }

    /// G1, G5: `worker`'s presence as last heard. Offline (its will, its goodbye after its last write, or
    /// deleted): the connection it wrote on is closed, or wrote its last, so the buckets it held are served here.
    public mutating func presenceHeard(worker: String, online isOnline: Bool, now: Double) -> [Action] {
        guard worker != selfID else { return [] }
        presences[worker] = isOnline
        return isOnline ? [] : endWaits(now: now) { _, wait in wait.holder == worker }
    }

    /// The buckets whose keys are bound to `held`, as etcd read them. A key this worker does not know it holds
    /// (a claim whose answer was lost and that etcd applied only after the bucket was given back, or no longer
    /// wanted) would refuse the bucket to its owner until this lease ends: wanted, it is claimed again (found
    /// bound, it is won); otherwise it is given back.
    public mutating func keysHeld(_ buckets: [Int], lease held: Int64, now: Double) -> [Action] {
        guard lease?.id == held else { return [] }
        auditing = false
        let known = Set(granted.keys).union(claiming).union(uncertain).union(givingBack).union(stopping)
        let leaked = Set(buckets).subtracting(known)
        guard !leaked.isEmpty else { return [] }
        leakedKeys += leaked.count
        let wantedNow = wanted
        uncertain.formUnion(leaked.intersection(wantedNow))
        let unwanted = leaked.subtracting(wantedNow).sorted()
        givingBack.formUnion(unwanted)
        // Their claims replaced holder records this worker never read: announced once the wait has passed.
        for bucket in unwanted where deferred[bucket] == nil {
            deferred[bucket] = Wait(holder: nil, epoch: 0, since: now, grant: 0)
        }
        return batches(of: unwanted).map { .giveBack($0, lease: held) } + reconcile(now: now)
    }

    /// Buckets whose keys the last audit found bound to this lease unknown to this worker, since it started.
    public private(set) var leakedKeys = 0

    /// These buckets' keys are deleted (or were not bound to this lease any more), by a transaction that left the
    /// store at `revision`: every grant of them here up to it has ended, and is announced (but those whose wait for
    /// the holder before goes on, and any held here again since).
    @discardableResult
    public mutating func gaveBack(_ buckets: [Int], lease given: Int64, revision: Int64 = 0) -> [Action] {
        guard lease?.id == given else { return [] }  // an earlier lease's: its keys ended with it
        for bucket in buckets { givingBack.remove(bucket) }
        guard revision > 0 else { return [] }
        let epoch = configuration.epochBase + UInt64(revision)
        // A lost claim's grant, not known: its give-back's revision is above it (a claim applied later still is a
        // key bound to this lease, found by ``keysHeld``).
        for bucket in buckets where deferred[bucket]?.grant == 0 { deferred[bucket]?.grant = epoch }
        var ended: [Int: UInt64] = [:]
        for bucket in buckets
        where deferred[bucket] == nil && granted[bucket] == nil && !claiming.contains(bucket)
            && !uncertain.contains(bucket)
        {
            ended[bucket] = epoch
        }
        return ended.isEmpty ? [] : [.releaseGrants(ended)]
    }

    /// G5, G6: this worker lost the broker (its broker lease lapsed): it cannot serve, so it stops every bucket
    /// at once and revokes its etcd lease, and holds nothing until ``resume(now:)``.
    public mutating func suspend(reason: String, now: Double) -> [Action] {
        active = false
        var actions = lapse(reason: reason, now: now, renew: false)
        if let held = revokable {
            revokable = nil
            actions.append(.revoke(held))
        }
        return actions
    }

    /// The broker is back and this worker's presence is confirmed: it takes a new lease and claims again.
    public mutating func resume(now: Double) -> [Action] {
        active = true
        return tick(now: now)
    }

    /// Time passes: the lease's end by the clock, its renewal, the members' read, claims to retry.
    public mutating func tick(now: Double) -> [Action] {
        guard active else { return [] }
        let ended = endExpiredWaits(now: now)
        guard let held = lease else {
            guard !askedForLease else { return ended }
            askedForLease = true
            return ended + [.grantLease]
        }
        if now >= held.validUntil {
            return ended
                + lapse(reason: "lease \(held.id) ran out by this worker's clock before a renewal came back", now: now)
        }
        var actions: [Action] = []
        if !renewing, now - lastRenewal >= Double(configuration.leaseTTL) / 3 {
            renewing = true
            lastRenewal = now
            actions.append(.renewLease(held.id))
        }
        if !auditing, now - lastAudit >= Self.auditInterval {
            auditing = true
            lastAudit = now
            actions.append(.auditKeys(lease: held.id))
        }
        if !readingMembers, now - lastMembersRead >= configuration.membersInterval {
            readingMembers = true
            lastMembersRead = now
            actions.append(.readMembers)
        }
        return ended + actions + reconcile(now: now)
    }

    /// The waits past ``Configuration/releaseWait``: awaited buckets served anyway (logged), deferred grants
    /// announced.
    private mutating func endExpiredWaits(now: Double) -> [Action] {
        guard !awaiting.isEmpty || !deferred.isEmpty else { return [] }
        let wait = configuration.releaseWait
        let expired = awaiting.filter { now - $0.value.since >= wait }
        var actions = endWaits(now: now) { _, waiting in now - waiting.since >= wait }
        if !expired.isEmpty {
            let holders = Set(expired.values.map { $0.holder ?? "unknown" }).sorted()
            actions.append(.releaseWaitExpired(expired.keys.sorted(), holders: holders))
        }
        return actions
    }

    /// Seconds before a bucket whose claim found another holder is claimed again.
    public static let claimRetry = 0.5

    // MARK: - Private

    /// The lease to revoke on ``suspend(reason:now:)``: the one held, or the one just lost by the clock (etcd may
    /// still count it, and its keys would hold the buckets until its TTL ends there).
    private var revokable: Int64?

    private mutating func lapse(reason: String, now: Double, renew: Bool = true) -> [Action] {
        revokable = lease?.id ?? revokable
        let held = !granted.isEmpty || !stopping.isEmpty
        // Grants still waiting for the holder before: announced once that wait is over, not now.
        deferred.merge(awaiting) { $1 }
        let ended = granted.filter { awaiting[$0.key] == nil }
        lease = nil
        granted = [:]
        claiming = []
        uncertain = []
        refusedAt = [:]
        awaiting = [:]
        stopping = []
        givingBack = []
        renewing = false
        readingMembers = false
        auditing = false
        members = []
        ownedByMembers = []
        var actions: [Action] = held ? [.stopAll(reason: reason, ended: ended)] : []
        // A lease lost by this worker's clock may still live in etcd (its renewals arrived, their answers did not):
        // ended now, so that its buckets move at once rather than when etcd's TTL runs out.
        if let lapsed = revokable, renew {
            revokable = nil
            actions.append(.revoke(lapsed))
        }
        if renew { actions += tick(now: now) }
        return actions
    }

    /// Claims for the buckets wanted and not held, stops for those held and not wanted.
    private mutating func reconcile(now: Double) -> [Action] {
        guard let held = lease, leaseLive(at: now) else { return [] }
        if reconciled == changes && refusedAt.isEmpty { return [] }
        defer { reconciled = changes }
        let wantedNow = wanted
        if !refusedAt.isEmpty { refusedAt = refusedAt.filter { wantedNow.contains($0.key) && granted[$0.key] == nil } }
        var actions: [Action] = []
        let leaving = Set(granted.keys).subtracting(wantedNow).subtracting(stopping).sorted()
        // Never served: its stop writes nothing, and its notice waits for the holder before.
        for bucket in leaving { if let wait = awaiting.removeValue(forKey: bucket) { deferred[bucket] = wait } }
        if !leaving.isEmpty {
            stopping.formUnion(leaving)
            actions.append(.stop(leaving))
        }
        // Doubtful keys of buckets no longer wanted: given back (deleted only where bound to this lease).
        let doubtful = uncertain.subtracting(wantedNow).subtracting(givingBack).sorted()
        if !doubtful.isEmpty {
            uncertain.subtract(doubtful)
            givingBack.formUnion(doubtful)
            // Their lost claims may have replaced holder records unread: announced once the wait has passed.
            for bucket in doubtful where deferred[bucket] == nil {
                deferred[bucket] = Wait(holder: nil, epoch: 0, since: now, grant: 0)
            }
            actions += batches(of: doubtful).map { .giveBack($0, lease: held.id) }
        }
        let missing = wantedNow.subtracting(granted.keys).subtracting(claiming).subtracting(givingBack)
            .filter { bucket in refusedAt[bucket].map { now - $0 >= Self.claimRetry } ?? true }.sorted()
        for batch in batches(of: missing) {
            claiming.formUnion(batch)
            actions.append(.claim(batch, lease: held.id))
        }
        return actions
    }

    /// What a grant of `grant` waits for, given the holder record its claim replaced: nil when nothing (no holder
    /// before, this worker itself, or one offline or whose notice for that grant was heard).
    private func wait(for previous: PreviousHolder?, bucket: Int, grant: UInt64, now: Double) -> Wait? {
        switch previous ?? PreviousHolder.none {
        case .none: return nil
        case .unknown: return Wait(holder: nil, epoch: 0, since: now, grant: grant)
        case .worker(let holder, let epoch):
            if holder == selfID || presences[holder] == false { return nil }
            if let notice = releases[bucket], notice.worker == holder, notice.epoch >= epoch { return nil }
            return Wait(holder: holder, epoch: epoch, since: now, grant: grant)
        }
    }

    /// Ends the waits `cleared` picks: an awaited bucket is served (while the lease is live), a deferred grant is
    /// announced.
    private mutating func endWaits(now: Double, _ cleared: (Int, Wait) -> Bool) -> [Action] {
        var serve: [Int: UInt64] = [:]
        var ended: [Int: UInt64] = [:]
        for (bucket, wait) in awaiting where cleared(bucket, wait) {
            awaiting[bucket] = nil
            if let epoch = granted[bucket], leaseLive(at: now) {
                serve[bucket] = epoch
            } else {
                ended[bucket] = wait.grant  // its lease ran out meanwhile: never served, nothing written
            }
        }
        // A lost claim's grant is announced at its give-back's revision, once known (``gaveBack``).
        for (bucket, wait) in deferred where wait.grant > 0 && cleared(bucket, wait) {
            deferred[bucket] = nil
            ended[bucket] = wait.grant
        }
        var actions: [Action] = serve.isEmpty ? [] : [.serve(serve)]
        if !ended.isEmpty { actions.append(.releaseGrants(ended)) }
        return actions
    }

    /// `buckets` in transactions etcd takes (``Configuration/claimBatch`` operations each).
    private func batches(of buckets: [Int]) -> [[Int]] {
        stride(from: 0, to: buckets.count, by: configuration.claimBatch).map {
            Array(buckets[$0..<min($0 + configuration.claimBatch, buckets.count)])
        }
    }
}
