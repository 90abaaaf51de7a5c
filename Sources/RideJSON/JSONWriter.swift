public import Foundation

/// Appends compact JSON to a byte buffer: the encoder behind every payload the worker emits.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Whether the next value at each nesting level needs a comma: bit `depth` for the current level. A bit
    /// set instead of an array of flags keeps the hot path free of allocation and uniqueness checks.
    private var needsComma: UInt64 = 0
    private var depth = 0

    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    private mutating func separator() {
        let bit: UInt64 = 1 << UInt64(depth)
        if needsComma & bit != 0 { bytes.append(UInt8(ascii: ",")) }
        needsComma |= bit
    }

    private mutating func open(_ bracket: UInt8) {
        separator()
        bytes.append(bracket)
        depth += 1
        precondition(depth < 64, "JSON nested deeper than 63 levels")
        needsComma &= ~(1 << UInt64(depth))
    }

    private mutating func close(_ bracket: UInt8) {
        depth -= 1
        bytes.append(bracket)
    }

    public mutating func beginObject() { open(UInt8(ascii: "{")) }

    public mutating func endObject() { close(UInt8(ascii: "}")) }

    public mutating func beginArray() { open(UInt8(ascii: "[")) }

    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// Writes `"key":` for a key written in the source (never escaped: the encoder's own field names); the
    /// next value call writes the value without a comma.
    public mutating func key(_ key: StaticString) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        appendStatic(key)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma &= ~(1 << UInt64(depth))
    }

    /// Writes `"key":` for a key from data, escaped as needed.
    package mutating func key(dynamic key: String) {
        separator()
        appendQuoted(key)
        bytes.append(UInt8(ascii: ":"))
        needsComma &= ~(1 << UInt64(depth))
    }

    public mutating func string(_ value: String) {
        separator()
        appendQuoted(value)
    }

    public mutating func number(_ value: Double) {
        separator()
        if value.isFinite {
            if value == value.rounded() && abs(value) < 1e15 {
                appendDigits(Int64(value))
                bytes.append(UInt8(ascii: "."))
                bytes.append(UInt8(ascii: "0"))
            } else {
                // Shortest round-trip digits; a small string, so no allocation.
                var text = value.description
                text.withUTF8 { bytes.append(contentsOf: $0) }
            }
        } else {
            appendStatic("null")
        }
    }

    /// The bytes of a literal, in one append.
    private mutating func appendStatic(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A decimal integer without going through `String`.
    private mutating func appendDigits(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var start = 20
            repeat {
                start -= 1
                buffer[start] = UInt8(48 + magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<20]))
        }
    }

    /// An RFC 3339 UTC time with milliseconds, as a JSON string.
    public mutating func time(_ value: Date) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        Timestamps.append(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func integer(_ value: Int) {
        separator()
        appendDigits(Int64(value))
    }

    public mutating func bool(_ value: Bool) {
        separator()
        if value { appendStatic("true") } else { appendStatic("false") }
    }

    public mutating func null() {
        separator()
        appendStatic("null")
    }

    /// Writes a value that is already JSON.
    public mutating func raw(_ json: [UInt8]) {
        separator()
        bytes.append(contentsOf: json)
    }

    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number): self.number(number)
        case .string(let text): string(text)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members.sorted(by: { $0.key < $1.key }) {
                key(dynamic: name)
                self.value(member)
            }
            endObject()
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    private mutating func appendQuoted(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            // Runs without escapes are copied in bulk; only the rare escaped byte is handled alone.
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte == 0x22 || byte == 0x5C || byte < 0x20 else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                switch byte {
                case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
                case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 0xF)])
                }
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
