public import Foundation
import RideStatusKit

/// E1: one service area's learned priors as the workers of a group share them, retained on
/// `{serviceName}/priors/{key}` (``RideStatusKit/RideTopics/priors(key:)``), so that a worker that restarts, or another worker of
/// the group, starts its rides from what the fleet taught instead of from the configuration.
///
/// The topic's level is ``key(area:)``, not the area's name: a catalog's area names are free text (spaces,
/// slashes), and I1 lets nothing else into a topic. The payload names the area, and a reader checks that it
/// hashes to the topic's key (as a ride state's ride id must equal its topic's, A2).
public struct AreaPriors: Sendable, Equatable {
    /// The area's name in the catalog; "" for rides outside every area (or a worker without a catalog).
    public var area: String
    /// The worker that published them (I1).
    public var worker: String
    /// When they were published.
    public var at: Date
    public var detourFactor: Double
    /// Completed rides the factor was learned from (in the publishing worker's view: its own and what it
    /// adopted from others).
    public var rides: Int
    /// The learned share of time standing; nil until a leg taught one.
    public var stopShare: Double?
    /// Legs the stop share was learned from.
    public var legs: Int
    /// The learned speed while moving, m/s; nil until a leg taught one (and from workers before it was shared).
    public var speed: Double?
    /// Legs the speed was learned from (0 when absent).
    public var speedLegs: Int
    /// What each hour of the week taught (``AreaLearning/Hour``), by hour; empty from workers before they were
    /// shared.
    public var hours: [Int: AreaLearning.Hour]
    /// The time zone the hours are counted in (``AreaLearning/zoneName(of:_:)``): a reader whose zone for the
    /// area differs leaves them alone, so that one worker's 08:00 is not averaged with another's 07:00. Nil
    /// without hours.
    public var timeZone: String?
    /// E1's range: the area's percentile of each leg and horizon with the arrivals it stands for
    /// (``ArrivalRanges/shared(area:)``); empty from workers before they were shared.
    public var ranges: [ArrivalRanges.Shared]

    public init(
        area: String, worker: String, at: Date, detourFactor: Double, rides: Int, stopShare: Double?, legs: Int,
        speed: Double? = nil, speedLegs: Int = 0, hours: [Int: AreaLearning.Hour] = [:], timeZone: String? = nil,
        ranges: [ArrivalRanges.Shared] = []
    ) {
        self.area = area
        self.worker = worker
        self.at = at
        self.detourFactor = detourFactor
        self.rides = rides
        self.stopShare = stopShare
        self.legs = legs
        self.speed = speed
        self.speedLegs = speedLegs
        self.hours = hours
        self.timeZone = timeZone
        self.ranges = ranges
    }

    /// Priors older than this are not read (A2: a prior from before a long pause says little of today's roads;
    /// the configuration's values stand in until rides teach again).
    public static let maximumAge: TimeInterval = 30 * 86_400
    /// The most rides or legs a count may claim; a larger count is written as this.
    static let maximumCount = 1_000_000_000
    /// The priors' own I2 limit, in bytes, the same in every worker whatever its `rides.maxPayloadBytes`: a group
    /// whose workers set that differently still reads each other's priors. 168 hours with the largest counts
    /// take 14.5 KB; a publisher leaves out the hours with the fewest legs beyond it.
    public static let maximumBytes = 16_384

