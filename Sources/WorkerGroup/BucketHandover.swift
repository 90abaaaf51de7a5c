/// Which buckets of rides this worker serves as the group changes (G3, G4): a pure state machine, member
/// changes, loaded states, releases and the clock in, actions out. ``Handover`` carries its actions out, with
/// the rides' states, fences and markers; this decides the buckets, and is tested alone.
///
/// - A bucket this worker no longer owns is released at once: its rides write their last state, marked
///   released, and stop (G4: a worker that is no longer the owner stops publishing).
/// - A bucket it gains is loaded (its rides' durable states), then served. If the previous owner is still a
///   member (a join moved the bucket), the new owner waits for that owner's release before loading, so the two
///   never publish the same ride at once and the load reads the released states, which carry the last sequence
///   published (C5); if the release does not come within `releaseTimeout` (the old owner died without its will
///   yet), it loads and serves anyway, which G4 allows for at most one interval. If the previous owner is gone
///   (a leave or a death), the load starts at once.
///
/// The first view must be complete: the service forms it from every retained presence, closed by a marker it
/// publishes to itself after subscribing (as the recovery of L5 is), so a live owner is never mistaken for
/// none.
public struct BucketHandover: Sendable {
    /// What ``Handover`` does for the state machine.
    public enum Action: Sendable, Equatable {
        /// Stop serving these buckets' rides: write each one's last state, marked released, and forget it.
        case release([Int])
        /// Read these buckets' durable states (subscribe to them); report ``loaded(_:generation:now:)`` with
        /// this generation when done (a report of an earlier load of a bucket lost and gained again since
        /// does not count).
        case load([Int], generation: Int)
        /// Forget what was loaded of these buckets without writing anything: they were lost before being served.
        case drop([Int])
        /// Serve these buckets' loaded rides: each continues above its last sequence under a new epoch.
        case serve([Int])
        /// Serve again the loaded rides of these buckets, served here all along, that are not held here any
        /// more (``reclaim(_:now:)``); the rides still held stay as they are.
        case resume([Int])
    }

    /// A bucket on its way to this worker.
    struct Arrival: Sendable, Equatable {
        /// The owner before, while it is still a member and has not released the bucket.
        var previousOwner: String?
        var loaded = false
        var since: Double
        /// The load that reads this bucket; nil while it waits for the previous owner's release.
        var generation: Int?
        /// The previous owner released it: it wrote each ride's last state first (G3), so the states are fresh.
        var released = false
    }

    public let selfID: String
    /// How long a live previous owner may take to release a bucket, in seconds (about one interval).
    public let releaseTimeout: Double
    /// The owners in the last view; nil before the first (``membersChanged(_:now:)``).
    public private(set) var ownership: Ownership?
    /// Buckets served now.
    public private(set) var serving: Set<Int> = []
    private(set) var arriving: [Int: Arrival] = [:]
    /// G3: for the last ``Action/serve(_:)``, the longest any of its buckets waited from the view that gave it
    /// to this worker to being served, in seconds (the handover's duration, for `/metrics`).
    public private(set) var lastServeWait: Double?
    /// Numbers the loads, so that a late report of an earlier load is told apart.
    private var loads = 0
    /// Served buckets whose states are read again (``reclaim(_:now:)``): that load's generation and start, by bucket.
    private var reclaiming: [Int: (generation: Int, since: Double)] = [:]

    /// A worker that serves nothing until its first view of the group, which the service forms from the
    /// retained presences before it reads any ride state.
    public init(selfID: String, releaseTimeout: Double) {
        self.selfID = selfID
        self.releaseTimeout = releaseTimeout
    }

    /// Buckets gained but not yet served.
    public var pending: [Int] { arriving.keys.sorted() }

    /// Whether `bucket` is gained and not yet served (without sorting ``pending``: called per message).
    public func isArriving(_ bucket: Int) -> Bool { arriving[bucket] != nil }

    /// Whether `bucket` is arriving from a previous owner that released it (its rides' last states are fresh),
    /// rather than from one that died, left without releasing, or was waited for no more.
    public func arrivesReleased(_ bucket: Int) -> Bool { arriving[bucket]?.released == true }

    /// Whether `bucket` is served and its states are being read again (``reclaim(_:now:)``).
    public func isReclaiming(_ bucket: Int) -> Bool { reclaiming[bucket] != nil }

    /// How many buckets are gained and not yet served.
    public var pendingCount: Int { arriving.count }

    /// The live members changed (``GroupMembership``).
    public mutating func membersChanged(_ members: [String], now: Double) -> [Action] {
        // Before its first view this worker was not in the group: the group's owners were the others'.
        let before = ownership ?? Ownership(members: members.filter { $0 != selfID })
        let after = Ownership(members: members)
        ownership = after
        let me = selfID
        return assign(Set(after.buckets(of: me)), now: now) { bucket in
            before.owner(ofBucket: bucket).flatMap { $0 != me && members.contains($0) ? $0 : nil }
        }
    }

    /// G6: the buckets an authority (etcd) granted this worker. As a change of members, with the grants as this
    /// worker's buckets; none waits for a previous owner: a bucket is granted only once the previous owner gave
    /// it back (after writing its rides' last states) or its lease ended.
    public mutating func granted(_ mine: Set<Int>, now: Double) -> [Action] {
        assign(mine, now: now) { _ in nil }
    }

