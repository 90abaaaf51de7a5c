import Foundation
import Locking
import RideDomain
import RideJSON
import Testing

import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideTopics

@testable import RideStatusService

/// The read API's paging, filters and answers, and the live map's feed, over a real ``RideEngine`` (no server:
/// `tests/api` runs schemathesis against the running worker, `tests/browser` the page in chromium).
@Suite("Read API and live feed")
struct ReadAPITests {
    /// A reader over an engine, as the worker's is over its own (FleetReader.swift).
    final class EngineReader: FleetReader {
        let engine: Locked<RideEngine>
        let now = Locked(Date())

        init(trackLength: Int = 10) {
            var configuration = RideConfiguration()
            configuration.trackLength = trackLength
            engine = Locked(RideEngine(configuration: configuration))
        }

        func start(_ ride: String, vehicle: String?) {
            let time = now.withLock { $0 }
            engine.withLock { engine in
                _ = engine.receive(
                    topic: engine.topics.control(.start, ride: ride),
                    payload: Array(booking(ride: ride, vehicle: vehicle).utf8),
                    now: time)
            }
        }

        func send(_ vehicle: String, _ coordinate: Coordinate, secondsLater: Double) {
            let time = now.withLock { date in
                date.addTimeInterval(secondsLater)
                return date
            }
            engine.withLock { engine in
                _ = engine.receive(
                    topic: engine.topics.position(vehicle: vehicle),
                    payload: Array(fix(vehicle, coordinate, at: time, speed: 5).utf8), now: time)
            }
        }

        /// An input the engine refuses (a dead letter, 3.5).
        func refuse() {
            let time = now.withLock { $0 }
            engine.withLock { engine in
                _ = engine.receive(
                    topic: engine.topics.control(.start, ride: "r-bad"), payload: Array("{oops".utf8), now: time)
            }
        }

        func stop(_ ride: String) {
            let time = now.withLock { $0 }
            engine.withLock { engine in
                _ = engine.receive(
                    topic: engine.topics.control(.stop, ride: ride), payload: Array("{}".utf8), now: time)
            }
        }

        func rideIdentifiers(in phase: RidePhase?) -> [String] { engine.withLock { $0.rideIdentifiers(in: phase) } }
        func summaries(of rides: [String]) -> [RideSummary] {
            let time = now.withLock { $0 }
            return engine.withLock { $0.summaries(of: rides, now: time) }
        }
        func summaries(from start: Int, limit: Int) -> (summaries: [RideSummary], next: Int?) {
            let time = now.withLock { $0 }
            return engine.withLock { $0.summaries(from: start, limit: limit, now: time) }
        }
        func currentStatus(of ride: String) -> [UInt8]? { engine.withLock { $0.currentStatus(of: ride) }?.encoded() }
        func track(of ride: String) -> (vehicle: String?, points: [TrackPoint])? {
            engine.withLock { engine in engine.track(of: ride).map { (engine.ride(ride)?.vehicleId, $0) } }
        }
        func availableVehicles() -> [FleetIndex.Listing] { [] }
        func overview() -> FleetOverview {
            engine.withLock { engine in
                FleetOverview(
                    workerID: "w-test", members: ["w-test"], ready: true, activeRides: engine.activeRideCount,
                    rejectedInputs: engine.counters.rejections.values.reduce(0, +), updateInterval: 5)
            }
        }
        var serviceAreas: [ServiceArea] { [] }
    }

    private func json(_ reply: ReadAPI.Reply) throws -> JSONValue {
        try JSONParser.parse(reply.body)
    }

    private func items(_ value: JSONValue?) -> [JSONValue]? {
        if case .array(let items) = value { return items }
        return nil
    }

    private func identifiers(_ page: JSONValue) -> [String] {
        (items(page["rides"]) ?? []).compactMap { $0["rideIdentifier"]?.stringValue }
    }

