import Foundation
import Locking
import Logging
import RidePush
import RideStatusKit
import ServiceLifecycle

// The small services that carry out ``PushCore``'s actions; each owns one kind of I/O.

/// An ordered change on the broker: a ride's unsubscribe never overtakes its subscribe.
enum BrokerChange: Sendable {
    case subscribe(ride: String)
    case unsubscribe(ride: String)
    /// An empty retained message on a registration's topic.
    case deleteRecord(topic: String)
}

/// A write straight to the client, beside the ordered changes.
enum BrokerWrite: Sendable {
    /// This process's presence, which must not wait behind thousands of subscriptions.
    case presence(topic: String, payload: [UInt8])
    /// A registration's record: `then` learns whether the broker stored it within the time limit.
    case record(topic: String, payload: [UInt8], then: @Sendable (Bool) -> Void)
}

/// Work for the senders.
enum Delivery: Sendable {
    case push(Push)
    /// A service refused its credential: make a new one.
    case renew(PushDevice.Service)
}

/// Subscribes to the group's presences and registrations (both retained), then tells the core, which announces
/// this process only after that: nothing is served before its own presence is back.
struct GroupSubscription: Service {
    let broker: RidePushService.Broker
    let topics: RideTopics
    let input: AsyncStream<RidePushService.Event>.Continuation
    let logger: Logger

    func run() async throws {
        // Refused (an ACL without the broker's push role, say): ride-push stops with the reason, rather than
        // announce itself and take a share of the rides it could never serve.
        do {
            try await broker.subscribe(topics.pushMemberFilter)
            try await broker.subscribe(topics.pushDeviceFilter)
        } catch {
            logger.critical(
                "could not subscribe to the group's presences and registrations (the broker's push role?)",
                metadata: ["error": "\(error)"])
            throw error
        }
        input.yield(.groupSubscribed)
        // Ends at its own turn of a graceful shutdown: a service that ends out of turn fails the group.
        try? await gracefulShutdown()
    }
}

/// The planner's clock: a tick every `every`, for retries and refreshes that are due and the heartbeat.
struct Ticker: Service {
    let clock: any Clock<Duration>
    let every: Duration
    let input: AsyncStream<RidePushService.Event>.Continuation

    func run() async {
        let (clock, every, input) = (clock, every, input)
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await clock.sleep(for: every)
                input.yield(.tick)
            }
        }
    }
}

/// Subscriptions, unsubscriptions and record deletions, one at a time in the order the core decided them. At a
/// shutdown it carries out what the core queued before it stopped (a record deletion left undone stays retained
/// until another owner deletes it), then waits for its own turn.
struct BrokerChanges: Service {
    let changes: AsyncStream<BrokerChange>
    let broker: RidePushService.Broker
    let topics: RideTopics
    let logger: Logger

    func run() async {
        // Ends when the core, stopping, finishes the stream (or when cancelled).
        for await change in changes {
            do {
                switch change {
                case .subscribe(let ride): try await broker.subscribe(topics.status(ride: ride))
                case .unsubscribe(let ride): try await broker.unsubscribe(topics.status(ride: ride))
                case .deleteRecord(let topic): try await broker.publish(topic, [], true)
                }
            } catch {
                logger.warning("a change on the broker failed", metadata: ["error": "\(error)"])
            }
        }
        try? await gracefulShutdown()
    }
}

/// Presences and registration records, each written at once; a record with a time limit, so that an HTTP request
/// waits at most ``RidePushService/Settings/recordWriteLimit`` for a broker that is gone but not yet noticed.
struct BrokerWrites: Service {
    let writes: AsyncStream<BrokerWrite>
    let broker: RidePushService.Broker
    let clock: any Clock<Duration>
    let limit: Duration

    func run() async {
        let (broker, clock, limit) = (broker, clock, limit)
        await withDiscardingTaskGroup { group in
            for await write in writes.cancelOnGracefulShutdown() {
                switch write {
                case .presence(let topic, let payload):
                    group.addTask { try? await broker.publish(topic, payload, true) }
                case .record(let topic, let payload, let then):
                    let once = Once()
                    group.addTask {
                        let stored = (try? await broker.publish(topic, payload, true)) != nil
                        if once.claim() { then(stored) }
                    }
                    group.addTask {
                        try? await clock.sleep(for: limit)
                        if once.claim() { then(false) }
                    }
                }
            }
            group.cancelAll()
        }
    }
}

/// Pushes through their service's sender, each in a task of its own (``SendQueue`` bounds how many), and
/// credential renewals; every outcome goes back to the core.
struct Deliveries: Service {
    let deliveries: AsyncStream<Delivery>
    let senders: RidePushService.Senders
    let input: AsyncStream<RidePushService.Event>.Continuation

    func run() async {
        let (senders, input) = (senders, input)
        await withDiscardingTaskGroup { group in
            for await delivery in deliveries.cancelOnGracefulShutdown() {
                switch delivery {
                case .push(let push):
                    let send = push.device.service == .apns ? senders.apns : senders.fcm
                    group.addTask {
                        let outcome = await send?(push) ?? .refused(reason: "no sender for \(push.device.service)")
                        input.yield(.outcome(push, outcome))
                    }
                case .renew(let service):
                    group.addTask { await senders.renew(service) }
                }
            }
            group.cancelAll()
        }
    }
}

/// Claimed once: the first of two racing tasks to finish answers.
final class Once: Sendable {
    private let claimed = Locked(false)

    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}
