import Foundation

/// E1 (issues 15 and 31): what each service area teaches its new rides, from the rides that drove there.
/// - The detour factor (road over great-circle distance) starts from the catalog's `detourFactor` for the area,
///   else `rides.detourFactor`, and is corrected by what completed rides drove: an exponentially weighted mean
///   of driven over great-circle metres (`rides.detourLearningRate` per ride), bounded to
///   `rides.detourFactorMinimum...detourFactorMaximum`.
/// - The stop share (the share of time a car stands at lights and in jams) starts from
///   `rides.typicalStopShare` and is corrected by every leg driven to its end, to the pickup and to the
///   drop-off: an exponentially weighted mean of the legs' own stop shares (`rides.stopShareLearningRate` per
///   leg), bounded to 0...0.9. A city of arterials stands a few per cent of the time, a centre of lights
///   a third: one constant is wrong by that much in every estimate.
///
/// A ride takes its area's values when it starts. What is learned lives in the worker's memory (each worker of a
/// group learns from its own rides; a restart starts again from the configuration).
public struct AreaLearning: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var factor: Double
        /// Completed rides learned the factor from.
        public var rides: Int
        /// The learned stop share; nil until a leg taught one.
        public var stopShare: Double?
        /// Legs learned the stop share from.
        public var legs: Int = 0
    }

    /// By area name; rides outside every area (or without a catalog) learn under "".
    public private(set) var learned: [String: Entry] = [:]

    /// Legs shorter than this teach nothing: GPS noise and the way to the curb dwarf the detour.
    public static let shortestLeg = 500.0
    /// The highest stop share learned or configured: a car that stands more than this is in a jam that a
    /// prior should not promise to every ride.
    public static let highestStopShare = 0.9

    public init() {}

    /// The factor for a ride starting in `area` now.
    public func factor(for area: ServiceArea?, configuration: RideConfiguration) -> Double {
        learned[area?.name ?? ""]?.factor ?? area?.detourFactor ?? configuration.detourFactor
    }

    /// The learned stop share for a ride starting in `area` now; nil when none was learned (the ride then uses
    /// `rides.typicalStopShare`).
    public func stopShare(for area: ServiceArea?) -> Double? {
        learned[area?.name ?? ""]?.stopShare
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
        var entry = learned[key] ?? Entry(factor: factor(for: area, configuration: configuration), rides: 0)
        entry.factor = min(max(entry.factor + rate * (observed - entry.factor), bounds.lowerBound), bounds.upperBound)
        entry.rides += 1
        learned[key] = entry
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
        var entry = learned[key] ?? Entry(factor: factor(for: area, configuration: configuration), rides: 0)
        let before = entry.stopShare ?? configuration.typicalStopShare
        entry.stopShare = min(before + rate * (observed - before), Self.highestStopShare)
        entry.legs += 1
        learned[key] = entry
        return true
    }
}
