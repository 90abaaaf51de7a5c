import Foundation

/// The topic names of the contract (section 2), under configurable prefixes. The one source of truth for
/// every topic the worker, the simulator and the live view use.
public struct Topics: Sendable, Equatable {
    public var fleetPrefix: String
    public var ridesPrefix: String
    public var serviceName: String
    public var rideOptionsPrefix: String

    public init(
        fleetPrefix: String = "fleet", ridesPrefix: String = "rides", serviceName: String = "ridestatus",
        rideOptionsPrefix: String = "ride-options"
    ) {
        self.fleetPrefix = fleetPrefix
        self.ridesPrefix = ridesPrefix
        self.serviceName = serviceName
        self.rideOptionsPrefix = rideOptionsPrefix
    }

    public func position(vehicle: String) -> String { "\(fleetPrefix)/vehicles/\(vehicle)/position" }
    public func control(_ kind: ControlKind, ride: String) -> String { "\(ridesPrefix)/\(ride)/\(kind.rawValue)" }
    public func status(ride: String) -> String { "\(ridesPrefix)/\(ride)/status" }
    public func statusRequest(ride: String) -> String { "\(ridesPrefix)/\(ride)/status/get" }
    public var rideOptionsRequest: String { "\(rideOptionsPrefix)/request" }
    public var deadLetter: String { "\(serviceName)/deadletter" }
    public func presence(worker: String) -> String { "\(serviceName)/workers/\(worker)" }
    /// Private, retained: the durable state of one ride (L5).
    public func state(ride: String) -> String { "\(serviceName)/state/\(ride)" }
    public func availability(vehicle: String) -> String { "\(fleetPrefix)/vehicles/\(vehicle)/availability" }

    /// The wildcard subscriptions of the worker.
    public var controlFilters: [String] { ControlKind.allCases.map { "\(ridesPrefix)/+/\($0.rawValue)" } }
    public var statusRequestFilter: String { "\(ridesPrefix)/+/status/get" }
    public var statusFilter: String { "\(ridesPrefix)/+/status" }
    public var stateFilter: String { "\(serviceName)/state/+" }
    /// Every vehicle's availability (3.4): retained, so a new subscription sees the whole available fleet.
    public var availabilityFilter: String { "\(fleetPrefix)/vehicles/+/availability" }

    /// What a topic is, as far as the worker reads it.
    public enum Parsed: Equatable, Sendable {
        case position(vehicle: String)
        case availability(vehicle: String)
        case control(ControlKind, ride: String)
        case statusRequest(ride: String)
        case rideOptionsRequest
        case state(ride: String)
        case unknown
    }

    public func parse(_ topic: String) -> Parsed {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        if topic == rideOptionsRequest { return .rideOptionsRequest }
        let fleet = fleetPrefix.split(separator: "/").count
        let rides = ridesPrefix.split(separator: "/").count
        if levels.count == fleet + 3, topic.hasPrefix(fleetPrefix + "/vehicles/"), levels.last == "position" {
            return .position(vehicle: String(levels[fleet + 1]))
        }
        if levels.count == fleet + 3, topic.hasPrefix(fleetPrefix + "/vehicles/"), levels.last == "availability" {
            return .availability(vehicle: String(levels[fleet + 1]))
        }
        if topic.hasPrefix(ridesPrefix + "/") {
            if levels.count == rides + 2, let kind = ControlKind(rawValue: String(levels[rides + 1])) {
                return .control(kind, ride: String(levels[rides]))
            }
            if levels.count == rides + 3, levels[rides + 1] == "status", levels[rides + 2] == "get" {
                return .statusRequest(ride: String(levels[rides]))
            }
        }
        if levels.count == 3, topic.hasPrefix(serviceName + "/state/") { return .state(ride: String(levels[2])) }
        return .unknown
    }
}

/// The control topics a dispatch system writes to.
public enum ControlKind: String, CaseIterable, Sendable {
    case start, assign, event, cancel, stop
}

/// The stable reason codes of section 3.5.
public enum RejectionReason: String, CaseIterable, Sendable, Codable {
    case payloadTooLarge, malformedJSON, missingField, invalidField, invalidIdentifier, identifierMismatch
    case invalidCoordinates, nullIsland, timestampInFuture, timestampTooOld, impossibleSpeed, poorAccuracy
    case unknownRide, eventNotAllowed, invalidBooking

    /// The contract rule a rejection of this kind enforces, for log lines.
    public var rule: String {
        switch self {
        case .payloadTooLarge, .malformedJSON: return "I2"
        case .invalidIdentifier: return "I1"
        case .identifierMismatch: return "I3"
        case .invalidCoordinates, .nullIsland: return "T1"
        case .timestampInFuture, .timestampTooOld: return "T2"
        case .impossibleSpeed: return "T4"
        case .poorAccuracy: return "T5"
        case .eventNotAllowed: return "P8"
        case .missingField, .invalidField, .unknownRide, .invalidBooking: return "3.5"
        }
    }
}

/// A rejected input: a stable reason and a human-readable detail. Never thrown as a crash.
public struct Rejection: Error, Equatable, Sendable {
    public var reason: RejectionReason
    public var detail: String

    public init(_ reason: RejectionReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}

/// Identifiers (`rideIdentifier`, `vehicleId`): 1 to 64 of `A-Z a-z 0-9 . _ : -`, the first alphanumeric (I1).
public enum Identifier {
    public static func isValid(_ text: some StringProtocol) -> Bool {
        let utf8 = text.utf8
        guard (1...64).contains(utf8.count), let first = utf8.first, isAlphanumeric(first) else { return false }
        return utf8.allSatisfy { isAlphanumeric($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x3A || $0 == 0x2D }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

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
