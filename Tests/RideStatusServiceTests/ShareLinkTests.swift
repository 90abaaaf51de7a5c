import Foundation
import JWTKit
import Logging
import MosquittoTesting
import RideDomain
import RideStatusTesting
import Testing

import struct RideStatusKit.RideTopics

@testable import RideAccess
@testable import RideStatusService

/// Share links: Ed25519 tokens with a key id that open one ride until they expire, checked alone
/// (no server), and who may read what over HTTP.
@Suite("Share links: tokens and HTTP access")
struct ShareLinkTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// A key pair under `id`: the signer (dispatch's) and the key set's entry (the workers').
    static func key(_ id: String) async throws -> (signer: ShareLinks.Signer, publicJWK: String) {
        let (privateJWK, publicJWK) = try ShareLinks.generateKey(id: id)
        return (try await ShareLinks.Signer(privateJWK: privateJWK), publicJWK)
    }

    static func verifier(_ publicJWKs: [String]) async throws -> ShareLinks.Verifier {
        try await ShareLinks.Verifier(jwks: #"{"keys":[\#(publicJWKs.joined(separator: ","))]}"#)
    }

    @Test("I1, 30: a token opens the ride it names until it expires, and no longer")
    func validThenExpired() async throws {
        let (signer, publicJWK) = try await Self.key("k1")
        let verifier = try await Self.verifier([publicJWK])
        let token = try await signer.token(ride: "r-7f3a", expires: Self.now + 3_600, now: Self.now)
        #expect(
            await verifier.verify(token, now: Self.now + 60)
                == .success(.init(ride: "r-7f3a", expires: Self.now + 3_600)))
        #expect(await verifier.verify(token, now: Self.now + 3_600) == .failure(.expiredToken))
        #expect(await verifier.verify(token, now: Self.now + 7_200) == .failure(.expiredToken))
    }

    @Test("30: forged, altered, unknown-key, none-algorithm and malformed tokens open nothing, each with its reason")
    func refusals() async throws {
        let (signer, publicJWK) = try await Self.key("k1")
        let (stranger, _) = try await Self.key("k1")  // the same id, another key: a forger's
        let (other, _) = try await Self.key("k9")
        let verifier = try await Self.verifier([publicJWK])
        let good = try await signer.token(ride: "r-1", expires: Self.now + 600, now: Self.now)

        let forged = try await stranger.token(ride: "r-1", expires: Self.now + 600, now: Self.now)
        #expect(await verifier.verify(forged, now: Self.now) == .failure(.badSignature))
        // Another ride's claims under the good token's signature.
        let parts = good.split(separator: ".").map(String.init)
        let otherClaims = try await signer.token(ride: "r-2", expires: Self.now + 600, now: Self.now)
            .split(separator: ".").map(String.init)
        let altered = [parts[0], otherClaims[1], parts[2]].joined(separator: ".")
        #expect(await verifier.verify(altered, now: Self.now) == .failure(.badSignature))
        let unknown = try await other.token(ride: "r-1", expires: Self.now + 600, now: Self.now)
        #expect(await verifier.verify(unknown, now: Self.now) == .failure(.unknownKey))
        // alg none: the header says so, and no signature follows.
        let noneHeader = Data(#"{"alg":"none","kid":"k1","typ":"JWT"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "")
        #expect(await verifier.verify("\(noneHeader).\(parts[1]).", now: Self.now) == .failure(.badSignature))
        for malformed in ["", "abc", "a.b", "a.b.c.d", "!!!.@@@.###", String(repeating: "a", count: 5_000)] {
            #expect(
                await verifier.verify(malformed, now: Self.now) == .failure(.malformedToken), "\(malformed.prefix(20))")
        }
    }

    @Test("I1, 30: a signed token whose ride breaks I1, of another audience, or valid beyond 7 days is refused")
    func claims() async throws {
        let (signer, publicJWK) = try await Self.key("k1")
        let verifier = try await Self.verifier([publicJWK])
        func token(_ ride: String, audience: String = ShareLinks.audience, expires: TimeInterval = 600) async throws
            -> String
        {
            try await signer.sign(
                .init(
                    sub: .init(value: ride), exp: .init(value: Self.now + expires), aud: .init(value: [audience]),
                    iat: nil))
        }
        for ride in ["r/1", "#", "", String(repeating: "r", count: 65), "-leading"] {
            #expect(await verifier.verify(try await token(ride), now: Self.now) == .failure(.invalidClaims), "\(ride)")
        }
        #expect(
            await verifier.verify(try await token("r-1", audience: "another-service"), now: Self.now)
                == .failure(.invalidClaims))
        #expect(
            await verifier.verify(try await token("r-1", expires: 8 * 86_400), now: Self.now)
                == .failure(.expiredToken))
        // And the signer refuses to make such tokens in the first place.
        await #expect(throws: ShareKeyProblem.self) {
            try await signer.token(ride: "r/1", expires: Self.now + 60, now: Self.now)
        }
        await #expect(throws: ShareKeyProblem.self) {
            try await signer.token(ride: "r-1", expires: Self.now - 1, now: Self.now)
        }
    }

    @Test("I1, 30: the claims share-link signs are the ones docs/schema/share-token.schema.json describes")
    func claimsSchema() async throws {
        let (signer, _) = try await Self.key("k1")
        let token = try await signer.token(ride: "r-7f3a", expires: Self.now + 600, now: Self.now)
        let claims = try #require(ShareLinks.base64URLDecoded(token.split(separator: ".")[1]))
        let (code, output) = try await validateJSON(schema: "share-token.schema.json", documents: [Array(claims)])
        #expect(code == 0, "\(output)")
        // And the schema can fail: a ride that breaks I1.
        let bad = Array(#"{"sub":"r/1","exp":1800000600,"aud":"ride-status/share"}"#.utf8)
        #expect(try await validateJSON(schema: "share-token.schema.json", documents: [bad]).code != 0)
    }

    @Test("30: keys rotate by id: a set with the old and the new key takes both; without the old, its links end")
    func rotation() async throws {
        let (old, oldPublic) = try await Self.key("k-2026-10")
        let (new, newPublic) = try await Self.key("k-2026-11")
        let both = try await Self.verifier([oldPublic, newPublic])
        let oldLink = try await old.token(ride: "r-1", expires: Self.now + 600, now: Self.now)
        let newLink = try await new.token(ride: "r-1", expires: Self.now + 600, now: Self.now)
        #expect(await both.verify(oldLink, now: Self.now) == .success(.init(ride: "r-1", expires: Self.now + 600)))
        #expect(await both.verify(newLink, now: Self.now) == .success(.init(ride: "r-1", expires: Self.now + 600)))
        let rotated = try await Self.verifier([newPublic])
        #expect(await rotated.verify(oldLink, now: Self.now) == .failure(.unknownKey))
        #expect(await rotated.verify(newLink, now: Self.now) == .success(.init(ride: "r-1", expires: Self.now + 600)))
    }

    @Test("30: a key set with a private key, no kid, another curve or a repeated id is refused at start")
    func keySets() async throws {
        let (privateJWK, publicJWK) = try ShareLinks.generateKey(id: "k1")
        await #expect(throws: ShareKeyProblem.self) { try await Self.verifier([privateJWK]) }
        await #expect(throws: ShareKeyProblem.self) { try await Self.verifier([publicJWK, publicJWK]) }
        await #expect(throws: ShareKeyProblem.self) {
            try await Self.verifier([publicJWK.replacingOccurrences(of: #""kid":"k1","#, with: "")])
        }
        await #expect(throws: ShareKeyProblem.self) {
            try await Self.verifier([publicJWK.replacingOccurrences(of: "Ed25519", with: "Ed448")])
        }
        await #expect(throws: ShareKeyProblem.self) { try await ShareLinks.Verifier(jwks: #"{"keys":[]}"#) }
        await #expect(throws: ShareKeyProblem.self) { try await ShareLinks.Verifier(jwks: "not json") }
        #expect(throws: ShareKeyProblem.self) { try ShareLinks.generateKey(id: "k/1") }
    }

    @Test("30: beyond loopback nothing is read without a token; the operator's opens all, a share token one ride")
    func access() async throws {
        let (signer, publicJWK) = try await Self.key("k1")
        let verifier = try await Self.verifier([publicJWK])
        let time = WorkerTime(clock: ManualClock(), wall: { Self.now })
        let operatorToken = "an-operator-token-of-some-length"
        let exposed = HTTPAccess(
            tokenRequired: true, operatorToken: Array(operatorToken.utf8), verifier: verifier, time: time)
        let loopback = HTTPAccess(tokenRequired: false, operatorToken: nil, verifier: verifier, time: time)
        let link = try await signer.token(ride: "r-1", expires: Self.now + 600, now: Self.now)

        #expect(await loopback.scope(authorization: nil) == .success(.everything))
        #expect((try? (await exposed.scope(authorization: nil)).get()) == nil)
        if case .failure(let refusal) = await exposed.scope(authorization: nil) {
            #expect(refusal.status == 401 && refusal.reason == "unauthorized")
        }
        #expect(await exposed.scope(authorization: "Bearer \(operatorToken)") == .success(.everything))
        #expect(await exposed.scope(authorization: "bearer \(link)") == .success(.ride("r-1", until: Self.now + 600)))
        #expect(await loopback.scope(authorization: "Bearer \(link)") == .success(.ride("r-1", until: Self.now + 600)))
        // Loopback means a literal address, not a name that starts like one.
        for host in ["127.0.0.1", "127.1.2.3", "::1", "localhost"] { #expect(HTTPAccess.isLoopback(host), "\(host)") }
        for host in ["127.example.com", "0.0.0.0", "::", "10.0.0.1", "127.0.0", "127.0.0.256"] {
            #expect(!HTTPAccess.isLoopback(host), "\(host)")
        }
        for wrong in ["Bearer", "Basic abc", "Bearer \(operatorToken)x", "Bearer an-operator-token-of-some-lengtH"] {
            guard case .failure(let refusal) = await exposed.scope(authorization: wrong) else {
                Issue.record("'\(wrong)' was let in")
                continue
            }
            #expect(refusal.status == 401)
            // RFC 6750: a malformed header is an invalid request, a token that opens nothing an invalid token.
            #expect(
                refusal.bearerError == (wrong.hasPrefix("Bearer ") ? "invalid_token" : "invalid_request"), "\(wrong)")
        }
        // Share links off: a token that is not the operator's is refused, naming why.
        let off = HTTPAccess(tokenRequired: true, operatorToken: nil, verifier: nil, time: time)
        if case .failure(let refusal) = await off.scope(authorization: "Bearer \(link)") {
            #expect(refusal.reason == "sharingOff")
        } else {
            Issue.record("a share token was taken with share links off")
        }
        #expect(HTTPAccess.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!HTTPAccess.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!HTTPAccess.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
    }

    @Test(
        "30: a page's stream ends when its link expires and when the ride ends; the feed caps pages and forgets rides")
    func feedLifetimes() async throws {
        let broker = InMemoryBroker()
        let clock = ManualClock(origin: Self.now)
        let feed = ShareFeed(
            transport: broker.transport(), topics: RideTopics(), time: clock.workerTime,
            logger: Logger(label: "share", factory: { _ in SwiftLogNoOpLogHandler() }))
        /// Everything the stream yields until it ends, or what came within a second.
        func drain(_ stream: AsyncStream<[UInt8]>) async -> (frames: [String], ended: Bool) {
            await withTaskGroup(of: (frames: [String], ended: Bool)?.self) { group in
                group.addTask {
                    var frames: [String] = []
                    for await frame in stream { frames.append(String(decoding: frame, as: UTF8.self)) }
                    return (frames, true)
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(1))
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first ?? ([], false)
            }
        }
        // Expiry: a link valid 10 s more is followed until a sweep after then.
        let short = try #require(feed.watch("r-1", until: Self.now + 10))
        await feed.sweep()
        #expect(feed.watcherCount == 1)
        try await clock.advance(by: .seconds(11))
        await feed.sweep()
        let expired = await drain(short)
        #expect(expired.ended && expired.frames.first == ": connected\n\n")
        #expect(feed.watcherCount == 0)
        // The ride's end: its pages get `ended`, then their streams close.
        let page = try #require(feed.watch("r-1", until: Self.now + 600))
        feed.deliver("r-1", payload: [])
        let ended = await drain(page)
        #expect(ended.ended && ended.frames.last == "event: ended\ndata: {}\n\n", "\(ended.frames)")
        #expect(feed.watcherCount == 0)
        // Caps: as many pages of one ride as allowed, then none (the route answers 503).
        let pages = (0..<ShareFeed<InMemoryTransport>.maximumWatchersPerRide).compactMap { _ in
            feed.watch("r-2", until: Self.now + 600)
        }
        #expect(pages.count == ShareFeed<InMemoryTransport>.maximumWatchersPerRide)
        #expect(feed.watch("r-2", until: Self.now + 600) == nil)
        // A ride nobody watches or reads is forgotten after the linger.
        #expect(feed.watchedRides == 2)
        try await clock.advance(by: ShareFeed<InMemoryTransport>.linger + .seconds(1))
        await feed.sweep()
        #expect(feed.watchedRides == 1, "r-1 forgotten, r-2 still watched")
        _ = pages
    }

    @Test("A2: the share feed shows only what decodes as the status of the ride its topic names, on one line")
    func showable() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let golden = try Data(contentsOf: root.appendingPathComponent("Tests/RideDomainTests/Golden/full-ride.json"))
        let first = try #require((try JSONSerialization.jsonObject(with: golden) as? [[String: Any]])?.first)
        let ride = try #require(first["rideIdentifier"] as? String)
        let status = Array(try JSONSerialization.data(withJSONObject: first))
        typealias Feed = ShareFeed<InMemoryTransport>
        #expect(Feed.isShowable(status, ride: ride))
        #expect(!Feed.isShowable(status, ride: ride + "x"), "another ride's topic")
        let pretty = Array(try JSONSerialization.data(withJSONObject: first, options: .prettyPrinted))
        #expect(!Feed.isShowable(pretty, ride: ride), "an SSE data line holds no line break")
        #expect(!Feed.isShowable(Array("{}".utf8), ride: ride))
        #expect(!Feed.isShowable(Array("not json".utf8), ride: ride))
        #expect(Feed.frame(status) == Array("event: status\ndata: ".utf8) + status + Array("\n\n".utf8))
        #expect(Feed.frame([]) == Array("event: ended\ndata: {}\n\n".utf8))
    }
}
