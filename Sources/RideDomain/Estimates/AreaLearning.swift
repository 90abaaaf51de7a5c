import Foundation

/// E1 (issues 15 and 31): what each service area teaches its new rides, from the rides that drove there.
/// - The detour factor (road over great-circle distance) starts from the catalog's `detourFactor` for the area,
///   else the fleet's (the other areas' learned factors, ``fleetFactor(_:)``), else `rides.detourFactor`, and
///   is corrected by what completed rides drove: an exponentially weighted mean
///   of driven over great-circle metres (`rides.detourLearningRate` per ride), bounded to
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
    }

    /// By area name; rides outside every area (or without a catalog) learn under "".
    public private(set) var learned: [String: Entry] = [:]
    /// The areas whose entry this worker learned (not adopted) since they were last shared.
    public private(set) var changed: Set<String> = []
    /// The last priors adopted per area, by who shared them and when: a retained message heard again (after a
    /// reconnect) is not weighed in twice.
    var lastAdopted: [String: (worker: String, at: Date)] = [:]

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

    /// The stop share for a ride starting in `area` now: the area's learned one, else the fleet's
    /// (``fleetStopShare(_:)``); nil when none was learned (the ride then uses `rides.typicalStopShare`).
    public func stopShare(for area: ServiceArea?, configuration: RideConfiguration) -> Double? {
        learned[area?.name ?? ""]?.stopShare ?? fleetStopShare(configuration)
    }

    /// The speed while moving for a ride starting in `area` now: the area's learned one, else the fleet's
    /// (``fleetSpeed(_:)``); nil when none was learned (the ride then goes by its own).
    public func speed(for area: ServiceArea?, configuration: RideConfiguration) -> Double? {
        learned[area?.name ?? ""]?.speed ?? fleetSpeed(configuration)
    }

    /// E1 (issue 31): what an area with no history of its own starts from: the learned areas' factors, each
    /// weighed by its rides up to the learning's memory (1 / `rides.detourLearningRate`), so the fleet's value
    /// is shrunk toward the areas that taught most without one busy area standing for all. Nil before any
    /// ride taught one, or with learning off. Computed when a ride starts in such an area, over the few areas
    /// of a catalog: nothing more to keep, share or restore.
    public func fleetFactor(_ configuration: RideConfiguration) -> Double? {
        Self.pooled(
            learned.values.lazy.filter { $0.rides > 0 }.map { ($0.factor, $0.rides) },
            rate: configuration.detourLearningRate)
    }

    /// E1 (issue 31): the fleet's stop share for an area that learned none, as ``fleetFactor(_:)`` (by legs, up
    /// to 1 / `rides.stopShareLearningRate`).
    public func fleetStopShare(_ configuration: RideConfiguration) -> Double? {
        Self.pooled(
            learned.values.lazy.compactMap { entry in entry.stopShare.map { ($0, entry.legs) } }.filter { $0.1 > 0 },
            rate: configuration.stopShareLearningRate)
    }

    /// E1 (issue 31): the fleet's speed while moving for an area that learned none, as ``fleetStopShare(_:)``.
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
        entry.factor = min(max(entry.factor + rate * (observed - entry.factor), bounds.lowerBound), bounds.upperBound)
        entry.rides += 1
        setLearned(entry, for: key, changed: true)
        return true
    }

    /// Learns from a leg driven to its end (the pickup reached, or the ride completed) whose own stop share came
    /// to `observed`.
    /// - Returns: whether the leg taught anything (a share in 0...1, learning on).
    @discardableResult
    public mutating func learn(stopShare observed: Double, area: ServiceArea?, configuration: RideConfiguration)
        -> Bool
    {
        let rate = configuration.stopShareLearningRate
        guard rate > 0, (0...1).contains(observed) else { return false }
        let key = area?.name ?? ""
        // A factor with no rides is a placeholder: ``factor(for:configuration:)`` reads past it.
        var entry = learned[key] ?? Entry(factor: configuration.detourFactor, rides: 0)
        let before = entry.stopShare ?? fleetStopShare(configuration) ?? configuration.typicalStopShare
        entry.stopShare = min(before + rate * (observed - before), Self.highestStopShare)
        entry.legs += 1
        setLearned(entry, for: key, changed: true)
        return true
    }

    /// Learns from a leg driven to its end whose car moved at `observed` m/s on average while moving.
    /// - Returns: whether the leg taught anything (a speed in ``speeds``, learning on).
    @discardableResult
    public mutating func learn(speed observed: Double, area: ServiceArea?, configuration: RideConfiguration) -> Bool {
        let rate = configuration.stopShareLearningRate
        guard rate > 0, Self.speeds.contains(observed) else { return false }
        let key = area?.name ?? ""
        var entry = learned[key] ?? Entry(factor: configuration.detourFactor, rides: 0)
        let before = entry.speed ?? fleetSpeed(configuration) ?? observed
        entry.speed = before + rate * (observed - before)
        entry.speedLegs += 1
        setLearned(entry, for: key, changed: true)
        return true
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
