import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain
import RideStatusKit
import ServiceLifecycle

/// What share links show: a ride's status as its status topic carries it, read from the broker on a
/// connection of its own, so that a link works on every worker of a group and across handovers (the ride's
/// owner is wherever its bucket is; its retained status is the same everywhere).
///
/// A ride's status topic is subscribed while someone watches it, and for ``ShareFeed/linger`` after the last
/// reader, so a page that reloads or polls does not subscribe anew each time. Each status is checked as
/// anything read back from the broker is (A2): it must decode as a ride status of the ride its topic names;
/// what does not is logged and never shown.
final class ShareFeed<Transport: WorkerTransport>: Sendable {
    private let transport: Transport
    private let topics: RideTopics
    private let time: WorkerTime
    private let logger: Logger
    private let state = Locked(State())
    /// How long a ride's subscription outlives its last reader.
    static var linger: Duration { .seconds(60) }
    /// Events a watcher may have waiting; a slower page loses the oldest (the next status supersedes them).
    static var backlog: Int { 8 }
    /// The most rides watched at once: a flood of links cannot make the worker subscribe without bound.
    static var maximumRides: Int { 10_000 }
    /// The most pages following at once, in all and on one ride: more get 503 (a leaked link cannot open
    /// connections without bound).
    static var maximumWatchers: Int { 20_000 }
    static var maximumWatchersPerRide: Int { 100 }
    /// How often an idle stream gets a comment line: a page that went away is noticed by the failed write, and
    /// proxies keep the connection.
    static var keepalive: Duration { .seconds(15) }

    private struct State {
        var rides: [String: Watched] = [:]
        var nextID = 0
        var watcherCount = 0
        var lastKeepalive: Duration = .zero
        var finished = false
    }

    private struct Watched {
        /// The last status read, or an empty payload once the ride's retained status was cleared (it ended).
        var latest: [UInt8]?
        var watchers: [Int: Watcher] = [:]
        var lastUsed: Duration
    }

    private struct Watcher {
        var continuation: AsyncStream<[UInt8]>.Continuation
        /// When the link that opened the stream expires: the stream ends then.
        var until: Date
    }

    init(transport: Transport, topics: RideTopics, time: WorkerTime, logger: Logger) {
        self.transport = transport
        self.topics = topics
        self.time = time
        self.logger = logger
    }

