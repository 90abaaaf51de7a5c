import Foundation
import Locking
import Logging
import MQTTClient
import MosquittoTesting
import RideDomain

import enum RideStatusKit.RidePhase

/// What the observer saw on `rides/+/status`: first arrival per ride and phase, and cadence gaps.
///
/// It takes every status at the 100,000-ride cadence (20,000 a second) on the 2 cores the worker and the broker
/// use too, so what it costs is taken from them: one pass over the payload for the three fields it reads and one
/// dictionary entry per ride. (Searching each field with slices and keeping five dictionaries keyed by ride
/// cost the harness about 0.45 cores at that cadence.)
final class StatusObserver: Sendable {
    /// Per ride: what C5 and the first arrivals need, and, under the gap prefix, its gaps.
    private struct Track {
        var newestSequence = -1
        /// Phases whose first arrival is recorded, one bit per ``RidePhase`` case.
        var phasesSeen: UInt8 = 0
        /// Since ``resetGaps(prefix:lateAbove:)``: the last arrival, the largest gap between arrivals, and the
        /// last `issuedAt` (the worker's cadence, whatever the broker and this subscriber add).
        var last: ContinuousClock.Instant?
        var gap = 0.0
        var lastIssued: Date?
    }

    private struct State {
        var tracks: [String: Track] = [:]
        var arrivals: [String: ContinuousClock.Instant] = [:]
        var issuedGap = 0.0
        /// Gaps between `issuedAt` above `lateAbove`, counted by the second (since ``resetGaps``) they ended in:
        /// when in the run the cadence slipped.
        var lateAbove = Double.infinity
        var lateBySecond: [Int: Int] = [:]
        /// The largest gap between `issuedAt` by the second (since ``resetGaps``) it ended in.
        var largestBySecond: [Int: Double] = [:]
        var resetAt = Date()
        /// Arrival here minus `issuedAt`: what the broker and this subscriber add.
        var worstDelay = 0.0
        var gapPrefix: String?
        /// C5 at this subscriber: statuses that came below the highest sequence already seen for their ride.
        var regressions = 0
    }

    private let state = Locked(State())

    func record(_ message: MQTTMessage) {
        let now = ContinuousClock.now
        guard let ride = Self.ride(inStatusTopic: message.topic), !message.payload.isEmpty else { return }
        let fields = message.payload.withUnsafeBytes { Self.fields(of: $0) }
        let phaseBit =
            fields.phase.flatMap(RidePhase.init(rawValue:)).flatMap { RidePhase.allCases.firstIndex(of: $0) }
            .map { UInt8(1) << UInt8($0) } ?? 0
        let issued = fields.issuedAt.flatMap { Timestamps.parse($0) }
        let arrived = Date()
        state.withLock { state in
            let gaps = state.gapPrefix.map { ride.hasPrefix($0) } ?? false
            var track = state.tracks[ride, default: Track()]
            if let sequence = fields.sequence {
                if track.newestSequence >= 0, sequence < track.newestSequence { state.regressions += 1 }
                track.newestSequence = max(sequence, track.newestSequence)
            }
            // A known phase's bit says whether its first arrival is recorded; another phase asks the table.
            if let phase = fields.phase, phaseBit == 0 || track.phasesSeen & phaseBit == 0 {
                track.phasesSeen |= phaseBit
                let key = "\(ride)/\(phase)"
                if state.arrivals[key] == nil { state.arrivals[key] = now }
            }
            var issuedGap: Double?
            if gaps {
                if let previous = track.last { track.gap = max(track.gap, (now - previous).seconds) }
                track.last = now
                if let issued {
                    issuedGap = track.lastIssued.map { issued.timeIntervalSince($0) }
                    track.lastIssued = issued
                }
            }
            state.tracks[ride] = track
            guard gaps, let issued else { return }
            if let gap = issuedGap {
                state.issuedGap = max(state.issuedGap, gap)
                let second = Int(issued.timeIntervalSince(state.resetAt))
                if gap > state.lateAbove { state.lateBySecond[second, default: 0] += 1 }
                state.largestBySecond[second] = max(state.largestBySecond[second] ?? 0, gap)
            }
            state.worstDelay = max(state.worstDelay, arrived.timeIntervalSince(issued))
        }
    }

