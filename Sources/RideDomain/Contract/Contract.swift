import Foundation
public import RideStatusKit
import WorkerGroup

/// The worker's side of the one topic table (``RideStatusKit/RideTopics``): the state topics under a ride's own
/// bucket, A1's check of a Response Topic, and the parser every message goes through.
extension RideTopics {
    /// A1: where a reply to a request (L7, 3.4) may go: a topic name (no wildcard, no NUL) under
    /// `{replyPrefix}/`, never onto a topic of the contract. Otherwise the rejection to dead-letter.
    public func replyTopicProblem(_ responseTopic: String?) -> Rejection? {
        guard let responseTopic else {
            return Rejection(.missingField, "the request has no Response Topic (A1)")
        }
        let shown = String(responseTopic.prefix(128))
        let under =
            responseTopic.utf8.count > replyPrefix.utf8.count + 1
            && responseTopic.hasPrefix(replyPrefix + "/")
        let clean = !responseTopic.utf8.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }
        guard under, clean, responseTopic.utf8.count <= 65_535 else {
            return Rejection(
                .invalidField, "Response Topic '\(shown)' is not a topic under '\(replyPrefix)/' (A1)")
        }
        return nil
    }

    /// Private, retained: the durable state of one ride (L5), under its ownership bucket (G1, G3).
    public func state(ride: String) -> String {
        state(bucketName: Ownership.bucketName(Ownership.bucket(of: ride)), ride: ride)
    }
    /// The durable states of one bucket's rides (G3: what a new owner of the bucket reads).
    public func stateFilter(bucket: Int) -> String { stateFilter(bucketName: Ownership.bucketName(bucket)) }

    /// What a topic is, as far as the worker reads it.
    public enum Parsed: Equatable, Sendable {
        case position(vehicle: String)
        case availability(vehicle: String)
        /// A3: a driver event on the vehicle's own topic (the ride is in the payload).
        case vehicleEvent(vehicle: String)
        case control(RideTopics.Control, ride: String)
        case statusRequest(ride: String)
        /// A ride's status: the worker reads the retained ones back at recovery (L5).
        case status(ride: String)
        case rideOptionsRequest
        /// A ride's durable state; `legacy` on the topic of releases before groups (no bucket level).
        case state(ride: String, legacy: Bool = false)
        /// A worker's presence (L8, G1).
        case presence(worker: String)
        /// A worker's release notice (G3).
        case released(worker: String)
        /// An area's priors shared by a worker (E1), under their ``AreaPriors/key(area:)``.
        case priors(key: String)
        case unknown
    }

    /// Runs on every message, so it reads the topic's UTF-8 bytes in place: no substrings and no string built
    /// to compare with, only the identifier it returns. (`make bench-instructions`: the version on
    /// `String.UTF8View` indices took 2,500 of the 12,000 instructions of an accepted fix.)
    public func parse(_ topic: String) -> Parsed {
        var topic = topic
        return topic.withUTF8 { parse(bytes: $0) }
    }

    private func parse(bytes: UnsafeBufferPointer<UInt8>) -> Parsed {
        let topic = TopicBytes(bytes)
        // `{rideOptionsPrefix}/request`
        if let end = topic.after(rideOptionsPrefix, "/request"),
            end == bytes.count
        {
            return .rideOptionsRequest
        }
        // `{fleetPrefix}/vehicles/{vehicleId}/position|availability|event`
        if let rest = topic.after(fleetPrefix, "/vehicles/"),
            let slash = topic.slash(from: rest)
        {
            let vehicle = topic.string(rest..<slash)
            if topic.isRest("position", from: slash + 1) { return .position(vehicle: vehicle) }
            if topic.isRest("availability", from: slash + 1) { return .availability(vehicle: vehicle) }
            if topic.isRest("event", from: slash + 1) { return .vehicleEvent(vehicle: vehicle) }
            return .unknown
        }
        // `{ridesPrefix}/{ride}/{kind}` and `{ridesPrefix}/{ride}/status/get`
        if let rest = topic.after(ridesPrefix, "/"),
            let slash = topic.slash(from: rest)
        {
            let ride = topic.string(rest..<slash)
            let tail = slash + 1
            if topic.slash(from: tail) == nil {
                if topic.isRest("status", from: tail) { return .status(ride: ride) }
                for kind in RideTopics.Control.allCases where topic.isRest(kind.rawValue, from: tail) {
                    return .control(kind, ride: ride)
                }
            } else if topic.isRest("status/get", from: tail) {
                return .statusRequest(ride: ride)
            }
            return .unknown
        }
        guard !serviceName.utf8.contains(UInt8(ascii: "/")) else { return .unknown }
        // `{serviceName}/workers/{workerId}` and `.../{workerId}/released` (the recovery marker is neither)
        if let rest = topic.after(serviceName, "/workers/") {
            guard let slash = topic.slash(from: rest) else {
                return .presence(worker: topic.string(rest..<bytes.count))
            }
            if topic.isRest("released", from: slash + 1) { return .released(worker: topic.string(rest..<slash)) }
            return .unknown
        }
        // `{serviceName}/priors/{key}`
        if let rest = topic.after(serviceName, "/priors/") {
            guard rest < bytes.count, topic.slash(from: rest) == nil else { return .unknown }
            return .priors(key: topic.string(rest..<bytes.count))
        }
        // `{serviceName}/state/{bucket}/{ride}`, the bucket the ride's own; `{serviceName}/state/{ride}` (legacy)
        if let rest = topic.after(serviceName, "/state/") {
            guard let slash = topic.slash(from: rest) else {
                return .state(ride: topic.string(rest..<bytes.count), legacy: true)
            }
            guard topic.slash(from: slash + 1) == nil else { return .unknown }
            let ride = topic.string(slash + 1..<bytes.count)
            guard let bucket = Ownership.bucket(named: Substring(topic.string(rest..<slash))),
                bucket == Ownership.bucket(of: ride)
            else { return .unknown }
            return .state(ride: ride)
        }
        return .unknown
    }
}

