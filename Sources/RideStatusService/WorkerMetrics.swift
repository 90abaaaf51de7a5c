import CoreMetrics
import Metrics
import RideDomain

/// The worker's metrics through swift-metrics; the executable picks the backend (Prometheus text).
struct WorkerMetrics: Sendable {
    let connects = Counter(label: "ridestatus_connects_total")
    let reconnects = Gauge(label: "ridestatus_reconnects")
    let droppedMessages = Gauge(label: "ridestatus_mqtt_dropped_messages")
    /// Publishes the connection takes now without holding them back (0: disconnected or the broker behind).
    let publishRoom = Gauge(label: "ridestatus_mqtt_publish_room")
    let deadLetters = Counter(label: "ridestatus_dead_letters_sent_total")
    let inputToStatus = Timer(label: "ridestatus_input_to_status_seconds", preferredDisplayUnit: .seconds)
    let cadenceGap = Timer(label: "ridestatus_cadence_gap_seconds", preferredDisplayUnit: .seconds)
    let fixesAccepted = Counter(label: "ridestatus_fixes_accepted_total")
    let fixesDuplicate = Counter(label: "ridestatus_fixes_duplicate_total")
    let statuses = Counter(label: "ridestatus_statuses_published_total")
    let stateWrites = Counter(label: "ridestatus_state_writes_total")
    let statusesDeferred = Counter(label: "ridestatus_statuses_deferred_total")
    let transitions = Counter(label: "ridestatus_phase_transitions_total")
    let duplicateStarts = Counter(label: "ridestatus_duplicate_starts_total")
    let invalidStatuses = Counter(label: "ridestatus_invalid_statuses_total")
    let activeRides = Gauge(label: "ridestatus_active_rides")
    /// G1: live workers in this worker's view of the group, itself included.
    let groupMembers = Gauge(label: "ridestatus_group_members")
    /// G3: rides taken over and released, by this worker; G4: rides it stopped publishing for a newer epoch.
    let ridesGained = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "gained")])
    let ridesReleased = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "released")])
    let ridesFenced = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "fenced")])
    /// G3: from the view that gives buckets to this worker to serving them (release, load), per handover.
    let handoverDuration = Timer(label: "ridestatus_handover_seconds", preferredDisplayUnit: .seconds)
    /// G3: buckets gained but not served yet, and control messages kept for other workers' rides.
    let bucketsArriving = Gauge(label: "ridestatus_handover_buckets_arriving")
    let bucketsServed = Gauge(label: "ridestatus_handover_buckets_served")
    let controlsKept = Gauge(label: "ridestatus_handover_controls_kept")
    let vehicleSubscriptions = Gauge(label: "ridestatus_vehicle_subscriptions")
    let availableVehicles = Gauge(label: "ridestatus_available_vehicles_indexed")
    let quoteDuration = Timer(label: "ridestatus_quote_seconds", preferredDisplayUnit: .seconds)

    func quoteAnswered(_ code: RideOptionsReply.Code) {
        Counter(label: "ridestatus_quotes_total", dimensions: [("code", code.rawValue)]).increment()
    }

    func report(_ counters: RideCounters, previous: RideCounters, engine: RideEngine) {
        fixesAccepted.increment(by: counters.fixesAccepted - previous.fixesAccepted)
        fixesDuplicate.increment(by: counters.fixesDuplicate - previous.fixesDuplicate)
        statuses.increment(by: counters.statusesPublished - previous.statusesPublished)
        stateWrites.increment(by: counters.statesWritten - previous.statesWritten)
        statusesDeferred.increment(by: counters.statusesDeferred - previous.statusesDeferred)
        transitions.increment(by: counters.phaseTransitions - previous.phaseTransitions)
        duplicateStarts.increment(by: counters.duplicateStarts - previous.duplicateStarts)
        invalidStatuses.increment(by: counters.invalidStatuses - previous.invalidStatuses)
        for (reason, count) in counters.rejections {
            let delta = count - (previous.rejections[reason] ?? 0)
            if delta > 0 {
                Counter(label: "ridestatus_inputs_rejected_total", dimensions: [("reason", reason.rawValue)])
                    .increment(by: delta)
            }
        }
        activeRides.record(engine.activeRideCount)
        vehicleSubscriptions.record(engine.subscribedVehicleCount)
    }
}

extension Timer {
    /// Records a duration measured on a clock.
    func record(_ duration: Duration) {
        let parts = duration.components
        recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
