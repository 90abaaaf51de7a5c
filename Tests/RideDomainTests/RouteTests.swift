import Foundation
import MosquittoTesting
import RideDomain
import Testing

import enum RideStatusKit.EstimateSource
import struct RideStatusKit.RideStatus

/// E2: a route on `assign` or `rides/{ride}/route`, and a navigation app's progress in a fix.
@Suite("E2: ETAs along a route, and from a navigation app")
struct RouteTests {
    /// The car starts 1 km west of a corner 1 km south of the pickup: 2 km of road to the pickup, 1.41 km as the
    /// crow flies. The route goes on to the drop-off.
    static let corner = pickup.moved(metres: 1000, bearing: 180)
    static let start = corner.moved(metres: 1000, bearing: 270)
    static let points = [start, corner, pickup, dropOff]

    static func routeJSON(_ points: [Coordinate] = points, duration: Double? = nil, version: String = "1") -> String {
        let line = Polyline.encode(points, precision: 6).replacingOccurrences(of: "\\", with: "\\\\")
        let durationPart = duration.map { #","duration":\#($0)"# } ?? ""
        return #"{"polyline":"\#(line)","precision":6,"version":"\#(version)"\#(durationPart)}"#
    }

    /// A ride whose car is at the route's start, with the route sent on `assign` at t0 + 2 s.
    /// - Parameter holdLater: E1's limit on how much later an ETA may move between statuses (the worker's 30 s by
    ///   default); large, to see the estimate itself.
    static func routed(duration: Double?, holdLater: Double? = nil) -> Harness {
        var configuration = RideConfiguration()
        if let holdLater { configuration.estimateDelayLimit = holdLater }
        var harness = Harness(configuration: configuration)
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), start)
        let assigned = harness.send(
            "rides/r-1/assign", bytes(#"{"vehicleId":"v-1","route":\#(routeJSON(duration: duration))}"#),
            at: t0.addingTimeInterval(2))
        #expect(assigned.deadLetters.isEmpty, "\(assigned.deadLetters)")
        return harness
    }

    /// The ride's newest status at `seconds`: the cadence's, or the one a change of phase published at once (C2).
    static func status(_ harness: inout Harness, at seconds: Double, after actions: [RideAction] = []) throws
        -> RideStatus
    {
        try #require(actions.statuses.last ?? harness.engine.tick(now: t0.addingTimeInterval(seconds)).statuses.last)
    }

    @Test("Google's polyline example decodes at precision 5 and encodes back the same")
    func polylineExample() throws {
        let text = "_p~iF~ps|U_ulLnnqC_mqNvxq`@"
        let points = try #require(Polyline.decode(text, precision: 5))
        #expect(points.count == 3)
        #expect(abs(points[0].latitude - 38.5) < 1e-9 && abs(points[0].longitude - -120.2) < 1e-9)
        #expect(abs(points[2].latitude - 43.252) < 1e-9 && abs(points[2].longitude - -126.453) < 1e-9)
        #expect(Polyline.encode(points, precision: 5) == text)
        #expect(Polyline.decode("_p~iF~ps|U_ulL", precision: 5) == nil, "a latitude without its longitude")
        #expect(Polyline.decode("_p~iF ps|U", precision: 5) == nil, "a character outside the alphabet")
    }

    @Test("E2: with the engine's duration the pickup ETA is its prediction, scaled by the pace driven so far")
    func engineDuration() throws {
        // The engine says 10 m/s over the whole route.
        let length = RouteTests.length(RouteTests.points)
        var harness = RouteTests.routed(duration: length / 10, holdLater: 600)
        // The car leaves: 40 m on at t0 + 6 (it left halfway between the two fixes, at 3.5 s).
        harness.fix(at: t0.addingTimeInterval(6), RouteTests.start.moved(metres: 40, bearing: 90))
        var status = try RouteTests.status(&harness, at: 8)
        #expect(status.estimateSource == .route)
        // 1,960 m left at the engine's 10 m/s from the fix's time, the pace so far (40 m in 2.5 s) weighed at
        // 40 / (40 + 4,000): 6 + 196 x (1 + 0.0099 x (0.625 - 1)) = 201.3.
        let first = try #require(status.estimatedPickupDate).timeIntervalSince(t0)
        #expect(abs(first - 201.3) < 1, "\(first)")
        // The car reaches the corner at t0 + 152: 1,000 m in 148.5 s, 1.485 times the engine's time, weighed at
        // 1,000 / 5,000: the last kilometre's 100 s become 100 x (1 + 0.2 x 0.485) = 109.7 s.
        let moved = harness.fix(at: t0.addingTimeInterval(152), RouteTests.corner)
        status = try RouteTests.status(&harness, at: 152, after: moved)
        let second = try #require(status.estimatedPickupDate).timeIntervalSince(t0)
        #expect(abs(second - 261.7) < 2, "\(second)")
        #expect(status.estimateSource == .route)
    }