    /// The topic level for `area`: the 64-bit FNV-1a hash of its UTF-8 name, 16 lowercase hex digits (I1-safe
    /// for any name, and the same in every worker and release).
    public static func key(area: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in area.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The payload as a worker publishes it: `area`, `worker`, `at`, `detourFactor`, `rides`, then `stopShare`
    /// when learned, `legs`, `speed` with `speedLegs` when learned, and `hours` when any hour taught something:
    /// `{"hour", "stopShare", "legs", "speed", "speedLegs"}` per hour, in hour order, the values to a thousandth,
    /// after `timeZone` (`priors.schema.json`). Before the hours, `ranges` when any cell learned one:
    /// `{"leg", "horizon", "ratio", "arrivals"}` per cell (the ratio to a thousandth, the arrivals to a tenth).
    /// Counts above ``maximumCount`` are written as it.
    /// - Parameter limit: the most bytes the payload may take (I2): hours that taught the fewest legs are left
    ///   out until it fits. 168 hours take about 12 KB.
    public func encoded(limit: Int = maximumBytes) -> [UInt8] {
        var writer = JSONWriter(capacity: 160)
        writer.beginObject()
        writer.key("area")
        writer.string(area)
        writer.key("worker")
        writer.string(worker)
        writer.key("at")
        writer.time(at)
        writer.key("detourFactor")
        writer.number(detourFactor)
        writer.key("rides")
        writer.integer(min(rides, Self.maximumCount))
        if let stopShare {
            writer.key("stopShare")
            writer.number(stopShare)
        }
        writer.key("legs")
        writer.integer(min(legs, Self.maximumCount))
        if let speed {
            writer.key("speed")
            writer.number(speed)
            writer.key("speedLegs")
            writer.integer(min(speedLegs, Self.maximumCount))
        }
        if !ranges.isEmpty {
            writer.key("ranges")
            writer.beginArray()
            for cell in ranges {
                writer.beginObject()
                writer.key("leg")
                writer.string(cell.leg.name)
                writer.key("horizon")
                writer.string(ArrivalRanges.horizonNames[cell.horizon])
                writer.key("ratio")
                writer.number((cell.ratio * 1000).rounded() / 1000)
                writer.key("arrivals")
                writer.number((min(cell.arrivals, Double(Self.maximumCount)) * 10).rounded() / 10)
                writer.endObject()
            }
            writer.endArray()
        }
        guard !hours.isEmpty else {
            writer.endObject()
            return writer.bytes
        }
        var entries = hours.map { hour, values in (hour, values, Self.encoded(hour: hour, values)) }
        // `,"timeZone":"…"`, `,"hours":[` and `]}`.
        var budget = limit - writer.count - 12 - (14 + (timeZone ?? "UTC").utf8.count)
        entries.sort { ($0.1.legs + $0.1.speedLegs, $1.0) > ($1.1.legs + $1.1.speedLegs, $0.0) }
        var kept = 0
        for entry in entries {
            guard budget >= entry.2.count + 1 else { break }
            budget -= entry.2.count + 1
            kept += 1
        }
        // The zone only with the hours: a reader refuses one without the other.
        if kept > 0 {
            writer.key("timeZone")
            writer.string(timeZone ?? "UTC")
            writer.key("hours")
            writer.beginArray()
            for entry in entries.prefix(kept).sorted(by: { $0.0 < $1.0 }) { writer.raw(entry.2) }
            writer.endArray()
        }
        writer.endObject()
        return writer.bytes
    }

    /// One hour's object in `hours`.
    static func encoded(hour: Int, _ values: AreaLearning.Hour) -> [UInt8] {
        var writer = JSONWriter(capacity: 80)
        writer.beginObject()
        writer.key("hour")
        writer.integer(hour)
        if let stopShare = values.stopShare {
            writer.key("stopShare")
            writer.number((stopShare * 1000).rounded() / 1000)
            writer.key("legs")
            writer.integer(min(values.legs, maximumCount))
        }
        if let speed = values.speed {
            writer.key("speed")
            writer.number((speed * 1000).rounded() / 1000)
            writer.key("speedLegs")
            writer.integer(min(values.speedLegs, maximumCount))
        }
        writer.endObject()
        return writer.bytes
    }

    /// A2: priors read from the broker pass the checks of fresh input: I2 (size, UTF-8, a JSON object), the
    /// area hashing to the topic's `key`, I1 for the worker, the time neither ahead by more than
    /// `futureTolerance` nor older than ``maximumAge``, and every number in its range (the detour factor within
    /// `rides.detourFactor`'s 1...5, the stop share within 0...0.9, the speed within
    /// ``AreaLearning/speeds``, counts whole and not negative; a speed comes with its count), and the same of each
    /// hour (an hour of ``AreaLearning/hoursOfWeek`` named once, a stop share with its legs, a speed with its) and
    /// of each range (a leg and a horizon of ``ArrivalRanges`` named once, the ratio within 0.25...4, the arrivals
    /// within 0...10^9).
    /// - Returns: nil for a deleted retained message (zero bytes).
    public static func decode(
        _ payload: [UInt8], key: String, decoder: InputDecoder, now: Date, futureTolerance: TimeInterval
    ) throws(Rejection) -> AreaPriors? {
        guard !payload.isEmpty else { return nil }
        do {
            return try read(payload, key: key, decoder: decoder, now: now, futureTolerance: futureTolerance)
        } catch  where !error.detail.contains("A2") {
            // A field's own refusal ("worker is required"): the dead letter and the log still name the rule.
            throw Rejection(error.reason, "priors: \(error.detail) (A2)")
        }
    }

    private static func read(
        _ payload: [UInt8], key: String, decoder: InputDecoder, now: Date, futureTolerance: TimeInterval
    ) throws(Rejection) -> AreaPriors {
        let fields = Fields(try decoder.object(payload))
        let area = try fields.string("area")
        guard area.utf8.count <= 200 else { throw Rejection(.invalidField, "priors: area is over 200 bytes (A2)") }
        guard Self.key(area: area) == key else {
            throw Rejection(.identifierMismatch, "priors: area '\(area.prefix(64))' is not the topic's (A2)")
        }
        let worker = try fields.string("worker")
        guard Identifier.isValid(worker) else {
            throw Rejection(.invalidIdentifier, "priors: worker breaks I1 (A2)")
        }
        let at = try fields.date("at")
        guard at.timeIntervalSince(now) <= futureTolerance else {
            throw Rejection(.timestampInFuture, "priors: at is ahead of this worker's clock (A2)")
        }
        guard now.timeIntervalSince(at) <= maximumAge else {
            throw Rejection(.timestampTooOld, "priors: at is more than 30 days old (A2)")
        }
        let factor = try fields.number("detourFactor")
        guard (1...5).contains(factor) else {
            throw Rejection(.invalidField, "priors: detourFactor \(factor) is outside 1...5 (E1, A2)")
        }
        let stopShare = try fields.optionalNumber("stopShare")
        if let stopShare, !(0...AreaLearning.highestStopShare).contains(stopShare) {
            throw Rejection(.invalidField, "priors: stopShare \(stopShare) is outside 0...0.9 (E1, A2)")
        }
        let speed = try fields.optionalNumber("speed")
        if let speed, !AreaLearning.speeds.contains(speed) {
            throw Rejection(.invalidField, "priors: speed \(speed) is outside 0.5...60 m/s (E1, A2)")
        }
        // The speed and its count come together (the schema's dependentRequired both ways).
        let speedLegs = try fields.optionalNumber("speedLegs")
        guard speed != nil || speedLegs == nil else {
            throw Rejection(.invalidField, "priors: speedLegs without a speed (A2)")
        }
        var hours: [Int: AreaLearning.Hour] = [:]
        let timeZone = try fields.optionalString("timeZone")
        if let timeZone, timeZone.isEmpty || timeZone.utf8.count > 64 {
            throw Rejection(.invalidField, "priors: timeZone is not 1 to 64 bytes (A2)")
        }
        let hourList = try fields.optionalArray("hours")
        guard (hourList == nil) == (timeZone == nil) else {
            throw Rejection(.invalidField, "priors: hours and timeZone come together (A2)")
        }
        guard (hourList?.count ?? 0) <= AreaLearning.hoursOfWeek.count else {
            throw Rejection(.invalidField, "priors: more than 168 hours (A2)")
        }
        for element in hourList ?? [] {
            guard case .object = element else { throw Rejection(.invalidField, "priors: hours[] must be objects (A2)") }
            let (hour, values) = try Self.hour(Fields(element))
            guard hours.updateValue(values, forKey: hour) == nil else {
                throw Rejection(.invalidField, "priors: hour \(hour) is named twice (A2)")
            }
        }
        let rangeList = try fields.optionalArray("ranges") ?? []
        guard rangeList.count <= ArrivalRanges.Leg.allCases.count * ArrivalRanges.horizonNames.count else {
            throw Rejection(.invalidField, "priors: more than 8 ranges (A2)")
        }
        var ranges: [ArrivalRanges.Shared] = []
        for element in rangeList {
            guard case .object = element else {
                throw Rejection(.invalidField, "priors: ranges[] must be objects (A2)")
            }
            let cell = try Self.range(Fields(element))
            guard !ranges.contains(where: { $0.leg == cell.leg && $0.horizon == cell.horizon }) else {
                throw Rejection(
                    .invalidField,
                    "priors: the range of \(cell.leg.name) at \(ArrivalRanges.horizonNames[cell.horizon]) is named twice (A2)"
                )
            }
            ranges.append(cell)
        }
        return AreaPriors(
            area: area, worker: worker, at: at, detourFactor: factor, rides: try count(fields, "rides"),
            stopShare: stopShare, legs: try count(fields, "legs"), speed: speed,
            speedLegs: speed == nil ? 0 : try count(fields, "speedLegs"), hours: hours, timeZone: timeZone,
            ranges: ranges)
    }

    /// One object of `ranges`: a leg and a horizon by name, the ratio within ``ArrivalRanges/lowestRatio``...
    /// ``ArrivalRanges/highestRatio`` and the arrivals it stands for within 0...``maximumCount``.
    private static func range(_ fields: Fields) throws(Rejection) -> ArrivalRanges.Shared {
        let legName = try fields.string("leg")
        guard let leg = ArrivalRanges.Leg.allCases.first(where: { $0.name == legName }) else {
            throw Rejection(.invalidField, "priors: range leg '\(legName.prefix(32))' is not pickup or dropOff (A2)")
        }
        let horizonName = try fields.string("horizon")
        guard let horizon = ArrivalRanges.horizonNames.firstIndex(of: horizonName) else {
            throw Rejection(
                .invalidField,
                "priors: range horizon '\(horizonName.prefix(32))' is not 0-60, 60-120, 120-240 or 240+ (A2)")
        }
        let ratio = try fields.number("ratio")
        guard (ArrivalRanges.lowestRatio...ArrivalRanges.highestRatio).contains(ratio) else {
            throw Rejection(.invalidField, "priors: range ratio \(ratio) is outside 0.25...4 (E1, A2)")
        }
        let arrivals = try fields.number("arrivals")
        guard arrivals >= 0, arrivals <= Double(maximumCount) else {
            throw Rejection(.invalidField, "priors: range arrivals \(arrivals) is outside 0...\(maximumCount) (A2)")
        }
        return ArrivalRanges.Shared(leg: leg, horizon: horizon, ratio: ratio, arrivals: arrivals)
    }

    /// One object of `hours`: its hour of the week, and what it taught (each value with its count, in range).
    private static func hour(_ fields: Fields) throws(Rejection) -> (Int, AreaLearning.Hour) {
        let hour = try count(fields, "hour")
        guard AreaLearning.hoursOfWeek.contains(hour) else {
            throw Rejection(.invalidField, "priors: hour \(hour) is outside 0...167 (A2)")
        }
        var values = AreaLearning.Hour()
        if let stopShare = try fields.optionalNumber("stopShare") {
            guard (0...AreaLearning.highestStopShare).contains(stopShare) else {
                throw Rejection(
                    .invalidField, "priors: hour \(hour)'s stopShare \(stopShare) is outside 0...0.9 (E1, A2)")
            }
            values.stopShare = stopShare
            values.legs = try count(fields, "legs")
        } else if fields.has("legs") {
            throw Rejection(.invalidField, "priors: hour \(hour) has legs without a stopShare (A2)")
        }
        if let speed = try fields.optionalNumber("speed") {
            guard AreaLearning.speeds.contains(speed) else {
                throw Rejection(.invalidField, "priors: hour \(hour)'s speed \(speed) is outside 0.5...60 m/s (E1, A2)")
            }
            values.speed = speed
            values.speedLegs = try count(fields, "speedLegs")
        } else if fields.has("speedLegs") {
            throw Rejection(.invalidField, "priors: hour \(hour) has speedLegs without a speed (A2)")
        }
        return (hour, values)
    }

    private static func count(_ fields: Fields, _ key: String) throws(Rejection) -> Int {
        let number = try fields.number(key)
        guard number >= 0, number <= Double(maximumCount), number == number.rounded() else {
            throw Rejection(.invalidField, "priors: \(key) is not a whole number in 0...\(maximumCount) (A2)")
        }
        return Int(number)
    }
}

extension AreaLearning {
    /// E1: what another worker learned of `priors.area`, weighed against what this worker holds.
    ///
    /// Each side is an exponentially weighted mean whose memory is 1 / the learning rate (20 rides at the
    /// default 0.05), so each weighs its count up to that memory: a worker that saw 5 rides does not pull a
    /// prior learned from 20 far, and 10,000 rides weigh no more than 20 of the same recent roads. An area this
    /// worker knows nothing of takes the shared values as they are; the counts become the larger of the two, so
    /// that hearing the same priors again does not inflate them. The factor is bounded to
    /// `rides.detourFactorMinimum...detourFactorMaximum`. Learning turned off (a rate of 0) adopts nothing.
    /// Adopting is not learning: it does not mark the area to share again (``takeChanged()``). The last priors
    /// adopted per area are not weighed in again when heard again: a reconnect replays every retained one.
    /// - Parameter configuredFactor: the factor this worker starts the area from (its catalog's, else
    ///   `rides.detourFactor`).
    /// - Returns: whether anything changed.
    @discardableResult
    public mutating func adopt(_ priors: AreaPriors, configuredFactor: Double, configuration: RideConfiguration)
        -> Bool
    {
        // Only an exact repeat: the retained message is always the latest share, and a worker whose clock stepped
        // back must still be heard.
        if let last = lastAdopted[priors.area], last.worker == priors.worker, priors.at == last.at { return false }
        lastAdopted[priors.area] = (priors.worker, priors.at)
        let before = learned[priors.area]
        var entry = before ?? Entry(factor: configuredFactor, rides: 0)
        if priors.rides > 0,
            let mean = Self.pooled(
                [(entry.factor, entry.rides), (priors.detourFactor, priors.rides)],
                rate: configuration.detourLearningRate)
        {
            let bounds = configuration.detourFactorMinimum...configuration.detourFactorMaximum
            entry.factor = min(max(mean, bounds.lowerBound), bounds.upperBound)
            entry.rides = max(entry.rides, priors.rides)
        }
        let rate = configuration.stopShareLearningRate
        Self.weigh(
            &entry.stopShare, &entry.legs, priors.stopShare, priors.legs, rate: rate, within: 0...Self.highestStopShare)
        Self.weigh(&entry.speed, &entry.speedLegs, priors.speed, priors.speedLegs, rate: rate, within: Self.speeds)
        // Each hour as the area; kept and shared again with hours off (only not read), so that a worker with them
        // off does not wipe the group's from the retained priors.
        for (hour, shared) in priors.hours where Self.hoursOfWeek.contains(hour) {
            var mine = entry.hours[hour] ?? Hour()
            Self.weigh(
                &mine.stopShare, &mine.legs, shared.stopShare, shared.legs, rate: rate,
                within: 0...Self.highestStopShare)
            Self.weigh(&mine.speed, &mine.speedLegs, shared.speed, shared.speedLegs, rate: rate, within: Self.speeds)
            if mine.stopShare != nil || mine.speed != nil { entry.hours[hour] = mine }
        }
        guard entry != before, entry.rides > 0 || entry.stopShare != nil || entry.speed != nil else { return false }
        setLearned(entry, for: priors.area, changed: false)
        return true
    }

