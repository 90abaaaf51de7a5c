import Foundation
import Locking
import Logging
import MQTTClient
import RideDomain
import RideStatusKit
import ServiceLifecycle

/// What share links show (issue 30): a ride's status as its status topic carries it, read from the broker on a
/// connection of its own, so that a link works on every worker of a group and across handovers (the ride's
/// owner is wherever its bucket is; its retained status is the same everywhere).
///
/// A ride's status topic is subscribed while someone watches it, and for ``ShareFeed/linger`` after the last
/// reader, so a page that reloads or polls does not subscribe anew each time. Each status is checked as
/// anything read back from the broker is (A2): it must decode as a ride status of the ride its topic names;
/// what does not is logged and never shown.
final class ShareFeed<Transport: WorkerTransport>: Sendable {
    private let transport: Transport
    private let topics: Topics
    private let time: WorkerTime
    private let logger: Logger
    private let state = Locked(State())
    /// How long a ride's subscription outlives its last reader.
    static var linger: Duration { .seconds(60) }
    /// Events a watcher may have waiting; a slower page loses the oldest (the next status supersedes them).
    static var backlog: Int { 8 }
    /// The most rides watched at once: a flood of links cannot make the worker subscribe without bound.
    static var maximumRides: Int { 10_000 }

    private struct State {
        var rides: [String: Watched] = [:]
        var nextID = 0
        var finished = false
    }

    private struct Watched {
        /// The last status read, or an empty payload once the ride's retained status was cleared (it ended).
        var latest: [UInt8]?
        var watchers: [Int: AsyncStream<[UInt8]>.Continuation] = [:]
        var lastUsed: Duration
    }

    init(transport: Transport, topics: Topics, time: WorkerTime, logger: Logger) {
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
                    await self.forgetUnused()
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
            return state.rides.values.flatMap { $0.watchers.values }
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
        if subscribe { await self.subscribe(ride) }
        // Read rarely (a page's first load, an API call): polled in small steps rather than woken, which keeps
        // the feed's state to its watchers.
        let deadline = time.instant + timeout
        while !isFinished {
            if let latest = state.withLock({ $0.rides[ride]?.latest }) { return latest.isEmpty ? nil : latest }
            guard time.instant < deadline else { break }
            try? await time.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// A page's events for `ride`, each a complete SSE frame: `event: status` with the status as its topic
    /// carries it (the current one first, when known), and `event: ended` once the ride's status is cleared.
    func watch(_ ride: String) -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: [UInt8].self, bufferingPolicy: .bufferingNewest(Self.backlog))
        let (id, latest, subscribe, refused) = state.withLock { state -> (Int, [UInt8]?, Bool, Bool) in
            state.nextID += 1
            let id = state.nextID
            guard !state.finished else { return (id, nil, false, true) }
            var watched = state.rides[ride]
            let subscribe = watched == nil
            if subscribe && state.rides.count >= Self.maximumRides { return (id, nil, false, true) }
            watched = watched ?? Watched(lastUsed: time.instant)
            watched?.watchers[id] = continuation
            watched?.lastUsed = time.instant
            state.rides[ride] = watched
            return (id, watched?.latest, subscribe, false)
        }
        continuation.onTermination = { [weak self] _ in self?.forget(id, ride: ride) }
        if refused {
            continuation.finish()
            return stream
        }
        continuation.yield(Array(": connected\n\n".utf8))
        if let latest { continuation.yield(Self.frame(latest)) }
        if subscribe { Task { await self.subscribe(ride) } }
        return stream
    }

    var watchedRides: Int { state.withLock { $0.rides.count } }

    private func forget(_ id: Int, ride: String) {
        state.withLock { state in
            state.rides[ride]?.watchers[id] = nil
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

    /// Rides nobody watches or has read for ``linger``: unsubscribed and forgotten.
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

    private func deliver(_ ride: String, payload: [UInt8]) {
        let watchers = state.withLock { state -> [AsyncStream<[UInt8]>.Continuation] in
            guard state.rides[ride] != nil else { return [] }
            state.rides[ride]?.latest = payload
            return Array(state.rides[ride]?.watchers.values ?? [:].values)
        }
        let frame = Self.frame(payload)
        for watcher in watchers { watcher.yield(frame) }
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        payload.isEmpty
            ? Array("event: ended\ndata: {}\n\n".utf8)
            : Array("event: status\ndata: ".utf8) + payload + Array("\n\n".utf8)
    }
}

extension ShareFeed: WorkerHTTPServer.ShareSource {}
