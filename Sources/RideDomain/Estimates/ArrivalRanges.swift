import Foundation

/// E1's range: how much later than its estimate a car arrives, learned from the arrivals the worker
/// sees, per service area, leg (to the pickup, to the drop-off) and horizon (the estimate's own: 0-60, 60-120,
/// 120-240, 240+ s). Each arrival teaches the ratio of the time it really took to the time estimated; the
/// latest time of a new estimate is its time to go times the 90th percentile of that ratio (read a little
/// higher while a cell's arrivals are few: ``Cell/ratio(at:)``), never below the estimate. A wide constant
/// margin would meet any coverage, so the width is what the learning buys and is measured beside the coverage
/// (`make bench-eta`).
///
/// - Coverage is a share of statuses (each status a rider sees says "by then"), so each arrival's ratio weighs
///   as many statuses as its estimate stood for (``ArrivalSamples``): a ride that lingers in a horizon, slower
///   than estimated, shows more statuses there than one that passes through it. Weighing each arrival once
///   learned the ratios of rides, not of statuses: `make bench-eta`'s urban trips were covered 73 to 82 %
///   (5 seeds), and 81 to 84 % after 100 trips (`make bench-eta-restart`, 3 seeds).
/// - An area with little history borrows from the fleet: its percentile is shrunk toward the fleet-wide one
///   by ``shrinkWeight`` observations' worth, and the fleet-wide one (this worker's arrivals and what the group
///   shared of every area) toward ``priorRatio`` by ``priorWeight``'s.
/// - Old arrivals fade: every observation weighs ``fading`` less than the one after it, so a cell follows a
///   change of traffic within a few hundred arrivals.
/// - Pure and small: a histogram of 48 ratio bins per cell, 8 cells per area.
/// - Shared by the group in each area's retained priors (``AreaPriors/ranges``): each cell's percentile with the
///   arrivals it was learned from. A worker weighs what it adopted (``adopt(_:area:)``) beside its own arrivals,
///   each by its arrivals up to ``memory``, and counts the larger of the two, as the other priors do
///   (``AreaLearning/adopt(_:configuredFactor:configuration:)``): two workers passing the same arrivals back and
///   forth do not add them up. What was adopted fades with each own arrival of the cell as the worker's own
///   arrivals do, so a worker alone in an area follows a change of traffic after a restart as it did before.
///   A restart or a new owner thus draws latest times close to the group's instead of starting again from
///   ``priorRatio``.
public struct ArrivalRanges: Sendable, Equatable {
    /// One cell of an area as the group shares it: the ratio of the latest time to the estimate (the 90th
    /// percentile, ``quantile``, as the cell reads it) and the arrivals, faded, it stands for.
    public struct Shared: Sendable, Equatable {
        public var leg: Leg
        /// 0 to 3: ``horizonNames``.
        public var horizon: Int
        /// Within ``lowestRatio``...``highestRatio``.
        public var ratio: Double
        /// Arrivals' worth, faded (at most ``memory`` from one worker's own).
        public var arrivals: Double

        public init(leg: Leg, horizon: Int, ratio: Double, arrivals: Double) {
            self.leg = leg
            self.horizon = horizon
            self.ratio = ratio
            self.arrivals = arrivals
        }
    }

    public enum Leg: Int, Sendable, CaseIterable {
        case pickup, dropOff

        /// As in metrics and reports: the status field's stem.
        public var name: String { self == .pickup ? "pickup" : "dropOff" }
    }

    /// The quantile the latest time stands for.
    public static let quantile = 0.9
    /// The ratio assumed before any arrival was seen: half as long again as estimated.
    public static let priorRatio = 1.5
    /// How many observations' worth the fleet's percentile counts for beside an area's own.
    public static let shrinkWeight = 20.0
    /// How many observations' worth the prior counts for beside the fleet's own. A guess, so it weighs little:
    /// slow city traffic needs 2.0 to 2.7, and at 20 (the areas' weight) `make bench-eta`'s urban class was
    /// covered 1 to 2 points less (5 seeds).
    public static let priorWeight = 5.0
    /// Each new observation multiplies the weight of the ones before by this.
    public static let fading = 0.995
    /// Estimates closer than this teach nothing: a few seconds of GPS noise would be a ratio of 3.
    public static let shortestHorizon = 15.0
    /// Horizon buckets, by the estimate's own time to go: below 60, 120, 240 s, and beyond.
    public static let horizonBounds: [Double] = [60, 120, 240]
    /// The buckets' names, as in metrics and reports.
    public static let horizonNames = ["0-60", "60-120", "120-240", "240+"]
    /// Ratio bins, evenly spaced in log from 1/4 to 4; ratios outside fall in the end bins.
    static let bins = 48
    public static let lowestRatio = 0.25
    public static let highestRatio = 4.0
    /// The most arrivals' worth a cell holds with ``fading``: 1 / (1 - fading), 200. A shared cell weighs at
    /// most this much beside a worker's own, as a worker's own arrivals never weigh more.
    public static let memory = 1 / (1 - fading)

