/// The contract's numbered rules (`docs/PROTOCOL.md`, section 4), as values rather than strings: a log
/// line, a dead letter's detail and a test name all cite the same ids. Where each rule's code lives:
///
/// The ids and the reason codes are RideStatusKit's, the contract's one vocabulary; the code that enforces each rule:
///
/// | Rules | Folder of `Sources/RideDomain` |
/// |---|---|
/// | I1-I3, section 3 payloads, 3.5 dead letters | `Inputs/` (decoding), `Contract/` (topics); I1's rule and the reason codes: `Sources/RideStatusKit/` |
/// | T1-T7 | `Telemetry/` |
/// | P1-P8 | `Phases/` (`Ride.swift`), applied by `Lifecycle/RideEngine.swift` |
/// | E1, E2 | `Estimates/` |
/// | C1-C6 | `Cadence/` (scheduler), `Status/Ride+Status.swift` (sequence, issuedAt, stale) |
/// | V1-V7 | `Status/` |
/// | L1-L8 | `Lifecycle/` (engine), `Storage/` (durable state, L5) |
/// | 3.4 quotes | `Quotes/` |
/// | A1, A2 | `Contract/Contract.swift` (reply topics), `Storage/Ride+Restore.swift` |
/// | A3 | `Inputs/` (the vehicle's event decoded), `Lifecycle/RideEngine+Inputs.swift` (the assigned vehicle checked) |
/// | G1-G6 | `Sources/WorkerGroup/` (ownership, membership, handover); the service carries them out |
/// | A4 | `Sources/RideAccess/AllowedHosts.swift` (the HTTP side), `scripts/broker_roles.py` (client ids bound to accounts) |
///
/// The service, the MQTT side and the HTTP side are in `Sources/RideStatusService/`; `docs/architecture.md`
/// follows one fix through them. `RuleTableTests` keeps this table, the contract's ids and the tests' citations
/// in step.
// swift-format-ignore: AlwaysUseLowerCamelCase
public enum Rule: String, CaseIterable, Sendable, CustomStringConvertible {
    case I1, I2, I3
    case T1, T2, T3, T4, T5, T6, T7
    case P1, P2, P3, P4, P5, P6, P7, P8
    case E1, E2
    case C1, C2, C3, C4, C5, C6
    case V1, V2, V3, V4, V5, V6, V7
    case L1, L2, L3, L4, L5, L6, L7, L8
    case G1, G2, G3, G4, G5, G6
    case A1, A2, A3, A4
    /// Section 3.5: a payload that breaks no numbered rule but is not what its topic takes.
    case deadLetters = "3.5"

    public var description: String { rawValue }
}

extension DeadLetter.Reason {
    /// The contract rule a rejection of this kind enforces, for log lines.
    public var rule: Rule {
        switch self {
        case .payloadTooLarge, .malformedJSON: return .I2
        case .invalidIdentifier: return .I1
        case .identifierMismatch: return .I3
        case .invalidCoordinates, .nullIsland: return .T1
        case .timestampInFuture, .timestampTooOld: return .T2
        case .impossibleSpeed: return .T4
        case .poorAccuracy: return .T5
        case .eventNotAllowed: return .P8
        case .notAssignedVehicle: return .A3
        case .missingField, .invalidField, .unknownRide, .invalidBooking: return .deadLetters
        }
    }
}
