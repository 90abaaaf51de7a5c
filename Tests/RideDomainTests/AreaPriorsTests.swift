import Foundation
import MosquittoTesting
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter
import enum RideStatusKit.Identifier
import struct RideStatusKit.RideTopics

/// E1: what an area learned, shared with the group as a retained message and read back under A2.
@Suite("Shared priors: E1's learned values per area, read back under A2")
struct AreaPriorsTests {
    static let berlinKey = AreaPriors.key(area: "berlin")

    static func priors(
        area: String = "berlin", worker: String = "w-2", at: Date = t0, factor: Double = 1.1, rides: Int = 40,
        stopShare: Double? = 0.3, legs: Int = 25
    ) -> AreaPriors {
        AreaPriors(
            area: area, worker: worker, at: at, detourFactor: factor, rides: rides, stopShare: stopShare, legs: legs)
    }

    @Test("E1: an area's topic key is FNV-1a 64 of its name, I1-safe for any name, on the service's own topic")
    func keys() {
        // Hand-computed (FNV-1a, 64 bits): the offset basis for "", and two names.
        #expect(AreaPriors.key(area: "") == "cbf29ce484222325")
        #expect(AreaPriors.key(area: "grid") == "fb539f7243dbb831")
        #expect(AreaPriors.key(area: "Paris Centre/Nord") == "5fcecbf23bb574a5")
        #expect(Identifier.isValid(AreaPriors.key(area: "Paris Centre/Nord")), "I1")
        let topics = RideTopics()
        #expect(topics.priors(key: Self.berlinKey) == "ridestatus/priors/\(Self.berlinKey)")
        #expect(topics.parse(topics.priors(key: Self.berlinKey)) == .priors(key: Self.berlinKey))
        #expect(topics.priorsFilter == "ridestatus/priors/+")
        #expect(topics.parse("ridestatus/priors/") == .unknown, "no key")
        #expect(topics.parse("ridestatus/priors/a/b") == .unknown, "one level only")
    }

    @Test("E1, A2: the payload a worker writes reads back as written, and validates against priors.schema.json")
    func roundTrip() async throws {
        let decoder = InputDecoder()
        var withSpeed = Self.priors()
        (withSpeed.speed, withSpeed.speedLegs) = (12.5, 18)
        for written in [Self.priors(), Self.priors(area: "", stopShare: nil, legs: 0), withSpeed] {
            let read = try AreaPriors.decode(
                written.encoded(), key: AreaPriors.key(area: written.area), decoder: decoder, now: t0,
                futureTolerance: 5)
            #expect(read == written)
        }
        #expect(
            String(decoding: Self.priors().encoded(), as: UTF8.self)
                == #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":40,"stopShare":0.3,"legs":25}"#
        )
        let (code, output) = try await validateJSON(
            schema: "priors.schema.json",
            documents: [
                Self.priors().encoded(), Self.priors(area: "", stopShare: nil, legs: 0).encoded(), withSpeed.encoded(),
            ])
        #expect(code == 0, Comment(rawValue: output))
        #expect(
            String(decoding: withSpeed.encoded(), as: UTF8.self).hasSuffix(#""legs":25,"speed":12.5,"speedLegs":18}"#))
        let deleted = try AreaPriors.decode([], key: Self.berlinKey, decoder: decoder, now: t0, futureTolerance: 5)
        #expect(deleted == nil, "a deleted retained message is no priors")
    }

