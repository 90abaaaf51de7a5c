import Foundation
import Metrics
import RidePush
import RideStatusKit
import WorkerGroup

/// `ridepush_*` metrics: registrations, what waits, and every push's outcome by service and priority.
struct PushMetrics: Sendable {
    let registrations = Gauge(label: "ridepush_registrations")
    let rides = Gauge(label: "ridepush_subscribed_rides")
    let pending = Gauge(label: "ridepush_pending")
    let inFlight = Gauge(label: "ridepush_in_flight")
    let unreadable = Counter(label: "ridepush_unreadable_statuses_total")
    /// Statuses replaced by a newer one of their ride before the service's task took them.
    let supersededStatuses = Counter(label: "ridepush_superseded_statuses_total")

    let members = Gauge(label: "ridepush_members")
    let records = Gauge(label: "ridepush_records")
    let serving = Gauge(label: "ridepush_serving")
    let unreadableRecords = Counter(label: "ridepush_unreadable_records_total")

    func update(group: PushGroup, inFlight: Int, waiting: Int, now: Date) {
        let planner = group.planner
        registrations.record(planner.registrations)
        rides.record(planner.subscribedRides)
        pending.record(planner.pending + waiting)
        self.inFlight.record(inFlight)
        members.record(group.membership.members.count)
        records.record(group.recordCount)
        serving.record(group.isServing(now: now) ? 1 : 0)
    }

    func unreadableRecord() { unreadableRecords.increment() }

    func outcome(_ outcome: PushPlanner.Outcome, of push: Push) {
        let name: String
        switch outcome {
        case .delivered: name = "delivered"
        case .unregistered: name = "unregistered"
        case .retry: name = "retry"
        case .credentialExpired: name = "credentialExpired"
        case .refused: name = "refused"
        }
        Counter(
            label: "ridepush_pushes_total",
            dimensions: [
                ("service", push.device.service.rawValue), ("priority", String(push.priority.rawValue)),
                ("event", push.event.rawValue), ("outcome", name),
            ]
        ).increment()
    }

    func removed(_ reason: PushPlanner.Removal) {
        Counter(label: "ridepush_registrations_removed_total", dimensions: [("reason", reason.rawValue)]).increment()
    }

    func renewal(_ service: PushDevice.Service) {
        Counter(label: "ridepush_credential_renewals_total", dimensions: [("service", service.rawValue)]).increment()
    }

    func unreadableStatus() { unreadable.increment() }
}
