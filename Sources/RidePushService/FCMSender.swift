import AsyncHTTPClient
public import Foundation
import JWTKit
public import Logging
public import RidePush

/// Sends Android's Live Update data messages through FCM HTTP v1. It signs in as a service account: an RS256
/// JWT (RFC 7523) exchanged at the account's `token_uri` for an access token, kept until five minutes before it
/// expires, or until FCM answers 401.
public actor FCMSender {
    public struct Configuration: Sendable {
        /// `https://fcm.googleapis.com` (or a stand-in).
        public var baseURL: String
        /// The service account's JSON key as Google's console gives it (`client_email`, `private_key`,
        /// `token_uri`, `project_id`).
        public var serviceAccountJSON: String
        /// The Firebase project; the account's `project_id` when nil.
        public var project: String?
        public var trustRootsFile: String?

        public init(baseURL: String, serviceAccountJSON: String, project: String? = nil, trustRootsFile: String? = nil)
        {
            self.baseURL = baseURL
            self.serviceAccountJSON = serviceAccountJSON
            self.project = project
            self.trustRootsFile = trustRootsFile
        }
    }

    struct ServiceAccount: Decodable {
        var clientEmail: String
        var privateKey: String
        var tokenURI: String
        var projectID: String?
        enum CodingKeys: String, CodingKey {
            case clientEmail = "client_email"
            case privateKey = "private_key"
            case tokenURI = "token_uri"
            case projectID = "project_id"
        }
    }

    struct AssertionClaims: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A configuration that cannot be used, said plainly.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    private let configuration: Configuration
    private let account: ServiceAccount
    private let project: String
    private let client: HTTPClient
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var accessToken: (value: String, until: Date)?

    public init(configuration: Configuration, now: @escaping @Sendable () -> Date, logger: Logger) async throws {
        let account: ServiceAccount
        do {
            account = try JSONDecoder().decode(ServiceAccount.self, from: Data(configuration.serviceAccountJSON.utf8))
        } catch {
            throw Problem(description: "the FCM service account is not a service account's JSON key: \(error)")
        }
        guard let project = configuration.project ?? account.projectID else {
            throw Problem(description: "no Firebase project: set push.fcm.project, or use a key with project_id")
        }
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: account.privateKey), digestAlgorithm: .sha256)
        self.client = .forPushService(trustRootsFile: configuration.trustRootsFile)
        self.configuration = configuration
        self.account = account
        self.project = project
        self.keys = keys
        self.now = now
        self.logger = logger
    }

    public func send(_ push: Push) async -> PushPlanner.Outcome {
        do {
            let body = try FCM.body(for: push, now: now())
            let answer = try await client.post(
                url: configuration.baseURL + FCM.sendPath(project: project),
                headers: [
                    ("authorization", "Bearer \(try await token())"),
                    ("content-type", "application/json; charset=utf-8"),
                ], body: body)
            return FCM.outcome(status: answer.status, body: answer.body, retryAfter: answer.retryAfter)
        } catch let error as APNs.TooLarge {
            return .refused(reason: "message too large (\(error.bytes) bytes)")
        } catch {
            logger.debug("FCM request failed", metadata: ["push.device": "\(push.device)", "error": "\(error)"])
            return .retry(after: nil)
        }
    }

    /// FCM refused the access token: the next send signs in again.
    public func accessTokenRefused() { accessToken = nil }

    func token() async throws -> String {
        let now = self.now()
        if let accessToken, accessToken.until > now { return accessToken.value }
        let issued = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let assertion = try await keys.sign(
            AssertionClaims(
                iss: .init(value: account.clientEmail), scope: "https://www.googleapis.com/auth/firebase.messaging",
                aud: .init(value: [account.tokenURI]), iat: .init(value: issued),
                exp: .init(value: issued.addingTimeInterval(3600))))
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let answer = try await client.post(
            url: account.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")],
            body: Array(form.utf8))
        struct Grant: Decodable {
            var accessToken: String
            var expiresIn: Double
            enum CodingKeys: String, CodingKey {
                case accessToken = "access_token"
                case expiresIn = "expires_in"
            }
        }
        guard answer.status == 200, let grant = try? JSONDecoder().decode(Grant.self, from: Data(answer.body)) else {
            throw Problem(description: "the token endpoint answered \(answer.status)")
        }
        accessToken = (grant.accessToken, now.addingTimeInterval(max(60, grant.expiresIn - 300)))
        return grant.accessToken
    }

    public func shutdown() async throws { try await client.shutdown() }
}