    struct Cell: Sendable, Equatable {
        /// Statuses' worth per ratio bin, faded per arrival.
        var weights = [Double](repeating: 0, count: ArrivalRanges.bins)
        /// The arrivals, faded: what the cell's percentile weighs against the fleet's and the group's.
        var total = 0.0

        /// An arrival whose estimate stood for `statuses` statuses.
        mutating func add(ratio: Double, statuses count: Double) {
            for index in weights.indices { weights[index] *= ArrivalRanges.fading }
            total = total * ArrivalRanges.fading + 1
            weights[ArrivalRanges.bin(of: ratio)] += count
        }

        /// The ratio below which `quantile` of the weight lies (the upper edge of that bin), read at the level a
        /// quantile of `total` arrivals needs to cover the next one as often: `quantile` x (n + 1) / n, at most
        /// 0.99 (the finite-sample correction of split conformal prediction, n the faded arrivals: 0.945 at 20
        /// arrivals, 0.905 at 200). Without it `make bench-eta`'s urban class, learned over its first 100 trips,
        /// was covered 80.8 to 85.5 % (pickups and drop-offs, 5 seeds); with it 83.6 to 86.9 %. Nil when empty.
        /// Interpolating within the bin instead of its upper edge was measured: 1 to 2 points less coverage on
        /// every class of `make bench-eta` (5 seeds).
        func ratio(at quantile: Double) -> Double? {
            // The statuses' mass, summed here (at an arrival, not per status) rather than kept beside the bins.
            let statuses = weights.reduce(0, +)
            guard total > 0, statuses > 0 else { return nil }
            let level = ArrivalRanges.level(quantile, arrivals: total)
            var below = 0.0
            for (index, weight) in weights.enumerated() {
                below += weight
                if below >= level * statuses { return ArrivalRanges.upperEdge(of: index) }
            }
            return ArrivalRanges.highestRatio
        }
    }

    /// By area name ("" outside every area), then leg x horizon.
    private var cells: [String: [Cell]] = [:]
    /// Every observation, whatever its area.
    private var fleet = [Cell](repeating: Cell(), count: Leg.allCases.count * (horizonBounds.count + 1))
    /// The ratios ``ratio(_:horizon:area:)`` answers, kept up to date by ``observe`` (arrivals are rare, statuses
    /// many: a status looks its ratio up rather than walking two histograms).
    private var areaRatios: [String: [Double]] = [:]
    private var fleetRatios = [Double](repeating: priorRatio, count: Leg.allCases.count * (horizonBounds.count + 1))
    /// What the group shared of each area (``adopt(_:area:)``), by cell: ratio and arrivals (0: nothing shared).
    private var adopted: [String: [Adopted]] = [:]

    private struct Adopted: Sendable, Equatable {
        var ratio = 0.0
        var arrivals = 0.0
    }
    /// Coverage: statuses whose arrival was seen, with a latest time, and those whose arrival came by
    /// it, by leg x horizon (each arrival counts the statuses its sample stood for: ``observe``).
    public private(set) var arrivals = [Int](repeating: 0, count: Leg.allCases.count * (horizonBounds.count + 1))
    public private(set) var covered = [Int](repeating: 0, count: Leg.allCases.count * (horizonBounds.count + 1))

    public init() {}

    /// The horizon bucket of an estimate `seconds` away: 0 to 3.
    public static func horizon(of seconds: Double) -> Int {
        let bounds = horizonBounds  // compared in place: no closure per status
        return seconds < bounds[1] ? (seconds < bounds[0] ? 0 : 1) : (seconds < bounds[2] ? 2 : 3)
    }

    static func cell(_ leg: Leg, _ horizon: Int) -> Int { leg.rawValue * (horizonBounds.count + 1) + horizon }

    static func bin(of ratio: Double) -> Int {
        guard ratio.isFinite, ratio > lowestRatio else { return 0 }
        let share = log(ratio / lowestRatio) / log(highestRatio / lowestRatio)
        return min(bins - 1, Int(share * Double(bins)))
    }

