import Foundation
import Locking
import Logging
import RidePush
import RideStatusKit
import ServiceLifecycle

/// The one task that owns ride-push's state: every event goes to ``PushGroup``, ``PushConnection`` or the
/// ``SendQueue``, and their actions go out to the services that carry them out (``BrokerChanges``,
/// ``BrokerWrites``, ``Deliveries``).
struct PushCore: Service {
    let events: AsyncStream<RidePushService.Event>
    let state: State
    let now: @Sendable () -> Date

    func run() async {
        var state = self.state
        state.logger.info(
            "ride-push ready",
            metadata: ["push.apns": "\(state.enabled[.apns] == true)", "push.fcm": "\(state.enabled[.fcm] == true)"])
        for await event in events.cancelOnGracefulShutdown() {
            state.handle(event, now: now())
        }
        // What the core queued for the broker still goes out; the other outputs stay open, as each service beside
        // this one ends at its own turn of the graceful shutdown (one that ended before would fail the group).
        state.outputs.changes.finish()
    }

    /// Where the core's actions go.
    struct Outputs: Sendable {
        /// Back to the core: a registration's write, once stored.
        let input: AsyncStream<RidePushService.Event>.Continuation
        let changes: AsyncStream<BrokerChange>.Continuation
        let writes: AsyncStream<BrokerWrite>.Continuation
        let deliveries: AsyncStream<Delivery>.Continuation
    }

    struct State: Sendable {
        let member: String
        let settings: RidePushService.Settings
        /// Which services have a sender.
        let enabled: [PushDevice.Service: Bool]
        var group: PushGroup
        let outputs: Outputs
        let inbox: Locked<PushInbox>
        let metrics: PushMetrics
        let logger: Logger
        var connection: PushConnection
        var queue: SendQueue

        init(
            member: String, settings: RidePushService.Settings, enabled: [PushDevice.Service: Bool],
            group: PushGroup, outputs: Outputs, inbox: Locked<PushInbox>, metrics: PushMetrics, logger: Logger
        ) {
            self.member = member
            self.settings = settings
            self.enabled = enabled
            self.group = group
            self.outputs = outputs
            self.inbox = inbox
            self.metrics = metrics
            self.logger = logger
            connection = PushConnection(heartbeat: settings.heartbeat)
            queue = SendQueue(limit: settings.concurrentPushes)
        }

        var topics: RideTopics { settings.topics }

        mutating func handle(_ event: RidePushService.Event, now: Date) {
            switch event {
            case .status(let topic):
                // Taken already when a newer one's wake-up came first.
                guard let payload = inbox.withLock({ $0.take(topic: topic) }) else { return }
                message(topic: topic, payload: payload, now: now)
            case .message(let topic, let payload):
                message(topic: topic, payload: payload, now: now)
            case .register(let device, let ride, let expires, let reply):
                register(device, ride: ride, expires: expires, now: now, reply: reply)
            case .unregister(let device, let ride, let reply):
                unregister(device, ride: ride, reply: reply)
            case .stored(let ride, let key, let record, let reply):
                carryOut(group.record(ride: ride, key: key, record, local: true, now: now))
                reply()
            case .outcome(let push, let outcome):
                metrics.outcome(outcome, of: push)
                send(queue.finished())
                carryOut(group.outcome(outcome, of: push, now: now))
            case .groupSubscribed:
                carryOut(connection.subscribedGroup(now: now), now: now)
            case .connected(let incarnation):
                carryOut(connection.connected(incarnation: incarnation, now: now), now: now)
            case .disconnected:
                carryOut(connection.disconnected(), now: now)
            case .tick:
                tick(now: now)
            }
        }

        mutating func message(topic: String, payload: [UInt8], now: Date) {
            let read = PushInbox.read(topic: topic, payload: payload, topics: topics, now: now)
            switch read {
            case .status(let ride, let status):
                logger.trace(
                    "status",
                    metadata: [
                        "ride.id": "\(ride)", "status.sequence": "\(status.sequence)",
                        "push.serves": "\(group.planner.serves(ride: ride))",
                    ])
                carryOut(group.status(status, now: now))
            case .stop(let ride):
                carryOut(group.stopped(ride: ride, now: now))
            case .unreadableStatus(let ride, let bytes):
                // The worker validates what it publishes (V1-V7); anything else on a status topic is not shown to
                // a rider.
                metrics.unreadableStatus()
                logger.warning(
                    "a status that does not decode, or names another ride, is not pushed",
                    metadata: ["ride.id": "\(ride)", "bytes": "\(bytes)"])
            case .presence(let other, let sighting) where other == member:
                carryOut(connection.heard(own: sighting), now: now)
            case .presence(let other, let sighting):
                carryOut(group.presence(of: other, sighting, now: now))
            case .unreadablePresence(let other, let bytes):
                metrics.unreadableRecord()
                logger.warning(
                    "a push member's presence that does not read is ignored (A2, G1)",
                    metadata: ["push.member": "\(other)", "bytes": "\(bytes)"])
            case .record(let ride, let key, let record):
                carryOut(group.record(ride: ride, key: key, record, now: now))
            case .unreadableRecord(let ride, let problem):
                metrics.unreadableRecord()
                logger.warning(
                    "a registration record that does not read is ignored (A2)",
                    metadata: ["ride.id": "\(ride)", "reason": "\(problem.rawValue)"])
            case .other:
                break
            }
        }

