import FleetModel
import Foundation
import RideDomain

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

/// The simulated fleet: each vehicle idles, gets a ride, drives a street-like path (legs along the grid
/// with turns, speed changes and stops) to the pickup, waits, drives to the drop-off, and the ride is stopped.
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
        var route: [Coordinate] = []
        var speed: Double = 0
        var stage: Stage = .idle(until: nil)
        var ride: String?
        var ownTracks: Bool
        var replay: [Coordinate]? = nil
        /// The ride option this vehicle serves (its availability names it).
        var option = "Compact"
    }

    var random: SeededRandom
    var vehicles: [Vehicle] = []
    let topics = Topics()
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
    /// Where quote replies arrive: this simulator's own response topic.
    let quoteReplies: String
    /// Replies received, by ride (the correlation data).
    var quoteReplies_: [String: [UInt8]] = [:]

    init(
        seed: UInt64, vehicles count: Int, center: Coordinate, radius: Double, ownTracksShare: Double,
        cancelRate: Double, badInputRate: Double, quoteReplies: String = "replies/fleet-sim/quotes",
        ridePrefix: String = "r-"
    ) {
        random = SeededRandom(seed: seed)
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
            vehicles[index].stage = .idle(until: Date().addingTimeInterval(Double.random(in: 0...15, using: &random)))
        }
    }

    var summary: [String: String] {
        let active = vehicles.filter { $0.ride != nil }.count
        return [
            "rides.started": "\(ridesStarted)", "rides.stopped": "\(ridesStopped)", "rides.active": "\(active)",
            "bad.inputs": "\(badInputs)", "quotes.asked": "\(quotesAsked)", "quotes.answered": "\(quotesAnswered)",
        ]
    }

    mutating func randomPlace() -> Coordinate {
        center.moved(
            metres: radius * Double.random(in: 0...1, using: &random).squareRoot(),
            bearing: Double.random(in: 0..<360, using: &random))
    }

    /// A street-like path: alternate north-south and east-west legs of 100-400 m, like a grid city.
    mutating func streetPath(from start: Coordinate, to end: Coordinate) -> [Coordinate] {
        StreetTrip.corners(from: start, to: end, random: &random)
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
            if let until, now >= until {
                askForOptions(&vehicle, now: now, into: &out)
            }
        case .quoting(let ride, let pickup, let partySize, let deadline):
            if quoteReplies_[ride] != nil || now >= deadline {
                book(&vehicle, ride: ride, pickup: pickup, partySize: partySize, now: now, into: &out)
            }
        case .toPickup, .toDropOff:
            drive(&vehicle, dt: dt)
            if vehicle.route.isEmpty {
                vehicle.speed = 0
                if case .toPickup = vehicle.stage {
                    vehicle.stage = .waiting(until: now.addingTimeInterval(Double.random(in: 5...20, using: &random)))
                    if Bool.random(using: &random), let ride = vehicle.ride {
                        out.append(event(ride, "arrivedAtPickup"))
                    }
                } else {
                    if Double.random(in: 0..<1, using: &random) < 0.3, let ride = vehicle.ride {
                        out.append(event(ride, "arrivedAtDropOff"))
                    }
                    vehicle.stage = .done(stopAt: now.addingTimeInterval(8))
                }
            } else if case .toPickup = vehicle.stage, Double.random(in: 0..<1, using: &random) < cancelRate / 120,
                let ride = vehicle.ride
            {
                out.append(
                    OutgoingMessage(
                        topic: topics.control(.cancel, ride: ride),
                        payload: Array(#"{"canceledBy":"user","reason":"changed plans"}"#.utf8), control: true))
                vehicle.stage = .done(stopAt: now.addingTimeInterval(8))
            }
        case .waiting(let until):
            vehicle.speed = 0
            if now >= until {
                if Bool.random(using: &random), let ride = vehicle.ride { out.append(event(ride, "passengerOnBoard")) }
                vehicle.route = streetPath(from: vehicle.position, to: dropOffs[vehicle.id] ?? randomPlace())
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

    /// Speed changes, an occasional stop (a red light), and turns at each corner of the path.
    mutating func drive(_ vehicle: inout Vehicle, dt: Double) {
        if Double.random(in: 0..<1, using: &random) < 0.04 {
            vehicle.speed = 0
            return
        }
        vehicle.speed = min(14, max(4, vehicle.speed + Double.random(in: -1.5...2, using: &random)))
        var remaining = vehicle.speed * dt
        while remaining > 0, let target = vehicle.route.first {
            let distance = vehicle.position.distance(to: target)
            if distance <= remaining {
                vehicle.position = target
                vehicle.route.removeFirst()
                remaining -= distance
            } else {
                vehicle.position = vehicle.position.moved(
                    metres: remaining, bearing: vehicle.position.bearing(to: target))
                remaining = 0
            }
        }
        if vehicle.route.isEmpty { vehicle.speed = 0 }
    }

    mutating func fix(_ vehicle: Vehicle, now: Date) -> OutgoingMessage {
        // GPS noise of a few metres.
        let noisy = vehicle.position.moved(
            metres: Double.random(in: 0...3, using: &random), bearing: Double.random(in: 0..<360, using: &random))
        let payload: String
        if vehicle.ownTracks {
            payload =
                #"{"_type":"location","lat":\#(noisy.latitude),"lon":\#(noisy.longitude),"tst":\#(Int(now.timeIntervalSince1970)),"vel":\#(Int(vehicle.speed * 3.6)),"acc":5}"#
        } else {
            payload =
                #"{"vehicleId":"\#(vehicle.id)","timestamp":"\#(Timestamps.format(now))","latitude":\#(noisy.latitude),"longitude":\#(noisy.longitude),"speed":\#(vehicle.speed),"horizontalAccuracy":5}"#
        }
        return OutgoingMessage(
            topic: topics.position(vehicle: vehicle.id), payload: Array(payload.utf8), control: false)
    }

    func event(_ ride: String, _ type: String) -> OutgoingMessage {
        OutgoingMessage(
            topic: topics.control(.event, ride: ride), payload: Array(#"{"type":"\#(type)"}"#.utf8), control: true)
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
            ("rides/r-x/event", #"{"type":"warp"}"#),
            ("rides/r-x/start", #"{"rideIdentifier":"r-x"}"#),
        ]
        let (topic, payload) = cases[Int.random(in: 0..<cases.count, using: &random)]
        return OutgoingMessage(topic: topic, payload: Array(payload.utf8), control: !topic.hasSuffix("position"))
    }
}
