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
        /// Arrival here minus `issuedAt`: what the broker and this subscriber add.
        var worstDelay = 0.0
        var gapPrefix: String?
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
        state.withLock { state in
            if let phase, state.arrivals["\(ride)/\(phase)"] == nil { state.arrivals["\(ride)/\(phase)"] = now }
            guard let prefix = state.gapPrefix, ride.hasPrefix(prefix) else { return }
            if let previous = state.last[ride] {
                state.gaps[ride] = max(state.gaps[ride] ?? 0, (now - previous).seconds)
            }
            state.last[ride] = now
            if let issued {
                if let before = state.lastIssued[ride] {
                    state.issuedGap = max(state.issuedGap, issued.timeIntervalSince(before))
                }
                state.lastIssued[ride] = issued
                state.worstDelay = max(state.worstDelay, arrived.timeIntervalSince(issued))
            }
        }
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
    func resetGaps(prefix: String) {
        state.withLock { state in
            state.gapPrefix = prefix
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

    func maxGap(prefix: String) -> (Double, Int) {
        let now = ContinuousClock.now
        return state.withLock { state in
            let open = state.last.values.map { (now - $0).seconds }
            return (max(state.gaps.values.max() ?? 0, open.max() ?? .infinity), state.last.count)
        }
    }
}