    /// These are this worker's buckets now: the others are released (served) or dropped (arriving); the new
    /// ones arrive, waiting for `previousOwner` (a live member that has not released them) when it names one.
    private mutating func assign(_ mine: Set<Int>, now: Double, previousOwner: (Int) -> String?) -> [Action] {
        var actions: [Action] = []
        let lost = (serving.union(arriving.keys)).subtracting(mine).sorted()
        if !lost.isEmpty {
            let wasServing = lost.filter { serving.contains($0) }
            let wasArriving = lost.filter { arriving[$0] != nil }
            for bucket in lost {
                serving.remove(bucket)
                arriving[bucket] = nil
                reclaiming[bucket] = nil
            }
            if !wasServing.isEmpty { actions.append(.release(wasServing)) }
            if !wasArriving.isEmpty { actions.append(.drop(wasArriving)) }
        }
        let gained = mine.subtracting(serving).subtracting(arriving.keys).sorted()
        for bucket in gained {
            arriving[bucket] = Arrival(previousOwner: previousOwner(bucket), since: now)
        }
        // A previous owner that has left since: nothing to wait for any more.
        if let members = ownership?.members {
            for (bucket, arrival) in arriving {
                if let previous = arrival.previousOwner, !members.contains(previous) {
                    arriving[bucket]?.previousOwner = nil
                }
            }
        }
        return actions + loadReady() + serveReady(now: now)
    }

    /// The durable states of these buckets, asked for by the load of `generation`, are in.
    public mutating func loaded(_ buckets: [Int], generation: Int, now: Double) -> [Action] {
        for bucket in buckets where arriving[bucket]?.generation == generation { arriving[bucket]?.loaded = true }
        let resumed = buckets.filter { reclaiming[$0]?.generation == generation }
        for bucket in resumed { reclaiming[bucket] = nil }
        return (resumed.isEmpty ? [] : [.resume(resumed.sorted())]) + serveReady(now: now)
    }

    /// G3, G4: buckets this worker serves, and whose rides another worker may have served meanwhile: that
    /// worker's view of the group lacked this one for a while (as a broker cluster losing a node can make
    /// happen), it took these buckets over under newer epochs, which fenced their rides off here, and it has
    /// released them since. Their states are read again; then the rides not held here any more are served again
    /// (``Action/resume(_:)``), each above the sequence the other reached. Without this those rides belonged to
    /// nobody until the next change of the group. Buckets not served, or already being read, are left alone.
    public mutating func reclaim(_ buckets: [Int], now: Double) -> [Action] {
        let ready = Set(buckets.filter { serving.contains($0) && reclaiming[$0] == nil }).sorted()
        guard !ready.isEmpty else { return [] }
        loads += 1
        for bucket in ready { reclaiming[bucket] = (loads, now) }
        return [.load(ready, generation: loads)]
    }

    /// A read again that has not ended after this many release timeouts (its marker lost with a connection, or
    /// a clustered broker that does not answer) is asked for anew.
    static let reclaimRetry = 5.0

    /// `worker` released these buckets: their last states are written (the release notice follows them).
    public mutating func released(_ buckets: [Int], by worker: String, now: Double) -> [Action] {
        for bucket in buckets where arriving[bucket]?.previousOwner == worker {
            arriving[bucket]?.previousOwner = nil
            arriving[bucket]?.released = true
        }
        return loadReady() + serveReady(now: now)
    }

    /// Time passes: a live previous owner that has not released within `releaseTimeout` is waited for no more.
    public mutating func tick(now: Double) -> [Action] {
        for (bucket, arrival) in arriving where arrival.previousOwner != nil && now - arrival.since >= releaseTimeout {
            arriving[bucket]?.previousOwner = nil
        }
        let stuck = reclaiming.filter { now - $0.value.since >= Self.reclaimRetry * releaseTimeout }.keys.sorted()
        var again: [Action] = []
        if !stuck.isEmpty {
            loads += 1
            for bucket in stuck { reclaiming[bucket] = (loads, now) }
            again = [.load(stuck, generation: loads)]
        }
        return again + loadReady() + serveReady(now: now)
    }

    /// One load for every arriving bucket that waits for nobody and has not been asked for yet.
    private mutating func loadReady() -> [Action] {
        let ready = arriving.filter { $0.value.previousOwner == nil && $0.value.generation == nil }.keys.sorted()
        guard !ready.isEmpty else { return [] }
        loads += 1
        for bucket in ready { arriving[bucket]?.generation = loads }
        return [.load(ready, generation: loads)]
    }

    private mutating func serveReady(now: Double) -> [Action] {
        let ready = arriving.filter { $0.value.loaded && $0.value.previousOwner == nil }.keys.sorted()
        guard !ready.isEmpty else { return [] }
        lastServeWait = ready.compactMap { arriving[$0].map { now - $0.since } }.max()
        for bucket in ready {
            arriving[bucket] = nil
            serving.insert(bucket)
        }
        return [.serve(ready)]
    }
}
