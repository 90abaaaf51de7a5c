import EtcdGateway
import Foundation
import Locking
import Logging
import Metrics
import RideDomain
import RideStatusKit
import WorkerGroup

// MARK: - G6: bucket ownership granted by etcd (`group.authority: etcd`), for a group on a clustered broker

extension RideStatusService {
    /// The authority's part of the worker's state, under the service's lock.
    struct AuthorityState {
        var grants: BucketGrants
        /// Buckets granted and handed to the handover, with their epochs (``Ride/grant(epoch:)`` numbers under them).
        var served: [Int: UInt64] = [:]
        /// Requests to etcd the machine asked for, sent by ``runAuthority()``.
        var outbox: [BucketGrants.Action] = []
        /// G5, G6: the grants that ended here since this connection's birth, with their epochs: their release
        /// notice is sent again at the next birth, since a notice queued as the client reset its connection (its
        /// gate's fence) is lost with it. On a new connection it still proves the old one closed: the broker
        /// closes a client's old connection when it accepts its new one.
        var endedSinceBirth: [Int: UInt64] = [:]
        /// G3, G6 on SIGTERM: the gate is not closed in the client when the grants end (closing it resets the
        /// connection while a status is unacknowledged, and the release notice behind it is lost): the worker
        /// publishes nothing more under them, waits for what is in flight and the notice, then closes it.
        var leaving = false
    }

    /// The group's keys in etcd, under `group.etcdPrefix`.
    struct AuthorityKeys {
        let prefix: String
        var members: String { prefix + "members/" }
        func member(_ id: String) -> String { members + id }
        func bucket(_ bucket: Int) -> String { prefix + "buckets/" + Ownership.bucketName(bucket) }
        /// G5, G6: the bucket's last holder, written (with no lease: it outlives the grant) by each claim, which
        /// reads the one it replaces.
        func holder(_ bucket: Int) -> String { prefix + "holders/" + Ownership.bucketName(bucket) }
        var epochBase: String { prefix + "epochBase" }
    }

    /// This worker's monotonic time in seconds, the grant machine's clock (a lease counts on it, never on the wall).
    var monotonicSeconds: Double { time.seconds }

    /// Steps the grant machine under the lock: the handover follows its grants, and its requests to etcd go to the
    /// outbox. The G6 gate (``GrantLease``) follows the lease.
    func stepGrants(_ core: inout Core, _ body: (inout BucketGrants, Double) -> [BucketGrants.Action]) {
        guard core.authority != nil else { return }
        let clock = monotonicSeconds
        let now = time.now
        var pending = body(&core.authority!.grants, clock)
        while !pending.isEmpty {
            let action = pending.removeFirst()
            switch action {
            case .serve(let buckets):
                core.authority!.served.merge(buckets) { $1 }
                core.engine.grantEpochs = core.authority!.served
                let granted = Set(core.authority!.served.keys)
                carryOut(
                    core.handover.machine.grantsChanged(granted, now: now.timeIntervalSince1970), now: now, core: &core)
                logger.info(
                    "buckets granted by etcd (G6)",
                    metadata: [
                        "buckets": "\(buckets.count)", "epoch": "\(buckets.values.max() ?? 0)",
                        "buckets.held": "\(granted.count)",
                    ])
            case .stop(let buckets):
                var ended: [Int: UInt64] = [:]
                // Those served; one still waiting for its last holder is announced when that wait is over.
                for bucket in buckets { ended[bucket] = core.authority!.served.removeValue(forKey: bucket) }
                core.engine.grantEpochs = core.authority!.served
                let granted = Set(core.authority!.served.keys)
                carryOut(
                    core.handover.machine.grantsChanged(granted, now: now.timeIntervalSince1970), now: now, core: &core)
                // After the rides' last states, on the same connection: the new holders serve once they read it.
                publishGrantsReleased(ended, core: &core)
                pending += core.authority!.grants.stopped(buckets, now: clock)
            case .stopAll(let reason, let ended):
                let held = core.engine.activeRideCount
                // The gate is closed already (written nothing more): what this worker wrote under its grants is
                // ahead of this notice on its connection, or gone with that connection.
                grantLease.set(lease: nil, closingClient: !core.authority!.leaving)
                publishGrantsReleased(ended.merging(core.authority!.served) { $1 }, core: &core)
                core.authority!.served = [:]
                core.engine.grantEpochs = [:]
                carryOut(
                    core.handover.machine.grantsLapsed(
                        nonce: HandoverState.newMarkerNonce(), now: now.timeIntervalSince1970), now: now, core: &core)
                metrics.grantLapses.increment()
                logger.warning(
                    "every bucket stopped, nothing written: the etcd lease is not live, another worker may hold them (G6)",
                    metadata: ["reason": "\(reason)", "rides.dropped": "\(held)"])
            case .releaseGrants(let ended):
                publishGrantsReleased(ended, core: &core)
            case .awaitRelease(let buckets, let holder):
                logger.info(
                    "buckets granted, served once their last holder is offline or sends its release notice (G5, G6)",
                    metadata: ["buckets": "\(buckets.count)", "holder": "\(holder)"])
            case .releaseWaitExpired(let buckets, let holders):
                metrics.releaseWaitsExpired.increment(by: buckets.count)
                logger.warning(
                    "no release notice and no will from these buckets' last holders within the wait: served now; a status they wrote before their grants ended may still land late (G5, G6)",
                    metadata: [
                        "buckets": "\(buckets.count)", "holders": "\(holders)",
                        "wait": "\(core.authority!.grants.configuration.releaseWait) s",
                    ])
            default:
                core.authority!.outbox.append(action)
            }
        }
        grantLease.set(lease: core.authority!.grants.lease, closingClient: !core.authority!.leaving)
    }