    /// The ride of a `rides/<id>/status` topic (the ride level of any three-level topic), without splitting it.
    static func ride(inStatusTopic topic: String) -> String? {
        var utf8 = topic.utf8[...]
        guard let first = utf8.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        utf8 = utf8[utf8.index(after: first)...]
        guard let second = utf8.firstIndex(of: UInt8(ascii: "/")),
            !utf8[utf8.index(after: second)...].contains(UInt8(ascii: "/"))
        else { return nil }
        return String(topic[topic.utf8.index(after: first)..<second])
    }

    /// `phase`, `issuedAt` (as written) and `sequence` of a status, in one pass over its bytes: at each quote,
    /// whether one of the three keys starts there.
    static func fields(of payload: UnsafeRawBufferPointer) -> (phase: String?, issuedAt: String?, sequence: Int?) {
        let bytes = payload.bindMemory(to: UInt8.self)
        var result: (phase: String?, issuedAt: String?, sequence: Int?) = (nil, nil, nil)
        var index = 0
        while index < bytes.count, result.phase == nil || result.issuedAt == nil || result.sequence == nil {
            guard bytes[index] == UInt8(ascii: "\"") else {
                index += 1
                continue
            }
            if result.phase == nil, let end = matchEnd(Self.phaseKey, in: bytes, at: index) {
                result.phase = string(in: bytes, from: end)
            } else if result.issuedAt == nil, let end = matchEnd(Self.issuedAtKey, in: bytes, at: index) {
                result.issuedAt = string(in: bytes, from: end)
            } else if result.sequence == nil, let end = matchEnd(Self.sequenceKey, in: bytes, at: index) {
                var value = 0
                var digit = end
                while digit < bytes.count, (48...57).contains(bytes[digit]) {
                    value = value &* 10 &+ Int(bytes[digit] - 48)
                    digit += 1
                }
                if digit > end { result.sequence = value }
            }
            index += 1
        }
        return result
    }

    private static let phaseKey = Array(#""phase":""#.utf8)
    private static let issuedAtKey = Array(#""issuedAt":""#.utf8)
    private static let sequenceKey = Array(#""sequence":"#.utf8)

    /// Where `key` ends if it starts at `index`.
    private static func matchEnd(_ key: [UInt8], in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        guard index + key.count <= bytes.count else { return nil }
        for offset in 1..<key.count where bytes[index + offset] != key[offset] { return nil }
        return index + key.count
    }

    /// The string from `start` to the next quote.
    private static func string(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> String? {
        guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// Statuses that arrived with a lower sequence than one already seen for their ride (C5).
    var sequenceRegressions: Int { state.withLock { $0.regressions } }

    /// Rides under the gap prefix whose newest status was issued at or after `date`.
    func ridesIssued(since date: Date) -> Int {
        state.withLock { $0.tracks.values.filter { ($0.lastIssued ?? .distantPast) >= date }.count }
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
            state.largestBySecond = [:]
            state.resetAt = Date()
            state.tracks = state.tracks.mapValues { track in
                var track = track
                (track.last, track.gap, track.lastIssued) = (nil, 0, nil)
                return track
            }
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

    /// The largest gap between `issuedAt` that ended in each second since ``resetGaps(prefix:lateAbove:)``.
    func largestIssuedGaps() -> [(second: Int, gap: Double)] {
        state.withLock { $0.largestBySecond.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    func maxGap(prefix: String) -> (Double, Int) {
        let now = ContinuousClock.now
        return state.withLock { state in
            // A ride that fell silent counts with the time since its last status; no ride seen: no bound.
            let seen = state.tracks.values.filter { $0.last != nil }
            guard !seen.isEmpty else { return (.infinity, 0) }
            return (seen.map { max($0.gap, (now - $0.last!).seconds) }.max()!, seen.count)
        }
    }
}
