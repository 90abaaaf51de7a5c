import AsyncHTTPClient
public import Foundation
import JWTKit
public import Logging
public import RidePush

/// Sends Live Activity pushes to APNs over HTTP/2 (async-http-client negotiates it by ALPN) with token
/// authentication: an ES256 JWT naming the team, signed with the key APNs gave for it, made again as
/// ``ProviderTokenPolicy`` says.
public actor APNsSender {
    public struct Configuration: Sendable {
        /// `https://api.push.apple.com` (or `api.sandbox.push.apple.com`, or a stand-in in tests).
        public var baseURL: String
        /// The app's bundle identifier: the topic is `<bundle>.push-type.liveactivity`.
        public var bundleIdentifier: String
        /// The team (the JWT's `iss`) and the key's id (its `kid`).
        public var teamIdentifier: String
        public var keyIdentifier: String
        /// The signing key as Apple hands it out (a `.p8` file: PEM, PKCS #8, P-256).
        public var privateKeyPEM: String
        /// A PEM file of the certificates to trust instead of the system's (a stand-in's); nil for APNs itself.
        public var trustRootsFile: String?
        public var renewalAge: TimeInterval

        public init(
            baseURL: String, bundleIdentifier: String, teamIdentifier: String, keyIdentifier: String,
            privateKeyPEM: String, trustRootsFile: String? = nil, renewalAge: TimeInterval = 40 * 60
        ) {
            self.baseURL = baseURL
            self.bundleIdentifier = bundleIdentifier
            self.teamIdentifier = teamIdentifier
            self.keyIdentifier = keyIdentifier
            self.privateKeyPEM = privateKeyPEM
            self.trustRootsFile = trustRootsFile
            self.renewalAge = renewalAge
        }
    }

    /// The claims of a provider token: the team and when it was made, in whole seconds.
    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private let configuration: Configuration
    private let client: HTTPClient
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var policy: ProviderTokenPolicy
    private var token: String?
    /// The token being made: concurrent sends wait for it rather than each signing one (APNs answers a burst of
    /// new tokens with `TooManyProviderTokenUpdates`).
    private var signing: Task<String, any Error>?

    /// - Throws: when the key is not a P-256 private key in PEM, or the trust roots cannot be read.
    public init(configuration: Configuration, now: @escaping @Sendable () -> Date, logger: Logger) async throws {
        let key = try ES256PrivateKey(pem: configuration.privateKeyPEM)
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: configuration.keyIdentifier))
        self.client = .forPushService(trustRootsFile: configuration.trustRootsFile)
        self.configuration = configuration
        self.keys = keys
        self.now = now
        self.logger = logger
        self.policy = ProviderTokenPolicy(renewalAge: configuration.renewalAge)
    }

    /// Sends `push` and says what became of it. A connection failure or a timeout is worth a retry.
    public func send(_ push: Push) async -> PushPlanner.Outcome {
        do {
            let request = try APNs.request(
                for: push, bundleIdentifier: configuration.bundleIdentifier, providerToken: try await providerToken())
            let answer = try await client.post(
                url: configuration.baseURL + request.path, headers: request.headers, body: request.body)
            return APNs.outcome(status: answer.status, body: answer.body, retryAfter: answer.retryAfter)
        } catch let error as APNs.TooLarge {
            return .refused(reason: "PayloadTooLarge (\(error.bytes) bytes)")
        } catch {
            logger.debug("APNs request failed", metadata: ["push.device": "\(push.device)", "error": "\(error)"])
            return .retry(after: nil)
        }
    }

    /// APNs called the provider token expired: make a new one if APNs will take it (see
    /// ``ProviderTokenPolicy/expired(now:)``). Returns whether the clock of this host or APNs's is off.
    @discardableResult
    public func providerTokenExpired() -> Bool {
        if policy.expired(now: now()) { token = nil }
        return policy.expiredEarly
    }

    /// The provider token, made again once it reached its renewal age.
    func providerToken() async throws -> String {
        let now = self.now()
        if let token, !policy.needsNewToken(now: now) { return token }
        if let signing { return try await signing.value }
        // Whole seconds: APNs reads `iat` as an integer.
        let issued = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = ProviderClaims(iss: .init(value: configuration.teamIdentifier), iat: .init(value: issued))
        let keys = self.keys
        let kid = JWKIdentifier(string: configuration.keyIdentifier)
        let task = Task { try await keys.sign(claims, kid: kid) }
        signing = task
        defer { signing = nil }
        let made = try await task.value
        policy.made(at: now)
        token = made
        return made
    }

    public func shutdown() async throws { try await client.shutdown() }
}