    @Test(
        "A2: priors read from the broker that break a check are refused with the reason of fresh input",
        arguments: [
            (#"[1]"#, DeadLetter.Reason.malformedJSON),
            (#"{"area":"berlin""#, .malformedJSON),
            (#"{"worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2}"#, .missingField),
            (
                #"{"area":"tokyo","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2}"#,
                .identifierMismatch
            ),
            (
                #"{"area":"berlin","worker":"w 2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2}"#,
                .invalidIdentifier
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T10:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2}"#,
                .timestampInFuture
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-09-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2}"#,
                .timestampTooOld
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":0.4,"rides":4,"legs":2}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"stopShare":0.95,"legs":2}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":-1,"legs":2}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2.5}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"speed":70,"speedLegs":3}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"speed":0.2,"speedLegs":3}"#,
                .invalidField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"speed":12}"#,
                .missingField
            ),
            (
                #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"speedLegs":3}"#,
                .invalidField
            ),
        ])
    func refusals(payload: String, reason: DeadLetter.Reason) {
        #expect(throws: Rejection.self) {
            try AreaPriors.decode(
                bytes(payload), key: Self.berlinKey, decoder: InputDecoder(), now: t0, futureTolerance: 5)
        }
        do {
            _ = try AreaPriors.decode(
                bytes(payload), key: Self.berlinKey, decoder: InputDecoder(), now: t0, futureTolerance: 5)
        } catch {
            #expect(error.reason == reason, "\(error.detail)")
            #expect(error.detail.components(separatedBy: "A2").count == 2, "names A2 once: \(error.detail)")
        }
    }

    @Test("E1: shared priors weigh by their rides up to the learning's memory; counts do not add up; bounded")
    func adoption() {
        var configuration = RideConfiguration()
        configuration.detourLearningRate = 0.1  // a memory of 10 rides
        configuration.stopShareLearningRate = 0.1
        configuration.detourFactorMaximum = 1.5
        var learning = AreaLearning()
        // An area this worker knows nothing of takes the shared values as they are.
        let changed = learning.adopt(Self.priors(), configuredFactor: 1.3, configuration: configuration)
        #expect(changed)
        let taken = learning.learned["berlin"]
        #expect(taken?.factor == 1.1 && taken?.rides == 40 && taken?.stopShare == 0.3 && taken?.legs == 25)
        #expect(learning.changed.isEmpty, "adopting is not learning: nothing to share again")
        // Local 5 rides at 1.4 against 40 at 1.1: weights 5 and 10 (the memory), (5 * 1.4 + 10 * 1.1) / 15 = 1.2.
        var local = AreaLearning()
        let area = ServiceArea(name: "berlin", currencyCode: "EUR", polygons: [])
        for _ in 0..<5 {
            local.learn(driven: 2800, straight: 2000, area: area, configuration: configuration)
        }
        let learnedFactor = local.learned["berlin"]!.factor
        local.adopt(Self.priors(stopShare: nil, legs: 0), configuredFactor: 1.3, configuration: configuration)
        let adopted = local.learned["berlin"]!
        #expect(abs(adopted.factor - (5 * learnedFactor + 10 * 1.1) / 15) < 1e-12)
        #expect(adopted.rides == 40, "the larger count, not the sum")
        #expect(adopted.stopShare == nil, "no shared stop share: none adopted")
        // Heard again (a reconnect replays every retained message): not weighed in twice; a newer share is.
        let again = local.adopt(
            Self.priors(stopShare: nil, legs: 0), configuredFactor: 1.3, configuration: configuration)
        #expect(!again && local.learned["berlin"] == adopted)
        let newer = local.adopt(
            Self.priors(at: t0.addingTimeInterval(60), stopShare: nil, legs: 0), configuredFactor: 1.3,
            configuration: configuration)
        #expect(newer && abs(local.learned["berlin"]!.factor - (adopted.factor + 1.1) / 2) < 1e-12)
        // An earlier time from the same worker is a new share too (its clock stepped back), not a replay.
        let stepped = local.adopt(
            Self.priors(at: t0.addingTimeInterval(-30), factor: 1.0, stopShare: nil, legs: 0), configuredFactor: 1.3,
            configuration: configuration)
        #expect(stepped)
        // Bounded by this worker's configuration.
        var bounded = AreaLearning()
        bounded.adopt(Self.priors(factor: 1.9), configuredFactor: 1.3, configuration: configuration)
        #expect(bounded.learned["berlin"]?.factor == 1.5)
        // Learning off adopts nothing.
        configuration.detourLearningRate = 0
        configuration.stopShareLearningRate = 0
        var off = AreaLearning()
        let offChanged = off.adopt(Self.priors(), configuredFactor: 1.3, configuration: configuration)
        #expect(!offChanged)
        #expect(off.learned.isEmpty)
    }

    @Test(
        "E1: an area with no history starts from the fleet's values, weighed by rides up to the memory; a catalog factor comes first"
    )
    func fleetPrior() {
        var configuration = RideConfiguration()
        configuration.detourLearningRate = 0.1  // a memory of 10 rides
        configuration.stopShareLearningRate = 0.1
        var learning = AreaLearning()
        let fresh = ServiceArea(name: "fresh", currencyCode: "EUR", polygons: [])
        let priced = ServiceArea(name: "priced", currencyCode: "EUR", polygons: [], detourFactor: 1.6)
        #expect(learning.fleetFactor(configuration) == nil)
        #expect(learning.factor(for: fresh, configuration: configuration) == 1.3, "nothing learned: rides.detourFactor")
        #expect(learning.stopShare(for: fresh, at: t0, configuration: configuration) == nil)
        learning.adopt(
            Self.priors(area: "a", factor: 1.1, rides: 40, stopShare: 0.1, legs: 5), configuredFactor: 1.3,
            configuration: configuration)
        learning.adopt(
            Self.priors(area: "b", factor: 1.4, rides: 5, stopShare: 0.4, legs: 10), configuredFactor: 1.3,
            configuration: configuration)
        // Weights 10 (40 rides, capped) and 5: (10 * 1.1 + 5 * 1.4) / 15 = 1.2; shares by legs 5 and 10:
        // (5 * 0.1 + 10 * 0.4) / 15 = 0.3.
        #expect(abs(learning.factor(for: fresh, configuration: configuration) - 1.2) < 1e-12)
        #expect(abs((learning.stopShare(for: fresh, at: t0, configuration: configuration) ?? 0) - 0.3) < 1e-12)
        #expect(learning.factor(for: priced, configuration: configuration) == 1.6, "the catalog's own value first")
        // A shared prior that learned only a stop share: its factor is a placeholder; the area keeps the fleet's.
        let shareOnly = ServiceArea(name: "shareOnly", currencyCode: "EUR", polygons: [])
        learning.adopt(
            Self.priors(area: "shareOnly", factor: 1.9, rides: 0, stopShare: 0.3, legs: 10), configuredFactor: 1.3,
            configuration: configuration)
        #expect(abs(learning.factor(for: shareOnly, configuration: configuration) - 1.2) < 1e-12)
        #expect(learning.stopShare(for: shareOnly, at: t0, configuration: configuration) == 0.3)
        // A stop share learned first makes the area an entry, but no factor of its own: still the fleet's.
        learning.learn(stopShare: 0.2, area: fresh, at: t0, configuration: configuration)
        #expect(abs(learning.factor(for: fresh, configuration: configuration) - 1.2) < 1e-12)
        // The fresh area's first ride starts from the fleet's value, rising at most 0.1: 1.2 + 0.1 * 0.1 = 1.21.
        learning.learn(driven: 3000, straight: 2000, area: fresh, configuration: configuration)
        #expect(abs(learning.factor(for: fresh, configuration: configuration) - 1.21) < 1e-12)
        configuration.detourLearningRate = 0
        #expect(learning.fleetFactor(configuration) == nil, "learning off: no fleet value")
    }

    @Test("E1: what a worker learned is shared once per change, on its area's topic; what it adopted is not")
    func sharing() throws {
        var engine = RideEngine(catalog: testCatalog())
        #expect(engine.priorsToShare(worker: "w-1", now: t0).isEmpty)
        let berlin = testCatalog().areas.first { $0.name == "berlin" }
        engine.learning.learn(driven: 3000, straight: 2000, area: berlin, configuration: engine.configuration)
        engine.learning.learn(stopShare: 0.4, area: nil, at: t0, configuration: engine.configuration)
        let shared = engine.priorsToShare(worker: "w-1", now: t0)
        #expect(shared.map(\.topic) == ["ridestatus/priors/cbf29ce484222325", "ridestatus/priors/\(Self.berlinKey)"])
        let decoded = try AreaPriors.decode(
            shared[1].payload, key: Self.berlinKey, decoder: InputDecoder(), now: t0, futureTolerance: 5)
        let written = try #require(decoded)
        #expect(written.worker == "w-1" && written.rides == 1 && written.area == "berlin")
        #expect(engine.priorsToShare(worker: "w-1", now: t0).isEmpty, "nothing new: nothing shared")
        _ = engine.receivePriors(
            key: Self.berlinKey, topic: "ridestatus/priors/\(Self.berlinKey)", payload: Self.priors().encoded(),
            now: t0, worker: "w-1", since: t0)
        #expect(engine.priorsToShare(worker: "w-1", now: t0).isEmpty, "adopted priors are not shared again")
    }

    @Test(
        "E1, A2: a worker that reads the group's priors starts new rides in the area from them; a refusal is a dead letter and changes nothing"
    )
    func engineReadsBack() throws {
        var engine = RideEngine(catalog: testCatalog())
        let topic = "ridestatus/priors/\(Self.berlinKey)"
        // Another worker's priors (or this worker's own from before a restart).
        let read = engine.receivePriors(
            key: Self.berlinKey, topic: topic, payload: Self.priors().encoded(), now: t0, worker: "w-1",
            since: t0)
        #expect(read.adopted == Self.priors() && read.refusal == nil && read.actions.isEmpty)
        _ = engine.receive(topic: "rides/r-1/start", payload: bookingJSON(), now: t0.addingTimeInterval(1))
        #expect(engine.ride("r-1")?.detourFactor == 1.1, "a new ride in the area takes the shared factor")
        // Refused: an area of no catalog here, a broken payload. Each is a dead letter; nothing changes.
        let before = engine.learning
        let unknown = engine.receivePriors(
            key: AreaPriors.key(area: "atlantis"), topic: "ridestatus/priors/x",
            payload: Self.priors(area: "atlantis").encoded(), now: t0, worker: "w-1", since: t0)
        #expect(unknown.refusal?.reason == .invalidField)
        let broken = engine.receivePriors(
            key: Self.berlinKey, topic: topic, payload: bytes(#"{"area":"berlin"}"#), now: t0, worker: "w-1", since: t0)
        #expect(broken.refusal?.reason == .missingField)
        for refused in [unknown, broken] {
            let letters = refused.actions.compactMap { action -> DeadLetter? in
                if case .deadLetter(let letter) = action { return letter }
                return nil
            }
            #expect(letters.count == 1 && letters[0].detail.contains("A2"), "\(letters)")
        }
        #expect(engine.learning == before)
        // This worker's own echo from this run is not weighed in again; from an earlier run it is.
        let echo = engine.receivePriors(
            key: Self.berlinKey, topic: topic, payload: Self.priors(worker: "w-1", factor: 1.4).encoded(), now: t0,
            worker: "w-1", since: t0)
        #expect(echo.adopted == nil && echo.refusal == nil)
        #expect(engine.learning == before)
        let earlier = engine.receivePriors(
            key: Self.berlinKey, topic: topic, payload: Self.priors(worker: "w-1", factor: 1.4).encoded(), now: t0,
            worker: "w-1", since: t0.addingTimeInterval(10))
        #expect(earlier.adopted != nil)
        #expect(engine.learning.learned["berlin"]?.factor == 1.25, "40 rides at 1.1 and 40 at 1.4, 20 each")
    }
}
