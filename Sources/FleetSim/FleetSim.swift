public import ArgumentParser
import AsyncHTTPClient
import BrokerOptions
import FleetModel
import Foundation
import Locking
import Logging
import MQTTClient
import NIOCore
import RideDomain
import RideStatusKit

/// `fleet-sim`: vehicles that drive street-like paths at 1 Hz and a dispatch that books rides for them.
/// Deterministic for a given seed (apart from wall-clock timestamps).
@main
struct FleetSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-sim", abstract: "Simulates a fleet and its dispatch against an MQTT broker.")

    @OptionGroup var access: BrokerOptions
    @Option(help: "Number of vehicles (1...100000).") var vehicles = 50
    @Option(help: "Random seed; the same seed gives the same fleet and rides.") var seed: UInt64 = 42
    @Option(help: "Fixes per second per vehicle.") var rate: Double = 1
    @Option(
        name: .customLong("bad-input-rate"), help: "Share of messages replaced by bad input of every class (0...1).")
    var badInputRate: Double = 0
    @Option(name: .customLong("owntracks"), help: "Share of vehicles that send OwnTracks payloads (0...1).")
    var ownTracksShare: Double = 0.1
    @Option(name: .customLong("cancel-rate"), help: "Share of rides the rider cancels (0...1).") var cancelRate:
        Double = 0.05
    @Option(help: "Stop after this many seconds (0: run until Ctrl-C).") var duration: Double = 0
    @Option(help: "Replay a recorded trace (GPX, or CSV of time,latitude,longitude) as one extra vehicle.")
    var replay: String?
    @Option(
        help: """
            Prefix of the ride identifiers. Default: r-<run>-, different for every run, so that rides an \
            earlier run left in the worker (restored from durable state, L5) are not booked again.
            """)
    var ridePrefix: String?
    @Option(help: "Centre of the simulated city, latitude,longitude.") var center = "52.5200,13.4050"
    @Option(help: "Radius of the simulated city in metres.") var radius: Double = 2500
    @Option(
        help: """
            How vehicles drive and report: grid (the old grid city, a fix every tick with speed), classes (issue \
            31's real driving: arterial, urban and mixed vehicles in the recorded trips' shares, a fix every 1 to \
            5 s, half without speed), or one class: arterial, urban, mixed.
            """)
    var driving: FleetDriving = .grid
    @Option(
        help: """
            Real streets: the GeoJSON of scripts/roads.sh (streets.geojson). Cars, pickups and drop-offs lie on \
            them (--center and --radius do not apply).
            """)
    var streets: String?
    @Option(
        help: """
            The routing engine (osrm-routed, scripts/roads.sh --serve), for example http://127.0.0.1:5005: each \
            leg is driven along its route, and dispatch sends that route (E2). Needs --streets.
            """)
    var osrm: String?

    func validate() throws {
        guard (1...100_000).contains(vehicles) else { throw ValidationError("--vehicles must be 1...100000") }
        guard rate > 0 && rate <= 10 else { throw ValidationError("--rate must be in (0, 10]") }
        if let ridePrefix, !Identifier.isValid(ridePrefix + "1000000") {
            throw ValidationError("--ride-prefix must make ride identifiers of letters, digits and . _ : - (3.2)")
        }
        guard (0...1).contains(badInputRate), (0...1).contains(ownTracksShare), (0...1).contains(cancelRate) else {
            throw ValidationError("rates and shares must be in 0...1")
        }
        if osrm != nil && streets == nil { throw ValidationError("--osrm needs --streets (where the cars are)") }
        if let osrm, !(osrm.hasPrefix("http://") || osrm.hasPrefix("https://")) || osrm.hasSuffix("/") {
            throw ValidationError("--osrm takes the engine's URL without a path, for example http://127.0.0.1:5005")
        }
    }

    func run() async throws {
        let parts = center.split(separator: ",").compactMap { Double($0) }
        guard parts.count == 2 else { throw ValidationError("--center takes latitude,longitude") }
        var logger = Logger(label: "fleet-sim")
        logger.logLevel = .info
        let clientID = "fleet-sim-\(seed)-\(UInt16.random(in: 0...UInt16.max))"
        let configuration = try access.configuration(clientID: clientID)
        let client = try MQTTClient(configuration: configuration, logger: logger)
        logger.info("connecting", metadata: ["broker": "\(access.brokerURL)"])
        try await client.connect(timeout: .seconds(30))
        // Quote replies (3.4) come back on this simulator's own topic under the reply prefix (A1); they are
        // handed to the world each tick.
        // Under the account's own reply prefix when it signs in (the ACL lets it read only replies/{account}/#).
        let replyTopic = "\(RideTopics().replyPrefix)/\(access.username.map { "\($0)/" } ?? "")\(clientID)/quotes"
        try await client.subscribe(replyTopic, qos: .atLeastOnce)
        let inbox = QuoteInbox()
        let reader = Task {
            for await message in client.messages where message.topic == replyTopic {
                if let correlation = message.properties.correlationData { inbox.add(correlation, message.payload) }
            }
        }
        defer { reader.cancel() }
        // MQTT 3.1.1 (a NATS cluster) has no Response Topic, so a quote request could not be answered (A1).
        let quotes = configuration.protocolVersion == .v5
        if !quotes { logger.notice("MQTT 3.1.1: no Response Topic (A1), so the simulated riders book without quotes") }
        var streetMap: StreetMap?
        if let streets {
            do {
                streetMap = try StreetMap(geoJSON: Array(try Data(contentsOf: URL(fileURLWithPath: streets))))
            } catch {
                throw ValidationError("--streets \(streets): \(error)")
            }
            logger.info(
                "real streets", metadata: ["file": "\(streets)", "metres": "\(Int(streetMap?.length ?? 0))"])
        }
        let routes = RouteInbox()
        var world = World(
            seed: seed, vehicles: vehicles,
            center: streetMap?.center ?? Coordinate(latitude: parts[0], longitude: parts[1]),
            radius: radius,
            ownTracksShare: ownTracksShare, cancelRate: cancelRate, badInputRate: badInputRate,
            quoteReplies: quotes ? replyTopic : nil,
            ridePrefix: ridePrefix ?? "r-\(String(UInt64(Date().timeIntervalSince1970) % 46_656, radix: 36))-",
            driving: driving, streets: streetMap)
        if let replay { try world.addReplay(try Trace.load(path: replay).map(\.coordinate)) }
        logger.info(
            "simulating",
            metadata: [
                "vehicles": "\(vehicles)", "seed": "\(seed)", "rate": "\(rate)/s", "driving": "\(driving.rawValue)",
            ])
        let started = ContinuousClock.now
        let period = Duration.seconds(1 / rate)
        var next = ContinuousClock.now
        var lastReport = ContinuousClock.now
        while duration == 0 || ContinuousClock.now - started < .seconds(duration) {
            let now = Date()
            for (correlation, payload) in inbox.drain() {
                world.receiveQuote(correlationData: correlation, payload: payload)
            }
            for (key, route) in routes.drain() { world.receiveRoute(key, route) }
            for message in world.step(now: now, dt: 1 / rate) {
                do {
                    try client.publishWithoutWaiting(
                        topic: message.topic, payload: message.payload,
                        qos: message.control ? .atLeastOnce : .atMostOnce, retain: message.retain,
                        properties: MQTTProperties(
                            responseTopic: message.responseTopic, correlationData: message.correlationData))
                } catch {
                    logger.warning("publish failed", metadata: ["error": "\(error)"])
                }
            }
            for request in world.routeRequests {
                if let osrm {
                    routes.fetch(request, engine: osrm, logger: logger)
                } else {
                    routes.add(request.key, nil)
                }
            }
            world.routeRequests = []
            if ContinuousClock.now - lastReport >= .seconds(10) {
                lastReport = ContinuousClock.now
                logger.info("progress", metadata: world.summary.mapValues { .string($0) })
            }
            next = next.advanced(by: period)
            try await Task.sleep(until: next, clock: .continuous)
        }
        await client.disconnect()
    }
}

