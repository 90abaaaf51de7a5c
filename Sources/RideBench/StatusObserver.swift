import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain

/// What the observer saw on `rides/+/status`: first arrival per ride and phase, and cadence gaps.
final class StatusObserver: Sendable {
    private struct State {
        var arrivals: [String: ContinuousClock.Instant] = [:]
        var last: [String: ContinuousClock.Instant] = [:]
        var gaps: [String: Double] = [:]
        /// By the statuses' own `issuedAt`: the worker's cadence, whatever the broker and this subscriber add.
        var lastIssued: [String: Date] = [:]
        var issuedGap = 0.0
        /// Gaps between `issuedAt` above `lateAbove`, counted by the second (since ``resetGaps``) they ended in:
        /// when in the run the cadence slipped.
        var lateAbove = Double.infinity
        var lateBySecond: [Int: Int] = [:]
        var resetAt = Date()
        /// Arrival here minus `issuedAt`: what the broker and this subscriber add.
        var worstDelay = 0.0
        var gapPrefix: String?
        /// C5 at this subscriber: the highest sequence seen per ride, and statuses that came below it.
        var newestSequence: [String: Int] = [:]
        var regressions = 0
    }

    private let state = Locked(State())

    func record(_ message: MQTTMessage) {
        let now = ContinuousClock.now
        let levels = message.topic.split(separator: "/")
        guard levels.count == 3, !message.payload.isEmpty else { return }
        let ride = String(levels[1])
        let phase = Self.phase(in: message.payload)
        let issued = Self.value(of: #""issuedAt":""#, in: message.payload).flatMap { Timestamps.parse($0) }
        let arrived = Date()
        let sequence = Self.integer(after: #""sequence":"#, in: message.payload)
        state.withLock { state in
            if let sequence {
                if let newest = state.newestSequence[ride], sequence < newest { state.regressions += 1 }
                state.newestSequence[ride] = max(sequence, state.newestSequence[ride] ?? sequence)
            }
            if let phase, state.arrivals["\(ride)/\(phase)"] == nil { state.arrivals["\(ride)/\(phase)"] = now }
            guard let prefix = state.gapPrefix, ride.hasPrefix(prefix) else { return }
            if let previous = state.last[ride] {
                state.gaps[ride] = max(state.gaps[ride] ?? 0, (now - previous).seconds)
            }
            state.last[ride] = now
            if let issued {
                if let before = state.lastIssued[ride] {
                    let gap = issued.timeIntervalSince(before)
                    state.issuedGap = max(state.issuedGap, gap)
                    if gap > state.lateAbove {
                        state.lateBySecond[Int(issued.timeIntervalSince(state.resetAt)), default: 0] += 1
                    }
                }
                state.lastIssued[ride] = issued
                state.worstDelay = max(state.worstDelay, arrived.timeIntervalSince(issued))
            }
        }
    }

    /// The non-negative integer after `marker`, without decoding the payload.
    static func integer(after marker: String, in payload: [UInt8]) -> Int? {
        let marker = Array(marker.utf8)
        guard payload.count > marker.count else { return nil }
        for start in 0...(payload.count - marker.count)
        where payload[start..<start + marker.count].elementsEqual(marker) {
            var value = 0
            var index = start + marker.count
            while index < payload.count, (48...57).contains(payload[index]) {
                value = value * 10 + Int(payload[index] - 48)
                index += 1
            }
            return index > start + marker.count ? value : nil
        }
        return nil
    }

    /// Statuses that arrived with a lower sequence than one already seen for their ride (C5).
    var sequenceRegressions: Int { state.withLock { $0.regressions } }

    /// Rides under the gap prefix whose newest status was issued at or after `date`.
    func ridesIssued(since date: Date) -> Int {
        state.withLock { $0.lastIssued.values.filter { $0 >= date }.count }
    }

    /// The phase without decoding the whole status: the value after `"phase":"`.
    static func phase(in payload: [UInt8]) -> String? { value(of: #""phase":""#, in: payload) }

    /// The string value after `marker` (a key, its colon and the opening quote), without decoding the payload.
    static func value(of marker: String, in payload: [UInt8]) -> String? {
        let marker = Array(marker.utf8)
        guard payload.count > marker.count else { return nil }
        for start in 0...(payload.count - marker.count)
        where payload[start..<start + marker.count].elementsEqual(marker) {
            let from = start + marker.count
            guard let end = payload[from...].firstIndex(of: 0x22) else { return nil }
            return String(decoding: payload[from..<end], as: UTF8.self)
        }
        return nil
    }

    func firstArrival(_ ride: String, phase: String) -> ContinuousClock.Instant? {
        state.withLock { $0.arrivals["\(ride)/\(phase)"] }
    }

    /// Starts measuring gaps of rides whose id starts with `prefix`, from their next status on.
    func resetGaps(prefix: String, lateAbove: Double = .infinity) {
        state.withLock { state in
            state.gapPrefix = prefix
            state.lateAbove = lateAbove
            state.lateBySecond = [:]
            state.resetAt = Date()
            state.last = [:]
            state.gaps = [:]
            state.lastIssued = [:]
            state.issuedGap = 0
            state.worstDelay = 0
        }
    }

    /// The largest gap between two statuses of one ride, counting the time since each ride's last status
    /// too (a ride that fell silent shows), and how many rides were seen.
    /// The largest gap between two `issuedAt` of one ride (the worker's cadence) and the longest delivery
    /// delay (arrival minus `issuedAt`), since ``resetGaps(prefix:)``.
    func issuedGapAndDelay() -> (gap: Double, delay: Double) {
        state.withLock { ($0.issuedGap, $0.worstDelay) }
    }

    /// Gaps between `issuedAt` above the `lateAbove` of ``resetGaps(prefix:lateAbove:)``, by the second since
    /// then in which they ended.
    func lateIssuedGaps() -> [(second: Int, count: Int)] {
        state.withLock { $0.lateBySecond.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    func maxGap(prefix: String) -> (Double, Int) {
        let now = ContinuousClock.now
        return state.withLock { state in
            let open = state.last.values.map { (now - $0).seconds }
            return (max(state.gaps.values.max() ?? 0, open.max() ?? .infinity), state.last.count)
        }
    }
}
