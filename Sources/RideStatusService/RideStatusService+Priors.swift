import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain

import struct RideStatusKit.DeadLetter

// MARK: - Priors shared by the group (E1)

extension RideStatusService {
    /// E1, A2: one area's priors from the broker: another worker's, or this worker's own from an earlier run
    /// (retained; its echoes from this run are skipped). Checked like any input by the engine; a refusal is logged
    /// naming A2, dead-lettered, and leaves this worker's learning as it was.
    func receivePriors(_ message: MQTTMessage, key: String, now: Date, core: inout Core) {
        let (adopted, refusal, actions) = core.engine.receivePriors(
            key: key, topic: message.topic, payload: message.payload, now: now, worker: identity.id, since: startedAt)
        if let refusal {
            metrics.priorsRefused.increment()
            logger.warning(
                "shared priors refused (A2); this worker's learning stays as it was",
                metadata: [
                    "topic": "\(message.topic)", "reason": "\(refusal.reason.rawValue)", "detail": "\(refusal.detail)",
                ])
        }
        if let adopted {
            metrics.priorsAdopted.increment()
            logger.debug(
                "shared priors weighed in (E1)",
                metadata: [
                    "area": "\(adopted.area)", "from": "\(adopted.worker)", "rides": "\(adopted.rides)",
                    "legs": "\(adopted.legs)",
                ])
        }
        executor.execute(actions, engine: &core.engine, now: now)
    }

    /// E1: every `rides.priorsShareInterval`, what the areas learned since the last share, each retained on its
    /// area's topic; called with the heartbeat, once a second. Only a recovered, connected worker shares: one
    /// that has not read the group's priors yet would overwrite them with its own few rides.
    /// - Parameter force: share at once, whatever the interval (a graceful shutdown: what the last minute taught
    ///   is not lost with the process).
    func sharePriors(now: Date, force: Bool = false, core: inout Core) {
        let interval = settings.ride.priorsShareInterval
        guard interval > 0, force || now.timeIntervalSince(core.lastPriorsShare) >= interval,
            core.lifecycle.recovered, transport.isConnected
        else { return }
        core.lastPriorsShare = now
        for (area, topic, payload) in core.engine.priorsToShare(worker: identity.id, now: now) {
            do {
                try transport.publish(topic, payload, retain: true)
                metrics.priorsShared.increment()
            } catch {
                // Shared again at the next interval; until then the group keeps the last.
                core.engine.markPriorsChanged(area)
                logger.warning(
                    "sharing priors failed (E1)", metadata: ["topic": "\(topic)", "error": "\(error)"])
            }
        }
    }
}
