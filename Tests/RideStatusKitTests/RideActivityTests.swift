import Foundation
import RideStatusKit
import Testing

/// The lock screen's state from the statuses the worker publishes: mapped, encoded as ActivityKit
/// reads it, and under APNs's 4 KB whatever the status holds.
@Suite("Live Activities: the lock screen's state from a status")
struct RideActivityTests {
    static func golden() throws -> [RideStatus] {
        let data = try Data(
            contentsOf: RideStatusKitTests.root.appendingPathComponent("Tests/RideDomainTests/Golden/full-ride.json"))
        let array = try #require(try JSONSerialization.jsonObject(with: data) as? [Any])
        return try array.map {
            try JSONDecoder.rideStatus.decode(RideStatus.self, from: try JSONSerialization.data(withJSONObject: $0))
        }
    }

    @Test(
        "P1-P5, E1, C3: each golden status maps to its phase, the next arrival, the crew, and progress that only grows")
    func mapping() throws {
        let statuses = try Self.golden()
        var last = -1.0
        for status in statuses {
            let state = RideActivityAttributes.ContentState(status: status)
            #expect(state.phase == status.phase && state.sequence == status.sequence && state.stale == status.stale)
            switch status.phase {
            case .received, .confirmed, .approachingPickup:
                #expect(state.estimatedArrival == (status.estimatedPickupDate ?? status.rideOption.estimatedPickupDate))
            case .pickup, .ongoing:
                #expect(state.estimatedArrival == status.estimatedDropOffDate)
            case .completed:
                #expect(state.estimatedArrival == nil && state.ending == .completed && state.progress == 1)
            }
            #expect(state.driverName == status.driver?.displayName)
            #expect(state.registrationPlate == status.vehicle.registrationPlate)
            #expect((0...1).contains(state.progress))
            #expect(state.progress >= last, "progress \(state.progress) after \(last) at \(status.phase)")
            last = state.progress
            // Issue 31's range: the latest time of the arrival shown, never before it.
            switch status.phase {
            case .received, .confirmed, .approachingPickup:
                #expect(state.estimatedArrivalLatest == status.estimatedPickupDateLatest)
            case .pickup, .ongoing:
                #expect(state.estimatedArrivalLatest == status.estimatedDropOffDateLatest)
            case .completed:
                #expect(state.estimatedArrivalLatest == nil)
            }
            if let latest = state.estimatedArrivalLatest, let arrival = state.estimatedArrival {
                #expect(latest >= arrival)
            }
        }
        let first = try #require(statuses.first)
        let attributes = RideActivityAttributes(status: first)
        #expect(attributes.rideIdentifier == first.rideIdentifier)
        #expect(attributes.rideOption == (first.rideOption.localizedName ?? first.rideOption.name))
    }

    @Test("V3: a canceled ride or a missed pickup ends the activity with its ending and no arrival")
    func endings() throws {
        var status = try #require(try Self.golden().last)
        status.completionStatus?.completed = false
        status.completionStatus?.canceled = true
        var state = RideActivityAttributes.ContentState(status: status)
        #expect(state.ending == .canceled && state.estimatedArrival == nil)
        status.completionStatus?.canceled = false
        status.completionStatus?.missedPickup = true
        state = RideActivityAttributes.ContentState(status: status)
        #expect(state.ending == .missedPickup)
    }

    @Test("content-state's dates are what ActivityKit decodes (JSONDecoder's default, seconds since 2001)")
    func dates() throws {
        let status = try #require(try Self.golden().first { $0.phase == .approachingPickup })
        let state = RideActivityAttributes.ContentState(status: status)
        let payload = try LiveActivityPush.payload(
            state, event: .update, timestamp: status.issuedAt, staleDate: status.issuedAt.addingTimeInterval(60),
            relevanceScore: 50)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        let aps = try #require(json["aps"] as? [String: Any])
        #expect(aps["timestamp"] as? Int == Int(status.issuedAt.timeIntervalSince1970))
        #expect(aps["event"] as? String == "update")
        let content = try #require(aps["content-state"] as? [String: Any])
        #expect(content["issuedAt"] as? Double == status.issuedAt.timeIntervalSinceReferenceDate)
        // ActivityKit's decoder is a default JSONDecoder: the state comes back equal.
        let decoded = try JSONDecoder().decode(
            RideActivityAttributes.ContentState.self, from: try JSONSerialization.data(withJSONObject: content))
        #expect(decoded == state)
    }

    @Test(
        "I2: the largest status a worker publishes (16 KB, every text long and multi-byte) makes an APNs payload under 4 KB"
    )
    func size() throws {
        var status = try #require(try Self.golden().first { $0.phase == .ongoing })
        let long = String(repeating: "Ré🚕", count: 800)  // 8 bytes a repeat: 6.4 KB a text
        status.driver = Driver(displayName: long, phoneNumber: long, rating: long)
        status.vehicle.manufacturer = long
        status.vehicle.model = long
        status.vehicle.registrationPlate = long
        status.pickupLocation.name = long
        status.dropOffLocation.name = long
        let state = RideActivityAttributes.ContentState(status: status)
        let payload = try LiveActivityPush.payload(
            state, event: .end, timestamp: status.issuedAt, staleDate: status.issuedAt, relevanceScore: 100,
            dismissalDate: status.issuedAt.addingTimeInterval(600))
        #expect(payload.count < LiveActivityPush.maximumBytes, "\(payload.count) bytes")
        for text in [state.driverName, state.vehicleModel, state.registrationPlate].compactMap({ $0 }) {
            #expect(text.utf8.count <= RideActivityAttributes.ContentState.textLimit)
            #expect(long.hasPrefix(text) || ("Ré🚕 " + long).contains(text), "cut on a character's boundary")
        }
        let attributes = RideActivityAttributes(status: status)
        #expect(try #require(attributes.pickupName).utf8.count <= RideActivityAttributes.ContentState.textLimit)
        #expect(RideActivityAttributes.ContentState.cut("🚕🚕", limit: 5) == "🚕")
        #expect(RideActivityAttributes.ContentState.cut("abc", limit: 5) == "abc")
    }
}
