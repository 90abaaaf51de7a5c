import Foundation
import MosquittoTesting
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter

/// E1's range shared by the group: each area's percentile per leg and horizon travels in the area's
/// retained priors, so that a restarted worker or a new owner draws the latest times the group drew instead of
/// starting again from the prior of 1.5.
@Suite("Estimates E1: the range shared with the group in the priors, read back under A2")
struct RangeSharingTests {
    /// The upper edge of the histogram bin of a ratio of 1.1: bins are 1/48 of log(4 / 0.25) wide from 0.25, and
    /// 1.1 lies in bin 25 (log(4.4) / log(16) x 48 = 25.65).
    static let edgeOfOnePointOne = 0.25 * pow(16, 26.0 / 48)

    /// Faded weight of `count` arrivals: each weighs 0.995 of the one after it.
    static func weight(_ count: Int) -> Double { (1 - pow(0.995, Double(count))) / 0.005 }

    @Test(
        "E1: a shared cell weighs its arrivals (at most 200) in its area and in the fleet's, each shrunk as before"
    )
    func adoptedAlone() {
        var ranges = ArrivalRanges()
        #expect(ranges.ratio(.pickup, horizon: 2, area: "berlin") == 1.5)
        let changed1 = ranges.adopt([.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 100)], area: "berlin")
        #expect(changed1)
        // The fleet's, toward the prior by 5: (100 x 1.2 + 5 x 1.5) / 105; the area's, toward the fleet's by 20.
        let fleet1 = 127.5 / 105
        #expect(abs(ranges.ratio(.pickup, horizon: 2, area: "berlin") - (120 + 20 * fleet1) / 120) < 1e-12)
        #expect(abs(ranges.ratio(.pickup, horizon: 2, area: "zurich") - fleet1) < 1e-12, "another area: the fleet's")
        #expect(ranges.ratio(.pickup, horizon: 1, area: "berlin") == 1.5, "another horizon: nothing shared")
        #expect(ranges.ratio(.dropOff, horizon: 2, area: "berlin") == 1.5, "another leg: nothing shared")
        // 10,000 arrivals weigh as 200, the most a worker's own faded arrivals reach: the fleet (240 + 7.5) / 205,
        // the area (240 + 20 x the fleet's) / 220.
        let changed2 = ranges.adopt([.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 10_000)], area: "berlin")
        #expect(changed2)
        let capped = (240 + 20 * 247.5 / 205) / 220
        #expect(abs(ranges.latest(in: 180, leg: .pickup, area: "berlin") - 180 * capped) < 1e-9)
        // The same again changes nothing; nothing shared (a worker before ranges) keeps what was adopted.
        let changed3 = ranges.adopt([.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 10_000)], area: "berlin")
        #expect(!changed3)
        let changed4 = ranges.adopt([], area: "berlin")
        #expect(!changed4)
        #expect(abs(ranges.latest(in: 180, leg: .pickup, area: "berlin") - 180 * capped) < 1e-9)
        // A share that replaces the cells: the latest view of the publisher, not a sum.
        let changed5 = ranges.adopt([.init(leg: .dropOff, horizon: 3, ratio: 2, arrivals: 20)], area: "berlin")
        #expect(changed5)
        #expect(ranges.ratio(.pickup, horizon: 2, area: "berlin") == 1.5)
        // The fleet (40 + 7.5) / 25 = 1.9, the area (40 + 20 x 1.9) / 40.
        #expect(abs(ranges.ratio(.dropOff, horizon: 3, area: "berlin") - 78.0 / 40) < 1e-12)
    }

    @Test(
        "E1: an area's own arrivals and the shared ones pool by weight and count as the larger; what a worker shares is that pool"
    )
    func pooledWithOwn() {
        var ranges = ArrivalRanges()
        for _ in 0..<10 { ranges.observe(estimated: 200, actual: 220, latest: nil, leg: .pickup, area: "berlin") }
        ranges.adopt([.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 100)], area: "berlin")
        // Pooled by weight, counted as the larger weight (100): the shared view may hold this worker's own.
        // The fleet's cell holds the same as the area's (one area here).
        let (own, edge) = (Self.weight(10), Self.edgeOfOnePointOne)
        let pooled = (own * edge + 100 * 1.2) / (own + 100)
        let fleet = (100 * pooled + 5 * 1.5) / 105
        let expected = (100 * pooled + 20 * fleet) / 120
        #expect(abs(ranges.ratio(.pickup, horizon: 2, area: "berlin") - expected) < 1e-12)
        let shared = ranges.shared(area: "berlin")
        #expect(shared.count == 1, "only the cell that learned")
        #expect(shared.first?.leg == .pickup && shared.first?.horizon == 2)
        #expect(abs((shared.first?.ratio ?? 0) - pooled) < 1e-12)
        #expect(shared.first?.arrivals == 100)
        #expect(ranges.shared(area: "zurich").isEmpty)
        // An area seen only through the group shares what it adopted, so that a restart passes it on.
        ranges.adopt([.init(leg: .dropOff, horizon: 0, ratio: 1.3, arrivals: 7)], area: "zurich")
        #expect(ranges.shared(area: "zurich") == [.init(leg: .dropOff, horizon: 0, ratio: 1.3, arrivals: 7)])
    }

    @Test("E1: two workers passing an area's range back and forth do not add up its arrivals")
    func echoes() {
        var (first, second) = (ArrivalRanges(), ArrivalRanges())
        for _ in 0..<5 { first.observe(estimated: 200, actual: 220, latest: nil, leg: .pickup, area: "berlin") }
        for _ in 0..<50 {
            second.adopt(first.shared(area: "berlin"), area: "berlin")
            first.adopt(second.shared(area: "berlin"), area: "berlin")
        }
        // Five arrivals, faded: (1 - 0.995^5) / 0.005, however often they went round.
        #expect(abs((first.shared(area: "berlin").first?.arrivals ?? 0) - Self.weight(5)) < 1e-9)
        #expect(abs((second.shared(area: "berlin").first?.arrivals ?? 0) - Self.weight(5)) < 1e-9)
        #expect(abs((first.shared(area: "berlin").first?.ratio ?? 0) - Self.edgeOfOnePointOne) < 1e-9)
    }

    @Test("E1: what was adopted fades with the cell's own arrivals, so a worker alone follows a change of traffic")
    func adoptedFades() {
        var ranges = ArrivalRanges()
        ranges.adopt([.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 200)], area: "berlin")
        // Traffic changed: 600 arrivals take 1.8 times their estimate (bin 34 of 48: upper edge 16^(35/48) / 4).
        for _ in 0..<600 { ranges.observe(estimated: 200, actual: 360, latest: nil, leg: .pickup, area: "berlin") }
        let own: Double = Self.weight(600)
        let edge: Double = 0.25 * pow(16.0, 35.0 / 48)
        let adopted: Double = 200 * pow(0.995, 600.0)
        let pooled: Double = (own * edge + adopted * 1.2) / (own + adopted)
        let fleet: Double = (own * pooled + 5 * 1.5) / (own + 5)
        let expected: Double = (own * pooled + 20 * fleet) / (own + 20)
        #expect(abs(ranges.ratio(.pickup, horizon: 2, area: "berlin") - expected) < 1e-9)
        #expect(expected > 1.8, "\(expected): without the fade 200 adopted at 1.2 would hold it near 1.5")
    }

    @Test(
        "E1, A2: the ranges travel in the priors, valid against priors.schema.json; another worker draws the group's latest times, and older priors keep them"
    )
    func throughThePriors() async throws {
        var first = RideEngine()
        first.learning.learn(speed: 10, area: nil, at: t0, configuration: first.configuration)
        for _ in 0..<10 { first.ranges.observe(estimated: 200, actual: 220, latest: nil, leg: .pickup, area: "") }
        let share = try #require(first.priorsToShare(worker: "w-1", now: t0).first)
        let text = String(decoding: share.payload, as: UTF8.self)
        // Its own cell alone: the upper edge of 1.1's bin (1.124...) to a thousandth, 9.8 arrivals to a tenth.
        let ratio = (Self.edgeOfOnePointOne * 1000).rounded() / 1000
        #expect(
            text.contains(#""ranges":[{"leg":"pickup","horizon":"120-240","ratio":\#(ratio),"arrivals":9.8}]"#),
            "\(text)")
        let (code, output) = try await validateJSON(schema: "priors.schema.json", documents: [share.payload])
        #expect(code == 0, Comment(rawValue: output))

        var second = RideEngine()
        #expect(second.ranges.latest(in: 200, leg: .pickup, area: "") == 300, "before: the prior")
        let key = AreaPriors.key(area: "")
        let heard = second.receivePriors(
            key: key, topic: share.topic, payload: share.payload, now: t0, worker: "w-2", since: t0)
        #expect(heard.refusal == nil && heard.adopted?.ranges.count == 1)
        // 9.8 arrivals at the shared ratio: the fleet's shrunk toward the prior by 5, the area's toward the fleet's
        // by 20.
        let fleet = (9.8 * ratio + 5 * 1.5) / 14.8
        let expected = (9.8 * ratio + 20 * fleet) / 29.8
        #expect(abs(second.ranges.ratio(.pickup, horizon: 2, area: "") - expected) < 1e-9)
        // Priors from a worker before the ranges (none in them) leave the adopted ones as they were.
        let older = AreaPriors(
            area: "", worker: "w-3", at: t0.addingTimeInterval(60), detourFactor: 1.2, rides: 3, stopShare: 0.2,
            legs: 3)
        let again = second.receivePriors(
            key: key, topic: share.topic, payload: older.encoded(), now: t0.addingTimeInterval(60), worker: "w-2",
            since: t0)
        #expect(again.refusal == nil)
        #expect(abs(second.ranges.ratio(.pickup, horizon: 2, area: "") - expected) < 1e-9)
        // The first worker restarts: it reads back its own retained priors (from before this run) and draws the
        // latest times it drew; its own echo within a run is skipped.
        var restarted = RideEngine()
        let echo = restarted.receivePriors(
            key: key, topic: share.topic, payload: share.payload, now: t0, worker: "w-1", since: t0)
        #expect(echo.adopted == nil && restarted.ranges.ratio(.pickup, horizon: 2, area: "") == 1.5, "an echo")
        let readBack = restarted.receivePriors(
            key: key, topic: share.topic, payload: share.payload, now: t0.addingTimeInterval(30), worker: "w-1",
            since: t0.addingTimeInterval(20))
        #expect(readBack.adopted != nil)
        #expect(abs(restarted.ranges.ratio(.pickup, horizon: 2, area: "") - expected) < 1e-9)
    }

    @Test("E1, A2: a range out of its bounds, unnamed or named twice refuses the whole priors; the ranges stay")
    func refusals() throws {
        let base =
            #"{"area":"","worker":"w-1","at":"2026-11-22T09:50:00.000Z","detourFactor":1.2,"rides":3,"legs":0,"ranges":["#
        let good = #"{"leg":"pickup","horizon":"0-60","ratio":1.2,"arrivals":3}"#
        let bad = [
            #"{"leg":"walk","horizon":"0-60","ratio":1.2,"arrivals":3}"#,
            #"{"leg":"pickup","horizon":"5-10","ratio":1.2,"arrivals":3}"#,
            #"{"leg":"pickup","horizon":"0-60","ratio":4.5,"arrivals":3}"#,
            #"{"leg":"pickup","horizon":"0-60","ratio":0.2,"arrivals":3}"#,
            #"{"leg":"pickup","horizon":"0-60","ratio":1.2,"arrivals":-1}"#,
            #"{"leg":"pickup","horizon":"0-60","ratio":1.2}"#,
            #"{"leg":"pickup","horizon":"0-60","ratio":1.2,"arrivals":3},{"leg":"pickup","horizon":"0-60","ratio":1.3,"arrivals":3}"#,
            #"7"#,
            Array(repeating: good, count: 9).joined(separator: ","),
            #"{"leg":"pickup","horizon":"0-60","ratio":1.2,"arrivals":2000000000}"#,
        ]
        var engine = RideEngine()
        let key = AreaPriors.key(area: "")
        // The ends of the ratio's range are read.
        let ends =
            #"{"leg":"pickup","horizon":"60-120","ratio":0.25,"arrivals":3},{"leg":"dropOff","horizon":"240+","ratio":4,"arrivals":1000000000}"#
        let accepted = engine.receivePriors(
            key: key, topic: "ridestatus/priors/\(key)", payload: Array((base + ends + "]}").utf8), now: t0,
            worker: "w-2", since: t0)
        #expect(accepted.refusal == nil && accepted.adopted?.ranges.count == 2)
        let before = engine.ranges
        #expect(before.ratio(.dropOff, horizon: 3, area: "") > 3, "4, at 200 arrivals' worth")
        for ranges in bad {
            let payload = Array((base + ranges + "]}").utf8)
            let heard = engine.receivePriors(
                key: key, topic: "ridestatus/priors/\(key)", payload: payload, now: t0, worker: "w-2", since: t0)
            let refusal = try #require(heard.refusal, "\(ranges)")
            let reason: DeadLetter.Reason = ranges.hasSuffix(#""ratio":1.2}"#) ? .missingField : .invalidField
            #expect(refusal.reason == reason && refusal.detail.contains("A2"), "\(refusal.detail)")
            #expect(heard.adopted == nil)
            #expect(engine.ranges == before, "refused: nothing adopted, not even the good cell beside a bad one")
        }
        // The good one alone is read (a later share: the same worker's same instant would be a replay).
        let later = base.replacingOccurrences(of: "09:50:00.000Z", with: "09:51:00.000Z")
        let heard = engine.receivePriors(
            key: key, topic: "ridestatus/priors/\(key)", payload: Array((later + good + "]}").utf8),
            now: t0.addingTimeInterval(60), worker: "w-2", since: t0)
        #expect(heard.refusal == nil)
        #expect(engine.ranges.ratio(.pickup, horizon: 0, area: "") < 1.5)
        #expect(engine.ranges.ratio(.dropOff, horizon: 3, area: "") == 1.5, "replaced: the latest view heard")
    }

    @Test(
        "E1: a car arriving teaches its area's range, and the area's priors are shared with it, even with nothing else learned"
    )
    func arrivalMarksTheArea() throws {
        // Learning off: the leg teaches neither a factor, a stop share nor a speed, only the range.
        var configuration = RideConfiguration()
        (configuration.detourLearningRate, configuration.stopShareLearningRate) = (0, 0)
        var harness = Harness(configuration: configuration)
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0), speed: 10)
        _ = harness.engine.tick(now: t0.addingTimeInterval(5))
        let nothingNew = harness.engine.priorsToShare(worker: "w-1", now: t0.addingTimeInterval(5))
        #expect(nothingNew.isEmpty, "nothing learned yet")
        harness.fix(at: t0.addingTimeInterval(200), pickup.moved(metres: 10, bearing: 0), speed: 0)
        #expect(harness.phase() == .pickup)
        #expect(harness.engine.learning.learned.isEmpty, "learning off")
        let share = try #require(harness.engine.priorsToShare(worker: "w-1", now: t0.addingTimeInterval(200)).first)
        let read = try #require(
            try AreaPriors.decode(
                share.payload, key: AreaPriors.key(area: ""), decoder: InputDecoder(), now: t0.addingTimeInterval(200),
                futureTolerance: 5))
        #expect(read.ranges.map(\.leg) == [.pickup] && read.ranges.first?.horizon == 3, "\(read.ranges)")
        #expect(read.rides == 0 && read.legs == 0 && read.detourFactor == configuration.detourFactor, "a placeholder")
        let again = harness.engine.priorsToShare(worker: "w-1", now: t0.addingTimeInterval(260))
        #expect(again.isEmpty, "shared once")
    }

    @Test(
        "E1: a worker with learning off shares no range alone over what the group learned (one retained message an area)"
    )
    func noPlaceholderOverLearned() throws {
        var configuration = RideConfiguration()
        (configuration.detourLearningRate, configuration.stopShareLearningRate) = (0, 0)
        var harness = Harness(configuration: configuration)
        // The group's retained priors of the area, from a worker that learned 40 rides there.
        let learned = AreaPriors(
            area: "", worker: "w-2", at: t0, detourFactor: 1.2, rides: 40, stopShare: 0.3, legs: 25)
        let key = AreaPriors.key(area: "")
        _ = harness.engine.receivePriors(
            key: key, topic: "ridestatus/priors/\(key)", payload: learned.encoded(), now: t0, worker: "w-1", since: t0)
        #expect(harness.engine.learning.learned.isEmpty, "learning off keeps nothing of it")
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), pickup.moved(metres: 2000, bearing: 0), speed: 10)
        _ = harness.engine.tick(now: t0.addingTimeInterval(5))
        harness.fix(at: t0.addingTimeInterval(200), pickup.moved(metres: 10, bearing: 0), speed: 0)
        #expect(harness.phase() == .pickup)
        #expect(harness.engine.ranges.ratio(.pickup, horizon: 3, area: "") < 1.5, "the range learned")
        let shares = harness.engine.priorsToShare(worker: "w-1", now: t0.addingTimeInterval(200))
        #expect(shares.isEmpty, "a share with no rides would replace the group's 40")
    }

    @Test("E1: the same retained priors heard again (a reconnect) do not undo the fade of what was adopted")
    func replayKeepsTheFade() throws {
        var engine = RideEngine()
        let priors = AreaPriors(
            area: "", worker: "w-2", at: t0, detourFactor: 1.2, rides: 4, stopShare: nil, legs: 0,
            ranges: [.init(leg: .pickup, horizon: 2, ratio: 1.2, arrivals: 200)])
        let key = AreaPriors.key(area: "")
        let topic = "ridestatus/priors/\(key)"
        _ = engine.receivePriors(
            key: key, topic: topic, payload: priors.encoded(), now: t0, worker: "w-1", since: t0)
        for _ in 0..<300 { engine.ranges.observe(estimated: 200, actual: 360, latest: nil, leg: .pickup, area: "") }
        let faded = engine.ranges.ratio(.pickup, horizon: 2, area: "")
        let again = engine.receivePriors(
            key: key, topic: topic, payload: priors.encoded(), now: t0.addingTimeInterval(60), worker: "w-1",
            since: t0)
        #expect(again.adopted == nil && again.refusal == nil)
        #expect(engine.ranges.ratio(.pickup, horizon: 2, area: "") == faded, "not back to 200 arrivals at 1.2")
        // A newer share of the same worker is heard.
        var newer = priors
        newer.at = t0.addingTimeInterval(90)
        let heard = engine.receivePriors(
            key: key, topic: topic, payload: newer.encoded(), now: t0.addingTimeInterval(90), worker: "w-1",
            since: t0)
        #expect(heard.adopted != nil)
        #expect(engine.ranges.ratio(.pickup, horizon: 2, area: "") < faded, "200 at 1.2 again, as shared")
    }
}
