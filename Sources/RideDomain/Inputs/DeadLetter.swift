public import Foundation
public import RideStatusKit

/// A rejected input as published on the dead-letter topic (3.5): the kit's ``RideStatusKit/DeadLetter``, made
/// from a rejection and written with the domain's writer.
extension DeadLetter {
    public init(topic: String, rejection: Rejection, payload: [UInt8], receivedAt: Date) {
        let prefix = Array(payload.prefix(256))
        let text: String
        if let utf8 = String(validating: prefix, as: UTF8.self) {
            text = utf8
        } else if let utf8 = (1...3).lazy.compactMap({ String(validating: prefix.dropLast($0), as: UTF8.self) }).first,
            payload.count > 256
        {
            // A multi-byte character cut at byte 256 is still UTF-8 text.
            text = utf8
        } else {
            text = Data(prefix).base64EncodedString()
        }
        self.init(
            topic: topic, reason: rejection.reason, detail: rejection.detail, receivedAt: receivedAt,
            payloadBytes: payload.count, payloadPrefix: text)
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

/// Dead letters per reason per second (3.5): at most `limit` of one reason in any one-second window, never
/// fewer than 1; every rejection is still counted by the engine.
///
/// A sliding window over the times of the last `limit` dead letters, rather than a token bucket: a bucket
/// that is full at the start of a second and refills during it lets up to twice the limit through in one
/// window (15 in one second was measured under a flood).
package struct DeadLetterLimiter: Sendable {
    /// Per reason, the times of its last `limit` dead letters, oldest first.
    private var recent: [DeadLetter.Reason: [Date]] = [:]
    public let limit: Int

    public init(perSecond: Double) { limit = perSecond.isFinite ? max(1, Int(perSecond)) : 1 }

    /// Whether a dead letter of `reason` may be sent at `now` (and, if so, records it).
    public mutating func allow(_ reason: DeadLetter.Reason, now: Date) -> Bool {
        var times = recent[reason, default: []]
        if times.count >= limit {
            // Any window of one second holds at most `limit` when the one sent `limit` letters ago has left it.
            guard now.timeIntervalSince(times[times.count - limit]) >= 1 else { return false }
            times.removeFirst(times.count - limit + 1)
        }
        times.append(now)
        recent[reason] = times
        return true
    }
}
