import Foundation

/// E1 (issue 15): each service area's detour factor (road over great-circle distance). It starts from the
/// catalog's `detourFactor` for the area, else `rides.detourFactor`, and is corrected by what completed rides
/// drove: an exponentially weighted mean of driven over great-circle metres (`rides.detourLearningRate` per
/// ride), bounded to `rides.detourFactorMinimum...detourFactorMaximum`. A ride takes its area's factor when it
/// starts. What is learned lives in the worker's memory (each worker of a group learns from its own rides;
/// a restart starts again from the configuration).
public struct DetourLearning: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var factor: Double
        /// Completed rides learned from.
        public var rides: Int
    }

    /// By area name; rides outside every area (or without a catalog) learn under "".
    public private(set) var learned: [String: Entry] = [:]

    /// Legs shorter than this teach nothing: GPS noise and the way to the curb dwarf the detour.
    public static let shortestLeg = 500.0

    public init() {}

    /// The factor for a ride starting in `area` now.
    public func factor(for area: ServiceArea?, configuration: RideConfiguration) -> Double {
        learned[area?.name ?? ""]?.factor ?? area?.detourFactor ?? configuration.detourFactor
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
}
