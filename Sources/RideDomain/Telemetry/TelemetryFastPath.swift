import Foundation

import struct RideStatusKit.TelemetryFix

/// The hot telemetry shape, read in one pass without building a ``JSONValue`` tree.
///
/// It takes only the common case: one flat object of ASCII strings without escapes, plain numbers,
/// `null`, `true`/`false`, and no `_type`. Anything else (nesting, escapes, non-ASCII, exponents, an
/// OwnTracks payload, any syntax error) returns `nil` and the caller uses the general decoder, which
/// also produces every rejection. A differential test checks both agree on a corpus with malformed input.
enum TelemetryFastPath {
    struct Fields {
        var timestamp: Date?
        var timestampNumber: Double?
        var latitude: Double?
        var longitude: Double?
        var speed: Double?
        var course: Double?
        var accuracy: Double?
        var sequence: Double?
        var remainingDistance: Double?
        var remainingDuration: Double?
        var vehicleIdBytes: (start: Int, end: Int)?
    }

    /// The decoded fix, or `nil` when the general decoder must decide (including every error case).
    static func decode(vehicleId: String, payload: [UInt8]) -> TelemetryFix?? {
        payload.withUnsafeBufferPointer { bytes -> TelemetryFix?? in
            guard let fields = scan(bytes) else { return nil }
            if let range = fields.vehicleIdBytes {
                let slice = UnsafeBufferPointer(rebasing: bytes[range.start..<range.end])
                // I1/I3 errors: the general path. (In place: the generic comparison cost 290 instructions a fix.)
                let same =
                    vehicleId.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(slice) }
                    ?? slice.elementsEqual(vehicleId.utf8)
                guard same else { return nil }
            }
            guard let latitude = fields.latitude, let longitude = fields.longitude else { return nil }
            let coordinate = Coordinate(latitude: latitude, longitude: longitude)
            guard coordinate.isValid, latitude != 0 || longitude != 0 else { return nil }
            let timestamp: Date
            if let date = fields.timestamp {
                timestamp = date
            } else if let seconds = fields.timestampNumber, let date = Timestamps.parse(JSONValue.number(seconds)) {
                timestamp = date
            } else {
                return nil
            }
            var sequence: Int? = nil
            if let value = fields.sequence { sequence = Int(exactly: value.rounded()) ?? 0 }
            return .some(
                TelemetryFix(
                    vehicleId: vehicleId, timestamp: timestamp, coordinate: coordinate,
                    speed: fields.speed.flatMap(InputDecoder.usableSpeed),
                    course: fields.course.flatMap(InputDecoder.usableCourse), horizontalAccuracy: fields.accuracy,
                    sequence: sequence,
                    navigation: InputDecoder.usableNavigation(fields.remainingDistance, fields.remainingDuration)))
        }
    }

    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Fields? {
        var index = 0
        var fields = Fields()
        func skip() {
            while index < bytes.count,
                bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09
            {
                index += 1
            }
        }
        /// A string of printable ASCII without escapes; returns its byte range.
        func string() -> (Int, Int)? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return (start, index - 1)
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return nil }
                index += 1
            }
            return nil
        }
        /// A number without exponent, up to 15 significant digits: exact as the general parser computes it.
        func number() -> Double? {
            let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            var mantissa: UInt64 = 0
            var digits = 0
            var fraction = 0
            var seenPoint = false
            let first = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte >= 0x30 && byte <= 0x39 {
                    mantissa = mantissa * 10 + UInt64(byte - 0x30)
                    digits += 1
                    if seenPoint { fraction += 1 }
                    if digits > 15 { return nil }
                } else if byte == UInt8(ascii: ".") && !seenPoint && digits > 0 {
                    seenPoint = true
                } else {
                    break
                }
                index += 1
            }
            guard digits > 0, bytes[index - 1] != UInt8(ascii: ".") else { return nil }
            if bytes[first] == 0x30 && index - first > 1 && bytes[first + 1] != UInt8(ascii: ".") { return nil }
            if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
                return nil
            }
            let value = Double(mantissa) / JSONParser.powersOfTen[fraction]
            return negative ? -value : value
        }
        func key(_ range: (Int, Int), is name: StaticString) -> Bool {
            let length = range.1 - range.0
            guard length == name.utf8CodeUnitCount else { return false }
            let start = name.utf8Start
            for offset in 0..<length where bytes[range.0 + offset] != start[offset] { return false }
            return true
        }
        skip()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        skip()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") { return nil }
        while true {
            skip()
            guard let name = string() else { return nil }
            skip()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skip()
            guard index < bytes.count else { return nil }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                guard let value = string() else { return nil }
                if key(name, is: "timestamp") {
                    guard let date = Timestamps.parse(utf8: UnsafeBufferPointer(rebasing: bytes[value.0..<value.1]))
                    else { return nil }
                    fields.timestamp = date
                    fields.timestampNumber = nil
                } else if key(name, is: "vehicleId") {
                    fields.vehicleIdBytes = (value.0, value.1)
                } else if key(name, is: "_type") || key(name, is: "latitude") || key(name, is: "longitude")
                    || key(name, is: "speed") || key(name, is: "course") || key(name, is: "horizontalAccuracy")
                    || key(name, is: "sequence") || key(name, is: "remainingDistance")
                    || key(name, is: "remainingDuration")
                {
                    return nil
                }
            } else if byte == UInt8(ascii: "-") || (byte >= 0x30 && byte <= 0x39) {
                guard let value = number() else { return nil }
                if key(name, is: "latitude") {
                    fields.latitude = value
                } else if key(name, is: "longitude") {
                    fields.longitude = value
                } else if key(name, is: "speed") {
                    fields.speed = value
                } else if key(name, is: "course") {
                    fields.course = value
                } else if key(name, is: "horizontalAccuracy") {
                    fields.accuracy = value
                } else if key(name, is: "sequence") {
                    fields.sequence = value
                } else if key(name, is: "remainingDistance") {
                    fields.remainingDistance = value
                } else if key(name, is: "remainingDuration") {
                    fields.remainingDuration = value
                } else if key(name, is: "timestamp") {
                    fields.timestampNumber = value
                    fields.timestamp = nil
                } else if key(name, is: "vehicleId") || key(name, is: "_type") {
                    return nil
                }
            } else if byte == UInt8(ascii: "n") {
                guard index + 4 <= bytes.count, bytes[index + 1] == UInt8(ascii: "u"),
                    bytes[index + 2] == UInt8(ascii: "l"),
                    bytes[index + 3] == UInt8(ascii: "l")
                else { return nil }
                index += 4
                // A null member counts as absent in the general decoder too, except where it is required.
                if key(name, is: "latitude") || key(name, is: "longitude") || key(name, is: "timestamp")
                    || key(name, is: "_type")
                {
                    return nil
                }
                if key(name, is: "speed") { fields.speed = nil }
                if key(name, is: "course") { fields.course = nil }
                if key(name, is: "horizontalAccuracy") { fields.accuracy = nil }
                if key(name, is: "sequence") { fields.sequence = nil }
                if key(name, is: "remainingDistance") { fields.remainingDistance = nil }
                if key(name, is: "remainingDuration") { fields.remainingDuration = nil }
                if key(name, is: "vehicleId") { fields.vehicleIdBytes = nil }
            } else {
                return nil  // booleans, objects, arrays: the general path
            }
            skip()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                skip()
                return index == bytes.count ? fields : nil
            } else {
                return nil
            }
        }
    }
}
