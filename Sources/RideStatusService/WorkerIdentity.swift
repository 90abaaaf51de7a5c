import Foundation
import RideDomain
import RideStatusKit
import SettingsLayers

#if canImport(Glibc)
    import Glibc
#endif

/// Who this worker is on the broker: its id (L6: a restarted worker reuses its MQTT session), its presence
/// (L8) and the topic of the marker that closes its recovery (L5).
struct WorkerIdentity: Sendable {
    let id: String
    let version: String
    let topics: RideTopics

    /// `worker.id`, else the id kept in the state directory, else a new one saved there.
    init(settings: WorkerSettings, version: String) throws {
        self.id = try Self.resolve(settings)
        self.version = version
        self.topics = settings.topics
    }

    /// The retained presence topic (L8).
    var presenceTopic: String { topics.presence(worker: id) }

    /// The presence payload, `online` or `offline`, as of now, for the connection's `incarnation` (G1).
    /// - Parameter since: when the worker came online (a heartbeat repeats its birth's); `now` by default.
    func presence(online: Bool, incarnation: UInt64, since: Date? = nil, now: Date) -> [UInt8] {
        Presence(
            state: online ? .online : .offline, since: since ?? now, version: version,
            incarnation: Int(clamping: incarnation), at: now
        )
        .encoded()
    }

    /// The topic of the marker that closes this worker's recovery (L5).
    var recoveryMarker: String { topics.recoveryMarker(worker: id) }

    /// G5: the topic of the lease marker (a confirmation after a lapse) and of the client's lease pings.
    var leaseMarker: String { topics.leaseMarker(worker: id) }

    private static func resolve(_ settings: WorkerSettings) throws -> String {
        if let id = settings.workerID {
            guard Identifier.isValid(id) else {
                throw WorkerSettings.Problem(
                    key: "worker.id", message: "'\(id)' breaks I1 (1-64 of A-Z a-z 0-9 . _ : -)")
            }
            return id
        }
        let directory = URL(fileURLWithPath: settings.stateDirectory)
        let file = directory.appendingPathComponent("worker-id")
        if let saved = try? String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            Identifier.isValid(saved)
        {
            return saved
        }
        let id = "w-" + UUID().uuidString.prefix(8).lowercased()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try (id + "\n").write(to: file, atomically: true, encoding: .utf8)
        } catch {
            // One sentence, not a Foundation error domain: the reason is the system's (errno) when there is one.
            let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? any Error
            let reason =
                underlying.map { String(cString: strerror(Int32(($0 as NSError).code))) } ?? "it cannot be written"
            throw WorkerSettings.Problem(
                key: "worker.stateDir",
                message:
                    "cannot keep the worker id in \(directory.standardizedFileURL.path): \(reason.lowercased()); set worker.stateDir to a writable folder or give worker.id"
            )
        }
        return id
    }
}
