public import Foundation

/// Appends compact JSON to a byte buffer: the encoder behind every payload the worker emits.
///
/// Noncopyable, with a buffer of its own written through a pointer: a capacity check per write and no
/// uniqueness check (a key takes one check in all), where `[UInt8].append` paid both on every byte or run (a key
/// took four appends). Measured
/// under callgrind (`make bench-instructions`, 1,000 rides): a status took 35,037 instructions with the array and
/// 27,562 with this (and 26,489 once the engine reserved its actions). ``bytes`` copies the result out once.
public struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// The bytes written so far.
    public private(set) var count = 0
    /// Whether the next value at each nesting level needs a comma: bit `depth` for the current level. A bit
    /// set instead of an array of flags keeps the hot path free of allocation and uniqueness checks.
    private var needsComma: UInt64 = 0
    private var depth = 0

    public init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The JSON written so far.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Room for `extra` more bytes.
    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private mutating func grow(to needed: Int) {
        let larger = max(capacity * 2, needed)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    /// Bytes already reserved for.
    @inline(__always)
    private mutating func putReserved(_ run: UnsafeBufferPointer<UInt8>) {
        guard let start = run.baseAddress, !run.isEmpty else { return }
        (base + count).initialize(from: start, count: run.count)
        count += run.count
    }

    private mutating func put(_ run: UnsafeBufferPointer<UInt8>) {
        reserve(run.count)
        putReserved(run)
    }

    @inline(__always)
    private mutating func separator() {
        let bit: UInt64 = 1 << UInt64(depth)
        if needsComma & bit != 0 { put(UInt8(ascii: ",")) }
        needsComma |= bit
    }

    private mutating func open(_ bracket: UInt8) {
        separator()
        put(bracket)
        depth += 1
        precondition(depth < 64, "JSON nested deeper than 63 levels")
        needsComma &= ~(1 << UInt64(depth))
    }

    private mutating func close(_ bracket: UInt8) {
        depth -= 1
        put(bracket)
    }

    public mutating func beginObject() { open(UInt8(ascii: "{")) }

    public mutating func endObject() { close(UInt8(ascii: "}")) }

    public mutating func beginArray() { open(UInt8(ascii: "[")) }

    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// Writes `"key":` for a key written in the source (never escaped: the encoder's own field names); the
    /// next value call writes the value without a comma.
    public mutating func key(_ key: StaticString) {
        let length = key.utf8CodeUnitCount
        reserve(length + 4)  // the comma, the quotes and the colon: one check for all
        let bit: UInt64 = 1 << UInt64(depth)
        if needsComma & bit != 0 {
            base[count] = UInt8(ascii: ",")
            count += 1
        }
        base[count] = UInt8(ascii: "\"")
        count += 1
        putReserved(UnsafeBufferPointer(start: key.utf8Start, count: length))
        base[count] = UInt8(ascii: "\"")
        base[count + 1] = UInt8(ascii: ":")
        count += 2
        needsComma &= ~bit
    }

    /// Writes `"key":` for a key from data, escaped as needed.
    package mutating func key(dynamic key: String) {
        separator()
        appendQuoted(key)
        put(UInt8(ascii: ":"))
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
                reserve(2)
                base[count] = UInt8(ascii: ".")
                base[count + 1] = UInt8(ascii: "0")
                count += 2
            } else {
                // Shortest round-trip digits; a small string, so no allocation.
                var text = value.description
                text.withUTF8 { put($0) }
            }
        } else {
            appendStatic("null")
        }
    }

    /// The bytes of a literal.
    private mutating func appendStatic(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A decimal integer without going through `String`: its digits counted first, then written in place from
    /// the last.
    private mutating func appendDigits(_ value: Int64) {
        reserve(20)  // a sign and 19 digits: Int64's longest (its magnitude is below 10^19)
        if value < 0 {
            base[count] = UInt8(ascii: "-")
            count += 1
        }
        var magnitude = value.magnitude
        var digits = 1
        var bound: UInt64 = 10
        while digits < 19, magnitude >= bound {
            digits += 1
            bound &*= 10
        }
        var index = count + digits
        count = index
        repeat {
            index -= 1
            base[index] = UInt8(truncatingIfNeeded: 48 + magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
    }

    /// An RFC 3339 UTC time with milliseconds, as a JSON string.
    public mutating func time(_ value: Date) {
        separator()
        reserve(Timestamps.length + 2)
        base[count] = UInt8(ascii: "\"")
        Timestamps.write(value, at: base + count + 1)
        base[count + Timestamps.length + 1] = UInt8(ascii: "\"")
        count += Timestamps.length + 2
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
        json.withUnsafeBufferPointer { put($0) }
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
        var text = text
        text.withUTF8 { utf8 in
            reserve(utf8.count + 2)  // nothing to escape (the common case): no growth in the writes that follow
            base[count] = UInt8(ascii: "\"")
            count += 1
            // Runs without escapes are copied in bulk; only the rare escaped byte is handled alone.
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte == 0x22 || byte == 0x5C || byte < 0x20 else { continue }
                put(UnsafeBufferPointer(rebasing: utf8[start..<index]))
                switch byte {
                case 0x22: putEscape(0x22)
                case 0x5C: putEscape(0x5C)
                case 0x0A: putEscape(UInt8(ascii: "n"))
                case 0x0D: putEscape(UInt8(ascii: "r"))
                case 0x09: putEscape(UInt8(ascii: "t"))
                default:
                    putEscape(UInt8(ascii: "u"))
                    put(0x30)
                    put(0x30)
                    put(Self.hex[Int(byte >> 4)])
                    put(Self.hex[Int(byte & 0xF)])
                }
                start = index + 1
            }
            put(UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        put(UInt8(ascii: "\""))
    }

    private mutating func putEscape(_ letter: UInt8) {
        put(0x5C)
        put(letter)
    }
}
