import FleetModel
import Foundation
import RideDomain
import WorkerGroup

import struct RideStatusKit.RideTopics

struct OutgoingMessage {
    var topic: String
    var payload: [UInt8]
    var control: Bool
    var retain = false
    /// For MQTT 5 requests (ride-option quotes): where the reply goes, and what it echoes.
    var responseTopic: String? = nil
    var correlationData: [UInt8]? = nil
}

/// The ride options the simulated fleet drives, as the default names of `config/ride-options.yaml`.
let simulatedOptions = ["Compact", "Comfort", "SUV"]

/// The simulated fleet: each vehicle idles, gets a ride, drives a realistic street trip (FleetModel's
/// `StreetTrip`: grid legs on slow and fast streets, red lights, braking and accelerating; or with
/// `--driving classes` the classes of real driving of the recorded city trips, `DrivingClass`, sampled every 1 to 5 s, half without
/// `speed`) to the pickup, waits,
/// drives to the drop-off, and the ride is stopped. A fifth of the fleet stays available and never takes a
/// ride, so quotes show live pickup estimates; a fifth of rides stop short of the pickup (the driver pulls
/// in around the corner) and the driver's events say what happened instead (P3, P4).
struct World {
    enum Stage {
        case idle(until: Date?)
        /// Asked for ride options (3.4); books when the reply arrives or at `deadline`.
        case quoting(ride: String, pickup: Coordinate, partySize: Int, deadline: Date)
        case toPickup
        case waiting(until: Date)
        case toDropOff
        case done(stopAt: Date)
    }

    struct Vehicle {
        var id: String
        var position: Coordinate
        /// The trip being driven, a point a second, and how far into it the vehicle is (seconds).
        var trip: [StreetTrip.Point] = []
        var tripTime: Double = 0
        var speed: Double = 0
        /// Never takes a ride: it stays available for quotes (3.4).
        var standby = false
        /// This ride's pickup is not where the car stops; the driver's events report it.
        var passesPickup = false
        /// E2: dispatch sends this ride's routes.
        var routed = false
        var stage: Stage = .idle(until: nil)
        var ride: String?
        var ownTracks: Bool
        var replay: [Coordinate]? = nil
        /// The ride option this vehicle serves (its availability names it).
        var option = "Compact"
        /// How it drives and reports (`--driving`).
        var profile = FleetDriving.Profile(kind: nil, fixEvery: nil, reportsSpeed: true)
        /// When it sends its next fix, for a profile with its own sampling.
        var nextFix = Date.distantPast
    }

    var random: SeededRandom
    var vehicles: [Vehicle] = []
    let topics = RideTopics()
    let center: Coordinate
    let radius: Double
    let cancelRate: Double
    let badInputRate: Double
    /// Ride identifiers are this prefix and a counter.
    let ridePrefix: String
    var rideCounter = 0
    var ridesStarted = 0
    var ridesStopped = 0
    var badInputs = 0
    var quotesAsked = 0
    var quotesAnswered = 0
    var ridesBookedByQuote = 0
    var tick = 0
    /// Where quote replies come back (A1); nil under MQTT 3.1.1, which has no Response Topic: no quotes are asked.
    let quoteReplies: String?
    /// Replies received, by ride (the correlation data).
    var quoteReplies_: [String: [UInt8]] = [:]
    /// Real streets (`--streets`): every car, pickup and drop-off lies on one, and each leg is driven along the
    /// routing engine's route (`--osrm`), asked through ``routeRequests`` and answered by ``receiveRoute(_:_:)``.
    /// Nil: the made-up roads of `--driving`.
    let streets: StreetMap?
    /// Routes to ask the engine for; the loop takes them each tick.
    var routeRequests: [RouteRequest] = []
    /// The legs asked for and not started yet: an answer for any other leg (one that came after its leg started
    /// without it) is dropped, so nothing is kept for a leg that will never take it.
    var pendingRoutes: Set<String> = []
    /// The engine's answers, by request key, until a leg starts; a key in `failedRoutes` got none (the leg is
    /// driven on a made-up road then).
    var engineRoutes: [String: EngineRoute] = [:]
    var failedRoutes: Set<String> = []
    /// Legs driven along the engine's route, and legs that started without one (no answer, or none in time).
    var engineRoutesUsed = 0
    var engineRoutesMissed = 0
    /// Seconds a leg waits for its engine route past its own start before it goes without.
    static let routeWait = 5.0