    /// The level at which a quantile learned from `arrivals` (faded) is read (``Cell/ratio(at:)``).
    static func level(_ quantile: Double, arrivals: Double) -> Double {
        min(0.99, quantile * (arrivals + 1) / arrivals)
    }

    static func upperEdge(of bin: Int) -> Double {
        lowestRatio * pow(highestRatio / lowestRatio, Double(bin + 1) / Double(bins))
    }

    /// The ratio of the latest time to the estimate's time to go, for `leg` at `horizon` in `area`: at least 1.
    public func ratio(_ leg: Leg, horizon: Int, area: String) -> Double {
        let index = Self.cell(leg, horizon)
        // No hashing of the area's name while nothing has been learned (a status asks this twice).
        guard !areaRatios.isEmpty else { return fleetRatios[index] }
        return areaRatios[area]?[index] ?? fleetRatios[index]
    }

    /// Recomputes the ratios of cell `index`: the fleet's, shrunk toward the prior, and every area's (its own
    /// arrivals and what the group shared of it, ``pooled(_:_:)``), shrunk toward the fleet's. The fleet's pools
    /// its own arrivals with the shares of every area, weighing the larger of its own and their sum.
    private mutating func refresh(_ index: Int) {
        // The fleet's: every arrival this worker saw, and what the group shared of each area (so that a restarted
        // worker's areas shrink toward what the group learned, not toward the prior of 1.5).
        let fleetCell = fleet[index]
        let ownRatio = fleetCell.ratio(at: Self.quantile)
        let own = ownRatio == nil ? 0 : fleetCell.total
        var parts = ownRatio.map { [($0, own)] } ?? []
        var shared = 0.0
        for cells in adopted.values where cells[index].arrivals > 0 {
            parts.append((cells[index].ratio, cells[index].arrivals))  // capped at ``memory`` when adopted
            shared += cells[index].arrivals
        }
        let pooledRatio = Self.pool(parts)
        let weight = max(own, shared)
        let fleetRatio = max(
            1, Self.shrunk(pooledRatio, weight: weight, toward: Self.priorRatio, by: Self.priorWeight))
        fleetRatios[index] = fleetRatio
        for area in Set(cells.keys).union(adopted.keys) {
            let (ratio, weight) = pooled(area, index)
            areaRatios[area, default: fleetRatios][index] = max(
                1, Self.shrunk(ratio, weight: weight, toward: fleetRatio))
        }
    }

    /// An area's own percentile for cell `index` beside the one the group shared, each weighed by its arrivals
    /// (the shared ones up to ``memory``), and the larger of the two weights (the shared view may hold this
    /// worker's own arrivals, passed back); nil with a weight of 0 when neither has any.
    private func pooled(_ area: String, _ index: Int) -> (ratio: Double?, weight: Double) {
        var parts: [(Double, Double)] = []
        if let own = cells[area]?[index], let ratio = own.ratio(at: Self.quantile) { parts.append((ratio, own.total)) }
        if let shared = adopted[area]?[index], shared.arrivals > 0 {
            parts.append((shared.ratio, shared.arrivals))  // capped at ``memory`` when adopted
        }
        return (Self.pool(parts), parts.map(\.1).max() ?? 0)
    }

    /// The mean of `(ratio, weight)` parts by weight; one part as it is (to the bit: a worker
    /// that adopted nothing computes exactly what it did before ranges were shared), none as nil.
    private static func pool(_ parts: [(ratio: Double, weight: Double)]) -> Double? {
        guard parts.count > 1 else { return parts.first?.ratio }
        let weight = parts.reduce(0) { $0 + $1.weight }
        guard weight > 0 else { return nil }
        return parts.reduce(0) { $0 + $1.ratio * $1.weight } / weight
    }

    /// What this worker shares of `area` with the group: each cell its own arrivals or the group's taught, its
    /// percentile and its weight (the larger of its own and the adopted, at most ``memory``). Empty when none.
    public func shared(area: String) -> [Shared] {
        Leg.allCases.flatMap { leg in
            (0...Self.horizonBounds.count).compactMap { horizon in
                let (ratio, weight) = pooled(area, Self.cell(leg, horizon))
                guard let ratio, weight > 0 else { return nil }
                return Shared(
                    leg: leg, horizon: horizon, ratio: min(max(ratio, Self.lowestRatio), Self.highestRatio),
                    arrivals: weight)
            }
        }
    }