/// Quote replies handed from the message reader to the simulation loop.
final class QuoteInbox: Sendable {
    private let items = Locked<[([UInt8], [UInt8])]>([])

    func add(_ correlation: [UInt8], _ payload: [UInt8]) { items.withLock { $0.append((correlation, payload)) } }

    func drain() -> [([UInt8], [UInt8])] {
        items.withLock { items in
            defer { items = [] }
            return items
        }
    }
}

/// Routes from the engine, asked in the background and handed to the simulation loop.
final class RouteInbox: Sendable {
    private let items = Locked<[(String, EngineRoute?)]>([])

    func add(_ key: String, _ route: EngineRoute?) { items.withLock { $0.append((key, route)) } }

    func drain() -> [(String, EngineRoute?)] {
        items.withLock { items in
            defer { items = [] }
            return items
        }
    }

    /// Asks `engine` (osrm-routed) for a leg's route; the answer, or nil with a warning, lands in this inbox. A
    /// connection the engine closed as it was reused (`remoteConnectionClosed`, seen when 40 cars ask at once) is
    /// tried again, up to three times in all, within the leg's wait (``World/routeWait``); an answer without a
    /// route is not.
    func fetch(_ request: World.RouteRequest, engine: String, logger: Logger) {
        Task {
            var failure: any Error = CancellationError()
            let deadline = ContinuousClock.now + .seconds(World.routeWait)
            for attempt in 1...3 {
                let left = deadline - ContinuousClock.now
                guard left > .milliseconds(50) else { break }
                do {
                    let response = try await HTTPClient.shared.execute(
                        HTTPClientRequest(url: engine + EngineRoute.path(from: request.from, to: request.to)),
                        timeout: .milliseconds(Int64((left / .milliseconds(1)).rounded(.down))))
                    let body = try await response.body.collect(upTo: 4 << 20)
                    add(request.key, try EngineRoute(osrm: Array(body.readableBytesView)))
                    return
                } catch let problem as EngineRoute.Problem {
                    failure = problem
                    break
                } catch {
                    failure = error
                    if attempt < 3 { try? await Task.sleep(for: .milliseconds(100 * attempt)) }
                }
            }
            logger.warning(
                "no route from the engine: this leg drives a made-up road",
                metadata: ["leg": "\(request.key)", "engine": "\(engine)", "error": "\(failure)"])
            add(request.key, nil)
        }
    }
}

extension FleetDriving: ExpressibleByArgument {}
