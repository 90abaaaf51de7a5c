public import Foundation
import RideStatusKit

/// Firebase Cloud Messaging's HTTP v1 API as `ride-push` uses it for Android's Live Updates: a data message per
/// state (every value a string, as FCM requires), collapsed per ride, living until the state is stale. The app
/// builds its `Notification.ProgressStyle` from the data; the `sequence` lets it drop an older state.
public enum FCM {
    public static let host = "fcm.googleapis.com"

    /// The path of the send endpoint for a Firebase project.
    public static func sendPath(project: String) -> String { "/v1/projects/\(project)/messages:send" }

    /// The JSON body of `messages:send` for `push`, and the data it carries (for tests and the docs).
    public static func body(for push: Push, now: Date) throws -> [UInt8] {
        precondition(push.device.service == .fcm, "an FCM message for an \(push.device.service) device")
        let ttl = max(0, Int((push.staleDate ?? push.dismissalDate ?? now).timeIntervalSince(now).rounded(.up)))
        let message = Message(
            token: push.device.token, data: data(for: push),
            android: Android(
                collapseKey: push.ride, priority: push.priority == .urgent ? "HIGH" : "NORMAL", ttl: "\(ttl)s"))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = Array(try encoder.encode(Envelope(message: message)))
        guard body.count <= LiveActivityPush.maximumBytes else { throw APNs.TooLarge(bytes: body.count) }
        return body
    }

    /// The data of a push: the content state's fields as strings (times in RFC 3339, as the contract writes
    /// them), absent where the state has no value.
    public static func data(for push: Push) -> [String: String] {
        let state = push.state
        var data: [String: String] = [
            "ride": push.ride,
            "event": push.event.rawValue,
            "sequence": String(push.sequence),
            "issuedAt": ContractTime.format(state.issuedAt),
            "phase": state.phase.rawValue,
            "progress": String(format: "%.3f", state.progress),
            "stale": state.stale ? "true" : "false",
        ]
        data["estimatedArrival"] = state.estimatedArrival.map(ContractTime.format)
        data["estimatedArrivalLatest"] = state.estimatedArrivalLatest.map(ContractTime.format)
        data["vehicleModel"] = state.vehicleModel
        data["registrationPlate"] = state.registrationPlate
        data["driverName"] = state.driverName
        data["ending"] = state.ending?.rawValue
        data["staleDate"] = push.staleDate.map(ContractTime.format)
        data["dismissalDate"] = push.dismissalDate.map(ContractTime.format)
        return data
    }

    /// What FCM's answer means: its status and the `errorCode` of its error body.
    public static func outcome(status: Int, body: [UInt8], retryAfter: String?) -> PushPlanner.Outcome {
        if status == 200 { return .delivered }
        let code = Self.errorCode(in: body) ?? "status \(status)"
        switch (status, code) {
        // Only what says the token is gone: a 404 without `UNREGISTERED` (a wrong project in the path) or
        // `SENDER_ID_MISMATCH` (another project's token, or a wrong project) is a setting to fix, not a reason to
        // remove every device.
        case (_, "UNREGISTERED"):
            return .unregistered
        case (401, _):
            return .credentialExpired
        case (429, _), (500, _), (503, _):
            return .retry(after: PushPlanner.retryAfter(retryAfter))
        default:
            return .refused(reason: code)
        }
    }

    /// The FCM error code of an error body (`error.details[].errorCode`), else its `error.status`.
    static func errorCode(in body: [UInt8]) -> String? {
        struct ErrorBody: Decodable {
            struct Detail: Decodable { var errorCode: String? }
            struct Inner: Decodable {
                var status: String?
                var details: [Detail]?
            }
            var error: Inner
        }
        guard let error = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)).error else { return nil }
        return error.details?.lazy.compactMap(\.errorCode).first ?? error.status
    }

    private struct Envelope: Encodable { var message: Message }
    private struct Message: Encodable {
        var token: String
        var data: [String: String]
        var android: Android
    }
    private struct Android: Encodable {
        var collapseKey: String
        var priority: String
        var ttl: String
        enum CodingKeys: String, CodingKey {
            case collapseKey = "collapse_key"
            case priority, ttl
        }
    }
}
