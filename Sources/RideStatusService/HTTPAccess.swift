import Foundation
import RideAccess

/// Who may read what over HTTP, decided from a request's bearer token or a share link's path, with
/// no HTTP types, so that it is tested alone:
/// - a share token (``ShareLinks``) opens its one ride, on any worker, until it expires;
/// - the operator token (`http.operatorTokenFile`) opens everything;
/// - no token opens everything only while the server listens on loopback alone and no operator token is set (as
///   before share links); served beyond loopback, or with an operator token (a reverse proxy on the same host
///   reaches the worker on loopback), every read needs a token. `/metrics` and the probes are never behind one.
struct HTTPAccess: Sendable {
    /// What a request may see.
    enum Scope: Sendable, Equatable {
        case everything
        /// One ride, until the link expires.
        case ride(String, until: Date)
    }

    /// A request refused: its status, and the JSON error's `reason` and `detail` (the OpenAPI `Problem`).
    struct Refusal: Error, Sendable, Equatable {
        var status: Int
        var reason: String
        var detail: String
        /// RFC 6750's `error` in the challenge of a 401: `invalid_request` for a malformed header,
        /// `invalid_token` for a token that opens nothing, none when no token came.
        var bearerError: String? = nil

        static let otherRide = Refusal(
            status: 403, reason: "otherRide", detail: "this share token opens another ride")
        static let fleetWide = Refusal(
            status: 403, reason: "fleetWide", detail: "a share token opens its ride alone, not the fleet")
    }

    /// Whether every read needs a token: the server listens beyond loopback (`metrics.host`), or an operator
    /// token is set.
    var tokenRequired: Bool
    /// The operator token's bytes, when one is configured.
    var operatorToken: [UInt8]?
    /// The share keys, when share links are on (`http.shareKeys`).
    var verifier: ShareLinks.Verifier?
    var time: WorkerTime

    /// A loopback address as `metrics.host` names it: `localhost`, `::1` or an IPv4 literal in 127.0.0.0/8 (not a
    /// name that merely starts with "127.").
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// The scope of a request with this `Authorization` header (or none).
    func scope(authorization: String?) async -> Result<Scope, Refusal> {
        guard let authorization else {
            return tokenRequired
                ? .failure(
                    Refusal(
                        status: 401, reason: "unauthorized",
                        detail:
                            "this worker needs a token: send Authorization: Bearer with the operator token or a share token"
                    ))
                : .success(.everything)
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            return .failure(
                Refusal(
                    status: 401, reason: "malformedToken", detail: "Authorization takes Bearer and a token",
                    bearerError: "invalid_request"))
        }
        let token = String(parts[1]).trimmingCharacters(in: .whitespaces)
        if let operatorToken, Self.constantTimeEqual(Array(token.utf8), operatorToken) { return .success(.everything) }
        return await scope(shareToken: token)
    }

    /// The scope of a share link's token (`/share/{token}`, or a bearer token that is not the operator's).
    func scope(shareToken token: String) async -> Result<Scope, Refusal> {
        guard let verifier else {
            return .failure(
                Refusal(
                    status: 401, reason: ShareLinks.Refusal.sharingOff.rawValue,
                    detail: "share links are off on this worker (http.shareKeys), and the token is not the operator's",
                    bearerError: "invalid_token"))
        }
        switch await verifier.verify(token, now: time.now) {
        case .success(let grant): return .success(.ride(grant.ride, until: grant.expires))
        case .failure(let refusal):
            return .failure(
                Refusal(status: 401, reason: refusal.rawValue, detail: refusal.detail, bearerError: "invalid_token"))
        }
    }

    /// Compares without stopping at the first difference, so that the time taken says nothing of the token.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

extension ShareLinks.Refusal {
    /// The JSON error's `detail`; never the token.
    var detail: String {
        switch self {
        case .malformedToken: "not a share token (a JWT with alg EdDSA, kid, sub, exp and aud)"
        case .unknownKey: "the token names no key this worker holds (http.shareKeys): a rotated key, or none"
        case .badSignature: "the token's signature does not verify: forged or altered"
        case .expiredToken:
            "the share link has expired (or claims more than \(Int(ShareLinks.maximumLifetime / 86_400)) days)"
        case .invalidClaims: "the token names no ride (I1) or is not a share token (aud)"
        case .sharingOff: "share links are off on this worker (http.shareKeys)"
        }
    }
}
