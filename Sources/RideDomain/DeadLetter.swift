import Foundation

/// A rejected input as published on the dead-letter topic (3.5).
public struct DeadLetter: Sendable, Equatable {
    public var topic: String
    public var reason: RejectionReason
    public var detail: String
    public var receivedAt: Date
    public var payloadBytes: Int
    /// The first 256 bytes, as UTF-8 when they are, else base64.
    public var payloadPrefix: String

    public init(topic: String, rejection: Rejection, payload: [UInt8], receivedAt: Date) {
        self.topic = topic
        self.reason = rejection.reason
        self.detail = rejection.detail
        self.receivedAt = receivedAt
        self.payloadBytes = payload.count
        let prefix = Array(payload.prefix(256))
        if let text = String(validating: prefix, as: UTF8.self) {
            payloadPrefix = text
        } else if let text = (1...3).lazy.compactMap({ String(validating: prefix.dropLast($0), as: UTF8.self) }).first,
            payload.count > 256
        {
            // A multi-byte character cut at byte 256 is still UTF-8 text.
            payloadPrefix = text
        } else {
            payloadPrefix = Data(prefix).base64EncodedString()
        }
    }

    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.key("topic")
        writer.string(topic)
        writer.key("reason")
        writer.string(reason.rawValue)
        writer.key("detail")
        writer.string(detail)
        writer.date("receivedAt", receivedAt)
        writer.key("payloadBytes")
        writer.integer(payloadBytes)
        writer.key("payloadPrefix")
        writer.string(payloadPrefix)
        writer.endObject()
        return writer.bytes
    }
}

/// Dead letters per reason per second (3.5): a token bucket per reason; every rejection is still counted.
public struct DeadLetterLimiter: Sendable {
    private var buckets: [RejectionReason: (tokens: Double, updated: Date)] = [:]
    public let perSecond: Double

    public init(perSecond: Double) { self.perSecond = max(1, perSecond) }

    /// Whether a dead letter of `reason` may be sent at `now`.
    public mutating func allow(_ reason: RejectionReason, now: Date) -> Bool {
        var bucket = buckets[reason] ?? (perSecond, now)
        bucket.tokens = min(perSecond, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perSecond)
        bucket.updated = now
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        buckets[reason] = bucket
        return allowed
    }
}
