public import Foundation

public import struct RideStatusKit.CompletionStatus

/// Every tunable of the ride domain with the contract's default. The one source of truth for defaults:
/// the worker's YAML, environment and flags override these.
public struct RideConfiguration: Sendable, Equatable {
    /// C1: status at least this often, seconds; above ``maximumUpdateInterval`` is refused.
    public var updateInterval: Double = 5
    public static let maximumUpdateInterval: Double = 20
    /// C3: seconds without an accepted fix before statuses say `stale`.
    public var staleAfter: Double = 30
    /// I2: largest accepted payload, bytes.
    public var maxPayloadBytes: Int = 16_384
    /// T2: how far in the future a fix may be, seconds.
    public var futureTolerance: Double = 30
    /// T2: how old a fix may be, seconds.
    public var maxFixAge: Double = 300
    /// T4: highest plausible speed between two fixes, m/s.
    public var maxSpeed: Double = 70
    /// T5: worst accepted horizontal accuracy, metres.
    public var maxAccuracy: Double = 100
    /// P2: approaching when the estimated time to the pickup is at most this, seconds...
    public var approachingWithin: Double = 120
    /// ...or the distance at most this, metres.
    public var approachingDistance: Double = 500
    /// P3/P5: arrival radius, metres.
    public var arrivalRadius: Double = 50
    /// P3/P5: "stopped" means slower than this, m/s.
    public var stoppedSpeed: Double = 1.5
    /// P3/P6: how long the vehicle waits at the pickup, seconds.
    public var maxPickupWait: Double = 300
    /// E1: road distance over great-circle distance.
    public var detourFactor: Double = RideConfiguration.defaultDetourFactor
    public static let defaultDetourFactor = 1.3
    /// E1: the bounds of a learned detour factor, and how much each completed ride moves it (0: no
    /// learning). See ``AreaLearning``.
    public var detourFactorMinimum: Double = 1.0
    public var detourFactorMaximum: Double = 2.0
    public var detourLearningRate: Double = 0.05
    /// E1: lowest speed used for estimates, m/s.
    public var speedFloor: Double = 5
    /// E1: the time constant of the speed while moving, in moving seconds (``Ride/recordPace``): a new steady
    /// pace is followed within about 30 s of driving at it (95 % after three time constants). Stops do not
    /// count here; they count in the stop share.
    public var speedTimeConstant: Double = 10
    /// E1: the time constant of the share of time standing, seconds: five minutes (a recorded window of issue
    /// 31) weigh the lights and jams of a stretch of town, so one stop moves the estimate by what a stop costs on
    /// average, not by its length (`make bench-eta`, mixed trips 120-240 s out: 120 s was 3 to 5 s worse).
    public var stopShareTimeConstant: Double = 300
    /// E1: the share of time standing a ride starts from before its own stops are counted: the recorded
    /// recorded city trips stood 0 to 45 % of the time, 15 % across them.
    public var typicalStopShare: Double = 0.15
    /// E1: how far each leg driven to its end moves its area's learned stop share and speed while moving
    /// (``AreaLearning``); 0 turns learning off.
    public var stopShareLearningRate: Double = 0.05
    /// E1: how often a worker shares what its areas learned with its group, as a retained message
    /// per area that a restart reads back (``AreaPriors``), seconds; 0 shares nothing (what others share is
    /// still read).
    public var priorsShareInterval: Double = 60
    /// E1: the time zone of the hours of the week learned for rides outside every service area, and
    /// for areas whose catalog entry names none (``AreaLearning``); an IANA name in the configuration file. Nil is
    /// UTC, counted without Foundation's zone tables, which take 2.4 to 4.5 MiB once loaded (`ride-bench memory`).
    public var timeZone: TimeZone?
    /// E1: whether the areas learn and read their values by hour of the week; false reads the areas'
    /// values alone at every hour and learns no hour, but still weighs in and shares again what the group shares
    /// by hour, so that turning it off on one worker does not wipe the group's hours.
    public var hoursOfWeek = true
    /// E1: the speed a ride starts from before a moving fix is known (a first fix of a stopped car, or none
    /// with a speed), m/s: a city's typical driving speed with its stops, instead of the floor; where the ride's
    /// area (or the fleet) learned a speed while moving, that speed times the share of time moving instead.
    public var typicalSpeed: Double = 7
    /// E1: between two statuses, an ETA moves later by at most this many seconds while the vehicle is moving
    /// and no farther from where it goes than at the last status; a stopped vehicle moves it freely.
    public var estimateDelayLimit: Double = 30
    /// I1 on a broker that refuses `.` in topic names (NATS's MQTT listener drops the connection of a client
    /// that publishes to one): false refuses vehicle identifiers with a `.` as `invalidIdentifier`, since
    /// their position topic could not be subscribed to.
    public var dotsInTopics = true
    /// L4: a completed ride without `stop` is stopped after this, seconds.
    public var completedLinger: Double = 120
    /// L4: no ride lives longer than this, seconds.
    public var maxRideDuration: Double = 6 * 3600
    /// P5: feedback types of a completed ride (`rate`, `tip`).
    public var feedbackTypes: [CompletionStatus.FeedbackType] = [.rate, .tip]
    /// P5: tipping options offered with a completed ride.
    public var defaultTippingOptions: [Decimal] = []
    /// V5: map annotation image per ride option name, for bookings that omit one.
    public var mapAnnotationImages: [String: String] = [:]
    /// 3.5: dead letters per second per reason (at least 1).
    public var deadLettersPerSecond: Double = 10
    /// C5, L5: statuses a ride may publish between two writes of its durable state (a change of phase,
    /// completion, vehicle or driver writes it at once). A restart continues the sequence above the
    /// block the last write reserved, so it may skip up to this many numbers. 12 is one minute at the
    /// default interval; 1 writes the state before every status.
    public var sequenceBlock: Int = 12
    /// Accepted fixes kept per vehicle for the read API's track (`/v1/rides/{id}/track`), 16 bytes each;
    /// 0 keeps none.
    public var trackLength: Int = 5

