import CoreMetrics
import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain

import struct RideStatusKit.RideStatus
import struct RideStatusKit.RideTopics
import enum RideStatusKit.Rule

/// Carries out the engine's ``RideAction``s: publishes, clears, subscription changes, dead letters and the
/// log lines that name the rule. Called while the service holds the engine's lock, so the statuses of a
/// ride leave in sequence order (C5); nothing here waits on the network.
struct ActionExecutor<Transport: WorkerTransport>: Sendable {
    let transport: Transport
    let topics: RideTopics
    /// G2: the `worker` user property of every status and state publish.
    let workerID: String
    let metrics: WorkerMetrics
    let logger: Logger
    let changes: SubscriptionQueue
    /// L3: the QoS of the per-vehicle subscriptions (``WorkerSettings/manySubscriptionsQoS``).
    let vehicleQoS: MQTTQoS
    /// G6: the etcd lease's end: past it nothing of a ride goes out (always open in broker-only mode).
    let grantLease: GrantLease
    /// G5: the rides ended lately, whose clears a lapse may have dropped unsent; sent again at the confirmation.
    let recentClears = Locked(RecentClears())

    /// Returns whether a status was published. A status the broker has no room for
    /// (``WorkerTransport/publishRoom``) does not leave: `engine` makes its ride due again, so it publishes
    /// its newest status as soon as there is room (coalesced at the source; nothing waits in memory).
    @discardableResult
    func execute(_ actions: [RideAction], engine: inout RideEngine, now: Date) -> Bool {
        var published = false
        for action in actions {
            switch action {
            case .publish(let status, let state, let gap):
                // G6: past the etcd lease another worker may hold the ride; the grant machine stops it next.
                guard let gate = grantLease.liveToken else { continue }
                guard transport.publishRoom >= (state == nil ? 1 : 2) else {
                    engine.deferStatus(of: status.rideIdentifier, stateDropped: state != nil, now: now)
                    continue
                }
                let epoch = state?.epoch ?? engine.epoch(of: status.rideIdentifier) ?? 1
                published = publish(status, state: state, gap: gap, epoch: epoch, gate: gate) || published
            case .clear(let ride, let epoch):
                clear(ride, epoch: epoch)
                recentClears.withLock { $0.note(ride, epoch: epoch, at: now) }
                logger.info("ride ended (L2)", metadata: ["ride.id": "\(ride)"])
            case .subscribe(let vehicle):
                changes.subscribe(topics.position(vehicle: vehicle), qos: vehicleQoS)
            case .unsubscribe(let vehicle):
                changes.unsubscribe(topics.position(vehicle: vehicle))
            case .deadLetter(let letter):
                logger.warning(
                    "input rejected (\(letter.reason.rule))",
                    metadata: [
                        "reason": "\(letter.reason.rawValue)", "detail": "\(letter.detail)", "topic": "\(letter.topic)",
                    ])
                try? transport.publish(topics.deadLetter, letter.encoded())
                metrics.deadLetters.increment()
            case .invalidStatus(let ride, let violation):
                logger.error(
                    "status failed validation (\(violation.rule)); last valid status republished (V7)",
                    metadata: ["ride.id": "\(ride)", "detail": "\(violation.detail)"])
            }
        }
        return published
    }

    /// L2: the ride's retained status and state, cleared.
    func clear(_ ride: String, epoch: UInt64) {
        guard let gate = grantLease.liveToken else { return }  // G6: another worker may hold the ride now
        let owner = ownership(epoch: epoch)
        try? transport.publish(topics.status(ride: ride), [], retain: true, properties: owner, gate: gate)
        try? transport.publish(topics.state(ride: ride), [], retain: true, properties: owner, gate: gate)
    }

    /// The state (when the engine asks for one) first, then the status: the state's sequence ceiling reaches
    /// the broker before any status above the previous ceiling, so a restart never reuses a published
    /// sequence (C5, L5).
    /// - Parameter gate: G6: the grant's gate token both go out under (``GrantLease/liveToken``).
    private func publish(_ status: RideStatus, state: Ride?, gap: Double?, epoch: UInt64, gate: UInt64) -> Bool {
        let owner = ownership(epoch: epoch)
        do {
            if let state {
                try transport.publish(
                    topics.state(ride: status.rideIdentifier), state.durableState(), retain: true, properties: owner,
                    gate: gate)
            }
            try transport.publish(
                topics.status(ride: status.rideIdentifier), status.encoded(), retain: true, properties: owner,
                gate: gate)
        } catch {
            logger.error(
                "status publish failed", metadata: ["ride.id": "\(status.rideIdentifier)", "error": "\(error)"])
            return false
        }
        // Never a trap: a gap that is not a plausible duration (a restored state's odd time) is not recorded.
        if let gap, let nanoseconds = Int64(exactly: (gap * 1e9).rounded()), nanoseconds >= 0 {
            metrics.cadenceGap.recordNanoseconds(nanoseconds)
        }
        return true
    }

    /// G2: the MQTT 5 user properties of a status or state publish: who published it, under which epoch of
    /// the ride's ownership. (MQTT 3.1.1 carries no properties; the durable state keeps the epoch there.)
    func ownership(epoch: UInt64) -> MQTTProperties {
        MQTTProperties(userProperties: [("worker", workerID), ("epoch", String(epoch))])
    }

    /// A2: another client wrote or deleted the state of a ride this worker runs. The worker's own is the
    /// truth: it is written again at once, so that a restart does not lose the ride.
    func rewriteState(of ride: Ride, payloadBytes: Int) {
        logger.warning(
            "ride state changed on the broker by another client (A2); writing this worker's again",
            metadata: ["ride.id": "\(ride.rideIdentifier)", "payload.bytes": "\(payloadBytes)"])
        writeState(of: ride)
    }

    /// L5, G3: the ride's durable state, retained, under its epoch (a release, a rewrite, an upgrade's move).
    /// - Parameter purpose: what the write is for, in the log line if it fails.
    func writeState(of ride: Ride, purpose: String = "rewrite") {
        guard let gate = grantLease.liveToken else { return }  // G6: another worker may hold the ride now
        do {
            try transport.publish(
                topics.state(ride: ride.rideIdentifier), ride.durableState(), retain: true,
                properties: ownership(epoch: ride.epoch), gate: gate)
        } catch {
            logger.error(
                "ride state \(purpose) failed", metadata: ["ride.id": "\(ride.rideIdentifier)", "error": "\(error)"])
        }
    }
}

/// G5: the clears of the last ``window`` seconds (at most ``limit``), oldest first; amortised O(1) a clear (a
/// head index, compacted now and then), since bookings end at thousands a second under load.
struct RecentClears {
    static let window: TimeInterval = 60
    static let limit = 10_000
    private var entries: [(ride: String, epoch: UInt64, at: Date)] = []
    private var head = 0

    mutating func note(_ ride: String, epoch: UInt64, at now: Date) {
        while head < entries.count, now.timeIntervalSince(entries[head].at) > Self.window { head += 1 }
        if entries.count - head >= Self.limit { head += 1 }
        if head >= 1024, head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        entries.append((ride, epoch, now))
    }

    func since(_ now: Date) -> [(ride: String, epoch: UInt64)] {
        entries[head...].filter { now.timeIntervalSince($0.at) <= Self.window }.map { ($0.ride, $0.epoch) }
    }
}