    /// Weighs a shared `value` taught by `count` legs into `mine`, taught by `myCount`: each weighs its count up
    /// to the learning's memory (``pooled(_:rate:)``), bounded `within`; the count becomes the larger of the two,
    /// so that hearing the same priors again does not inflate it. Nothing shared (or learning off): unchanged.
    static func weigh(
        _ mine: inout Double?, _ myCount: inout Int, _ value: Double?, _ count: Int, rate: Double,
        within bounds: ClosedRange<Double>
    ) {
        guard let value, count > 0,
            let mean = pooled([mine.map { ($0, myCount) }, (value, count)].compactMap { $0 }, rate: rate)
        else { return }
        mine = min(max(mean, bounds.lowerBound), bounds.upperBound)
        myCount = max(myCount, count)
    }

    /// The priors this worker learned (not adopted) since the last call, by area name, to share with the group.
    public mutating func takeChanged() -> [(area: String, entry: Entry)] {
        defer { clearChanged() }
        return changed.sorted().compactMap { area in learned[area].map { (area, $0) } }
    }
}

extension RideEngine {
    /// E1: the priors this engine learned since the last call, as `(topic, payload)` for the
    /// worker to publish retained (``AreaPriors``): each area whose learning or range changed. An area whose range
    /// learned before anything else is shared with no rides and no legs (its factor the configured one, which
    /// readers then ignore), unless this worker heard priors of the area that taught something: the group has
    /// one retained message per area, and such a share would replace what the group learned with nothing (a
    /// worker with learning off keeps none of it). A share that fails is marked again with
    /// ``markPriorsChanged(_:)``.
    public mutating func priorsToShare(worker: String, now: Date) -> [(area: String, topic: String, payload: [UInt8])] {
        var changed = learning.takeChanged()
        for area in rangesChanged.sorted()
        where !changed.contains(where: { $0.area == area })
            && (learning.learned[area] != nil || !heardLearned.contains(area))
        {
            let configured = serviceArea(named: area)?.detourFactor ?? configuration.detourFactor
            changed.append((area, learning.learned[area] ?? AreaLearning.Entry(factor: configured, rides: 0)))
        }
        rangesChanged.removeAll()
        return changed.map { area, entry in
            let zone = AreaLearning.zoneName(of: serviceArea(named: area), configuration)
            let priors = AreaPriors(
                area: area, worker: worker, at: now, detourFactor: entry.factor, rides: entry.rides,
                stopShare: entry.stopShare, legs: entry.legs, speed: entry.speed, speedLegs: entry.speedLegs,
                hours: entry.hours, timeZone: entry.hours.isEmpty ? nil : zone, ranges: ranges.shared(area: area))
            return (area, topics.priors(key: AreaPriors.key(area: area)), priors.encoded())
        }
    }

