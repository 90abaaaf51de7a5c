import Foundation
import RideStatusKit

/// Apple Push Notification service's HTTP/2 API as `ride-push` uses it for Live Activities: the request for a
/// push, and what an answer means. Pure: the client in the service sends the bytes and reports the answer.
public enum APNs {
    /// APNs's production and development hosts (HTTP/2 over TLS, port 443).
    public static let productionHost = "api.push.apple.com"
    public static let developmentHost = "api.sandbox.push.apple.com"

    /// One request: `POST` to ``path`` with ``headers`` and ``body``.
    public struct Request: Sendable, Equatable {
        public var path: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public static func == (a: Request, b: Request) -> Bool {
            a.path == b.path && a.body == b.body && a.headers.elementsEqual(b.headers) { $0 == $1 }
        }

        /// The value of the header `name`, if set.
        public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    /// The request for `push` to a Live Activity of the app `bundleIdentifier`.
    /// - Parameters:
    ///   - providerToken: the ES256 JWT of ``ProviderToken``, sent as `authorization: bearer ...`.
    /// - Throws: ``LiveActivityPush``'s encoding error, or ``TooLarge`` for a payload over 4 KB (the content
    ///   state's texts are cut so that none is; the check stays as the last line).
    public static func request(for push: Push, bundleIdentifier: String, providerToken: String) throws -> Request {
        precondition(push.device.service == .apns, "an APNs request for an \(push.device.service) device")
        let body = try LiveActivityPush.payload(
            push.state, event: push.event, timestamp: Date(timeIntervalSince1970: Double(push.timestamp)),
            staleDate: push.staleDate, relevanceScore: push.relevanceScore, dismissalDate: push.dismissalDate)
        guard body.count <= LiveActivityPush.maximumBytes else { throw TooLarge(bytes: body.count) }
        var headers: [(name: String, value: String)] = [
            ("authorization", "bearer \(providerToken)"),
            ("apns-push-type", "liveactivity"),
            ("apns-topic", "\(bundleIdentifier).push-type.liveactivity"),
            ("apns-priority", String(push.priority.rawValue)),
        ]
        // A state that cannot reach the device before it is stale is not worth delivering late.
        if let staleDate = push.staleDate {
            headers.append(("apns-expiration", String(Int(staleDate.timeIntervalSince1970.rounded(.down)))))
        }
        return Request(path: "/3/device/\(push.device.token)", headers: headers, body: body)
    }

    /// A payload over APNs's 4 KB.
    public struct TooLarge: Error, Sendable, Equatable {
        public var bytes: Int
    }

    /// What APNs's answer means for the push: its status, the `reason` of its JSON body, and `retry-after`.
    public static func outcome(status: Int, body: [UInt8], retryAfter: String?) -> PushPlanner.Outcome {
        if status == 200 { return .delivered }
        let reason = Self.reason(in: body) ?? "status \(status)"
        switch (status, reason) {
        // Only what says the token itself is gone: `DeviceTokenNotForTopic` or `BadTopic` mean a wrong bundle
        // identifier in ride-push's settings, and must not remove every device on its first push.
        case (410, _), (400, "BadDeviceToken"):
            return .unregistered
        case (403, "ExpiredProviderToken"):
            return .credentialExpired
        case (429, _), (500, _), (503, _):
            return .retry(after: PushPlanner.retryAfter(retryAfter))
        default:
            return .refused(reason: reason)
        }
    }

    /// The `reason` of an APNs error body (`{"reason":"BadDeviceToken"}`), if it has one.
    static func reason(in body: [UInt8]) -> String? {
        struct ErrorBody: Decodable { var reason: String }
        return try? JSONDecoder().decode(ErrorBody.self, from: Data(body)).reason
    }
}