    /// What another worker shared of `area` (A2-checked: ``AreaPriors``): it replaces what was adopted of the area
    /// before (the latest view of the area heard, whoever published it: its own arrivals and what it adopted), and
    /// weighs beside this worker's own arrivals from now on. Nothing shared (priors from a worker before ranges
    /// were shared) changes nothing.
    /// - Returns: whether anything changed.
    @discardableResult
    public mutating func adopt(_ shared: [Shared], area: String) -> Bool {
        guard !shared.isEmpty else { return false }
        var cells = [Adopted](repeating: Adopted(), count: fleet.count)
        for cell in shared
        where (0...Self.horizonBounds.count).contains(cell.horizon) && cell.ratio.isFinite && cell.arrivals.isFinite
            && cell.arrivals > 0
        {
            // Capped where it is kept, so that the fade below starts from what weighs (10^9 arrivals, which A2
            // lets through, would otherwise take 3,000 arrivals of this worker's own to begin fading).
            cells[Self.cell(cell.leg, cell.horizon)] = Adopted(
                ratio: min(max(cell.ratio, Self.lowestRatio), Self.highestRatio),
                arrivals: min(cell.arrivals, Self.memory))
        }
        guard adopted[area] != cells else { return false }
        adopted[area] = cells
        for index in cells.indices { refresh(index) }
        return true
    }

    static func shrunk(_ value: Double?, weight: Double, toward prior: Double, by priorWeight: Double = shrinkWeight)
        -> Double
    {
        guard let value else { return prior }
        return (weight * value + priorWeight * prior) / (weight + priorWeight)
    }

    /// The latest time for an estimate `seconds` away, in seconds from now.
    public func latest(in seconds: Double, leg: Leg, area: String) -> Double {
        let seconds = max(0, seconds)
        return seconds * ratio(leg, horizon: Self.horizon(of: seconds), area: area)
    }

    /// An arrival `actual` seconds after an estimate that said `estimated` seconds, whose latest time said
    /// `latest` seconds (nil: none was given): teaches the ratio and counts the coverage, each as `statuses`
    /// statuses (those of its horizon that the estimate stands for, ``ArrivalSamples``; at least 1).
    /// - Returns: whether it taught the ratio (an estimate of ``shortestHorizon`` or more).
    @discardableResult
    public mutating func observe(
        estimated: Double, actual: Double, latest: Double?, leg: Leg, area: String, statuses: Int = 1
    ) -> Bool {
        guard estimated.isFinite, actual.isFinite, actual >= 0 else { return false }
        let statuses = max(1, statuses)
        let horizon = Self.horizon(of: estimated)
        let index = Self.cell(leg, horizon)
        if let latest {
            arrivals[index] += statuses
            if actual <= latest { covered[index] += statuses }
        }
        guard estimated >= Self.shortestHorizon else { return false }
        let ratio = actual / estimated
        fleet[index].add(ratio: ratio, statuses: Double(statuses))
        cells[area, default: [Cell](repeating: Cell(), count: fleet.count)][index].add(
            ratio: ratio, statuses: Double(statuses))
        // What the group shared of the cell fades as the cell's own arrivals do.
        if adopted[area] != nil { adopted[area]?[index].arrivals *= Self.fading }
        refresh(index)
        return true
    }

    /// The share of statuses whose arrival came by their latest time for `leg` at `horizon`; nil before any.
    public func coverage(_ leg: Leg, horizon: Int) -> Double? {
        let index = Self.cell(leg, horizon)
        return arrivals[index] == 0 ? nil : Double(covered[index]) / Double(arrivals[index])
    }
}