    public init() {}

    /// A setting outside its allowed range, named as in the configuration file.
    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        public var key: String
        public var message: String
        public var description: String { "\(key): \(message)" }
    }

    /// Every problem with this configuration; empty when it can be used.
    public func problems() -> [Problem] {
        var problems: [Problem] = []
        func require(_ condition: Bool, _ key: String, _ message: String) {
            if !condition { problems.append(Problem(key: key, message: message)) }
        }
        require(
            updateInterval > 0 && updateInterval <= Self.maximumUpdateInterval, "updateInterval",
            "\(updateInterval) s is outside the allowed range (0, 20] seconds (C1)")
        require(staleAfter > 0, "staleAfter", "must be positive seconds")
        require(
            maxPayloadBytes >= 256 && maxPayloadBytes <= 268_435_455, "maxPayloadBytes", "must be 256...268435455 bytes"
        )
        require(futureTolerance >= 0, "futureTolerance", "must be 0 or more seconds")
        require(maxFixAge > 0, "maxFixAge", "must be positive seconds")
        require(maxSpeed > 0, "maxSpeed", "must be positive m/s")
        require(maxAccuracy > 0, "maxAccuracy", "must be positive metres")
        require(approachingWithin >= 0, "approachingWithin", "must be 0 or more seconds")
        require(approachingDistance >= 0, "approachingDistance", "must be 0 or more metres")
        require(arrivalRadius > 0, "arrivalRadius", "must be positive metres")
        require(maxPickupWait > 0, "maxPickupWait", "must be positive seconds")
        require(detourFactor >= 1 && detourFactor <= 5, "detourFactor", "must be 1...5")
        require(
            detourFactorMinimum >= 1 && detourFactorMinimum <= detourFactor, "detourFactorMinimum",
            "must be 1...detourFactor")
        require(
            detourFactorMaximum >= detourFactor && detourFactorMaximum <= 5, "detourFactorMaximum",
            "must be detourFactor...5")
        require((0...1).contains(detourLearningRate), "detourLearningRate", "must be 0...1")
        require(speedFloor > 0, "speedFloor", "must be positive m/s")
        require(speedTimeConstant >= 1 && speedTimeConstant <= 3600, "speedTimeConstant", "must be 1...3600 s")
        require(
            stopShareTimeConstant >= 1 && stopShareTimeConstant <= 3600, "stopShareTimeConstant", "must be 1...3600 s")
        require((0...0.9).contains(typicalStopShare), "typicalStopShare", "must be 0...0.9")
        require((0...1).contains(stopShareLearningRate), "stopShareLearningRate", "must be 0...1")
        require((0...3600).contains(priorsShareInterval), "priorsShareInterval", "must be 0...3600 s")
        require(typicalSpeed > 0 && typicalSpeed <= 100, "typicalSpeed", "must be in (0, 100] m/s")
        require(estimateDelayLimit >= 0 && estimateDelayLimit <= 3600, "estimateDelayLimit", "must be 0...3600 s")
        require(completedLinger >= 0, "completedLinger", "must be 0 or more seconds")
        require(maxRideDuration > 0, "maxRideDuration", "must be positive seconds")
        require(deadLettersPerSecond >= 1, "deadLettersPerSecond", "must be at least 1 per second")
        require((1...1_000_000).contains(sequenceBlock), "sequenceBlock", "must be 1...1000000 statuses")
        require((0...1000).contains(trackLength), "trackLength", "must be 0...1000 fixes")
        return problems
    }
}