    /// G6: the worker's side of etcd: a lease, its member key, the members read, the claims and give-backs,
    /// each request on its own task with a time limit; the machine's clock ticks every 200 ms. On shutdown the
    /// lease is revoked, so the buckets move at once.
    func runAuthority() async {
        guard let gateway = etcdGateway else { return }
        let keys = AuthorityKeys(prefix: settings.etcdPrefix)
        guard let base = await readEpochBase(gateway: gateway, keys: keys) else { return }
        core.withLock { core in
            core.authority = AuthorityState(
                grants: BucketGrants(
                    selfID: identity.id,
                    configuration: .init(
                        leaseTTL: settings.etcdLeaseTTL, margin: 1, epochBase: base,
                        releaseWait: settings.releaseWait)))
            // G5, G6: the presences read so far (retained, before etcd answered): who may still be writing.
            for (worker, sighting) in core.group.presences where worker != identity.id {
                _ = core.authority!.grants.presenceHeard(worker: worker, online: sighting.online, now: monotonicSeconds)
            }
        }
        logger.info(
            "bucket ownership from etcd (G6)",
            metadata: [
                "endpoints": "\(settings.etcdEndpoints)", "prefix": "\(settings.etcdPrefix)",
                "lease.ttl": "\(settings.etcdLeaseTTL)", "epoch.base": "\(base)",
            ])
        var reported: (progress: BucketGrants.Progress, at: Double)?
        // Discarding: the requests' tasks are forgotten as they end (a task group would keep each one, hundreds a
        // second during a rejoin, until the worker stops).
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                // Progress while the grants are on their way, every 5 s at most (a join moves thousands).
                let (progress, members) = core.withLock {
                    ($0.authority?.grants.progress, $0.authority?.grants.members)
                }
                if let progress, progress.granted != progress.wanted || progress.stopping > 0,
                    monotonicSeconds - (reported?.at ?? -.infinity) >= 5, reported?.progress != progress
                {
                    reported = (progress, monotonicSeconds)
                    logger.notice(
                        "buckets on their way (G6): \(progress)", metadata: ["members": "\(members ?? [])"])
                }
                let requests = core.withLock { core in
                    stepGrants(&core) { $0.tick(now: $1) }
                    defer { core.authority?.outbox = [] }
                    return core.authority?.outbox ?? []
                }
                for request in requests {
                    group.addTask { await self.send(request, gateway: gateway, keys: keys) }
                }
                try? await time.sleep(for: .milliseconds(200))
            }
        }
    }

    /// G3, G6 on SIGTERM: before the service's tasks are cancelled (a cancelled request is dropped at once), this
    /// worker stops holding anything and revokes its lease, so that its buckets move now rather than at the TTL's
    /// end. Waits at most the gateway's time limit.
    func leaveAuthority() async {
        guard settings.authority == .etcd else { return }
        let lease = core.withLock { core -> Int64? in
            let id = core.authority?.grants.lease?.id
            core.authority?.leaving = true
            stepGrants(&core) { $0.suspend(reason: "this worker is leaving", now: $1) }
            core.authority?.outbox = []
            return id
        }
        // The last statuses and the release notice behind them acknowledged, the new holders serve as soon as they
        // claim; then the client's gate closes with nothing in flight.
        _ = await transport.flush(timeout: .seconds(1))
        grantLease.closeClient()
        guard let lease, let gateway = etcdGateway else { return }
        do throws(EtcdError) {
            try await gateway.revoke(lease)
            logger.info("etcd lease revoked: this worker's buckets move now (G3, G6)", metadata: ["lease": "\(lease)"])
        } catch {
            logger.warning(
                "the etcd lease could not be revoked: this worker's buckets move when it ends (G6)",
                metadata: ["lease": "\(lease)", "error": "\(error)"])
        }
    }

    /// One request to etcd, its answer stepped into the machine.
    private func send(_ request: BucketGrants.Action, gateway: EtcdGateway, keys: AuthorityKeys) async {
        let sentAt = monotonicSeconds
        metrics.etcdRequests.increment()
        do throws(EtcdError) {
            switch request {
            case .grantLease:
                let lease = try await gateway.grant(ttl: Int64(settings.etcdLeaseTTL))
                step { grants, _ in grants.leaseGranted(id: lease.id, ttl: lease.ttl, sentAt: sentAt) }
            case .renewLease(let id):
                let ttl = try await gateway.keepAlive(id)
                step { $0.leaseRenewed(id, ttl: ttl, sentAt: sentAt, now: $1) }
            case .announce(let lease):
                _ = try await gateway.transaction(
                    when: [], then: [.put(keys.member(identity.id), value: Array(identity.id.utf8), lease: lease)])
            case .readMembers:
                let pairs = try await gateway.range(prefix: keys.members).pairs
                // A2: a key that does not name a worker is no member.
                let members = pairs.compactMap { pair -> String? in
                    let id = String(pair.key.dropFirst(keys.members.count))
                    return Identifier.isValid(id) ? id : nil
                }
                step { $0.membersRead(Array(members.prefix(Self.maximumGroupSize)), now: $1) }
            case .claim(let batch, let lease):
                let (won, previous) = try await claim(batch, lease: lease, gateway: gateway, keys: keys)
                step { $0.claimAnswered(batch, granted: won, previous: previous, lease: lease, now: $1) }
            case .giveBack(let batch, let lease):
                let revision = try await giveBack(batch, lease: lease, gateway: gateway, keys: keys)
                step { grants, _ in grants.gaveBack(batch, lease: lease, revision: revision) }
            case .revoke(let lease):
                try await gateway.revoke(lease)
            case .auditKeys(let lease):
                let prefix = keys.bucket(0).dropLast(4)
                let buckets = try await gateway.keys(of: lease).compactMap { key -> Int? in
                    guard key.hasPrefix(prefix) else { return nil }
                    return Ownership.bucket(named: key.dropFirst(prefix.count))
                }
                step { grants, now in
                    let before = grants.leakedKeys
                    let actions = grants.keysHeld(buckets, lease: lease, now: now)
                    if grants.leakedKeys > before {
                        logger.warning(
                            "keys bound to this worker's etcd lease that it did not know it held (a claim applied after its answer was lost): claimed again or given back (G6)",
                            metadata: ["buckets": "\(grants.leakedKeys - before)"])
                    }
                    return actions
                }
            default:
                break
            }
        } catch {
            metrics.etcdFailures.increment()
            logger.warning(
                "etcd request failed (G6)", metadata: ["request": "\(Self.describe(request))", "error": "\(error)"])
            switch request {
            case .claim(let batch, let lease): step { $0.claimFailed(batch, lease: lease, now: $1) }
            case .giveBack(let batch, let lease):
                // Keys left bound to a live lease would hold their buckets for good: again, until they go or the
                // lease does.
                try? await time.sleep(for: .milliseconds(500))
                let stillHeld = core.withLock { $0.authority?.grants.lease?.id == lease }
                if stillHeld, !Task.isCancelled {
                    await send(request, gateway: gateway, keys: keys)
                } else {
                    core.withLock { _ = $0.authority?.grants.gaveBack(batch, lease: lease) }
                }
            case .revoke, .announce: break
            default: step { $0.requestFailed(request, now: $1) }
            }
        }
    }

    private func step(_ body: (inout BucketGrants, Double) -> [BucketGrants.Action]) {
        core.withLock { core in stepGrants(&core, body) }
    }

    /// A claim of `batch` under `lease`: every bucket at once if none is held, else (a second transaction) the
    /// ones the first found free. Keys found bound to this lease already (a claim whose answer was lost) are won
    /// too, at the revision that wrote them. Returns each bucket won with the revision of its grant, and who held
    /// it before (each claim writes the bucket's holder record and reads the one it replaced: G5, G6).
    private func claim(_ batch: [Int], lease: Int64, gateway: EtcdGateway, keys: AuthorityKeys)
        async throws(EtcdError) -> (won: [Int: Int64], previous: [Int: BucketGrants.PreviousHolder])
    {
        let first = try await claimTransaction(batch, lease: lease, gateway: gateway, keys: keys, reading: true)
        // A2: an answer that does not say which revision wrote what, key by key, grants nothing.
        guard first.answer.revision > 0 else { throw .malformed("a claim answered without a revision") }
        if first.answer.succeeded {
            return (Dictionary(uniqueKeysWithValues: batch.map { ($0, first.answer.revision) }), first.previous)
        }
        guard first.answer.ranges.count == batch.count else {
            throw .malformed("a claim of \(batch.count) buckets answered \(first.answer.ranges.count) reads")
        }
        var won: [Int: Int64] = [:]
        var previous: [Int: BucketGrants.PreviousHolder] = [:]
        var free: [Int] = []
        for (bucket, found) in zip(batch, first.answer.ranges) {
            guard let pair = found.first else {
                free.append(bucket)
                continue
            }
            guard pair.key == keys.bucket(bucket) else {
                throw .malformed("a claim's read of \(keys.bucket(bucket)) answered \(pair.key)")
            }
            if pair.lease == lease, pair.modRevision > 0 { won[bucket] = pair.modRevision }
        }
        // Won by a claim whose answer was lost: the holder record it replaced, read from etcd's history.
        previous.merge(await holdersBefore(won, gateway: gateway, keys: keys)) { $1 }
        guard !free.isEmpty else { return (won, previous) }
        let second = try await claimTransaction(free, lease: lease, gateway: gateway, keys: keys, reading: false)
        if second.answer.succeeded, second.answer.revision > 0 {
            for bucket in free { won[bucket] = second.answer.revision }
            previous.merge(second.previous) { $1 }
        }
        return (won, previous)
    }

    /// One claim transaction: each bucket's owner key under the lease if every one is absent, with its holder
    /// record (the one replaced comes back); otherwise, with `reading`, the owner keys as they are.
    private func claimTransaction(
        _ batch: [Int], lease: Int64, gateway: EtcdGateway, keys: AuthorityKeys, reading: Bool
    ) async throws(EtcdError) -> (answer: EtcdTransactionResult, previous: [Int: BucketGrants.PreviousHolder]) {
        let value = Array(identity.id.utf8)
        let answer = try await gateway.transaction(
            when: batch.map { .absent(keys.bucket($0)) },
            then: batch.flatMap { bucket -> [EtcdOperation] in
                [
                    .put(keys.bucket(bucket), value: value, lease: lease),
                    .put(keys.holder(bucket), value: value, lease: 0, previous: true),
                ]
            },
            otherwise: reading ? batch.map { .get(keys.bucket($0)) } : [])
        guard answer.succeeded else { return (answer, [:]) }
        guard answer.previous.count == batch.count else {
            throw .malformed("a claim of \(batch.count) buckets answered \(answer.previous.count) previous holders")
        }
        var previous: [Int: BucketGrants.PreviousHolder] = [:]
        for (bucket, record) in zip(batch, answer.previous) {
            guard let record else { continue }  // never held: nobody to wait for
            let holder = String(decoding: record.value, as: UTF8.self)
            // A2: a record that does not name a worker, or has no revision, is not trusted: waited for in full.
            previous[bucket] =
                Identifier.isValid(holder) && record.modRevision > 0
                ? .worker(holder, epoch: base(of: keys) + UInt64(record.modRevision)) : .unknown
            if case .unknown = previous[bucket]! {
                logger.warning(
                    "a bucket's holder record does not read: waiting the whole release wait (G6, A2)",
                    metadata: ["key": "\(keys.holder(bucket))", "value": "\(holder.prefix(40))"])
            }
        }
        return (answer, previous)
    }

    /// The holder record of each bucket as it was just before `revisions` (the claim that wrote it): what that
    /// claim's lost answer would have said. Unknown when etcd compacted that history or it does not read.
    private func holdersBefore(_ revisions: [Int: Int64], gateway: EtcdGateway, keys: AuthorityKeys)
        async -> [Int: BucketGrants.PreviousHolder]
    {
        guard !revisions.isEmpty else { return [:] }
        let buckets = revisions.keys.sorted()
        var previous = Dictionary(uniqueKeysWithValues: buckets.map { ($0, BucketGrants.PreviousHolder.unknown) })
        guard
            let answer = try? await gateway.transaction(
                when: [], then: buckets.map { .getAt(keys.holder($0), revision: revisions[$0]! - 1) }),
            answer.ranges.count == buckets.count
        else { return previous }
        for (bucket, found) in zip(buckets, answer.ranges) {
            guard let record = found.first else {
                previous[bucket] = BucketGrants.PreviousHolder.none
                continue
            }
            let holder = String(decoding: record.value, as: UTF8.self)
            if Identifier.isValid(holder), record.modRevision > 0 {
                previous[bucket] = .worker(holder, epoch: base(of: keys) + UInt64(record.modRevision))
            }
        }
        return previous
    }

    /// The epoch base the grant machine adds to revisions.
    private func base(of keys: AuthorityKeys) -> UInt64 {
        core.withLock { $0.authority?.grants.configuration.epochBase ?? 0 }
    }

    /// Deletes the keys of `batch` that are still bound to `lease`.
    /// Returns the store's revision after it: every grant of these buckets to this worker up to it has ended.
    private func giveBack(_ batch: [Int], lease: Int64, gateway: EtcdGateway, keys: AuthorityKeys)
        async throws(EtcdError) -> Int64
    {
        let first = try await gateway.transaction(
            when: batch.map { .boundTo(keys.bucket($0), lease: lease) }, then: batch.map { .delete(keys.bucket($0)) },
            otherwise: batch.map { .get(keys.bucket($0)) })
        guard !first.succeeded else { return first.revision }
        let mine = zip(batch, first.ranges).filter { $0.1.first?.lease == lease }.map(\.0)
        guard !mine.isEmpty else { return first.revision }
        let second = try await gateway.transaction(
            when: mine.map { .boundTo(keys.bucket($0), lease: lease) }, then: mine.map { .delete(keys.bucket($0)) })
        return max(first.revision, second.revision)
    }

    /// G6: the base added to every grant's revision, kept in etcd (`{prefix}epochBase`) and written once by the
    /// first worker of a store. Tried until etcd answers; nil only when the worker is stopping.
    private func readEpochBase(gateway: EtcdGateway, keys: AuthorityKeys) async -> UInt64? {
        var pause = Duration.milliseconds(250)
        while !Task.isCancelled {
            do throws(EtcdError) {
                let answer = try await gateway.transaction(
                    when: [.absent(keys.epochBase)], then: [.put(keys.epochBase, value: Array("0".utf8), lease: 0)],
                    otherwise: [.get(keys.epochBase)])
                if answer.succeeded { return 0 }
                let text = answer.ranges.first?.first.map { String(decoding: $0.value, as: UTF8.self) } ?? ""
                guard let base = UInt64(text), base <= SequenceNumbering.maxEpoch else {
                    logger.error(
                        "etcd's epoch base does not read as a whole number: no bucket is served until it does (G6, A2)",
                        metadata: ["key": "\(keys.epochBase)", "value": "\(text.prefix(40))"])
                    try? await time.sleep(for: .seconds(5))
                    continue
                }
                return base
            } catch {
                logger.error(
                    "etcd does not answer: no bucket is served until it does (G6)",
                    metadata: ["endpoints": "\(settings.etcdEndpoints)", "error": "\(error)", "retry.in": "\(pause)"])
                try? await time.sleep(for: pause)
                pause = min(pause * 2, .seconds(10))
            }
        }
        return nil
    }

    private static func describe(_ request: BucketGrants.Action) -> String {
        switch request {
        case .claim(let batch, _): "claim of \(batch.count) buckets"
        case .giveBack(let batch, _): "give-back of \(batch.count) buckets"
        default: "\(request)"
        }
    }
}