/// E1's range, per ride: one estimate per horizon of the leg under way (when it was made, its time
/// to go and its latest time's: the first of the horizon), which the ride teaches ``ArrivalRanges`` when the
/// car arrives, weighed by the number of statuses of that horizon it stands for (coverage counts statuses).
/// Drawing the estimate evenly from those statuses instead (a reservoir of one, by a hash of the time) was
/// measured over 5 seeds of `make bench-eta`: about the same coverage on average, its spread between seeds
/// twice as wide on slow city trips (77 to 86 % against 81 to 84 % for their drop-offs).
///
/// Inline, no allocation per ride, 4-byte aligned (homogeneous tuples, not SIMD vectors, whose 16- or 32-byte
/// alignment would pad every ride), the one-byte leg last so the ride's own small fields follow in its padding:
/// 54 bytes (72 with the times as seconds since 1970 and the leg first; `ride-bench memory`).
struct ArrivalSamples: Sendable, Equatable {
    /// Seconds from the ride's start at which each bucket's estimate was made, single precision: within a
    /// millisecond up to 9 hours in (the default `rides.maxRideDuration` is 6), 31 ms at its longest setting of
    /// 7 days; NaN for none.
    private var made: (Float, Float, Float, Float) = (.nan, .nan, .nan, .nan)
    private var toGo: (Float, Float, Float, Float) = (0, 0, 0, 0)
    private var latest: (Float, Float, Float, Float) = (0, 0, 0, 0)
    /// Statuses of each horizon so far, up to 255 (21 minutes of statuses every 5 s; a longer stay in the 240+ s
    /// horizon counts as 255).
    private var statuses: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
    /// The horizon the last status counted in (``uncount()``); 4 for none.
    private var counted: UInt8 = 4
    /// The leg the samples belong to; nil when there are none.
    private(set) var leg: ArrivalRanges.Leg?

    private static func get<T>(_ tuple: (T, T, T, T), _ index: Int) -> T {
        withUnsafeBytes(of: tuple) { $0.load(fromByteOffset: index * MemoryLayout<T>.stride, as: T.self) }
    }

    private static func set<T>(_ tuple: inout (T, T, T, T), _ index: Int, _ value: T) {
        withUnsafeMutableBytes(of: &tuple) {
            $0.storeBytes(of: value, toByteOffset: index * MemoryLayout<T>.stride, as: T.self)
        }
    }

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.leg == rhs.leg && lhs.counted == rhs.counted
            && (0..<4).allSatisfy { index in
                let (left, right) = (get(lhs.made, index), get(rhs.made, index))
                return (left == right || (left.isNaN && right.isNaN)) && get(lhs.toGo, index) == get(rhs.toGo, index)
                    && get(lhs.latest, index) == get(rhs.latest, index)
                    && get(lhs.statuses, index) == get(rhs.statuses, index)
            }
    }

    /// Counts the estimate made `now` (`since` the ride started) for `leg`, `toGo` seconds away with its latest
    /// time `latest` seconds away, among its horizon's statuses, and keeps it if it is the horizon's first.
    /// Samples of another leg are dropped first.
    mutating func record(_ leg: ArrivalRanges.Leg, at now: Date, since start: Date, toGo: Double, latest: Double) {
        if self.leg != leg { self = ArrivalSamples(leg: leg) }
        let bucket = ArrivalRanges.horizon(of: toGo)
        let count = Self.get(statuses, bucket)
        if count < .max { Self.set(&statuses, bucket, count + 1) }
        counted = count < .max ? UInt8(bucket) : 4
        guard count == 0 else { return }
        Self.set(&made, bucket, Float(now.timeIntervalSince(start)))
        Self.set(&self.toGo, bucket, Float(toGo))
        Self.set(&self.latest, bucket, Float(latest))
    }

    /// The car arrived at `arrival` (`since` the ride started) at the end of the samples' leg: teaches every
    /// sample to `ranges` under `area` and forgets them.
    /// - Returns: whether any sample taught the ratio (estimates under 15 s teach none).
    mutating func teach(_ ranges: inout ArrivalRanges, arrival: Date, since start: Date, area: String) -> Bool {
        var taught = false
        if let leg {
            for bucket in 0..<4 where !Self.get(made, bucket).isNaN {
                let learned = ranges.observe(
                    estimated: Double(Self.get(toGo, bucket)),
                    actual: arrival.timeIntervalSince(start) - Double(Self.get(made, bucket)),
                    latest: Double(Self.get(latest, bucket)), leg: leg, area: area,
                    statuses: Int(Self.get(statuses, bucket)))
                taught = taught || learned
            }
        }
        self = ArrivalSamples()
        return taught
    }

    /// Forgets the samples (a leg that did not arrive: a cancellation, another car).
    mutating func clear() { self = ArrivalSamples() }

    /// The status last counted did not leave (no room at the broker, C1): it is taken back, and the horizon's
    /// estimate with it if that status was its first. Its retry counts again, once.
    mutating func uncount() {
        let bucket = Int(counted)
        counted = 4
        guard bucket < 4 else { return }
        let count = Self.get(statuses, bucket)
        if count <= 1 {
            Self.set(&statuses, bucket, 0)
            Self.set(&made, bucket, .nan)
            Self.set(&toGo, bucket, 0)
            Self.set(&latest, bucket, 0)
        } else {
            Self.set(&statuses, bucket, count - 1)
        }
    }
}
