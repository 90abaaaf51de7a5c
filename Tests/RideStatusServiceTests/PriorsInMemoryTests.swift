import Foundation
import Locking
import MQTTClient
import RideDomain
import RideStatusTesting
import Testing

import struct RideStatusKit.RideTopics

@testable import RideStatusService

/// E1: the service's side of the shared priors, on the in-memory broker.
@Suite("Shared priors in the service")
struct PriorsInMemoryTests {
    static let topic = RideTopics().priors(key: AreaPriors.key(area: ""))

    @Test(
        "E1: a retained prior is read before the first ride; what the worker learns is shared at its graceful shutdown, not a minute later"
    )
    func readAtStartSharedAtShutdown() async throws {
        let broker = InMemoryBroker()
        broker.publish(
            Self.topic,
            AreaPriors(
                area: "", worker: "w-other", at: Date(), detourFactor: 1.2, rides: 30, stopShare: nil, legs: 0
            ).encoded(), retain: true)
        let clock = ManualClock()
        let running = try ServiceInMemoryTests.Running(broker: broker, clock: clock)
        try await running.ready()
        let worker = running.worker
        // Read before any ride: the first ride outside every area starts from it, not rides.detourFactor.
        #expect(worker.core.withLock { $0.engine.learning.learned[""]?.factor } == 1.2)
        // The first share (nothing learned yet) is done; the next is rides.priorsShareInterval (60 s) away.
        try await running.waitFor("the first share's time") {
            worker.core.withLock { $0.lastPriorsShare != .distantPast }
        }
        worker.core.withLock { core in
            _ = core.engine.learning.learn(
                driven: 3000, straight: 2000, area: nil, configuration: core.engine.configuration)
        }
        // 59 s of the worker's time, every timer run at its time: still the other worker's priors.
        try await running.advance(.seconds(59))
        let before = running.broker.retained(Self.topic).flatMap { try? JSONParser.parse($0.payload) }
        #expect(before?["worker"]?.stringValue == "w-other", "not shared before the interval")
        await running.stop()
        let shared = try #require(running.broker.retained(Self.topic))
        let decoded = try AreaPriors.decode(
            shared.payload, key: AreaPriors.key(area: ""), decoder: InputDecoder(), now: clock.wallTime,
            futureTolerance: 5)
        let priors = try #require(decoded)
        #expect(priors.worker == "w-mem" && priors.rides == 31)
        // 1.2 (adopted) + 0.05 * min(1.5 - 1.2, detourRise 0.1).
        #expect(abs(priors.detourFactor - 1.205) < 1e-9)
    }
}
