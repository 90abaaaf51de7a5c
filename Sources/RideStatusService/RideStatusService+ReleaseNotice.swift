import CoreMetrics
import Foundation
import Logging
import MQTTClient
import RideDomain
import RideJSON
import WorkerGroup

import struct RideStatusKit.DeadLetter

// MARK: - Release notices (G3, C5): a worker's word that its buckets' last states are written, with their floors

extension RideStatusService {
    /// G3: another worker's release notice, `{serviceName}/workers/{workerId}/released`:
    /// `{"buckets":[...],"incarnation":N,"floors":[[bucket,epoch,ceiling],...]}`. What does not read is
    /// dead-lettered (A2).
    func receiveRelease(_ message: MQTTMessage, worker: String, now: Date, core: inout Core) {
        // G6: under an authority a bucket moves by its grant, and the grant's epoch is above every floor; the
        // notice only says that the worker's writes under its grants are behind it.
        guard settings.authority == .broker else {
            guard worker != identity.id, let grants = Self.releasedGrants(message.payload) else { return }
            stepGrants(&core) { $0.releaseHeard(from: worker, epochs: grants, now: $1) }
            return
        }
        guard core.handover.machine.hearsReleases(from: worker) else { return }
        guard let (buckets, floors) = Self.releaseNotice(message.payload) else {
            executor.execute(
                core.engine.reject(
                    Rejection(.invalidField, "release notice: buckets is not a list of bucket numbers (G3)"),
                    topic: message.topic, payload: message.payload, now: now),
                engine: &core.engine, now: now)
            return
        }
        carryOut(
            core.handover.machine.releaseNoticed(
                buckets, floors: floors, by: worker, now: now.timeIntervalSince1970), now: now, core: &core)
    }

    /// G3: the notice, after the last states (QoS 1, in order), that these buckets are free to load, with the
    /// floors of the rides this worker held in them (C5: ``SequenceFloor``).
    func publishReleaseNotice(_ buckets: [Int], floors: [Int: SequenceFloor] = [:]) {
        try? transport.publish(
            settings.topics.released(worker: identity.id),
            Self.releaseNotice(buckets: buckets, incarnation: transport.incarnation, floors: floors))
    }

    /// G5, G6: the notice that this worker's grants of these buckets (with their epochs) ended here: published once
    /// its gate closed, so on its connection it comes after everything it wrote under them. The new holders serve
    /// those buckets once they read it (``BucketGrants/releaseHeard(from:epochs:now:)``).
    func publishGrantsReleased(_ grants: [Int: UInt64], core: inout Core) {
        guard !grants.isEmpty else { return }
        core.authority?.endedSinceBirth.merge(grants) { max($0, $1) }
        try? transport.publish(
            settings.topics.released(worker: identity.id),
            Self.releaseNotice(buckets: [], incarnation: transport.incarnation, grants: grants))
    }

    /// G3, C5 on SIGTERM in a group: before its `offline` presence, a leaving worker publishes the floors of
    /// every bucket it holds rides in, releasing no bucket (it writes no last states: the new owners read the
    /// last state written, and continue above the floor too when the broker's copy lags).
    func announceLeavingFloors(core: inout Core) {
        let floors = core.engine.sequenceFloors()
        guard !floors.isEmpty else { return }
        publishReleaseNotice([], floors: floors)
    }

    // MARK: Release notices

    /// The largest release notice read: every bucket listed, and a floor for each, with room to spare.
    static var maximumReleaseNotice: Int { 512 * 1024 }