    @Test("Pages in identifier order, a cursor continues after the last ride shown, the last page has no cursor")
    func paging() throws {
        let reader = EngineReader()
        for ride in ["r-5", "r-2", "r-7", "r-1", "r-4", "r-3", "r-6"] { reader.start(ride, vehicle: "v-\(ride)") }
        let api = ReadAPI(reader: reader)
        let first = try json(api.rides(phase: nil, cursor: nil, limit: "3"))
        #expect(identifiers(first) == ["r-1", "r-2", "r-3"])
        #expect(first["nextCursor"]?.stringValue == "r-3")
        #expect(first["total"]?.doubleValue == 7)
        // A ride on the page before ends: the next page still starts right after the cursor.
        reader.stop("r-3")
        let second = try json(api.rides(phase: nil, cursor: "r-3", limit: "3"))
        #expect(identifiers(second) == ["r-4", "r-5", "r-6"])
        let last = try json(api.rides(phase: nil, cursor: second["nextCursor"]?.stringValue, limit: "3"))
        #expect(identifiers(last) == ["r-7"])
        #expect(last["nextCursor"]?.isNull == true)
        #expect(last["total"]?.doubleValue == 6)
        // The default page holds everything here.
        #expect(identifiers(try json(api.rides(phase: nil, cursor: nil, limit: nil))).count == 6)
    }

    @Test("P1: the phase filter keeps only rides in that phase (received without a vehicle, confirmed with one)")
    func phaseFilter() throws {
        let reader = EngineReader()
        for index in 1...3 { reader.start("r-no-\(index)", vehicle: nil) }
        for index in 1...4 { reader.start("r-yes-\(index)", vehicle: "v-\(index)") }
        let api = ReadAPI(reader: reader)
        let received = try json(api.rides(phase: "received", cursor: nil, limit: nil))
        #expect(identifiers(received) == ["r-no-1", "r-no-2", "r-no-3"])
        #expect(received["total"]?.doubleValue == 3)
        let confirmed = try json(api.rides(phase: "confirmed", cursor: nil, limit: "2"))
        #expect(identifiers(confirmed) == ["r-yes-1", "r-yes-2"])
        #expect(confirmed["total"]?.doubleValue == 4)
        #expect(identifiers(try json(api.rides(phase: "ongoing", cursor: nil, limit: nil))).isEmpty)
    }

    @Test("A phase or limit it does not know is a 400 naming what is allowed, never a guess")
    func badQueries() throws {
        let api = ReadAPI(reader: EngineReader())
        for (phase, limit) in [("flying", nil), ("", nil), (nil, "0"), (nil, "1001"), (nil, "ten"), ("unknown", "5")] {
            let reply = api.rides(phase: phase, cursor: nil, limit: limit)
            #expect(reply.status == 400, "\(String(describing: phase)) \(String(describing: limit))")
            #expect(try json(reply)["reason"]?.stringValue == "invalidQuery")
        }
        #expect(api.vehicles(limit: "0").status == 400)
    }

    @Test("L7: a ride's status is its current status as the topic carries it; an unknown ride is a 404")
    func rideStatus() throws {
        let reader = EngineReader()
        reader.start("r-1", vehicle: "v-1")
        let api = ReadAPI(reader: reader)
        let reply = api.ride("r-1")
        #expect(reply.status == 200)
        let status = try json(reply)
        #expect(status["rideIdentifier"]?.stringValue == "r-1")
        #expect(status["phase"]?.stringValue == "confirmed")
        #expect(status["sequence"]?.doubleValue == 1)
        let missing = api.ride("r-none")
        #expect(missing.status == 404)
        #expect(try json(missing)["reason"]?.stringValue == "unknownRide")
        #expect(api.track("r-none").status == 404)
    }

    @Test(
        "The track holds the vehicle's last rides.trackLength accepted fixes, oldest first; a rejected fix is not in it"
    )
    func track() throws {
        let reader = EngineReader(trackLength: 3)
        reader.start("r-1", vehicle: "v-1")
        let api = ReadAPI(reader: reader)
        #expect(items(try json(api.track("r-1"))["fixes"])?.isEmpty == true)
        let points = (1...5).map { Coordinate(latitude: 52.50 + Double($0) * 0.0005, longitude: 13.40) }
        for point in points { reader.send("v-1", point, secondsLater: 10) }
        // T4: a jump no car makes is rejected and must not show as the vehicle's position.
        reader.send("v-1", Coordinate(latitude: 53.5, longitude: 13.4), secondsLater: 1)
        let track = try json(api.track("r-1"))
        #expect(track["vehicleId"]?.stringValue == "v-1")
        let latitudes = (items(track["fixes"]) ?? []).compactMap { $0["latitude"]?.doubleValue }
        #expect(latitudes.count == 3)
        for (latitude, expected) in zip(latitudes, points.suffix(3)) {
            #expect(abs(latitude - expected.latitude) < 1e-5, "\(latitudes)")  // Float storage: centimetres
        }
        // 0 keeps none.
        let none = EngineReader(trackLength: 0)
        none.start("r-1", vehicle: "v-1")
        none.send("v-1", points[0], secondsLater: 1)
        #expect(items(try json(ReadAPI(reader: none).track("r-1"))["fixes"])?.isEmpty == true)
    }