        mutating func tick(now: Date) {
            logger.trace(
                "tick",
                metadata: ["push.serving": "\(group.isServing(now: now))", "push.records": "\(group.recordCount)"])
            carryOut(connection.tick(now: now), now: now)
            carryOut(group.tick(now: now))
            // Once a tick: `pending` counts over every activity.
            metrics.update(group: group, inFlight: queue.inFlight, waiting: queue.waitingCount, now: now)
        }

        // MARK: Registrations

        typealias Reply = @Sendable (Result<Bool, RidePushService.RegistrationRefusal>) -> Void

        func register(_ device: PushDevice, ride: String, expires: Date, now: Date, reply: @escaping Reply) {
            guard enabled[device.service] == true else { return reply(.failure(.serviceOff(device.service))) }
            guard connection.isConnected else { return reply(.failure(.brokerUnavailable)) }
            if let refusal = group.refusal(of: device, ride: ride) { return reply(.failure(.planner(refusal))) }
            let known = group.isRegistered(device, ride: ride)
            let record = PushGroup.Record(device: device, expires: expires)
            store(record, ride: ride, key: device.recordKey, reply: reply, answer: !known)
        }

        func unregister(_ device: PushDevice, ride: String, reply: @escaping Reply) {
            guard let key = group.key(of: device, ride: ride) else { return reply(.success(false)) }
            guard connection.isConnected else { return reply(.failure(.brokerUnavailable)) }
            store(nil, ride: ride, key: key, reply: reply, answer: true)
        }

        /// Writes a record (nil: deletes it); once stored it is applied at once, before the reply, so that the next
        /// request sees it (the broker's copy comes back later and changes nothing).
        private func store(_ record: PushGroup.Record?, ride: String, key: String, reply: @escaping Reply, answer: Bool)
        {
            let input = outputs.input
            let write = BrokerWrite.record(
                topic: topics.pushDevice(ride: ride, key: key), payload: record?.encoded() ?? [],
                then: { stored in
                    guard stored else { return reply(.failure(.brokerUnavailable)) }
                    let applied = input.yield(.stored(ride: ride, key: key, record, reply: { reply(.success(answer)) }))
                    if case .terminated = applied { reply(.failure(.shuttingDown)) }
                })
            outputs.writes.yield(write)
        }

        // MARK: Carrying out

        mutating func carryOut(_ action: PushConnection.Action?, now: Date) {
            switch action {
            case .announce(let incarnation, let since):
                let (topic, payload) = RidePushService.presence(
                    member: member, settings: settings, online: true, incarnation: incarnation, since: since, now: now)
                outputs.writes.yield(.presence(topic: topic, payload: payload))
            case .heardSelf: carryOut(group.heardSelf(now: now))
            case .stopServing: carryOut(group.disconnected())
            case nil: break
            }
        }

        mutating func carryOut(_ actions: GroupActions) {
            for ride in actions.unsubscribe { outputs.changes.yield(.unsubscribe(ride: ride)) }
            for ride in actions.subscribe { outputs.changes.yield(.subscribe(ride: ride)) }
            for record in actions.deleteRecords {
                outputs.changes.yield(.deleteRecord(topic: topics.pushDevice(ride: record.ride, key: record.key)))
            }
            for service in actions.renewCredential {
                metrics.renewal(service)
                outputs.deliveries.yield(.renew(service))
            }
            log(actions)
            send(queue.add(actions.pushes))
        }

        func send(_ pushes: [Push]) {
            for push in pushes { outputs.deliveries.yield(.push(push)) }
        }

        func log(_ actions: GroupActions) {
            for refused in actions.refusedRecords {
                logger.info(
                    "a registration the ride's owner does not take is deleted",
                    metadata: [
                        "ride.id": "\(refused.ride)", "push.device": "\(refused.device)",
                        "reason": "\(refused.refusal.rawValue)",
                    ])
            }
            for removed in actions.removed {
                metrics.removed(removed.reason)
                logger.debug(
                    "registration removed",
                    metadata: [
                        "ride.id": "\(removed.ride)", "push.device": "\(removed.device)",
                        "reason": "\(removed.reason.rawValue)",
                    ])
            }
            for (push, reason) in actions.refused {
                logger.warning(
                    "push refused",
                    metadata: ["ride.id": "\(push.ride)", "push.device": "\(push.device)", "reason": "\(reason)"])
            }
            for push in actions.pushes {
                logger.trace(
                    "push due",
                    metadata: [
                        "ride.id": "\(push.ride)", "push.device": "\(push.device)", "push.event": "\(push.event)",
                        "push.priority": "\(push.priority.rawValue)", "push.timestamp": "\(push.timestamp)",
                        "status.sequence": "\(push.sequence)",
                    ])
            }
        }
    }
}
