import Foundation
import RidePush
import RideStatusKit
import Testing

@Suite("APNs and FCM requests, their answers, and the provider token's age")
struct ServiceRequestTests {
    func push(device: PushDevice, event: LiveActivityPush.Event = .update, priority: Push.Priority = .urgent) -> Push {
        var maker = StatusMaker()
        let status = maker.next(.approachingPickup, at: 0, arrival: 240)
        return Push(
            ride: maker.ride, device: device, event: event, priority: priority,
            state: RideActivityAttributes.ContentState(status: status), sequence: status.sequence,
            timestamp: Int(status.issuedAt.timeIntervalSince1970), staleDate: status.issuedAt.addingTimeInterval(120),
            dismissalDate: event == .end ? status.issuedAt.addingTimeInterval(900) : nil, relevanceScore: 80)
    }

    @Test("APNs: POST /3/device/<token>, liveactivity headers, the priority, and the aps ActivityKit reads")
    func apnsRequest() throws {
        let push = self.push(device: phone, priority: .routine)
        let request = try APNs.request(for: push, bundleIdentifier: "com.example.rides", providerToken: "jwt")
        #expect(request.path == "/3/device/\(phone.token)")
        #expect(request.header("authorization") == "bearer jwt")
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-topic") == "com.example.rides.push-type.liveactivity")
        #expect(request.header("apns-priority") == "5")
        #expect(request.header("apns-expiration") == String(Int(push.staleDate!.timeIntervalSince1970)))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        let aps = try #require(body["aps"] as? [String: Any])
        #expect(aps["event"] as? String == "update" && aps["timestamp"] as? Int == push.timestamp)
        #expect(aps["stale-date"] as? Int == Int(push.staleDate!.timeIntervalSince1970))
        #expect(aps["relevance-score"] as? Double == 80 && aps["dismissal-date"] == nil)
        // ActivityKit decodes the content state with JSONDecoder's defaults (dates since 2001).
        let content = try JSONSerialization.data(withJSONObject: try #require(aps["content-state"]))
        #expect(try JSONDecoder().decode(RideActivityAttributes.ContentState.self, from: content) == push.state)

        let end = try APNs.request(
            for: self.push(device: phone, event: .end), bundleIdentifier: "com.example.rides", providerToken: "jwt")
        let endAPS = try #require(
            (try JSONSerialization.jsonObject(with: Data(end.body)) as? [String: Any])?["aps"] as? [String: Any])
        #expect(endAPS["event"] as? String == "end" && endAPS["dismissal-date"] is Int)
        #expect(end.header("apns-priority") == "10")
    }

