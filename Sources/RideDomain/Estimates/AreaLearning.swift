public import Foundation

/// E1: what each service area teaches its new rides, from the rides that drove there.
/// - The detour factor (road over great-circle distance) starts from the catalog's `detourFactor` for the area,
///   else the fleet's (the other areas' learned factors, ``fleetFactor(_:)``), else `rides.detourFactor`, and
///   is corrected by what completed rides drove: an exponentially weighted mean of driven over great-circle
///   metres (`rides.detourLearningRate` per ride), each ride's rise capped (``detourRise``), bounded to
///   `rides.detourFactorMinimum...detourFactorMaximum`.
/// - The stop share (the share of time a car stands at lights and in jams) starts from the fleet's
///   (``fleetStopShare(_:)``), else `rides.typicalStopShare`, and is corrected by every leg driven to its end, to the pickup and to the
///   drop-off: an exponentially weighted mean of the legs' own stop shares (`rides.stopShareLearningRate` per
///   leg), bounded to 0...0.9. A city of arterials stands a few per cent of the time, a centre of lights
///   a third: one constant is wrong by that much in every estimate.
/// - The speed while moving (the cruise a far arrival is estimated toward) starts from the fleet's
///   (``fleetSpeed(_:)``), else none (the ride's own), and is corrected by every leg driven to its end, as the
///   stop share (`rides.stopShareLearningRate` per leg), by the ride's cruise at the leg's end: its speed while
///   moving over the last five minutes of moving (which may reach back into the leg before), once at least
///   ``shortestCruise`` seconds of moving weigh in it; bounded to ``speeds``.
///
/// - By hour of week (`rides.hoursOfWeek`): each leg also teaches the stop share and the speed of its
///   hour of the week in the area's time zone (the catalog's `timeZone`, else `rides.timeZone`), Monday 00:00 to
///   01:00 being hour 0. An hour's values are the mean of its legs until the learning's memory is full
///   (``memory(_:rate:)``), then an exponentially weighted one at the area's rate. A ride reads them shrunk
///   toward the area's values (``hourly(_:legs:toward:rate:)``): the hour weighs its legs up to the memory, the
///   area ``hourShrinkage``. Rush hour is slower than the night in most cities. A quiet area's own value is
///   hours old and mixes the night with the rush; a busy area's hour is today's (its memory of 20 legs is the
///   last minutes of this very hour). The detour factor has no hours: the roads do not change with the time of
///   day.
///
/// A ride takes its area's values when it starts. What a worker learns it shares with its group as a retained
/// message per area (``AreaPriors``): every worker weighs in what the others learned
/// (``adopt(_:configuredFactor:configuration:)``), and a worker that restarts reads it back instead of starting
/// again from the configuration.
public struct AreaLearning: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var factor: Double
        /// Completed rides learned the factor from.
        public var rides: Int
        /// The learned stop share; nil until a leg taught one.
        public var stopShare: Double?
        /// Legs learned the stop share from.
        public var legs: Int = 0
        /// The learned speed while moving, m/s (the cruise of ``Ride``); nil until a leg taught one.
        public var speed: Double?
        /// Legs learned the speed from.
        public var speedLegs: Int = 0
        /// What the legs of each hour of the week taught, by hour (0 = Monday 00:00 to 01:00 local time).
        public var hours: [Int: Hour] = [:]
    }

    /// E1: what the legs driven in one hour of the week taught an area, bounded as the area's values.
    public struct Hour: Sendable, Equatable {
        /// The hour's stop share; nil until a leg of this hour taught one.
        public var stopShare: Double?
        /// Legs of this hour the stop share was learned from.
        public var legs: Int = 0
        /// The hour's speed while moving, m/s; nil until a leg of this hour taught one.
        public var speed: Double?
        /// Legs of this hour the speed was learned from.
        public var speedLegs: Int = 0

        public init(stopShare: Double? = nil, legs: Int = 0, speed: Double? = nil, speedLegs: Int = 0) {
            self.stopShare = stopShare
            self.legs = legs
            self.speed = speed
            self.speedLegs = speedLegs
        }
    }

    /// By area name; rides outside every area (or without a catalog) learn under "".
    public private(set) var learned: [String: Entry] = [:]
    /// The areas whose entry this worker learned (not adopted) since they were last shared.
    public private(set) var changed: Set<String> = []
    /// The last priors adopted per area, by who shared them and when: a retained message heard again (after a
    /// reconnect) is not weighed in twice.
    var lastAdopted: [String: (worker: String, at: Date)] = [:]

    /// The most a completed ride above an area's detour factor moves it up, before the learning rate: a ratio of
    /// driven over great-circle metres has no ceiling but the bound (a fare that loops back ends near its start),
    /// and the estimate's error is judged by its mean absolute value, which a median minimises, not a mean. Below the
    /// factor a ride pulls by all it is below (no ratio is under 1). Measured by `make bench-eta` in one run: Porto's
    /// recorded fares, warm, without a route, pickup mean |error| at 60-120 / 120-240 s from 73.9 / 137.0 s (no cap)
    /// to 65.1 / 121.9 s, drop-off 45.6 / 84.6 to 45.4 / 81.8 s; the simulated classes within 0.3 s (a cap of 0.05
    /// or 0.02 gains 4 to 7 s more on Porto, but an area whose roads wind more than its prior learns it 2 to 5
    /// times slower).
    public static let detourRise = 0.1

    /// Legs shorter than this teach nothing: GPS noise and the way to the curb dwarf the detour.
    public static let shortestLeg = 500.0
    /// The highest stop share learned or configured: a car that stands more than this is in a jam that a
    /// prior should not promise to every ride.
    public static let highestStopShare = 0.9
    /// Moving seconds under which a leg teaches no speed: a car seen moving for less than that was seen
    /// leaving a curb or reaching one.
    public static let shortestCruise = 30.0
    /// The speeds learned, shared or read back, m/s: from a walking pace to a motorway's.
    public static let speeds = 0.5...60.0
    /// The hours of a week.
    public static let hoursOfWeek = 0..<168
    /// The legs of the area's own values an hour's are weighed against when a ride reads them. A week has 168
    /// hours, so a worker that sees a few rides an hour learns an hour's rhythm over weeks; meanwhile the area's
    /// values stand for it. Measured with `ride-bench eta --weeks 4 --trips 1500 --classes arterial,mixed,grid` while its
    /// days were 0.85 to 1.25 times as congested as each other (arterial and mixed pickups 240+ s): 2 gave 51.8
    /// and 71.8 s, 5 gave 55.1 and 72.2, no hours 66.2 and 73.3.
    /// Weighing the area's legs of the last hour in as well (so that a busy area's fresh value would outweigh
    /// last week's hour) gave 55.9 and 72.2, and in a busy fleet (15,000 trips) the same as without (32.6 and 32.4
    /// s on arterial pickups): a busy area's hour is already today's. With 300 trips, most hours taught by one
    /// leg or none, the grid (no rhythm) stayed within 0.3 s of no hours at 2, 5 and 10: a thin hour's noise did
    /// not show.
    public static let hourShrinkage = 2.0

    public init() {}

    public static func == (left: AreaLearning, right: AreaLearning) -> Bool {
        left.learned == right.learned && left.changed == right.changed
    }

    /// The factor for a ride starting in `area` now: the area's learned one (an entry that learned only a stop
    /// share has none); else the catalog's for the area; else the fleet's (``fleetFactor(_:)``); else
    /// `rides.detourFactor`.
    public func factor(for area: ServiceArea?, configuration: RideConfiguration) -> Double {
        learned[area?.name ?? ""].flatMap { $0.rides > 0 ? $0.factor : nil } ?? area?.detourFactor
            ?? fleetFactor(configuration) ?? configuration.detourFactor
    }

    /// The stop share for a ride starting in `area` at `date`: the area's learned one, else the fleet's
    /// (``fleetStopShare(_:)``), moved toward the hour of the week's (``hourly(_:legs:toward:rate:)``); nil
    /// when none was learned (the ride then uses `rides.typicalStopShare`).
    public func stopShare(for area: ServiceArea?, at date: Date, configuration: RideConfiguration) -> Double? {
        let entry = learned[area?.name ?? ""]
        return (entry?.stopShare ?? fleetStopShare(configuration)).map { base in
            hourly(entry, base: base, area: area, at: date, configuration, \.stopShare, \.legs)
        }
    }

    /// The speed while moving for a ride starting in `area` at `date`: the area's learned one, else the fleet's
    /// (``fleetSpeed(_:)``), moved toward the hour of the week's; nil when none was learned (the ride then goes
    /// by its own).
    public func speed(for area: ServiceArea?, at date: Date, configuration: RideConfiguration) -> Double? {
        let entry = learned[area?.name ?? ""]
        return (entry?.speed ?? fleetSpeed(configuration)).map { base in
            hourly(entry, base: base, area: area, at: date, configuration, \.speed, \.speedLegs)
        }
    }

    /// `base` moved toward the `value` the hour of `date` taught `entry`'s area, if any (and hours are on).
    private func hourly(
        _ entry: Entry?, base: Double, area: ServiceArea?, at date: Date, _ configuration: RideConfiguration,
        _ value: KeyPath<Hour, Double?>, _ legs: KeyPath<Hour, Int>
    ) -> Double {
        guard configuration.hoursOfWeek, let entry,
            let hour = entry.hours[Self.hourOfWeek(date, in: Self.timeZone(of: area, configuration))],
            let taught = hour[keyPath: value]
        else { return base }
        return Self.hourly(
            taught, legs: hour[keyPath: legs], toward: base, rate: configuration.stopShareLearningRate)
    }

    /// An hour's `value`, taught by `legs` legs, shrunk toward the area's `base`: the hour weighs its legs up to
    /// the learning's memory (1 / `rate`), the area ``hourShrinkage`` legs. Between the two, so as bounded as they
    /// are; the area's value with learning off.
    public static func hourly(_ value: Double, legs: Int, toward base: Double, rate: Double) -> Double {
        guard rate > 0, legs > 0 else { return base }
        let weight = min(Double(legs), 1 / rate)
        return (weight * value + hourShrinkage * base) / (weight + hourShrinkage)
    }

    /// The hour of the week of `date` in `zone` (nil: UTC): 0 for Monday 00:00 to 01:00 local time, 167 for Sunday
    /// 23:00 to midnight. The zone's offset at that moment (summer time included), without a calendar: 1 January
    /// 1970 was a Thursday, 72 hours after a Monday's midnight.
    public static func hourOfWeek(_ date: Date, in zone: TimeZone?) -> Int {
        let local = date.timeIntervalSince1970 + Double(zone?.secondsFromGMT(for: date) ?? 0)
        let hours = Int((local / 3600).rounded(.down))
        return ((hours + 72) % 168 + 168) % 168
    }

    /// The time zone of `area`'s hours: the catalog's for it, else `rides.timeZone`; nil for UTC.
    static func timeZone(of area: ServiceArea?, _ configuration: RideConfiguration) -> TimeZone? {
        area?.timeZone ?? configuration.timeZone
    }

    /// The name of `area`'s zone as the shared priors carry it: its IANA identifier, "UTC" for UTC however named.
    /// Foundation keeps other aliases as given (US/Eastern, Asia/Calcutta); a reader compares the clocks of two
    /// names (``sameClock(_:as:around:)``), so workers that name one zone two ways still share their hours.
    public static func zoneName(of area: ServiceArea?, _ configuration: RideConfiguration) -> String {
        let name = timeZone(of: area, configuration)?.identifier ?? "UTC"
        return utcNames.contains(name) ? "UTC" : name
    }

    /// Whether the zone named `name` keeps the same clock as `zone` (nil: UTC without zone tables) from a year
    /// before `date` to a year after, so that an hour of the week means the same local hour in both: the same
    /// summer-time transitions at the same instants, and the same offset every six hours (a change of standard
    /// offset is no summer-time transition). Nil for a name Foundation does not know; false for any name read
    /// against nil (the tables are not loaded for it). Run once per pair of names: a few milliseconds.
    public static func sameClock(_ name: String, as zone: TimeZone?, around date: Date) -> Bool? {
        guard let other = TimeZone(identifier: name) else { return nil }
        guard let zone else { return false }
        let (start, end) = (date.addingTimeInterval(-366 * 86_400), date.addingTimeInterval(366 * 86_400))
        func transitions(_ zone: TimeZone) -> [Date] {
            var (found, after) = ([Date](), start)
            while found.count < 100, let next = zone.nextDaylightSavingTimeTransition(after: after), next < end {
                found.append(next)
                after = next
            }
            return found
        }
        guard transitions(zone) == transitions(other) else { return false }
        return stride(from: start, through: end, by: 6 * 3600).allSatisfy { instant in
            zone.secondsFromGMT(for: instant) == other.secondsFromGMT(for: instant)
        }
    }

    /// The IANA names of UTC (and GMT, which Foundation reports for "UTC"): `rides.timeZone` takes them as UTC
    /// without loading the zone tables, and the shared priors name them all "UTC".
    public static let utcNames: Set<String> = [
        "UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu", "GMT", "Etc/GMT",
        "GMT0", "Etc/GMT0", "GMT+0", "Etc/GMT+0", "GMT-0", "Etc/GMT-0", "Greenwich", "Etc/Greenwich",
    ]

    /// The learning rate for an hour's `count`-th leg: the mean of its legs until the learning's memory
    /// (1 / `rate`) is full, then `rate`.
    static func memory(_ count: Int, rate: Double) -> Double { max(rate, 1 / Double(max(count, 1))) }

    /// E1: what an area with no history of its own starts from: the learned areas' factors, each
    /// weighed by its rides up to the learning's memory (1 / `rides.detourLearningRate`), so the fleet's value
    /// is shrunk toward the areas that taught most without one busy area standing for all. Nil before any
    /// ride taught one, or with learning off. Computed when a ride starts in such an area, over the few areas
    /// of a catalog: nothing more to keep, share or restore.
    public func fleetFactor(_ configuration: RideConfiguration) -> Double? {
        Self.pooled(
            learned.values.lazy.filter { $0.rides > 0 }.map { ($0.factor, $0.rides) },
            rate: configuration.detourLearningRate)
    }

    /// E1: the fleet's stop share for an area that learned none, as ``fleetFactor(_:)`` (by legs, up
    /// to 1 / `rides.stopShareLearningRate`).
    public func fleetStopShare(_ configuration: RideConfiguration) -> Double? {
        Self.pooled(
            learned.values.lazy.compactMap { entry in entry.stopShare.map { ($0, entry.legs) } }.filter { $0.1 > 0 },
            rate: configuration.stopShareLearningRate)
    }

    /// E1: the fleet's speed while moving for an area that learned none, as ``fleetStopShare(_:)``.
    public func fleetSpeed(_ configuration: RideConfiguration) -> Double? {
        Self.pooled(
            learned.values.lazy.compactMap { entry in entry.speed.map { ($0, entry.speedLegs) } }.filter { $0.1 > 0 },
            rate: configuration.stopShareLearningRate)
    }

    /// The mean of the values, each weighed by its count up to the learning's memory (1 / `rate`); nil when
    /// nothing weighs or learning is off. The fleet's values and shared priors weigh alike.
    static func pooled(_ values: some Sequence<(Double, Int)>, rate: Double) -> Double? {
        guard rate > 0 else { return nil }
        var weight = 0.0
        var sum = 0.0
        for (value, count) in values {
            let share = min(Double(count), 1 / rate)
            weight += share
            sum += share * value
        }
        return weight > 0 ? sum / weight : nil
    }

    /// Learns from a completed ride that drove `driven` metres over a great-circle leg of `straight` metres.
    /// - Returns: whether the ride taught anything (a long enough leg, learning on).
    @discardableResult
    public mutating func learn(
        driven: Double, straight: Double, area: ServiceArea?, configuration: RideConfiguration
    ) -> Bool {
        let rate = configuration.detourLearningRate
        guard rate > 0, straight >= Self.shortestLeg, driven > 0, driven.isFinite else { return false }
        let bounds = configuration.detourFactorMinimum...configuration.detourFactorMaximum
        let observed = min(max(driven / straight, bounds.lowerBound), bounds.upperBound)
        let key = area?.name ?? ""
        var entry = learned[key] ?? Entry(factor: 0, rides: 0)
        // The first ride starts from the prior, whenever the entry was made (a stop share makes one earlier).
        if entry.rides == 0 { entry.factor = factor(for: area, configuration: configuration) }
        // A ride above the factor pulls it up by at most `detourRise`; one below, by all it is below.
        let pull = min(observed - entry.factor, Self.detourRise)
        entry.factor = min(max(entry.factor + rate * pull, bounds.lowerBound), bounds.upperBound)
        entry.rides += 1
        setLearned(entry, for: key, changed: true)
        return true
    }

    /// Learns from a leg driven to its end at `date` (the pickup reached, or the ride completed) whose own stop
    /// share came to `observed`: the area's, and its hour of the week's.
    /// - Returns: whether the leg taught anything (a share in 0...1, learning on).
    @discardableResult
    public mutating func learn(
        stopShare observed: Double, area: ServiceArea?, at date: Date, configuration: RideConfiguration
    ) -> Bool {
        let rate = configuration.stopShareLearningRate
        guard rate > 0, (0...1).contains(observed) else { return false }
        let key = area?.name ?? ""
        // A factor with no rides is a placeholder: ``factor(for:configuration:)`` reads past it.
        var entry = learned[key] ?? Entry(factor: configuration.detourFactor, rides: 0)
        let before = entry.stopShare ?? fleetStopShare(configuration) ?? configuration.typicalStopShare
        entry.stopShare = min(before + rate * (observed - before), Self.highestStopShare)
        entry.legs += 1
        teachHour(
            &entry, min(observed, Self.highestStopShare), \.stopShare, \.legs, area: area, at: date, configuration)
        setLearned(entry, for: key, changed: true)
        return true
    }

    /// Learns from a leg driven to its end at `date` whose car moved at `observed` m/s on average while moving:
    /// the area's speed, and its hour of the week's.
    /// - Returns: whether the leg taught anything (a speed in ``speeds``, learning on).
    @discardableResult
    public mutating func learn(
        speed observed: Double, area: ServiceArea?, at date: Date, configuration: RideConfiguration
    ) -> Bool {
        let rate = configuration.stopShareLearningRate
        guard rate > 0, Self.speeds.contains(observed) else { return false }
        let key = area?.name ?? ""
        var entry = learned[key] ?? Entry(factor: configuration.detourFactor, rides: 0)
        let before = entry.speed ?? fleetSpeed(configuration) ?? observed
        entry.speed = before + rate * (observed - before)
        entry.speedLegs += 1
        teachHour(&entry, observed, \.speed, \.speedLegs, area: area, at: date, configuration)
        setLearned(entry, for: key, changed: true)
        return true
    }

    /// What a leg that ended at `date` teaches its hour of the week (when hours are on): the mean of the hour's
    /// legs until the memory is full (``memory(_:rate:)``), then the area's rate. `observed` is already within
    /// its bounds (a stop share up to ``highestStopShare``, a speed in ``speeds``), and so is every mean of it.
    private func teachHour(
        _ entry: inout Entry, _ observed: Double, _ value: WritableKeyPath<Hour, Double?>,
        _ legs: WritableKeyPath<Hour, Int>, area: ServiceArea?, at date: Date, _ configuration: RideConfiguration
    ) {
        guard configuration.hoursOfWeek else { return }
        let hour = Self.hourOfWeek(date, in: Self.timeZone(of: area, configuration))
        var slot = entry.hours[hour] ?? Hour()
        slot[keyPath: legs] += 1
        let previous = slot[keyPath: value] ?? observed
        slot[keyPath: value] =
            previous + Self.memory(slot[keyPath: legs], rate: configuration.stopShareLearningRate)
            * (observed - previous)
        entry.hours[hour] = slot
    }

    mutating func setLearned(_ entry: Entry, for area: String, changed: Bool) {
        learned[area] = entry
        if changed { self.changed.insert(area) }
    }

    mutating func clearChanged() { changed.removeAll() }

    /// Marks `area` to share again (its last share failed).
    public mutating func markChanged(_ area: String) {
        if learned[area] != nil { changed.insert(area) }
    }
}