/// G6: the etcd lease's end by the worker's monotonic clock, as the publishing side reads it: a status or
/// state of a granted ride goes out only before it (``ActionExecutor``), even in the moment between a pause's
/// end and the grant machine's next tick. Each publish carries the lease as its gate token, and the transport
/// is told the lease's end (``WorkerTransport/setPublishGate(token:validFor:)``): what waits in the transport
/// when it ends is dropped there, not sent after another worker may have claimed the ride.
final class GrantLease: Sendable {
    private struct Held: Equatable {
        var token: UInt64
        var validUntil: Double
    }

    /// nil: no lease live (always nil in broker-only mode, where nothing is gated).
    private let held = Locked<Held?>(nil)
    private let enabled: Bool
    private let clock: @Sendable () -> Double
    private let gate: @Sendable (_ token: UInt64, _ validFor: Duration?) -> Void

    /// - Parameter gate: tells the transport a lease's gate (its token, how long it stays open; nil: closed).
    init(
        enabled: Bool, clock: @escaping @Sendable () -> Double,
        gate: @escaping @Sendable (_ token: UInt64, _ validFor: Duration?) -> Void = { _, _ in }
    ) {
        self.enabled = enabled
        self.clock = clock
        self.gate = gate
    }

    /// A gate this worker stopped publishing under without closing it in the client yet (``closeClient()``).
    private let unclosed = Locked<UInt64?>(nil)