    /// G3: `{serviceName}/workers/{workerId}/released`:
    /// `{"buckets":[...],"incarnation":N,"floors":[[bucket,epoch,ceiling],...]}` (floors omitted when none).
    static func releaseNotice(
        buckets: [Int], incarnation: UInt64, floors: [Int: SequenceFloor] = [:], grants: [Int: UInt64] = [:]
    ) -> [UInt8] {
        var writer = JSONWriter(capacity: 32 + 6 * buckets.count + 24 * floors.count + 24 * grants.count)
        writer.beginObject()
        writer.key("buckets")
        writer.beginArray()
        for bucket in buckets { writer.integer(bucket) }
        writer.endArray()
        writer.key("incarnation")
        writer.integer(Int(clamping: incarnation))
        if !floors.isEmpty {
            writer.key("floors")
            writer.beginArray()
            for (bucket, floor) in floors.sorted(by: { $0.key < $1.key }) {
                writer.beginArray()
                writer.integer(bucket)
                writer.integer(Int(clamping: min(floor.epoch, UInt64(Ride.maxSequence))))
                writer.integer(floor.ceiling)
                writer.endArray()
            }
            writer.endArray()
        }
        if !grants.isEmpty {
            writer.key("grants")
            writer.beginArray()
            for (bucket, epoch) in grants.sorted(by: { $0.key < $1.key }) {
                writer.beginArray()
                writer.integer(bucket)
                writer.integer(Int(clamping: min(epoch, UInt64(Ride.maxSequence))))
                writer.endArray()
            }
            writer.endArray()
        }
        writer.endObject()
        return writer.bytes
    }

    /// G6: the grants a release notice says ended (`"grants":[[bucket,epoch],...]`, entries outside the buckets or
    /// epochs skipped); nil for a notice that does not read or lists none.
    static func releasedGrants(_ payload: [UInt8]) -> [Int: UInt64]? {
        guard payload.count <= maximumReleaseNotice, let notice = try? JSONParser.parse(payload),
            case .array(let entries)? = notice["grants"]
        else { return nil }
        var grants: [Int: UInt64] = [:]
        for entry in entries {
            guard case .array(let parts) = entry, parts.count == 2, let bucket = bucketNumber(parts[0]),
                let epoch = parts[1].doubleValue.flatMap({ UInt64(exactly: $0) }), epoch <= UInt64(Ride.maxSequence)
            else { continue }
            grants[bucket] = max(grants[bucket] ?? 0, epoch)
        }
        return grants.isEmpty ? nil : grants
    }

    /// G3: the buckets a release notice lists and its floors (entries outside the buckets, epochs or sequences
    /// skipped); nil for one that does not read. Not the input decoder: a notice lists up to 8,192 buckets and as
    /// many floors (about 250 KB), above the input size limit.
    static func releaseNotice(_ payload: [UInt8]) -> (buckets: [Int], floors: [Int: SequenceFloor])? {
        guard payload.count <= maximumReleaseNotice, let notice = try? JSONParser.parse(payload),
            case .array(let items)? = notice["buckets"]
        else { return nil }
        let buckets = items.compactMap(bucketNumber)
        var floors: [Int: SequenceFloor] = [:]
        if case .array(let entries)? = notice["floors"] {
            for entry in entries {
                guard case .array(let parts) = entry, parts.count == 3, let bucket = bucketNumber(parts[0]),
                    // A2: at most 2^53 - 1, as every epoch read back (a larger one would never serialise again).
                    let epoch = parts[1].doubleValue.flatMap({ UInt64(exactly: $0) }),
                    epoch <= UInt64(Ride.maxSequence),
                    let ceiling = parts[2].doubleValue.flatMap({ Int(exactly: $0) }),
                    (0...Ride.maxSequence).contains(ceiling)
                else { continue }
                let floor = SequenceFloor(epoch: epoch, ceiling: ceiling)
                floors[bucket] = floors[bucket].map { floor.merged(with: $0) } ?? floor
            }
        }
        return (buckets, floors)
    }

    private static func bucketNumber(_ item: JSONValue) -> Int? {
        guard let number = item.doubleValue, let bucket = Int(exactly: number),
            (0..<Ownership.bucketCount).contains(bucket)
        else { return nil }
        return bucket
    }
}