    /// A route to ask the engine for: `key` names the ride and its leg.
    struct RouteRequest: Sendable, Equatable {
        var key: String
        var from: Coordinate
        var to: Coordinate
    }

    init(
        seed: UInt64, vehicles count: Int, center: Coordinate, radius: Double, ownTracksShare: Double,
        cancelRate: Double, badInputRate: Double, quoteReplies: String? = "replies/fleet-sim/quotes",
        ridePrefix: String = "r-", driving: FleetDriving = .grid, streets: StreetMap? = nil, start: Date = Date()
    ) {
        random = SeededRandom(seed: seed)
        self.streets = streets
        self.ridePrefix = ridePrefix
        self.quoteReplies = quoteReplies
        self.center = center
        self.radius = radius
        self.cancelRate = cancelRate
        self.badInputRate = badInputRate
        for index in 0..<count {
            let ownTracks = Double.random(in: 0..<1, using: &random) < ownTracksShare
            vehicles.append(
                Vehicle(
                    id: String(format: "v-%04d", index), position: Coordinate(latitude: 0, longitude: 0),
                    ownTracks: ownTracks))
            vehicles[index].position = randomPlace()
            let roll = Double.random(in: 0..<1, using: &random)
            vehicles[index].option =
                roll < 0.6 ? simulatedOptions[0] : roll < 0.85 ? simulatedOptions[1] : simulatedOptions[2]
            vehicles[index].standby = count >= 5 && index % 5 == 4
            vehicles[index].profile = driving.profile(random: &random)
            vehicles[index].stage =
                vehicles[index].standby
                ? .idle(until: nil) : .idle(until: start.addingTimeInterval(Double.random(in: 0...15, using: &random)))
        }
    }

    var summary: [String: String] {
        let active = vehicles.filter { $0.ride != nil }.count
        return [
            "rides.started": "\(ridesStarted)", "rides.stopped": "\(ridesStopped)", "rides.active": "\(active)",
            "bad.inputs": "\(badInputs)", "quotes.asked": "\(quotesAsked)", "quotes.answered": "\(quotesAnswered)",
        ].merging(
            streets == nil
                ? [:] : ["engine.routes.used": "\(engineRoutesUsed)", "engine.routes.missed": "\(engineRoutesMissed)"]
        ) { $1 }
    }

    mutating func randomPlace() -> Coordinate {
        if let streets { return streets.place(random: &random) }
        return center.moved(
            metres: radius * Double.random(in: 0...1, using: &random).squareRoot(),
            bearing: Double.random(in: 0..<360, using: &random))
    }

    /// Starts a trip from where the vehicle is: a street trip (grid legs, slow and fast streets, red lights), or
    /// its class's on a road with the recorded trips' detours.
    /// E2: the share of rides whose dispatch sends the car's route (its planned path, as a navigation engine
    /// would give it, with a duration off by up to 20 %): the rest go by E1, so both show in `make run`.
    var routeShare = 0.7

    /// E2: `trip` as a route object to `end`: a point every 20 m or so of the planned path, and the engine's duration.
    mutating func route(of trip: [StreetTrip.Point], to end: Coordinate) -> String {
        var points: [Coordinate] = []
        for point in trip where points.last.map({ $0.distance(to: point.coordinate) >= 20 }) ?? true {
            points.append(point.coordinate)
        }
        // The driver may stop short of the place (P3's pull-in): the route goes to the place itself.
        if let last = points.last, last.distance(to: end) >= 1 { points.append(end) }
        if points.count < 2 { points.append(end) }
        let seconds = (trip.last?.time ?? 0) * Double.random(in: 0.8...1.2, using: &random)
        let line = Polyline.encode(points, precision: 6).replacingOccurrences(of: "\\", with: "\\\\")
        return #"{"polyline":"\#(line)","precision":6,"duration":\#(Int(seconds.rounded())),"version":"\#(tick)"}"#
    }

    /// Asks the engine for a leg's route (with real streets); ``receiveRoute(_:_:)`` brings the answer.
    mutating func askRoute(_ key: String, from: Coordinate, to: Coordinate) {
        guard streets != nil else { return }
        pendingRoutes.insert(key)
        routeRequests.append(RouteRequest(key: key, from: from, to: to))
    }

    /// The engine's answer for a route asked by ``askRoute(_:from:to:)``: a route, or nil for none.
    mutating func receiveRoute(_ key: String, _ route: EngineRoute?) {
        guard pendingRoutes.contains(key) else { return }
        if let route { engineRoutes[key] = route } else { failedRoutes.insert(key) }
    }