    /// The lease held (its etcd id) and when it ends by the worker's clock, nil for none. With `closingClient`
    /// false, an ended lease's gate stays open in the client (until its own end there, or ``closeClient()``):
    /// nothing new goes out under it, and what is in flight is acknowledged rather than reset.
    func set(lease: (id: Int64, validUntil: Double)?, closingClient: Bool = true) {
        let new = lease.map { Held(token: UInt64(bitPattern: $0.id), validUntil: $0.validUntil) }
        let old = held.withLock { held -> Held?? in
            guard held != new else { return .none }
            defer { held = new }
            return .some(held)
        }
        guard case .some(let previous) = old else { return }
        if let previous, previous.token != new?.token {
            if closingClient { gate(previous.token, nil) } else { unclosed.withLock { $0 = previous.token } }
        }
        if let new { gate(new.token, .seconds(max(0, new.validUntil - clock()))) }
    }

    /// Closes in the client the gate ``set(lease:closingClient:)`` left open.
    func closeClient() {
        guard
            let token = unclosed.withLock({ token -> UInt64? in
                defer { token = nil }; return token
            })
        else { return }
        gate(token, nil)
    }

    /// Whether a ride's status or state may go out now.
    var isLive: Bool { liveToken != nil }

    /// The gate token a ride's status or state goes out under now: 0 when nothing is gated (broker-only mode),
    /// nil when nothing may go out (no live lease).
    var liveToken: UInt64? {
        guard enabled else { return 0 }
        guard let held = held.withLock({ $0 }), clock() < held.validUntil else { return nil }
        return held.token
    }
}
