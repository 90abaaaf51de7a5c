import Foundation
import Locking
package import RideDomain
import WorkerGroup

package import enum RideStatusKit.RidePhase

/// What the HTTP server reads of a worker (the read API `/v1` and the live map): each call takes the worker's
/// lock briefly, and anything that grows with the fleet (sorting, paging, JSON) happens outside it.
package protocol FleetReader: Sendable {
    /// The identifiers of the active rides, of one phase when given.
    func rideIdentifiers(in phase: RidePhase?) -> [String]
    /// The summaries of those rides that are still active, in the order given.
    func summaries(of rides: [String]) -> [RideSummary]
    /// A piece of a walk over every active ride (the live map): from slot `start`, at most `limit`.
    func summaries(from start: Int, limit: Int) -> (summaries: [RideSummary], next: Int?)
    /// L7: the ride's current status as the status topic carries it; nil when it is not active here.
    func currentStatus(of ride: String) -> [UInt8]?
    /// The ride's vehicle and its last accepted fixes, oldest first; nil when the ride is not active here.
    func track(of ride: String) -> (vehicle: String?, points: [TrackPoint])?
    /// Available vehicles for quotes (3.4), in no order.
    func availableVehicles() -> [FleetIndex.Listing]
    /// G1: this worker, its view of the group, and a few totals for the map's header.
    func overview() -> FleetOverview
    /// The catalog's service areas (3.4); empty without a catalog.
    var serviceAreas: [ServiceArea] { get }
}

/// The map's header and `/v1/workers`: who serves the rides, and how the input goes.
package struct FleetOverview: Sendable, Equatable {
    package var workerID: String
    /// G1: the live workers in this worker's view, itself included, sorted.
    package var members: [String]
    package var ready: Bool
    package var activeRides: Int
    /// Inputs refused so far (each is a dead letter, sent or suppressed by the limit of 3.5).
    package var rejectedInputs: Int
    package var updateInterval: Double
}

extension RideStatusService: FleetReader {
    package func rideIdentifiers(in phase: RidePhase?) -> [String] {
        core.withLock { $0.engine.rideIdentifiers(in: phase) }
    }

    package func summaries(of rides: [String]) -> [RideSummary] {
        let now = time.now
        return core.withLock { $0.engine.summaries(of: rides, now: now) }
    }

    package func summaries(from start: Int, limit: Int) -> (summaries: [RideSummary], next: Int?) {
        let now = time.now
        return core.withLock { $0.engine.summaries(from: start, limit: limit, now: now) }
    }

    package func currentStatus(of ride: String) -> [UInt8]? {
        core.withLock { $0.engine.currentStatus(of: ride) }?.encoded()
    }

    package func track(of ride: String) -> (vehicle: String?, points: [TrackPoint])? {
        core.withLock { core in
            core.engine.track(of: ride).map { (core.engine.ride(ride)?.vehicleId, $0) }
        }
    }

    package func availableVehicles() -> [FleetIndex.Listing] {
        core.withLock { $0.quoter?.fleet.listing() ?? [] }
    }

    package func overview() -> FleetOverview {
        let ready = isReady
        return core.withLock { core in
            FleetOverview(
                workerID: identity.id, members: core.group.members, ready: ready,
                activeRides: core.engine.activeRideCount,
                rejectedInputs: core.engine.counters.rejections.values.reduce(0, +),
                updateInterval: settings.ride.updateInterval)
        }
    }

    package var serviceAreas: [ServiceArea] { settings.catalog?.areas ?? [] }
}
