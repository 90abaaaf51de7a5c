public import Foundation
import JWTKit
import RideStatusKit

/// Share links: a token that names one ride and an expiry, signed with Ed25519 under a key id, so
/// that dispatch signs with its private key and the workers hold only the public keys (a JWKS file,
/// `http.shareKeys`). Keys rotate by id: a new key is added to the set, links are signed with it, and the old
/// one leaves the set when its last link has expired.
///
/// The token is a JWT (RFC 7519) in JWS compact form with `alg` `EdDSA` and a `kid`, so that dispatch may sign
/// with any JWT library: `sub` is the ride (I1), `exp` the expiry, `aud` ``ShareLinks/audience``. Expiry is read
/// against the caller's clock (the worker's `WorkerTime`, ride-push's), not the library's.
public enum ShareLinks {
    /// The audience every share token carries, so that a token made with the same key for another purpose
    /// opens no ride.
    public static let audience = "ride-status/share"
    /// The longest a token may be valid from when it was signed; dispatch chooses shorter.
    public static let maximumLifetime: TimeInterval = 7 * 86_400

    /// What a token proves once verified: the ride it opens, and until when.
    public struct Grant: Sendable, Equatable {
        public var ride: String
        public var expires: Date
    }

    /// Why a token opens nothing. The raw value is the JSON error's `reason`; none echoes the token.
    public enum Refusal: String, Error, Sendable, Equatable {
        /// Not three base64url parts of JSON, or not the claims a share token has.
        case malformedToken
        /// No `kid`, or one the worker's key set does not hold (a key rotated out, a token from elsewhere).
        case unknownKey
        /// Not signed by the key its `kid` names (forged or altered), or not `EdDSA`.
        case badSignature
        /// `exp` is past on the worker's clock, or further than ``ShareLinks/maximumLifetime`` ahead.
        case expiredToken
        /// `sub` is not a ride identifier (I1), or `aud` is not ``ShareLinks/audience``.
        case invalidClaims
        /// The worker holds no share keys (`http.shareKeys`).
        case sharingOff
    }

    /// The claims of a share token.
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        var iat: IssuedAtClaim?

        /// Expiry and subject are checked by ``Verifier`` with the worker's clock; the signature by jwt-kit.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The public keys a worker verifies share tokens with.
    public final class Verifier: Sendable {
        private let keys: JWTKeyCollection
        /// The key ids of the set: a token naming another is refused before any signature check.
        public let keyIDs: Set<String>

        /// - Parameter jwks: a JSON Web Key Set of Ed25519 public keys (`kty` `OKP`, `crv` `Ed25519`), each with
        ///   a `kid`. A private part (`d`) is refused: workers only verify.
        public init(jwks: String) async throws(ShareKeyProblem) {
            let set: JWKS
            do {
                set = try JSONDecoder().decode(JWKS.self, from: Data(jwks.utf8))
            } catch {
                throw ShareKeyProblem("not a JSON Web Key Set: \(error)")
            }
            guard !set.keys.isEmpty else { throw ShareKeyProblem("the key set holds no key") }
            let keys = JWTKeyCollection()
            var ids = Set<String>()
            for key in set.keys {
                let (id, x, d) = try ShareLinks.ed25519(key)
                guard let x else { throw ShareKeyProblem("key '\(id)' has no public part (x)") }
                guard d == nil else {
                    throw ShareKeyProblem(
                        "key '\(id)' holds its private part (d): workers only verify; keep it with dispatch")
                }
                guard ids.insert(id).inserted else { throw ShareKeyProblem("key '\(id)' appears twice") }
                do {
                    await keys.add(eddsa: try EdDSA.PublicKey(x: x, curve: .ed25519), kid: JWKIdentifier(string: id))
                } catch {
                    throw ShareKeyProblem("key '\(id)': \(error)")
                }
            }
            self.keys = keys
            self.keyIDs = ids
        }

        /// The ride `token` opens at `now`, or why it opens none.
        public func verify(_ token: String, now: Date) async -> Result<Grant, Refusal> {
            // The header first: a token that names no known key, or another algorithm, is refused without a
            // signature check (jwt-kit would fall back to a default key for an unknown kid).
            guard token.utf8.count <= 4096, let header = Self.header(of: token) else {
                return .failure(.malformedToken)
            }
            guard header.alg == "EdDSA" else { return .failure(.badSignature) }
            guard let kid = header.kid, keyIDs.contains(kid) else { return .failure(.unknownKey) }
            let claims: Claims
            do {
                claims = try await keys.verify(token, as: Claims.self)
            } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
                return .failure(.badSignature)
            } catch {
                return .failure(.malformedToken)
            }
            guard Identifier.isValid(claims.sub.value), claims.aud.value.contains(ShareLinks.audience) else {
                return .failure(.invalidClaims)
            }
            guard claims.exp.value > now, claims.exp.value.timeIntervalSince(now) <= ShareLinks.maximumLifetime
            else { return .failure(.expiredToken) }
            return .success(Grant(ride: claims.sub.value, expires: claims.exp.value))
        }