    @Test("APNs's answers: 410 and BadDeviceToken unregister, 429/500/503 retry, ExpiredProviderToken renews")
    func apnsOutcomes() {
        func body(_ reason: String) -> [UInt8] { Array(#"{"reason":"\#(reason)"}"#.utf8) }
        #expect(APNs.outcome(status: 200, body: [], retryAfter: nil) == .delivered)
        #expect(APNs.outcome(status: 410, body: body("Unregistered"), retryAfter: nil) == .unregistered)
        #expect(APNs.outcome(status: 400, body: body("BadDeviceToken"), retryAfter: nil) == .unregistered)
        #expect(APNs.outcome(status: 403, body: body("ExpiredProviderToken"), retryAfter: nil) == .credentialExpired)
        #expect(APNs.outcome(status: 429, body: body("TooManyRequests"), retryAfter: "7") == .retry(after: 7))
        #expect(APNs.outcome(status: 503, body: body("ServiceUnavailable"), retryAfter: nil) == .retry(after: nil))
        #expect(APNs.outcome(status: 500, body: [], retryAfter: nil) == .retry(after: nil))
        #expect(
            APNs.outcome(status: 400, body: body("BadPriority"), retryAfter: nil) == .refused(reason: "BadPriority"))
        // A wrong bundle identifier is a setting to fix, not every device gone.
        #expect(
            APNs.outcome(status: 400, body: body("DeviceTokenNotForTopic"), retryAfter: nil)
                == .refused(reason: "DeviceTokenNotForTopic"))
        #expect(APNs.outcome(status: 429, body: body("TooManyRequests"), retryAfter: "inf") == .retry(after: nil))
        #expect(APNs.outcome(status: 429, body: body("TooManyRequests"), retryAfter: "99999") == .retry(after: 3600))
        #expect(APNs.outcome(status: 413, body: [0xFF], retryAfter: nil) == .refused(reason: "status 413"))
        #expect(
            APNs.outcome(status: 403, body: body("InvalidProviderToken"), retryAfter: nil)
                == .refused(reason: "InvalidProviderToken"))
    }

    @Test("The largest state the schemas allow stays under APNs's and FCM's 4 KB")
    func largest() throws {
        var maker = StatusMaker()
        var status = maker.next(.ongoing, at: 0)
        let long = String(repeating: "\u{1F697}", count: 1000)
        status.vehicle.manufacturer = long
        status.vehicle.model = long
        status.vehicle.registrationPlate = long
        status.driver = Driver(displayName: long)
        status.stale = true
        status.estimatedDropOffDateLatest = status.issuedAt.addingTimeInterval(900)
        var big = self.push(device: phone, event: .end)
        big.state = RideActivityAttributes.ContentState(status: status)
        big.ride = String(repeating: "r", count: 64)
        big.sequence = Int.max
        let apns = try APNs.request(for: big, bundleIdentifier: "com.example.rides", providerToken: "jwt")
        #expect(apns.body.count < 4096, "\(apns.body.count) bytes")
        big.device = android
        let fcm = try FCM.body(for: big, now: status.issuedAt)
        #expect(fcm.count < 4096, "\(fcm.count) bytes")
        #expect(big.state.driverName?.utf8.count ?? 0 <= RideActivityAttributes.ContentState.textLimit)
    }

    @Test("FCM: a data message of strings, collapsed per ride, living until stale, HIGH only when urgent")
    func fcmMessage() throws {
        let push = self.push(device: android, priority: .routine)
        let body = try FCM.body(for: push, now: push.state.issuedAt)
        let message = try #require(
            (try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["token"] as? String == android.token)
        let block = try #require(message["android"] as? [String: Any])
        #expect(block["collapse_key"] as? String == push.ride && block["priority"] as? String == "NORMAL")
        #expect(block["ttl"] as? String == "120s")
        let data = try #require(message["data"] as? [String: String], "every value a string")
        #expect(data["sequence"] == String(push.sequence) && data["phase"] == "approachingPickup")
        #expect(data["estimatedArrival"].flatMap(ContractTime.parse) == push.state.estimatedArrival)
        #expect(data["event"] == "update" && data["ending"] == nil)
        #expect(FCM.sendPath(project: "rides-1") == "/v1/projects/rides-1/messages:send")
    }

    @Test("FCM's answers: UNREGISTERED unregisters, 401 renews the access token, 429/500/503 retry")
    func fcmOutcomes() {
        func body(_ status: String, _ code: String?) -> [UInt8] {
            let details =
                code.map {
                    #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"#
                } ?? ""
            return Array(#"{"error":{"code":0,"message":"m","status":"\#(status)"\#(details)}}"#.utf8)
        }
        #expect(FCM.outcome(status: 200, body: [], retryAfter: nil) == .delivered)
        #expect(FCM.outcome(status: 404, body: body("NOT_FOUND", "UNREGISTERED"), retryAfter: nil) == .unregistered)
        // A wrong project: a 404 without UNREGISTERED, or a sender mismatch, removes nobody.
        #expect(
            FCM.outcome(status: 404, body: body("NOT_FOUND", nil), retryAfter: nil) == .refused(reason: "NOT_FOUND"))
        #expect(
            FCM.outcome(status: 403, body: body("PERMISSION_DENIED", "SENDER_ID_MISMATCH"), retryAfter: nil)
                == .refused(reason: "SENDER_ID_MISMATCH"))
        #expect(
            FCM.outcome(status: 400, body: body("INVALID_ARGUMENT", "UNREGISTERED"), retryAfter: nil) == .unregistered)
        #expect(FCM.outcome(status: 401, body: body("UNAUTHENTICATED", nil), retryAfter: nil) == .credentialExpired)
        #expect(
            FCM.outcome(status: 429, body: body("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "3")
                == .retry(after: 3))
        #expect(FCM.outcome(status: 503, body: [], retryAfter: nil) == .retry(after: nil))
        #expect(
            FCM.outcome(status: 400, body: body("INVALID_ARGUMENT", "INVALID_ARGUMENT"), retryAfter: nil)
                == .refused(reason: "INVALID_ARGUMENT"))
    }

    @Test("The provider token: renewed at 40 minutes, never within 20 (APNs refuses), never past 60")
    func providerToken() {
        let t0 = Date(timeIntervalSince1970: 1_795_340_000)
        var policy = ProviderTokenPolicy()
        #expect(policy.needsNewToken(now: t0))
        policy.made(at: t0)
        #expect(!policy.needsNewToken(now: t0 + 39 * 60) && policy.needsNewToken(now: t0 + 40 * 60))
        // Called expired after 10 minutes: a clock is off; a renewal now would be refused too.
        #expect(!policy.expired(now: t0 + 600) && policy.expiredEarly)
        #expect(policy.expired(now: t0 + 20 * 60) && policy.needsNewToken(now: t0 + 20 * 60))
        policy.made(at: t0 + 20 * 60)
        #expect(!policy.expiredEarly)
        #expect(ProviderTokenPolicy(renewalAge: 5 * 60).renewalAge == 25 * 60)
        #expect(ProviderTokenPolicy(renewalAge: 2 * 3600).renewalAge == 55 * 60)
    }
}
