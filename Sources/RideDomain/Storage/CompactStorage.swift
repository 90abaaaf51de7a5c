public import Foundation

public import struct RideStatusKit.Driver
public import struct RideStatusKit.VehicleLocation

// Storage shapes for the values every active ride keeps (at most 1 KB per active ride: `make bench-scale`).
// An `Optional<Date>` or `Optional<Double>` takes 9 bytes and pads to 16 next to the following word; a
// ride keeps a dozen of them. These wrappers keep the same values in 8 bytes each, with NaN for nil.
// A time or a measurement the ride keeps is never NaN: JSON has no NaN, and times come from timestamps.

/// A value kept as one `Double` word.
public protocol DoubleWord {
    init(word: Double)
    var word: Double { get }
}

extension Double: DoubleWord {
    public init(word: Double) { self = word }
    public var word: Double { self }
}

extension Date: DoubleWord {
    public init(word: Double) { self.init(timeIntervalSinceReferenceDate: word) }
    public var word: Double { timeIntervalSinceReferenceDate }
}

/// An optional `Date` or `Double` in 8 bytes instead of 16: NaN stands for nil.
@propertyWrapper
public struct NaNBoxed<Value: DoubleWord>: Sendable, Equatable {
    private var bits: Double

    public init(wrappedValue: Value?) { bits = wrappedValue?.word ?? .nan }

    public var wrappedValue: Value? {
        get { bits.isNaN ? nil : Value(word: bits) }
        set { bits = newValue?.word ?? .nan }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.bits == rhs.bits || (lhs.bits.isNaN && rhs.bits.isNaN)
    }
}

/// An optional ``VehicleLocation`` in 48 bytes instead of 80: six words, a NaN latitude for nil.
@propertyWrapper
public struct PackedLocation: Sendable, Equatable {
    private var latitude: Double = .nan
    private var longitude: Double = 0
    @NaNBoxed private var course: Double?
    @NaNBoxed private var speed: Double?
    @NaNBoxed private var horizontalAccuracy: Double?
    private var timestamp: Date = .distantPast

    public init(wrappedValue: VehicleLocation?) {
        self.wrappedValue = wrappedValue
    }

    public var wrappedValue: VehicleLocation? {
        get {
            guard !latitude.isNaN else { return nil }
            return VehicleLocation(
                coordinate: Coordinate(latitude: latitude, longitude: longitude), course: course, speed: speed,
                horizontalAccuracy: horizontalAccuracy, timestamp: timestamp)
        }
        set {
            latitude = newValue?.coordinate.latitude ?? .nan
            longitude = newValue?.coordinate.longitude ?? 0
            course = newValue?.course
            speed = newValue?.speed
            horizontalAccuracy = newValue?.horizontalAccuracy
            timestamp = newValue?.timestamp ?? .distantPast
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.wrappedValue == rhs.wrappedValue }
}

/// An immutable value behind a reference: copying the holder copies a pointer, not the value. A ride and
/// the snapshot of its last valid status (V7) share such boxes for what rarely changes.
final class Shared<Value: Sendable & Equatable>: Sendable, Equatable {
    let value: Value

    init(_ value: Value) { self.value = value }

    static func == (lhs: Shared, rhs: Shared) -> Bool { lhs === rhs || lhs.value == rhs.value }
}

/// The vehicle's details and the driver: they change only on `assign`, so a ride and its V7 snapshot share
/// one box of them.
struct Crew: Sendable, Equatable {
    var vehicle: VehicleDetails
    var driver: Driver?
}

/// One copy of each of a few strings that repeat across rides (a ride option's map annotation image URL is
/// the same 40-odd bytes in every booking of that option). Bounded: past `limit` distinct values, strings
/// are kept as they come, so that unusual input cannot grow the table without end.
struct StringInterner: Sendable {
    private var strings: Set<String> = []
    let limit: Int

    init(limit: Int = 1024) { self.limit = limit }

    /// Distinct strings stored.
    var count: Int { strings.count }

    /// The stored copy equal to `string`, stored first if there is room.
    mutating func intern(_ string: String) -> String {
        if let stored = strings.firstIndex(of: string) { return strings[stored] }
        if strings.count < limit { strings.insert(string) }
        return string
    }

    mutating func intern(_ string: String?) -> String? { string.map { intern($0) } }
}
