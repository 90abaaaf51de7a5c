import Foundation
import Locking
import RideDomain
import RideJSON
import ServiceLifecycle

/// The live map's updates, as Server-Sent Events (`GET /v1/live`). Once a second, and only while someone
/// watches, it walks the active rides in pieces (the worker's lock is taken per piece of
/// ``LiveFeed/piece`` rides, never for the whole fleet), and sends each watcher the rides that changed since
/// the second before, the rides gone, and the header's figures. So a page gets at most one update per ride
/// per second however fast fixes come. A new watcher, or one that fell behind, gets the whole fleet once.
final class LiveFeed: Sendable {
    private let reader: any FleetReader
    private let interval: Duration
    private let time: WorkerTime
    private let state = Locked(State())
    /// Rides per piece of the walk: about a millisecond of the lock each on this machine.
    static let piece = 2_000
    /// Events a watcher may have waiting; one more and it gets the whole fleet again once it catches up.
    static let backlog = 4

    private struct State {
        var watchers: [Int: Watcher] = [:]
        var nextID = 0
        /// The rides as last sent; kept only while anyone watches.
        var previous: [String: RideSummary] = [:]
        /// Refused inputs at the last tick, and when: the header's rate is over the time really elapsed.
        var lastRejected: (count: Int, at: Duration)?
        var finished = false
    }

    private struct Watcher {
        var continuation: AsyncStream<[UInt8]>.Continuation
        var needsEverything = true
    }

    init(reader: any FleetReader, interval: Duration = .seconds(1), time: WorkerTime = .system) {
        self.reader = reader
        self.interval = interval
        self.time = time
    }

    /// A new watcher's events (each a complete SSE frame); it ends when the server shuts down.
    func watch() -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: [UInt8].self, bufferingPolicy: .bufferingOldest(Self.backlog))
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        // Set before the watcher is registered, so that a stream ended at once is forgotten too.
        continuation.onTermination = { [weak self] _ in self?.forget(id) }
        let registered = state.withLock { state in
            guard !state.finished else { return false }
            state.watchers[id] = Watcher(continuation: continuation)
            return true
        }
        guard registered else {
            continuation.finish()
            return stream
        }
        continuation.yield(Array(": connected\n\n".utf8))
        return stream
    }

    var watcherCount: Int { state.withLock { $0.watchers.count } }

    private func forget(_ id: Int) {
        state.withLock { state in
            state.watchers[id] = nil
            if state.watchers.isEmpty {
                state.previous = [:]
                state.lastRejected = nil
            }
        }
    }

    /// Ticks until graceful shutdown (or cancellation), then ends every watcher's stream, so that the HTTP
    /// server's shutdown is not held up by open event streams.
    func run() async {
        await withGracefulShutdownHandler {
            while !Task.isCancelled && !isFinished {
                try? await time.sleep(for: interval)
                if watcherCount > 0 { tick() }
            }
        } onGracefulShutdown: {
            self.finish()
        }
        finish()
    }

    private var isFinished: Bool { state.withLock { $0.finished } }

    func finish() {
        let watchers = state.withLock { state in
            state.finished = true
            defer { state.watchers = [:] }
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.continuation.finish() }
    }

    /// One second's events: walks the rides, compares with what was sent, and sends.
    /// - Parameter instant: the time on the worker's clock (tests give it).
    func tick(instant: Duration? = nil) {
        let now = time.now
        let instant = instant ?? time.instant
        var current: [String: RideSummary] = [:]
        var start = 0
        while true {
            let (summaries, next) = reader.summaries(from: start, limit: Self.piece)
            for summary in summaries { current[summary.rideIdentifier] = summary }
            guard let next else { break }
            start = next
        }
        let overview = reader.overview()
        let (previous, rejectedPerMinute) = state.withLock { state in
            defer {
                state.previous = current
                state.lastRejected = (overview.rejectedInputs, instant)
            }
            guard let last = state.lastRejected else { return (state.previous, 0.0) }
            let elapsed = instant - last.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(max(0, overview.rejectedInputs - last.count)) * 60 / seconds : 0
            return (state.previous, rate)
        }
        let header = Header(overview: overview, rejectedPerMinute: rejectedPerMinute, time: now)
        // Each form is written once, and only when a watcher needs it (all need the whole fleet at first).
        var everything: [UInt8]?
        var differences: [UInt8]?
        let watchers = state.withLock { state in state.watchers }
        var fellBehind: [Int] = []
        var caughtUp: [Int] = []
        for (id, watcher) in watchers {
            let event: [UInt8]
            if watcher.needsEverything {
                if everything == nil {
                    everything = Self.event(
                        updated: current.values.sorted { $0.rideIdentifier < $1.rideIdentifier }, removed: [],
                        full: true, header: header)
                }
                event = everything ?? []
            } else {
                if differences == nil {
                    let change = Self.change(from: previous, to: current)
                    differences = Self.event(
                        updated: change.updated, removed: change.removed, full: false, header: header)
                }
                event = differences ?? []
            }
            switch watcher.continuation.yield(event) {
            case .dropped: fellBehind.append(id)
            case .enqueued: if watcher.needsEverything { caughtUp.append(id) }
            case .terminated: forget(id)
            @unknown default: break
            }
        }
        state.withLock { state in
            for id in fellBehind { state.watchers[id]?.needsEverything = true }
            for id in caughtUp { state.watchers[id]?.needsEverything = false }
        }
    }

    // MARK: Pure parts

    struct Header: Sendable {
        var overview: FleetOverview
        var rejectedPerMinute: Double
        var time: Date
    }

    /// The rides that are new or differ, by identifier, and the identifiers gone.
    static func change(from previous: [String: RideSummary], to current: [String: RideSummary])
        -> (updated: [RideSummary], removed: [String])
    {
        let updated = current.values.filter { previous[$0.rideIdentifier] != $0 }
            .sorted { $0.rideIdentifier < $1.rideIdentifier }
        let removed = previous.keys.filter { current[$0] == nil }.sorted()
        return (updated, removed)
    }

    /// One SSE frame: `event: fleet` and the JSON the OpenAPI document calls `FleetEvent`.
    static func event(updated: [RideSummary], removed: [String], full: Bool, header: Header) -> [UInt8] {
        var writer = JSONWriter(capacity: 512 + updated.count * 480)
        writer.beginObject()
        writer.key("full")
        writer.bool(full)
        writer.key("time")
        writer.time(header.time)
        writer.key("rides")
        writer.beginArray()
        for summary in updated { summary.write(to: &writer) }
        writer.endArray()
        writer.key("removed")
        writer.beginArray()
        for identifier in removed { writer.string(identifier) }
        writer.endArray()
        writer.key("workers")
        ReadAPI.write(header.overview, to: &writer)
        writer.key("rejectedPerMinute")
        writer.number(header.rejectedPerMinute)
        writer.endObject()
        return Array("event: fleet\ndata: ".utf8) + writer.bytes + Array("\n\n".utf8)
    }
}