    @Test("E2: without the engine's duration the road left counts, not the straight line times the detour")
    func roadLeft() throws {
        var routed = RouteTests.routed(duration: nil)
        var plain = Harness()
        plain.start()
        plain.fix(at: t0.addingTimeInterval(1), RouteTests.start)
        let routedMoved = routed.fix(at: t0.addingTimeInterval(100), RouteTests.corner)
        let plainMoved = plain.fix(at: t0.addingTimeInterval(100), RouteTests.corner)
        let withRoute = try RouteTests.status(&routed, at: 100, after: routedMoved)
        let without = try RouteTests.status(&plain, at: 100, after: plainMoved)
        #expect(withRoute.estimateSource == .route && without.estimateSource == .estimate)
        let road = try #require(withRoute.estimatedPickupDate).timeIntervalSince(t0) - 100
        let straight = try #require(without.estimatedPickupDate).timeIntervalSince(t0) - 100
        // 1 km of road left against 1 km as the crow flies times E1's detour factor (1.3) at the same pace.
        #expect(road > 0 && road / straight > 0.65 && road / straight < 0.9, "\(road) s against \(straight) s")
    }

    @Test("E2: three fixes in a row off the route give it up for E1; one wild fix does not")
    func offRoute() throws {
        var harness = RouteTests.routed(duration: 300)
        let away = RouteTests.start.moved(metres: 200, bearing: 180)
        harness.fix(at: t0.addingTimeInterval(10), away)
        let back = harness.fix(at: t0.addingTimeInterval(20), RouteTests.start.moved(metres: 100, bearing: 90))
        #expect(
            try RouteTests.status(&harness, at: 20, after: back).estimateSource == .route,
            "one wild fix, then on the road")
        var off: [RideAction] = []
        for second in [30.0, 40, 50] { off += harness.fix(at: t0.addingTimeInterval(second), away) }
        #expect(try RouteTests.status(&harness, at: 50, after: off).estimateSource == .estimate, "three off it: E1")
        // A new route brings it back.
        let rerouted = harness.send(
            "rides/r-1/route", bytes(RouteTests.routeJSON([away, RouteTests.start, RouteTests.corner, pickup])),
            at: t0.addingTimeInterval(55))
        #expect(rerouted.deadLetters.isEmpty)
        #expect(try RouteTests.status(&harness, at: 56).estimateSource == .route)
    }

    @Test("E2: a route is refused, naming the rule, without a vehicle, unreadable, or too long; the ride keeps its own")
    func refusals() throws {
        var harness = RouteTests.routed(duration: 300)
        harness.start(ride: "r-2", vehicle: nil)
        let noVehicle = harness.send("rides/r-2/route", bytes(RouteTests.routeJSON()), at: t0.addingTimeInterval(3))
        #expect(noVehicle.reasons == [.eventNotAllowed])
        #expect(noVehicle.deadLetters.first?.detail.contains("E2") == true)
        let unreadable = harness.send(
            "rides/r-1/route", bytes(#"{"polyline":"_p~iF~ps|U_ulL","precision":5}"#), at: t0.addingTimeInterval(4))
        #expect(unreadable.reasons == [.invalidField])
        let noPrecision = harness.send(
            "rides/r-1/route", bytes(#"{"polyline":"_p~iF~ps|U_ulLnnqC_mqNvxq`@"}"#), at: t0.addingTimeInterval(4))
        #expect(noPrecision.reasons == [.invalidField])
        let elsewhere = harness.send(
            "rides/r-1/route",
            bytes(
                RouteTests.routeJSON([pickup.moved(metres: 5000, bearing: 0), pickup.moved(metres: 6000, bearing: 0)])),
            at: t0.addingTimeInterval(4))
        #expect(elsewhere.reasons == [.invalidField], "a route that reaches neither the pickup nor the drop-off")
        // 1,900 points 20 km apart zig-zag: 15.2 KB of polyline5, within I2's 16 KiB, but more than 12,288 characters
        // as the polyline6 the durable state keeps.
        let far = RouteTests.start.moved(metres: 20_000, bearing: 45)
        let zigzag = (0..<1900).map { $0 % 2 == 0 ? RouteTests.start : far } + [pickup]
        let line = Polyline.encode(zigzag, precision: 5).replacingOccurrences(of: "\\", with: "\\\\")
        let long = harness.send(
            "rides/r-1/route", bytes(#"{"polyline":"\#(line)","precision":5}"#), at: t0.addingTimeInterval(4))
        #expect(long.reasons == [.invalidField])
        #expect(long.deadLetters.first?.detail.contains("I2") == true)
        #expect(try RouteTests.status(&harness, at: 8).estimateSource == .route, "the ride kept its route")
    }

    @Test("E2: a GeoJSON LineString route is followed like a polyline")
    func geoJSON() throws {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), RouteTests.start)
        let coordinates = RouteTests.points.map { [$0.longitude, $0.latitude] }
        let sent = harness.send(
            "rides/r-1/route",
            bytes(#"{"geometry":{"type":"LineString","coordinates":\#(coordinates)},"duration":500,"distance":4900}"#),
            at: t0.addingTimeInterval(2))
        #expect(sent.deadLetters.isEmpty, "\(sent.deadLetters)")
        #expect(try RouteTests.status(&harness, at: 8).estimateSource == .route)
    }

    @Test("E2: a fix with the navigation app's progress sets the ETA; one without hands it back")
    func navigation() throws {
        var harness = Harness()
        harness.start()
        let fix =
            #"{"vehicleId":"v-1","timestamp":"\#(iso(t0.addingTimeInterval(10)))","latitude":\#(RouteTests.start.latitude),"longitude":\#(RouteTests.start.longitude),"remainingDistance":1900,"remainingDuration":140}"#
        harness.send("fleet/vehicles/v-1/position", bytes(fix), at: t0.addingTimeInterval(10))
        var status = try RouteTests.status(&harness, at: 12)
        #expect(status.estimateSource == .navigation)
        #expect(status.estimatedPickupDate == t0.addingTimeInterval(150))
        harness.fix(at: t0.addingTimeInterval(20), RouteTests.start.moved(metres: 100, bearing: 90))
        status = try RouteTests.status(&harness, at: 21)
        #expect(status.estimateSource == .estimate)
    }

    @Test("E2: the fast path and the general decoder read a navigation app's progress alike; half of it is none")
    func navigationDecoding() throws {
        let decoder = InputDecoder()
        let both = bytes(
            #"{"timestamp":"\#(iso(t0))","latitude":52.5,"longitude":13.4,"remainingDistance":800,"remainingDuration":95.5}"#
        )
        let fast = try #require(try decoder.telemetry(vehicleId: "v-1", payload: both))
        let general = try #require(try decoder.generalTelemetry(vehicleId: "v-1", payload: both))
        #expect(fast == general)
        #expect(fast.remainingDistance == 800 && fast.remainingDuration == 95.5)
        let half = bytes(#"{"timestamp":"\#(iso(t0))","latitude":52.5,"longitude":13.4,"remainingDuration":95.5}"#)
        let halfFix = try #require(try decoder.telemetry(vehicleId: "v-1", payload: half))
        #expect(halfFix.remainingDuration == nil && halfFix.remainingDistance == nil)
        #expect(halfFix == (try decoder.generalTelemetry(vehicleId: "v-1", payload: half)))
    }

    @Test("E2, L5, G3: the route and the car's place on it survive a restart or a handover in the durable state")
    func durable() throws {
        var harness = RouteTests.routed(duration: 400)
        harness.fix(at: t0.addingTimeInterval(100), RouteTests.corner)
        let before = try #require(harness.engine.rides["r-1"])
        let state = before.durableState()
        let ride = try Ride.restored(
            topicRide: "r-1", payload: state, now: t0.addingTimeInterval(101), configuration: RideConfiguration())
        #expect(ride.estimateSource == .route)
        #expect(ride.routeAlong == before.routeAlong && ride.routeAlong > 900)
        // Kept as polyline6: a point moves by at most 0.1 m.
        let track = try #require(ride.booking.route)
        let original = try #require(before.booking.route)
        #expect(abs(track.length - original.length) < 1 && track.duration == 400 && track.version == "1")
        #expect(track.receivedAt == original.receivedAt && track.startAlong == original.startAlong)
        #expect(track.departedAt != nil && track.departedAt == original.departedAt)
        // A new owner's next status goes on along the route, where the old one's would have.
        var next = Harness()
        _ = next.engine.restore(
            topic: "ridestatus/state/r-1", ride: "r-1", payload: state, now: t0.addingTimeInterval(101))
        let restored = try #require(next.engine.tick(now: t0.addingTimeInterval(106)).statuses.last)
        let kept = try #require(harness.engine.tick(now: t0.addingTimeInterval(106)).statuses.last)
        #expect(restored.estimateSource == .route)
        let gap = try #require(restored.estimatedPickupDate).timeIntervalSince(try #require(kept.estimatedPickupDate))
        #expect(abs(gap) < 1, "\(gap) s between the new owner's ETA and the old one's")
    }

    @Test("E2, A2: a durable state whose route is unreadable, or whose place on it is not on it, is refused")
    func durableRefusals() throws {
        let harness = RouteTests.routed(duration: 400)
        let state = String(decoding: try #require(harness.engine.rides["r-1"]).durableState(), as: UTF8.self)
        let now = t0.addingTimeInterval(10)
        let broken = state.replacingOccurrences(
            of: #""polyline":""#, with: #""polyline":" "#)
        #expect(throws: Rejection.self) {
            try Ride.restored(topicRide: "r-1", payload: bytes(broken), now: now, configuration: RideConfiguration())
        }
        let beyond = try #require(state.range(of: #""routeAlong":"#)).upperBound
        let farAlong = state.replacingCharacters(in: beyond..<beyond, with: "99999")
        do {
            _ = try Ride.restored(
                topicRide: "r-1", payload: bytes(farAlong), now: now, configuration: RideConfiguration())
            Issue.record("a place 100 km past the route's end was taken")
        } catch {
            #expect(error.detail.contains("A2, E2"), "\(error.detail)")
        }
    }

    @Test("E2, I2: a ride's durable state with the longest route the worker keeps stays within 16 KiB")
    func longestRouteState() throws {
        var harness = Harness()
        harness.start()
        harness.fix(at: t0.addingTimeInterval(1), RouteTests.start)
        // Points 300 m apart in a spiral of steps: each about 6 characters of polyline6, up to the limit.
        var points = [RouteTests.start]
        while Polyline.encodedLength(points + [pickup, dropOff], precision: 6) < RouteTrack.maximumEncodedLength - 40 {
            points.append(points.last!.moved(metres: 300, bearing: Double(points.count * 37 % 360)))
        }
        points += [pickup, dropOff]
        let sent = harness.send(
            "rides/r-1/route", bytes(RouteTests.routeJSON(points, duration: 9000)), at: t0.addingTimeInterval(2))
        #expect(sent.deadLetters.isEmpty, "\(sent.deadLetters)")
        let state = try #require(harness.engine.rides["r-1"]).durableState()
        #expect(state.count <= 16_384, "\(state.count) bytes")
        #expect(state.count > RouteTrack.maximumEncodedLength, "the route is in it")
    }

    @Test("E2: the test's routes, assignments with routes and navigation fixes validate against the schemas")
    func schemas() async throws {
        let geometry = RouteTests.points.map { [$0.longitude, $0.latitude] }
        let routes = [
            bytes(RouteTests.routeJSON(duration: 400)),
            bytes(#"{"geometry":{"type":"LineString","coordinates":\#(geometry)},"distance":4900,"version":"2"}"#),
        ]
        #expect(try await validateJSON(schema: "route.schema.json", documents: routes).code == 0)
        let both = bytes(#"{"polyline":"_p~iF~ps|U","precision":5,"geometry":{"type":"LineString","coordinates":[]}}"#)
        #expect(try await validateJSON(schema: "route.schema.json", documents: [both]).code == 1, "one geometry only")
        let assign = bytes(#"{"vehicleId":"v-1","route":\#(RouteTests.routeJSON())}"#)
        #expect(try await validateJSON(schema: "assign.schema.json", documents: [assign]).code == 0)
        let fix = bytes(
            #"{"timestamp":"\#(iso(t0))","latitude":52.5,"longitude":13.4,"remainingDistance":800,"remainingDuration":95}"#
        )
        let half = bytes(#"{"timestamp":"\#(iso(t0))","latitude":52.5,"longitude":13.4,"remainingDuration":95}"#)
        #expect(try await validateJSON(schema: "telemetry.schema.json", documents: [fix]).code == 0)
        #expect(try await validateJSON(schema: "telemetry.schema.json", documents: [half]).code == 1, "both or neither")
        var harness = RouteTests.routed(duration: 400)
        let routed = try RouteTests.status(&harness, at: 8)
        #expect(routed.estimateSource == .route)
        #expect(try await validateJSON(schema: "ride-status.schema.json", documents: [routed.encoded()]).code == 0)
    }

    @Test("E2: the wait at the pickup is not taken for slow driving: the ride's leg goes at the engine's pace again")
    func waitAtPickup() throws {
        let length = RouteTests.length(RouteTests.points)
        var harness = RouteTests.routed(duration: length / 10, holdLater: 600)
        // On the engine's pace to the corner and the pickup, then 300 s at the pickup.
        harness.fix(at: t0.addingTimeInterval(6), RouteTests.start.moved(metres: 40, bearing: 90))
        harness.fix(at: t0.addingTimeInterval(103), RouteTests.corner)
        harness.fix(at: t0.addingTimeInterval(203), pickup, speed: 0)
        harness.event("arrivedAtPickup", at: t0.addingTimeInterval(203))
        harness.fix(at: t0.addingTimeInterval(503), pickup, speed: 0)
        harness.event("passengerOnBoard", at: t0.addingTimeInterval(503))
        let toDropOff = pickup.distance(to: dropOff)
        let moved = harness.fix(at: t0.addingTimeInterval(508), toward(pickup, dropOff, metres: 50))
        let status = try RouteTests.status(&harness, at: 508, after: moved)
        #expect(status.phase == .ongoing && status.estimateSource == .route)
        // The rest of the leg at the engine's 10 m/s: the 300 s wait is in no ratio.
        let seconds = try #require(status.estimatedDropOffDate).timeIntervalSince(t0) - 508
        #expect(abs(seconds - (toDropOff - 50) / 10) < 0.1 * toDropOff / 10, "\(seconds) s")
    }

    @Test("E2: a navigation fix that brings the car to the pickup leaves the drop-off ETA to the ride's leg")
    func navigationAtPickup() throws {
        var harness = Harness()
        harness.start()
        let arriving =
            #"{"vehicleId":"v-1","timestamp":"\#(iso(t0.addingTimeInterval(60)))","latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude),"speed":0,"remainingDistance":0,"remainingDuration":0}"#
        let actions = harness.send("fleet/vehicles/v-1/position", bytes(arriving), at: t0.addingTimeInterval(60))
        let status = try RouteTests.status(&harness, at: 60, after: actions)
        #expect(status.phase == .pickup && status.estimateSource == .estimate)
        let leg = try #require(status.estimatedDropOffDate).timeIntervalSince(t0) - 60
        #expect(leg > 60, "the drop-off is a ride away, not now: \(leg) s")
    }

    @Test("E2: another car drops the navigation ETA and the route; an unusable route on assign is refused alone")
    func newCar() throws {
        var harness = Harness()
        harness.start()
        let fix =
            #"{"vehicleId":"v-1","timestamp":"\#(iso(t0.addingTimeInterval(10)))","latitude":\#(RouteTests.start.latitude),"longitude":\#(RouteTests.start.longitude),"remainingDistance":1900,"remainingDuration":140}"#
        harness.send("fleet/vehicles/v-1/position", bytes(fix), at: t0.addingTimeInterval(10))
        #expect(try RouteTests.status(&harness, at: 12).estimateSource == .navigation)
        let elsewhere = RouteTests.routeJSON([
            pickup.moved(metres: 5000, bearing: 0), pickup.moved(metres: 6000, bearing: 0),
        ])
        let assigned = harness.send(
            "rides/r-1/assign", bytes(#"{"vehicleId":"v-2","route":\#(elsewhere)}"#), at: t0.addingTimeInterval(13))
        #expect(assigned.reasons == [.invalidField], "the route alone is refused")
        #expect(harness.engine.rides["r-1"]?.vehicleId == "v-2", "the car is assigned all the same")
        #expect(try RouteTests.status(&harness, at: 13, after: assigned).estimateSource == .estimate)
    }

    @Test("E2, V6: a route's duration or a navigation app's over a day is refused, or counts as none")
    func durationsBounded() throws {
        var harness = RouteTests.routed(duration: 300)
        let refused = harness.send(
            "rides/r-1/route", bytes(RouteTests.routeJSON(duration: 1e12)), at: t0.addingTimeInterval(5))
        #expect(refused.reasons == [.invalidField])
        let fix =
            #"{"vehicleId":"v-1","timestamp":"\#(iso(t0.addingTimeInterval(10)))","latitude":\#(RouteTests.start.latitude),"longitude":\#(RouteTests.start.longitude),"remainingDistance":1900,"remainingDuration":1e9}"#
        let sent = harness.send("fleet/vehicles/v-1/position", bytes(fix), at: t0.addingTimeInterval(10))
        #expect(sent.deadLetters.isEmpty)
        #expect(try RouteTests.status(&harness, at: 12).estimateSource == .route, "no navigation: the route")
    }

    static func length(_ points: [Coordinate]) -> Double {
        zip(points, points.dropFirst()).map { $0.distance(to: $1) }.reduce(0, +)
    }
}