    /// E1: `area`'s priors did not leave (the broker refused them): shared again at the next interval.
    public mutating func markPriorsChanged(_ area: String) {
        learning.markChanged(area)
        rangesChanged.insert(area)
    }

    /// E1, A2: another worker's priors on `topic`, read from the broker: checked like any input
    /// (``AreaPriors/decode(_:key:decoder:now:futureTolerance:)``), and for an area of this engine's catalog
    /// ("" for rides outside every area), so that what the broker holds cannot grow the worker. Accepted ones
    /// are weighed in (``AreaLearning/adopt(_:configuredFactor:configuration:)``); a refusal is counted and
    /// dead-lettered, and changes nothing. A deleted message (zero bytes) changes nothing either, nor does
    /// `worker`'s own since `since` (its echo: a subscription without no local, so that a restarted worker
    /// reads back the priors it retained before).
    /// - Returns: the priors weighed in (nil when refused, deleted, an echo, or changing nothing), the refusal,
    ///   and the actions (a dead letter for a refusal, unless the per-reason limit holds it back).
    public mutating func receivePriors(
        key: String, topic: String, payload: [UInt8], now: Date, worker: String, since: Date
    ) -> (adopted: AreaPriors?, refusal: Rejection?, actions: [RideAction]) {
        do throws(Rejection) {
            guard
                var priors = try AreaPriors.decode(
                    payload, key: key, decoder: InputDecoder(maxPayloadBytes: AreaPriors.maximumBytes), now: now,
                    futureTolerance: configuration.futureTolerance)
            else { return (nil, nil, []) }
            let area = serviceArea(named: priors.area)
            guard area != nil || priors.area.isEmpty else {
                throw Rejection(
                    .invalidField,
                    "priors: no service area of this worker's catalog is named '\(priors.area.prefix(64))' (A2)")
            }
            guard priors.worker != worker || priors.at < since else { return (nil, nil, []) }
            // What was heard already (a retained message replayed at a reconnect) is not weighed in again: the
            // learning keeps the last one per area, and the ranges would otherwise undo their fade.
            let heardBefore = learning.lastAdopted[priors.area].map { $0 == (priors.worker, priors.at) } ?? false
            if priors.rides > 0 || priors.stopShare != nil || priors.speed != nil || !priors.hours.isEmpty {
                heardLearned.insert(priors.area)
            }
            // Hours counted in another zone than this worker's for the area are not this worker's hours; a zone
            // named another way (US/Eastern, America/New_York) whose clock agrees with this worker's is the same.
            if let shared = priors.timeZone, shared != AreaLearning.zoneName(of: area, configuration) {
                let ours = AreaLearning.timeZone(of: area, configuration)
                // Cached by the two names, only for names Foundation knows (a few hundred at most): names from the
                // broker cannot grow the cache.
                let key = "\(shared)|\(ours?.identifier ?? "")"
                var same = sameClock[key]
                if same == nil, let known = AreaLearning.sameClock(shared, as: ours, around: now) {
                    same = known
                    sameClock[key] = known
                }
                if same != true { priors.hours = [:] }
            }
            let changed = learning.adopt(
                priors, configuredFactor: area?.detourFactor ?? configuration.detourFactor, configuration: configuration
            )
            let rangesChanged = heardBefore ? false : ranges.adopt(priors.ranges, area: priors.area)
            return (changed || rangesChanged ? priors : nil, nil, [])
        } catch {
            return (nil, error, reject(error, topic: topic, payload: payload, now: now))
        }
    }
}