    @Test("Live feed: a watcher gets the whole fleet first, then only what changed and what ended, once per tick")
    func liveFeed() async throws {
        let reader = EngineReader()
        for index in 1...3 { reader.start("r-\(index)", vehicle: "v-\(index)") }
        let feed = LiveFeed(reader: reader)
        var events = feed.watch().makeAsyncIterator()
        #expect(String(decoding: await events.next() ?? [], as: UTF8.self) == ": connected\n\n")
        feed.tick()
        let first = try event(await events.next())
        #expect(first["full"] == .bool(true))
        #expect(identifiers(first) == ["r-1", "r-2", "r-3"])
        // Nothing changed: an event with no rides (the header still comes, and keeps the stream alive).
        feed.tick()
        #expect(identifiers(try event(await events.next())).isEmpty)
        // Many fixes of one vehicle within a tick: one update of that ride; an ended ride is listed as removed.
        for step in 1...5 {
            reader.send("v-2", Coordinate(latitude: 52.50 + Double(step) * 0.0003, longitude: 13.4), secondsLater: 0.1)
        }
        reader.stop("r-3")
        feed.tick()
        let third = try event(await events.next())
        #expect(third["full"] == .bool(false))
        #expect(identifiers(third) == ["r-2"])
        #expect(items(third["removed"])?.compactMap(\.stringValue) == ["r-3"])
        #expect(third["workers"]?["activeRides"]?.doubleValue == 2)
        // A second watcher gets the whole fleet, the first only differences.
        var late = feed.watch().makeAsyncIterator()
        _ = await late.next()
        feed.tick()
        #expect(try event(await late.next())["full"] == .bool(true))
        #expect(try event(await events.next())["full"] == .bool(false))
        // Shutdown ends every stream.
        feed.finish()
        #expect(await events.next() == nil)
        #expect(feed.watcherCount == 0)
    }

    @Test("Live feed: a watcher that goes away is forgotten; the dead-letter rate is over the time really elapsed")
    func liveFeedWatchersAndRate() async throws {
        let reader = EngineReader()
        reader.start("r-1", vehicle: "v-1")
        let feed = LiveFeed(reader: reader)
        do {
            // A page that closes: its stream and iterator go away (the HTTP handler's loop ends).
            var gone = feed.watch().makeAsyncIterator()
            _ = await gone.next()
            #expect(feed.watcherCount == 1)
        }
        feed.tick()
        #expect(feed.watcherCount == 0, "a closed page is not fed a full fleet every second")
        var events = feed.watch().makeAsyncIterator()
        _ = await events.next()
        let start = Duration.seconds(100)
        feed.tick(instant: start)
        #expect(try event(await events.next())["rejectedPerMinute"] == .number(0))
        for _ in 0..<10 { reader.refuse() }
        feed.tick(instant: start + .seconds(30))
        // 10 refused inputs in 30 s: 20 a minute, whatever the nominal tick.
        #expect(try event(await events.next())["rejectedPerMinute"] == .number(20))
        feed.finish()
    }

    private func event(_ frame: [UInt8]?) throws -> JSONValue {
        let text = String(decoding: try #require(frame), as: UTF8.self)
        #expect(text.hasPrefix("event: fleet\ndata: ") && text.hasSuffix("\n\n"), "\(text)")
        let data = text.dropFirst("event: fleet\ndata: ".count).dropLast(2)
        return try JSONParser.parse(Array(data.utf8))
    }

    @Test("A read API path asked with another method than GET is a 405; other paths fall through")
    func methods() {
        #expect(ReadOnlyPaths.isKnown("/v1/rides"))
        #expect(ReadOnlyPaths.isKnown("/v1/rides/r-1/track"))
        #expect(ReadOnlyPaths.isKnown("/v1/openapi.json"))
        #expect(!ReadOnlyPaths.isKnown("/v1/rides/r-1/other"))
        #expect(!ReadOnlyPaths.isKnown("/map.js"))
    }
}