    /// Whether a leg may start: without real streets at once; with them once the engine answered, or `routeWait`
    /// seconds after `since`.
    func routeSettled(_ key: String, now: Date, since: Date) -> Bool {
        streets == nil || engineRoutes[key] != nil || failedRoutes.contains(key)
            || now >= since.addingTimeInterval(Self.routeWait)
    }

    /// The engine's route for a leg, taken (nil if it has none).
    mutating func takeRoute(_ key: String) -> EngineRoute? {
        guard pendingRoutes.remove(key) != nil else { return nil }
        failedRoutes.remove(key)
        let route = engineRoutes.removeValue(forKey: key)
        if route != nil { engineRoutesUsed += 1 } else { engineRoutesMissed += 1 }
        return route
    }

    /// Starts a leg: along `road` (the engine's route, on real streets) in the vehicle's class of driving, else on
    /// a made-up road.
    mutating func startTrip(_ vehicle: inout Vehicle, to end: Coordinate, along road: [Coordinate]? = nil) {
        if let road {
            vehicle.trip = (vehicle.profile.kind ?? .urban).drive(along: road, random: &random)
        } else if let kind = vehicle.profile.kind {
            let road = DrivingClass.road(
                from: vehicle.position, to: end, detour: DrivingClass.detour(random: &random), random: &random)
            // From standing: a trip starts at the curb, or where the car waited.
            vehicle.trip = kind.drive(along: road, random: &random)
        } else {
            vehicle.trip = StreetTrip.drive(from: vehicle.position, to: end, random: &random)
        }
        vehicle.tripTime = 0
    }

    mutating func addReplay(_ trace: [Coordinate]) throws {
        guard trace.count >= 2 else { throw TraceError.tooShort }
        var vehicle = Vehicle(id: "v-replay", position: trace[0], ownTracks: false)
        vehicle.replay = Array(trace.dropFirst())
        vehicles.append(vehicle)
    }

    /// One tick: move every vehicle by `dt` seconds and return what to publish.
    mutating func step(now: Date, dt: Double) -> [OutgoingMessage] {
        var out: [OutgoingMessage] = []
        tick += 1
        for index in vehicles.indices {
            advance(index, now: now, dt: dt, into: &out)
            // Idle vehicles keep their retained availability fresh, a tenth of the fleet per tick.
            if case .idle = vehicles[index].stage, vehicles[index].replay == nil, (index + tick) % 10 == 0 {
                out.append(availability(vehicles[index], now: now))
            }
        }
        if badInputRate > 0 {
            let count =
                Int((Double(out.count) * badInputRate).rounded(.down))
                + (Double.random(in: 0..<1, using: &random)
                    < (Double(out.count) * badInputRate).truncatingRemainder(dividingBy: 1) ? 1 : 0)
            for _ in 0..<count { out.append(badInput(now: now)) }
            badInputs += count
        }
        return out
    }