/// A topic's UTF-8 bytes, read in place by ``RideStatusKit/RideTopics/parse(_:)``.
private struct TopicBytes {
    let bytes: UnsafeBufferPointer<UInt8>

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The index after `part` when the bytes at `index` are `part`'s.
    func match(_ part: String, at index: Int) -> Int? {
        // A native string's bytes in place (iterating `part.utf8` cost about 40 instructions a byte).
        if let end = part.utf8.withContiguousStorageIfAvailable({ part -> Int? in
            guard bytes.count - index >= part.count else { return nil }
            for offset in 0..<part.count where bytes[index + offset] != part[offset] { return nil }
            return index + part.count
        }) {
            return end
        }
        var index = index
        for byte in part.utf8 {
            guard index < bytes.count, bytes[index] == byte else { return nil }
            index += 1
        }
        return index
    }

    /// The index after `prefix` + `separator` when the topic starts with them.
    func after(_ prefix: String, _ separator: String) -> Int? {
        match(prefix, at: 0).flatMap { match(separator, at: $0) }
    }

    /// Whether the bytes from `index` to the end are exactly `part`'s.
    func isRest(_ part: String, from index: Int) -> Bool { match(part, at: index) == bytes.count }

    /// The index of the first `/` from `index` on.
    func slash(from index: Int) -> Int? {
        var index = index
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "/") { return index }
            index += 1
        }
        return nil
    }

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}

/// A rejected input: a stable reason (3.5's codes, the kit's) and a human-readable detail. Never thrown as a crash.
public struct Rejection: Error, Equatable, Sendable {
    public var reason: DeadLetter.Reason
    public var detail: String

    public init(_ reason: DeadLetter.Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}

/// I1's rule is the kit's (``RideStatusKit/Identifier``); the domain adds its rejection.
extension Identifier {
    /// The identifier, or an `invalidIdentifier` rejection that never echoes the raw text into a topic.
    public static func validated(_ text: String, field: String) throws(Rejection) -> String {
        guard isValid(text) else {
            throw Rejection(.invalidIdentifier, "\(field) breaks I1 (1-64 of A-Z a-z 0-9 . _ : -, first alphanumeric)")
        }
        return text
    }
}

/// Empty or only white space: a "blank" name (V4, I2-level checks, the catalog). Works on Unicode scalars,
/// without bridging to NSString, since it runs on every status.
public func isBlank(_ text: String) -> Bool {
    !text.unicodeScalars.contains { !$0.properties.isWhitespace }
}