        private struct Header: Decodable {
            var alg: String?
            var kid: String?
        }

        private static func header(of token: String) -> Header? {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let data = base64URLDecoded(parts[0]) else { return nil }
            return try? JSONDecoder().decode(Header.self, from: data)
        }
    }

    /// Dispatch's side: signs share tokens with an Ed25519 private key (a JWK with `d` and a `kid`).
    public struct Signer: Sendable {
        private let keys: JWTKeyCollection
        public let keyID: String

        public init(privateJWK: String) async throws(ShareKeyProblem) {
            let key: JWK
            do {
                key = try JSONDecoder().decode(JWK.self, from: Data(privateJWK.utf8))
            } catch {
                throw ShareKeyProblem("not a JSON Web Key: \(error)")
            }
            let (id, _, privatePart) = try ShareLinks.ed25519(key)
            guard let d = privatePart else { throw ShareKeyProblem("key '\(id)' has no private part (d)") }
            let keys = JWTKeyCollection()
            do {
                await keys.add(eddsa: try EdDSA.PrivateKey(d: d, curve: .ed25519), kid: JWKIdentifier(string: id))
            } catch {
                throw ShareKeyProblem("key '\(id)': \(error)")
            }
            self.keys = keys
            self.keyID = id
        }

        /// A token opening `ride` until `expires`, signed at `now`.
        public func token(ride: String, expires: Date, now: Date) async throws(ShareKeyProblem) -> String {
            guard Identifier.isValid(ride) else { throw ShareKeyProblem("'\(ride)' is not a ride identifier (I1)") }
            guard expires > now, expires.timeIntervalSince(now) <= ShareLinks.maximumLifetime else {
                throw ShareKeyProblem(
                    "a share link expires after it is made and within \(Int(ShareLinks.maximumLifetime / 86_400)) days"
                )
            }
            return try await sign(
                Claims(
                    sub: .init(value: ride), exp: .init(value: expires), aud: .init(value: [ShareLinks.audience]),
                    iat: .init(value: now)))
        }

        /// Any claims, unchecked: the tests' way to make the tokens the checks above refuse to sign.
        func sign(_ claims: Claims, header: JWTHeader = JWTHeader()) async throws(ShareKeyProblem) -> String {
            do {
                return try await keys.sign(claims, kid: JWKIdentifier(string: keyID), header: header)
            } catch {
                throw ShareKeyProblem("signing failed: \(error)")
            }
        }
    }

    /// The id and parts of an Ed25519 JSON Web Key (`kty` `OKP`, `crv` `Ed25519`, a `kid`): what the workers' key
    /// set and dispatch's signing key both are.
    static func ed25519(_ key: JWK) throws(ShareKeyProblem) -> (id: String, x: String?, d: String?) {
        guard let id = key.keyIdentifier?.string, !id.isEmpty else {
            throw ShareKeyProblem("a key has no kid: share tokens name the key that signed them")
        }
        guard key.keyType == .octetKeyPair, key.curve?.rawValue == "Ed25519" else {
            throw ShareKeyProblem("key '\(id)' is not an Ed25519 key (kty OKP, crv Ed25519)")
        }
        return (id, key.x, key.privateExponent)
    }

    /// A new key pair: the private JWK (for dispatch) and the public one (for the workers' key set).
    public static func generateKey(id: String) throws(ShareKeyProblem) -> (privateJWK: String, publicJWK: String) {
        guard Identifier.isValid(id) else { throw ShareKeyProblem("key id '\(id)' must be an identifier (I1)") }
        let key = try? EdDSA.PrivateKey(curve: .ed25519)
        guard let key, let x = key.publicKey.rawRepresentation.base64URLEncoded,
            let d = key.rawRepresentation.base64URLEncoded
        else { throw ShareKeyProblem("could not make an Ed25519 key") }
        let common =
            "\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"alg\":\"EdDSA\",\"use\":\"sig\",\"kid\":\"\(id)\",\"x\":\"\(x)\""
        return ("{\(common),\"d\":\"\(d)\"}", "{\(common)}")
    }

    static func base64URLDecoded(_ text: some StringProtocol) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

/// A share key or key set that cannot be used, with what is wrong.
public struct ShareKeyProblem: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension Data {
    fileprivate var base64URLEncoded: String? {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