    /// Connects, reads statuses until shutdown, and drops rides nobody has read for ``linger``. At shutdown its
    /// pages' streams end at once, so that they do not hold up the HTTP server's.
    func run() async {
        transport.start()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.consume() }
            group.addTask {
                while !Task.isCancelled && !self.isFinished {
                    try? await self.time.sleep(for: .seconds(5))
                    await self.sweep()
                }
            }
            try? await gracefulShutdown()
            self.finish()
            group.cancelAll()
        }
        await transport.disconnect(flushTimeout: .milliseconds(100))
    }

    private var isFinished: Bool { state.withLock { $0.finished } }

    func finish() {
        let watchers = state.withLock { state in
            state.finished = true
            defer { state.rides = [:] }
            return state.rides.values.flatMap { $0.watchers.values.map(\.continuation) }
        }
        for watcher in watchers { watcher.finish() }
    }

    // MARK: Readers

    /// The ride's status as last read from the broker, waiting up to `timeout` for the retained one when the
    /// ride is not watched yet; nil when none came (no such ride, or it ended).
    func current(_ ride: String, timeout: Duration = .seconds(2)) async -> [UInt8]? {
        let (known, subscribe) = state.withLock { state -> ([UInt8]??, Bool) in
            if var watched = state.rides[ride] {
                watched.lastUsed = time.instant
                state.rides[ride] = watched
                return (watched.latest.map { .some($0) }, false)
            }
            guard state.rides.count < Self.maximumRides, !state.finished else { return (.some(nil), false) }
            state.rides[ride] = Watched(lastUsed: time.instant)
            return (nil, true)
        }
        if let known { return known.flatMap { $0.isEmpty ? nil : $0 } }
        // The deadline holds whatever the broker does: a SUBACK waits for a connection that may be down.
        let deadline = time.instant + timeout
        if subscribe { Task { await self.subscribe(ride) } }
        // Read rarely (a page's first load, an API call): polled in small steps rather than woken, which keeps
        // the feed's state to its watchers.
        while !isFinished {
            if let latest = state.withLock({ $0.rides[ride]?.latest }) { return latest.isEmpty ? nil : latest }
            guard time.instant < deadline else { break }
            try? await time.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// A page's events for `ride`, each a complete SSE frame: `event: status` with the status as its topic
    /// carries it (the current one first, when known), and `event: ended` once the ride's status is cleared,
    /// after which the stream ends; it ends too when the link expires (`until`, within a sweep's 5 s). Nil when
    /// the feed follows as many pages or rides as it may (the caller answers 503).
    func watch(_ ride: String, until: Date) -> AsyncStream<[UInt8]>? {
        let (stream, continuation) = AsyncStream.makeStream(
            of: [UInt8].self, bufferingPolicy: .bufferingNewest(Self.backlog))
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        // Set before the watcher is registered, so that a stream ended at once is forgotten too.
        continuation.onTermination = { [weak self] _ in self?.forget(id, ride: ride) }
        let outcome = state.withLock { state -> (registered: Bool, subscribe: Bool) in
            guard !state.finished, state.watcherCount < Self.maximumWatchers else { return (false, false) }
            let known = state.rides[ride]
            guard known != nil || state.rides.count < Self.maximumRides,
                (known?.watchers.count ?? 0) < Self.maximumWatchersPerRide
            else { return (false, false) }
            var watched = known ?? Watched(lastUsed: time.instant)
            watched.watchers[id] = Watcher(continuation: continuation, until: until)
            watched.lastUsed = time.instant
            state.rides[ride] = watched
            state.watcherCount += 1
            // Yielded under the lock, so that no newer status delivered meanwhile goes out before this one.
            continuation.yield(Array(": connected\n\n".utf8))
            if let latest = watched.latest { continuation.yield(Self.frame(latest)) }
            return (true, known == nil)
        }
        guard outcome.registered else {
            continuation.finish()
            return nil
        }
        if outcome.subscribe { Task { await self.subscribe(ride) } }
        return stream
    }

    var watchedRides: Int { state.withLock { $0.rides.count } }

    var watcherCount: Int { state.withLock { $0.watcherCount } }

    private func forget(_ id: Int, ride: String) {
        state.withLock { state in
            if state.rides[ride]?.watchers.removeValue(forKey: id) != nil { state.watcherCount -= 1 }
            state.rides[ride]?.lastUsed = time.instant
        }
    }

    // MARK: The broker

    private func subscribe(_ ride: String) async {
        do {
            try await transport.subscribe(topics.status(ride: ride), qos: .atLeastOnce, options: .init())
        } catch {
            logger.warning(
                "share link: cannot read the ride's status from the broker",
                metadata: ["ride": "\(ride)", "error": "\(error)"])
        }
    }

    /// Every 5 s: ends the streams whose link has expired, sends idle streams a comment (a page gone away fails
    /// the write and is forgotten), and forgets rides nobody has watched or read for ``linger``.
    func sweep() async {
        let now = time.now
        let instant = time.instant
        let (expired, idle) = state.withLock {
            state -> ([AsyncStream<[UInt8]>.Continuation], [AsyncStream<[UInt8]>.Continuation]) in
            var expired: [AsyncStream<[UInt8]>.Continuation] = []
            for (ride, watched) in state.rides {
                for (id, watcher) in watched.watchers where watcher.until <= now {
                    expired.append(watcher.continuation)
                    state.rides[ride]?.watchers[id] = nil
                    state.watcherCount -= 1
                }
            }
            guard instant - state.lastKeepalive >= Self.keepalive else { return (expired, []) }
            state.lastKeepalive = instant
            return (expired, state.rides.values.flatMap { $0.watchers.values.map(\.continuation) })
        }
        for watcher in expired { watcher.finish() }
        for watcher in idle { watcher.yield(Array(": keepalive\n\n".utf8)) }
        await forgetUnused()
    }

    /// Rides nobody watches or has read for ``linger``: unsubscribed and forgotten. A ride watched again while
    /// its unsubscribe was on its way is subscribed again after it, so the broker's order cannot leave it unread.
    func forgetUnused() async {
        let now = time.instant
        let unused = state.withLock { state -> [String] in
            let unused = state.rides.filter {
                $0.value.watchers.isEmpty && now - $0.value.lastUsed >= Self.linger
            }.map(\.key)
            for ride in unused { state.rides[ride] = nil }
            return unused
        }
        guard !unused.isEmpty else { return }
        try? await transport.unsubscribe(unused.map { topics.status(ride: $0) })
        let back = state.withLock { state in unused.filter { state.rides[$0] != nil } }
        for ride in back { await subscribe(ride) }
    }

    private func consume() async {
        for await message in transport.messages {
            guard case .status(let ride) = topics.parse(message.topic) else { continue }
            if message.payload.isEmpty {
                deliver(ride, payload: [])
                continue
            }
            // A2: what the broker gives back is checked as fresh input before anyone sees it.
            guard Self.isShowable(message.payload, ride: ride) else {
                logger.error(
                    "share link: a retained or live status that does not decode as this ride's is not shown (A2)",
                    metadata: ["topic": "\(message.topic)", "bytes": "\(message.payload.count)"])
                continue
            }
            deliver(ride, payload: message.payload)
        }
    }

    /// A status of `ride` that decodes under the contract's rules, on one line (an SSE `data:` field).
    static func isShowable(_ payload: [UInt8], ride: String) -> Bool {
        guard !payload.contains(0x0A), !payload.contains(0x0D),
            let status = try? JSONDecoder.rideStatus.decode(RideStatusKit.RideStatus.self, from: Data(payload))
        else { return false }
        return status.rideIdentifier == ride
    }

    /// A status (or, empty, the ride's end) to the ride's pages; at the end their streams close.
    func deliver(_ ride: String, payload: [UInt8]) {
        let frame = Self.frame(payload)
        let ended = state.withLock { state -> [AsyncStream<[UInt8]>.Continuation] in
            guard state.rides[ride] != nil else { return [] }
            state.rides[ride]?.latest = payload
            let watchers = state.rides[ride]?.watchers ?? [:]
            // Yielded under the lock: two statuses delivered at once reach every page in the order they came.
            for watcher in watchers.values { watcher.continuation.yield(frame) }
            guard payload.isEmpty else { return [] }
            state.rides[ride]?.watchers = [:]
            state.watcherCount -= watchers.count
            return watchers.values.map(\.continuation)
        }
        for watcher in ended { watcher.finish() }
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        payload.isEmpty
            ? Array("event: ended\ndata: {}\n\n".utf8)
            : Array("event: status\ndata: ".utf8) + payload + Array("\n\n".utf8)
    }
}

extension ShareFeed: WorkerHTTPServer.ShareSource {}
