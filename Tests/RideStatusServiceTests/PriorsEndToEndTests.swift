import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

import struct RideStatusKit.RideTopics

/// E1: what an area taught a worker, shared through a real mosquitto as a retained message and read
/// back under A2.
@Suite("E1 priors shared through the broker", .serialized)
struct PriorsEndToEndTests {
    /// The rides' area in the shipped catalog (`config/ride-options.yaml`, which the worker reads by default).
    static let topic = RideTopics().priors(key: AreaPriors.key(area: "berlin"))

    @Test(
        "E1, A2: a completed ride's lesson is shared retained; after a restart new rides start from it; forged priors are dead letters naming A2"
    )
    func sharedAcrossRestart() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(
                broker: broker, workerID: "w-pri", interval: 1, extra: ["--set", "rides.priorsShareInterval=1"])
            try await worker.start()
            let observer = try await Observer(
                broker, filters: ["rides/+/status", "ridestatus/deadletter", "ridestatus/priors/+"])
            try await observer.publish("rides/r-1/start", booking(ride: "r-1", vehicle: "v-1"))
            try await observer.waitFor("confirmed") { _ in observer.statuses("r-1").last?.phase == "confirmed" }
            try await observer.publish("rides/r-1/event", #"{"type":"arrivedAtPickup"}"#)
            try await observer.publish("rides/r-1/event", #"{"type":"passengerOnBoard"}"#)
            try await observer.waitFor("ongoing") { _ in observer.statuses("r-1").last?.phase == "ongoing" }
            // Driven along two sides of a right angle: road over straight line is well above 1.3.
            let corner = Coordinate(latitude: dropOffPoint.latitude, longitude: pickupPoint.longitude)
            var points: [Coordinate] = []
            for step in 0...10 {
                let share = Double(step) / 10
                points.append(
                    Coordinate(
                        latitude: pickupPoint.latitude + (corner.latitude - pickupPoint.latitude) * share,
                        longitude: pickupPoint.longitude))
            }
            for step in 1...10 {
                let share = Double(step) / 10
                points.append(
                    Coordinate(
                        latitude: corner.latitude,
                        longitude: corner.longitude + (dropOffPoint.longitude - corner.longitude) * share))
            }
            var time = Date().addingTimeInterval(-Double(points.count) * 10 - 5)
            for point in points {
                time = time.addingTimeInterval(10)
                try await observer.publish("fleet/vehicles/v-1/position", fix("v-1", point, at: time, speed: 12))
            }
            let ratio =
                (pickupPoint.distance(to: corner) + corner.distance(to: dropOffPoint))
                / pickupPoint.distance(to: dropOffPoint)
            try await observer.publish("rides/r-1/event", #"{"type":"arrivedAtDropOff"}"#)
            try await observer.waitFor("completed") { _ in observer.statuses("r-1").last?.phase == "completed" }

            // Shared within the interval, retained, on the area's topic.
            let shared = try await observer.waitFor("the area's priors shared") { messages in
                messages.contains { $0.topic == Self.topic && !$0.payload.isEmpty }
            }.last { $0.topic == Self.topic }
            let sharedPayload = try #require(shared).payload
            let decoded = try AreaPriors.decode(
                sharedPayload, key: AreaPriors.key(area: "berlin"), decoder: InputDecoder(), now: Date(),
                futureTolerance: 5)
            let written = try #require(decoded)
            #expect(written.worker == "w-pri" && written.rides == 1 && written.area == "berlin")
            let expected = 1.3 + 0.05 * (ratio - 1.3)
            #expect(abs(written.detourFactor - expected) < 0.01, "\(written.detourFactor), ratio \(ratio)")
            await worker.kill()

            // Forged priors beside the genuine ones: an area hashing to another key, and a factor out of range.
            try await observer.publish(
                RideTopics().priors(key: "0000000000000001"),
                #"{"area":"","worker":"w-x","at":"\#(Timestamps.format(Date()))","detourFactor":1.2,"rides":3,"legs":0}"#,
                retain: true)
            try await observer.publish(
                RideTopics().priors(key: AreaPriors.key(area: "nowhere")),
                #"{"area":"nowhere","worker":"w-x","at":"\#(Timestamps.format(Date()))","detourFactor":9,"rides":3,"legs":0}"#,
                retain: true)
            observer.clear()
            let states = try await Observer(broker, filters: [RideTopics().state(ride: "r-2")])
            try await worker.start()
            try await observer.publish("rides/r-2/start", booking(ride: "r-2", vehicle: "v-2"))
            let state = try await states.waitFor("r-2's durable state") { !$0.isEmpty }
            let statePayload = try #require(state.last).payload
            let factor = try #require(try JSONParser.parse(statePayload)["detourFactor"]?.doubleValue)
            #expect(
                abs(factor - written.detourFactor) < 1e-9,
                "a new ride after the restart starts from the shared factor, not rides.detourFactor's 1.3")
            let letters = try await observer.waitFor("two dead letters") { messages in
                messages.filter { $0.topic == "ridestatus/deadletter" }.count >= 2
            }.filter { $0.topic == "ridestatus/deadletter" }.map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(letters.allSatisfy { $0.contains("A2") }, Comment(rawValue: letters.joined(separator: "\n")))
            #expect(
                letters.contains { $0.contains("identifierMismatch") }
                    && letters.contains { $0.contains("invalidField") },
                Comment(rawValue: letters.joined(separator: "\n")))
            #expect(worker.logText.contains("shared priors refused (A2)"))
            #expect(worker.readyStatus() == 200)
            await states.stop()
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }
}
