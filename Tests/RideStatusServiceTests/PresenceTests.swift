import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import RideStatusKit
import Testing
import WorkerGroup

@testable import RideStatusService

/// G1, L8, A2: a worker's presence as the group reads it back from the broker.
@Suite("Presence read back for the group (G1, L8, A2)")
struct PresenceTests {
    func read(_ text: String) throws(Rejection) -> GroupMembership.Sighting? {
        try Presence.member(from: Array(text.utf8), now: Date())
    }

    @Test("G1: what this release writes reads back: state and incarnation")
    func roundTrip() throws {
        let written = Presence(state: .offline, since: .now, version: "1.0", incarnation: 1_795_600_000_123)
        #expect(
            try Presence.member(from: written.encoded(), now: Date())
                == .init(online: false, incarnation: 1_795_600_000_123))
        #expect(
            try read(#"{"state":"online","since":"2026-11-25T09:00:00.000Z","version":"0.1.0"}"#)
                == .init(online: true, incarnation: 0), "a release before groups: incarnation 0")
        #expect(try read("") == nil, "a deleted presence")
    }

    @Test("A2, G1: a presence that does not read is refused with the field named")
    func refusals() {
        let cases: [(String, DeadLetter.Reason)] = [
            ("not json", .malformedJSON), ("[1]", .malformedJSON), (#"{"since":"x"}"#, .missingField),
            (#"{"state":"sleeping"}"#, .invalidField), (#"{"state":"online","incarnation":-1}"#, .invalidField),
            (#"{"state":"online","incarnation":1.5}"#, .invalidField),
            (#"{"state":"online","incarnation":"7"}"#, .invalidField),
            (#"{"state":"online","incarnation":9000000000000000}"#, .invalidField),
        ]
        for (text, reason) in cases {
            #expect(throws: Rejection.self, "\(text)") { try read(text) }
            do throws(Rejection) {
                _ = try read(text)
            } catch {
                #expect(error.reason == reason, "\(text): \(error.detail)")
            }
        }
    }

    @Test("G3: the release notice this release writes validates against released.schema.json")
    func releaseNoticeSchema() async throws {
        let notices = [
            RideStatusService<MQTTClient>.releaseNotice(buckets: [0, 17, 8191], incarnation: 1_795_600_000_123),
            RideStatusService<MQTTClient>.releaseNotice(buckets: Array(0..<8192), incarnation: 1),
            RideStatusService<MQTTClient>.releaseNotice(buckets: [], incarnation: 0),
            RideStatusService<MQTTClient>.releaseNotice(
                buckets: [], incarnation: 3, floors: [12: SequenceFloor(epoch: 4, ceiling: 125)]),
            RideStatusService<MQTTClient>.releaseNotice(
                buckets: Array(0..<8192), incarnation: 1_795_600_000_123,
                floors: Dictionary(
                    uniqueKeysWithValues: (0..<8192).map {
                        ($0, SequenceFloor(epoch: UInt64(Ride.maxSequence), ceiling: Ride.maxSequence))
                    })),
        ]
        #expect(notices[4].count <= RideStatusService<MQTTClient>.maximumReleaseNotice, "every bucket and floor fits")
        let (code, output) = try await validateJSON(schema: "released.schema.json", documents: notices)
        #expect(code == 0, Comment(rawValue: output))
    }

    @Test("G3, C5: a release notice's floors read back as written; entries that do not read are skipped")
    func releaseNoticeFloors() throws {
        typealias Service = RideStatusService<MQTTClient>
        let floors = [7: SequenceFloor(epoch: 3, ceiling: 60), 8191: SequenceFloor(epoch: 1, ceiling: 0)]
        let read = try #require(
            Service.releaseNotice(Service.releaseNotice(buckets: [7], incarnation: 2, floors: floors)))
        #expect(read.buckets == [7])
        #expect(read.floors == floors)
        let odd = Array(
            #"{"buckets":[1,9000],"incarnation":1,"floors":[[1,2,30],[1,5,10],[9000,1,1],[2,-1,5],[3,1],"x",[4,1,1.5]]}"#
                .utf8)
        let partial = try #require(Service.releaseNotice(odd))
        #expect(partial.buckets == [1], "a bucket out of range is skipped")
        #expect(partial.floors == [1: SequenceFloor(epoch: 5, ceiling: 30)], "two floors of one bucket merge")
        #expect(Service.releaseNotice(Array(#"{"floors":[]}"#.utf8)) == nil, "no buckets: not a notice")
    }

    @Test(
        "G1: the presence this release writes (birth with heartbeat time, will) validates against presence.schema.json")
    func presenceSchema() async throws {
        let identity = try WorkerIdentity(
            settings: {
                var settings = WorkerSettings(); settings.workerID = "w-1"; return settings
            }(), version: "1.0")
        let documents = [
            identity.presence(online: true, incarnation: 1_795_600_000_123, now: Date()),
            identity.presence(
                online: true, incarnation: 1_795_600_000_123, since: .now.addingTimeInterval(-30), now: Date()),
            Presence(state: .offline, since: .now, version: "1.0", incarnation: 7).encoded(),
        ]
        let (code, output) = try await validateJSON(schema: "presence.schema.json", documents: documents)
        #expect(code == 0, Comment(rawValue: output))
        let heartbeat = try #require(try Presence.member(from: documents[1], now: Date()))
        #expect(heartbeat.online && heartbeat.seenAt != nil, "a heartbeat says when it was sent")
    }

    /// The wire format, byte for byte: what a birth, a heartbeat and a will of this release write. A change here
    /// is a change of the contract's payload: the schema, the contract notes and readers of older releases.
    static let golden: [(name: String, bytes: String)] = [
        (
            "birth",
            #"{"state":"online","since":"2026-11-27T09:00:00.000Z","version":"1.4.0","incarnation":1795770000000,"at":"2026-11-27T09:00:00.000Z"}"#
        ),
        (
            "heartbeat",
            #"{"state":"online","since":"2026-11-27T09:00:00.000Z","version":"1.4.0","incarnation":1795770000000,"at":"2026-11-27T09:00:10.250Z"}"#
        ),
        ("will before any connection", #"{"state":"offline","since":"2026-11-27T09:00:00.000Z","version":"1.4.0"}"#),
        (
            "will of a connection",
            #"{"state":"offline","since":"2026-11-27T09:00:00.000Z","version":"1.4.0","incarnation":1795770000000}"#
        ),
    ]

    @Test("G1, L8: the presence's bytes are the golden ones, valid by presence.schema.json, and read back by all")
    func goldenPresence() async throws {
        let start = Date(timeIntervalSince1970: 1_795_770_000)
        let identity = try WorkerIdentity(
            settings: {
                var settings = WorkerSettings(); settings.workerID = "w-1"; return settings
            }(), version: "1.4.0")
        let written = [
            identity.presence(online: true, incarnation: 1_795_770_000_000, now: start),
            identity.presence(
                online: true, incarnation: 1_795_770_000_000, since: start, now: start.addingTimeInterval(10.25)),
            Presence(state: .offline, since: start, version: "1.4.0").encoded(),
            Presence(state: .offline, since: start, version: "1.4.0", incarnation: 1_795_770_000_000).encoded(),
        ]
        for (bytes, golden) in zip(written, Self.golden) {
            #expect(String(decoding: bytes, as: UTF8.self) == golden.bytes, "\(golden.name)")
        }
        let documents = Self.golden.map { Array($0.bytes.utf8) }
        let (code, output) = try await validateJSON(schema: "presence.schema.json", documents: documents)
        #expect(code == 0, Comment(rawValue: output))
        // The kit's readers (Codable) and the group's read of the same bytes agree.
        for (document, golden) in zip(documents, Self.golden) {
            let decoded = try JSONDecoder.rideStatus.decode(Presence.self, from: Data(document))
            #expect(decoded.encoded() == document, "\(golden.name): decoded and written again, the same bytes")
            let sighting = try #require(try Presence.member(from: document, now: start))
            #expect(sighting.online == (decoded.state == .online), "\(golden.name)")
            #expect(sighting.incarnation == UInt64(decoded.incarnation ?? 0), "\(golden.name)")
            #expect(sighting.seenAt == decoded.at?.timeIntervalSince1970, "\(golden.name)")
        }
    }
}