    mutating func advance(_ index: Int, now: Date, dt: Double, into out: inout [OutgoingMessage]) {
        var vehicle = vehicles[index]
        defer { vehicles[index] = vehicle }
        if var replay = vehicle.replay {
            if !replay.isEmpty { vehicle.position = replay.removeFirst() }
            vehicle.replay = replay
            out.append(fix(vehicle, now: now))
            return
        }
        switch vehicle.stage {
        case .idle(let until):
            if !vehicle.standby, let until, now >= until {
                askForOptions(&vehicle, now: now, into: &out)
            }
        case .quoting(let ride, let pickup, let partySize, let deadline):
            if quoteReplies_[ride] != nil || now >= deadline,
                routeSettled("\(ride)/pickup", now: now, since: deadline)
            {
                book(&vehicle, ride: ride, pickup: pickup, partySize: partySize, now: now, into: &out)
            }
        case .toPickup, .toDropOff:
            drive(&vehicle, dt: dt)
            if vehicle.trip.isEmpty {
                vehicle.speed = 0
                // A car with its own sampling reports its arrival at once, and stands long enough for three
                // more fixes at their longest gaps: without `speed`, the worker sees it stopped (P3, P5) only from
                // two fixes there. (3 x its mean gap + 2 fell short of the third with the jitter: WorldTests.)
                vehicle.nextFix = now
                let standing = vehicle.profile.fixEvery.map { 3 * FleetDriving.longestGap(every: $0) + 1 } ?? 0
                if case .toPickup = vehicle.stage {
                    if let ride = vehicle.ride, let dropOff = dropOffs[vehicle.id] {
                        askRoute("\(ride)/dropOff", from: vehicle.position, to: dropOff)
                    }
                    vehicle.stage = .waiting(
                        until: now.addingTimeInterval(max(standing, Double.random(in: 5...20, using: &random))))
                    // Stopped short of the pickup, only the driver's word says the car is there (P3).
                    if vehicle.passesPickup || Bool.random(using: &random), let ride = vehicle.ride {
                        out.append(event(ride, "arrivedAtPickup", by: vehicle.id))
                    }
                } else {
                    if Double.random(in: 0..<1, using: &random) < 0.3, let ride = vehicle.ride {
                        out.append(event(ride, "arrivedAtDropOff", by: vehicle.id))
                    }
                    vehicle.stage = .done(stopAt: now.addingTimeInterval(max(8, standing)))
                }
            } else if case .toPickup = vehicle.stage, Double.random(in: 0..<1, using: &random) < cancelRate / 120,
                let ride = vehicle.ride
            {
                out.append(
                    OutgoingMessage(
                        topic: topics.control(.cancel, ride: ride),
                        payload: Array(#"{"canceledBy":"user","reason":"changed plans"}"#.utf8), control: true))
                vehicle.stage = .done(stopAt: now.addingTimeInterval(8))
                // The driver pulls over: its fixes say so.
                vehicle.speed = 0
            }
        case .waiting(let until):
            vehicle.speed = 0
            if now >= until, routeSettled("\(vehicle.ride ?? "")/dropOff", now: now, since: until) {
                if vehicle.passesPickup || Bool.random(using: &random), let ride = vehicle.ride {
                    out.append(event(ride, "passengerOnBoard", by: vehicle.id))
                }
                let dropOff = dropOffs[vehicle.id] ?? randomPlace()
                let engine = takeRoute("\(vehicle.ride ?? "")/dropOff")
                startTrip(&vehicle, to: dropOff, along: engine?.points)
                if vehicle.routed, let ride = vehicle.ride {
                    // E2: a new route for the ride's second leg: the engine's, or the made-up road's.
                    let rerouted = engine?.message(version: "\(tick)") ?? route(of: vehicle.trip, to: dropOff)
                    out.append(
                        OutgoingMessage(
                            topic: topics.control(.route, ride: ride), payload: Array(rerouted.utf8), control: true))
                }
                vehicle.stage = .toDropOff
            }
        case .done(let stopAt):
            if now >= stopAt, let ride = vehicle.ride {
                out.append(
                    OutgoingMessage(topic: topics.control(.stop, ride: ride), payload: Array("{}".utf8), control: true))
                vehicle.ride = nil
                ridesStopped += 1
                vehicle.stage = .idle(until: now.addingTimeInterval(Double.random(in: 3...30, using: &random)))
                out.append(availability(vehicle, now: now))
            }
        }
        // A vehicle with its own sampling reports when its next fix is due (within half a tick: the loop wakes a
        // little late, and a gap of k seconds must not become k + 1); the grid's every tick.
        if let every = vehicle.profile.fixEvery {
            guard now.addingTimeInterval(dt / 2) >= vehicle.nextFix else { return }
            vehicle.nextFix = now.addingTimeInterval(FleetDriving.nextFix(every: every, random: &random))
        }
        out.append(fix(vehicle, now: now))
    }

    var dropOffs: [String: Coordinate] = [:]

    /// Retained availability (3.4): idle vehicles with their position, busy ones `available: false`.
    func availability(_ vehicle: Vehicle, now: Date) -> OutgoingMessage {
        let payload: String
        if case .idle = vehicle.stage {
            payload =
                #"{"available":true,"rideOptionName":"\#(vehicle.option)","location":{"latitude":\#(vehicle.position.latitude),"longitude":\#(vehicle.position.longitude),"speed":0,"timestamp":"\#(Timestamps.format(now))"}}"#
        } else {
            payload = #"{"available":false}"#
        }
        return OutgoingMessage(
            topic: topics.availability(vehicle: vehicle.id), payload: Array(payload.utf8), control: true, retain: true)
    }

    /// Moves the vehicle `dt` seconds along its trip (between the trip's points, a second apart).
    mutating func drive(_ vehicle: inout Vehicle, dt: Double) {
        guard let last = vehicle.trip.last else {
            vehicle.speed = 0
            return
        }
        vehicle.tripTime += dt
        guard vehicle.tripTime < last.time else {
            vehicle.position = last.coordinate
            vehicle.speed = 0
            vehicle.trip = []
            return
        }
        let index = min(Int(vehicle.tripTime), vehicle.trip.count - 2)
        let (from, to) = (vehicle.trip[index], vehicle.trip[index + 1])
        let share = max(0, min(1, (vehicle.tripTime - from.time) / max(to.time - from.time, 1e-9)))
        let distance = from.coordinate.distance(to: to.coordinate)
        vehicle.position =
            distance < 0.01
            ? from.coordinate
            : from.coordinate.moved(metres: distance * share, bearing: from.coordinate.bearing(to: to.coordinate))
        vehicle.speed = from.speed + (to.speed - from.speed) * share
    }

    mutating func fix(_ vehicle: Vehicle, now: Date) -> OutgoingMessage {
        // GPS noise of a few metres.
        let noisy = vehicle.position.moved(
            metres: Double.random(in: 0...3, using: &random), bearing: Double.random(in: 0..<360, using: &random))
        let payload: String
        // Without `speed` (T7 derives one from the fixes), as the recorded city trips.
        let speed = vehicle.profile.reportsSpeed
        if vehicle.ownTracks {
            let velocity = speed ? #","vel":\#(Int(vehicle.speed * 3.6))"# : ""
            payload =
                #"{"_type":"location","lat":\#(noisy.latitude),"lon":\#(noisy.longitude),"tst":\#(Int(now.timeIntervalSince1970))\#(velocity),"acc":5}"#
        } else {
            let speedField = speed ? #","speed":\#(vehicle.speed)"# : ""
            payload =
                #"{"vehicleId":"\#(vehicle.id)","timestamp":"\#(Timestamps.format(now))","latitude":\#(noisy.latitude),"longitude":\#(noisy.longitude)\#(speedField),"horizontalAccuracy":5}"#
        }
        return OutgoingMessage(
            topic: topics.position(vehicle: vehicle.id), payload: Array(payload.utf8), control: false)
    }

    /// A3: a driver event as the vehicle's driver app sends it, on the vehicle's own topic.
    func event(_ ride: String, _ type: String, by vehicle: String) -> OutgoingMessage {
        OutgoingMessage(
            topic: topics.vehicleEvent(vehicle: vehicle),
            payload: Array(#"{"rideIdentifier":"\#(ride)","type":"\#(type)"}"#.utf8), control: true)
    }

    /// One message of a bad-input class of the contract (3.5), chosen at random.
    mutating func badInput(now: Date) -> OutgoingMessage {
        let vehicle = vehicles[Int.random(in: 0..<vehicles.count, using: &random)].id
        let position = topics.position(vehicle: vehicle)
        let stamp = Timestamps.format(now)
        let cases: [(String, String)] = [
            (position, String(repeating: "x", count: 20_000)),
            (position, "{not json"),
            (position, #"{"timestamp":"\#(stamp)","latitude":123.4,"longitude":13.4}"#),
            (position, #"{"timestamp":"\#(stamp)","latitude":0,"longitude":0}"#),
            (
                position,
                #"{"timestamp":"\#(Timestamps.format(now.addingTimeInterval(600)))","latitude":52.5,"longitude":13.4}"#
            ),
            (
                position,
                #"{"timestamp":"\#(Timestamps.format(now.addingTimeInterval(-900)))","latitude":52.5,"longitude":13.4}"#
            ),
            (position, #"{"timestamp":"\#(stamp)","latitude":52.5,"longitude":13.4,"horizontalAccuracy":900}"#),
            (position, #"{"vehicleId":"someone-else","timestamp":"\#(stamp)","latitude":52.5,"longitude":13.4}"#),
            ("rides/bad id!/start", "{}"),
            ("rides/r-unknown-\(Int.random(in: 0...999, using: &random))/cancel", #"{"canceledBy":"user"}"#),
            (topics.vehicleEvent(vehicle: vehicle), #"{"rideIdentifier":"r-x","type":"warp"}"#),
            ("rides/r-x/start", #"{"rideIdentifier":"r-x"}"#),
        ]
        let (topic, payload) = cases[Int.random(in: 0..<cases.count, using: &random)]
        return OutgoingMessage(topic: topic, payload: Array(payload.utf8), control: !topic.hasSuffix("position"))
    }
}
