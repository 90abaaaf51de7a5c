import EtcdGateway
import Foundation
import MosquittoTesting
import Testing

/// G6: the calls of etcd's v3 JSON gateway that a group's ownership authority makes, against a real 3-member
/// etcd cluster (Debian's etcd-server) on loopback: what each answers, that a grant is exclusive and carries a
/// revision that grows, that a lease's end deletes its keys, and that a client fails over from a lost member.
@Suite("etcd's JSON gateway (G6)", .serialized, .timeLimit(.minutes(3)))
struct EtcdGatewayTests {
    @Test("G6: a key written under a lease is exclusive, its revision grows, and the lease's end deletes it")
    func exclusiveGrantUnderLease() async throws {
        let cluster = try await EtcdCluster()
        defer { cluster.stop() }
        let gateway = EtcdGateway(endpoints: cluster.endpoints)
        let first = try await gateway.grant(ttl: 60)
        let second = try await gateway.grant(ttl: 60)
        #expect(first.ttl >= 60 && first.id != second.id)

        // Two claims of one key, each only if it is absent: the first wins, the second reads the winner.
        let key = "/test/buckets/0001"
        let claim1 = try await gateway.transaction(
            when: [.absent(key)], then: [.put(key, value: Array("one".utf8), lease: first.id)],
            otherwise: [.get(key)])
        let claim2 = try await gateway.transaction(
            when: [.absent(key)], then: [.put(key, value: Array("two".utf8), lease: second.id)],
            otherwise: [.get(key)])
        #expect(claim1.succeeded)
        #expect(!claim2.succeeded)
        #expect(claim2.ranges.first?.first?.value == Array("one".utf8))
        #expect(claim2.ranges.first?.first?.lease == first.id)
        #expect(claim2.ranges.first?.first?.modRevision == claim1.revision)
        // The keys bound to each lease, as the holder's audit reads them.
        #expect(try await gateway.keys(of: first.id) == [key])
        #expect(try await gateway.keys(of: second.id).isEmpty)

        // A write by the holder, and only by it (bound to its lease), moves the revision on.
        let again = try await gateway.transaction(
            when: [.boundTo(key, lease: first.id)], then: [.put(key, value: Array("one'".utf8), lease: first.id)])
        let forged = try await gateway.transaction(
            when: [.boundTo(key, lease: second.id)], then: [.put(key, value: Array("two".utf8), lease: second.id)])
        #expect(again.succeeded && again.revision > claim1.revision)
        #expect(!forged.succeeded)

        // Renewing answers the TTL again; an unknown lease answers 0.
        #expect(try await gateway.keepAlive(first.id) >= 60)
        #expect(try await gateway.keepAlive(424_242) == 0)

        // Revoking the holder's lease deletes its key at once; the other claim then succeeds, at a higher revision.
        try await gateway.revoke(first.id)
        try await gateway.revoke(first.id)  // gone already: not an error
        #expect(try await gateway.range(prefix: "/test/").pairs.isEmpty)
        let claim3 = try await gateway.transaction(
            when: [.absent(key)], then: [.put(key, value: Array("two".utf8), lease: second.id)])
        #expect(claim3.succeeded && claim3.revision > again.revision)

        // A lease not renewed ends by itself within its TTL (etcd counts it on the leader).
        let expiring = try await gateway.grant(ttl: 2)
        _ = try await gateway.transaction(
            when: [], then: [.put("/test/short", value: [1], lease: expiring.id)])
        #expect(try await gateway.range(prefix: "/test/short").pairs.count == 1)
        try await Task.sleep(for: .seconds(4))
        #expect(try await gateway.range(prefix: "/test/short").pairs.isEmpty)
        #expect(try await gateway.keepAlive(expiring.id) == 0)
    }

    @Test("G6: more than 128 operations in one transaction are refused with etcd's message, not a crash")
    func transactionLimit() async throws {
        let cluster = try await EtcdCluster(size: 1)
        defer { cluster.stop() }
        let gateway = EtcdGateway(endpoints: cluster.endpoints)
        let puts = (0..<129).map { EtcdOperation.put("/limit/\($0)", value: [], lease: 0) }
        await #expect(throws: EtcdError.refused(status: 400, message: "etcdserver: too many operations in txn request"))
        {
            try await gateway.transaction(when: [], then: puts)
        }
        let fits = try await gateway.transaction(when: [], then: Array(puts.prefix(128)))
        #expect(fits.succeeded)
        #expect(try await gateway.range(prefix: "/limit/").pairs.count == 128)
    }

    @Test("G6: a claim's put of a bucket's holder record answers the holder it replaced, and the revision of its grant")
    func putAnswersThePreviousHolder() async throws {
        let cluster = try await EtcdCluster(size: 1)
        defer { cluster.stop() }
        let gateway = EtcdGateway(endpoints: cluster.endpoints)
        let key = "/test/holders/0001"
        let first = try await gateway.transaction(
            when: [.absent("/test/buckets/0001")],
            then: [
                .put("/test/buckets/0001", value: [1], lease: 0),
                .put(key, value: Array("w-a".utf8), lease: 0, previous: true),
            ])
        #expect(first.succeeded)
        #expect(first.previous == [nil], "no holder before the first grant")
        _ = try await gateway.transaction(when: [], then: [.delete("/test/buckets/0001")])
        let second = try await gateway.transaction(
            when: [.absent("/test/buckets/0001")],
            then: [
                .put("/test/buckets/0001", value: [2], lease: 0),
                .put(key, value: Array("w-b".utf8), lease: 0, previous: true),
            ],
            otherwise: [.get(key)])
        #expect(second.succeeded)
        #expect(second.previous.count == 1)
        #expect(second.previous.first??.value == Array("w-a".utf8))
        #expect(second.previous.first??.modRevision == first.revision, "the holder's record dates from its grant")
        // The same record read from etcd's history (what a claim whose answer was lost looks up).
        let history = try await gateway.transaction(when: [], then: [.getAt(key, revision: second.revision - 1)])
        #expect(history.ranges.first?.first?.value == Array("w-a".utf8))
        #expect(history.ranges.first?.first?.modRevision == first.revision)
        // A failed branch's reads come back as ranges, with no previous value.
        let refused = try await gateway.transaction(
            when: [.absent("/test/buckets/0001")],
            then: [.put(key, value: Array("w-c".utf8), lease: 0, previous: true)], otherwise: [.get(key)])
        #expect(!refused.succeeded && refused.previous.isEmpty)
        #expect(refused.ranges.first?.first?.value == Array("w-b".utf8))
    }

    @Test("G6: with a member killed, calls go to the others; with none left, the error names each endpoint")
    func failover() async throws {
        let cluster = try await EtcdCluster()
        defer { cluster.stop() }
        let gateway = EtcdGateway(endpoints: cluster.endpoints, requestTimeout: .seconds(1))
        let lease = try await gateway.grant(ttl: 60)
        cluster.kill(member: 0)
        #expect(try await gateway.keepAlive(lease.id) >= 60)
        let written = try await gateway.transaction(when: [], then: [.put("/f/k", value: [7], lease: lease.id)])
        #expect(written.succeeded)
        cluster.kill(member: 1)
        cluster.kill(member: 2)
        do {
            _ = try await gateway.range(prefix: "/f/")
            Issue.record("a range with every member down answered")
        } catch {
            guard case .unreachable(let failures) = error else {
                Issue.record("expected unreachable, got \(error)")
                return
            }
            #expect(failures.count == 3)
        }
    }
}
