import CoreMetrics
import Metrics
import RideDomain

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideOptionsReply

/// The worker's metrics through swift-metrics; the executable picks the backend (Prometheus text).
package struct WorkerMetrics: Sendable {
    let connects = Counter(label: "ridestatus_connects_total")
    let leaseLapses = Counter(label: "ridestatus_lease_lapses_total")
    /// G6: the etcd lease lapsed (by the clock, or etcd no longer knew it) or was given up with the broker's.
    let grantLapses = Counter(label: "ridestatus_grant_lapses_total")
    /// G5, G6: buckets served after waiting in full for their last holder (no will, no release notice).
    let releaseWaitsExpired = Counter(label: "ridestatus_grant_release_waits_expired_total")
    /// G6: requests to etcd, and those that failed (no member answered in time, or one refused).
    let etcdRequests = Counter(label: "ridestatus_etcd_requests_total")
    let etcdFailures = Counter(label: "ridestatus_etcd_failures_total")
    /// G3: control messages for rides not served here dropped from the handover's keep (``RecentControls``) before
    /// their time, because it was full: lost if no other worker served them.
    let controlsEvicted = Counter(label: "ridestatus_controls_evicted_total")
    let reconnects = Gauge(label: "ridestatus_reconnects")
    let droppedMessages = Gauge(label: "ridestatus_mqtt_dropped_messages")
    /// Publishes the connection takes now without holding them back (0: disconnected or the broker behind).
    let publishRoom = Gauge(label: "ridestatus_mqtt_publish_room")
    /// 1 when the MQTT client's reads go through `CMosquittoIO`'s patch of libmosquitto, else 0 (disabled by
    /// `broker.interposeIO`, or unavailable: then a distribution's libmosquitto no longer takes it, unseen
    /// otherwise).
    let ioInterposed = Gauge(label: "ridestatus_mqtt_io_interposed")
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
    /// G3: rides taken over and released, by this worker; G4: rides it stopped publishing for a newer epoch; C5: rides
    /// it numbered above another worker that served them too (views split).
    let ridesGained = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "gained")])
    let ridesReleased = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "released")])
    let ridesFenced = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "fenced")])
    let ridesLifted = Counter(label: "ridestatus_handover_rides_total", dimensions: [("direction", "lifted")])
    /// G3: from the view that gives buckets to this worker to serving them (release, load), per handover.
    let handoverDuration = Timer(label: "ridestatus_handover_seconds", preferredDisplayUnit: .seconds)
    /// G3: buckets gained but not served yet, and control messages kept for other workers' rides.
    let bucketsArriving = Gauge(label: "ridestatus_handover_buckets_arriving")
    let bucketsServed = Gauge(label: "ridestatus_handover_buckets_served")
    let controlsKept = Gauge(label: "ridestatus_handover_controls_kept")
    /// E1: areas' priors this worker shared with its group, and those it weighed in from others.
    let priorsShared = Counter(label: "ridestatus_priors_total", dimensions: [("direction", "shared")])
    let priorsAdopted = Counter(label: "ridestatus_priors_total", dimensions: [("direction", "adopted")])
    let priorsRefused = Counter(label: "ridestatus_priors_total", dimensions: [("direction", "refused")])
    let vehicleSubscriptions = Gauge(label: "ridestatus_vehicle_subscriptions")
    let availableVehicles = Gauge(label: "ridestatus_available_vehicles_indexed")
    let quoteDuration = Timer(label: "ridestatus_quote_seconds", preferredDisplayUnit: .seconds)
    /// `/readyz` as a gauge (1: connected and recovered), so that an alert can say how long it has been 0.
    let ready = Gauge(label: "ridestatus_ready")

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
        for (phase, count) in engine.phaseCounts() {
            Gauge(label: "ridestatus_rides", dimensions: [("phase", phase.rawValue)]).record(count)
        }
        vehicleSubscriptions.record(engine.subscribedVehicleCount)
        // E1's range: the share of statuses whose arrival came by their latest time, by leg and the
        // estimate's horizon (each arrival counts the statuses its estimate stood for: ArrivalSamples).
        for leg in ArrivalRanges.Leg.allCases {
            for (horizon, name) in ArrivalRanges.horizonNames.enumerated() {
                guard let coverage = engine.ranges.coverage(leg, horizon: horizon) else { continue }
                Gauge(label: "ridestatus_eta_range_coverage", dimensions: [("leg", leg.name), ("horizon", name)])
                    .record(coverage)
            }
        }
    }
}

// MARK: - What each metric means, and the cadence gap's buckets

extension WorkerMetrics {
    /// The `# HELP` text of every metric above, by name: the one place each metric is explained
    /// (swift-metrics has no help text, so the executable adds these lines to the Prometheus text).
    package static let help: [String: String] = [
        "ridestatus_connects_total": "Connections to the broker made (the first and every reconnect).",
        "ridestatus_lease_lapses_total":
            "G5: times the lease with the broker lapsed (a pause, a stall, a lost connection): what was queued was dropped and the rides waited for a confirmation.",
        "ridestatus_grant_lapses_total":
            "G6: times the etcd lease lapsed (by this worker's clock, unknown to etcd, or given up with the broker's lease): every bucket stopped, nothing written.",
        "ridestatus_grant_release_waits_expired_total":
            "G5, G6: buckets served after waiting in full (group.etcdReleaseWait) for their last holder's will or "
            + "release notice: a status it wrote before its grant ended may still land late.",
        "ridestatus_etcd_requests_total":
            "G6: requests sent to etcd (leases, members, claims, give-backs, key audits).",
        "ridestatus_etcd_failures_total":
            "G6: requests to etcd that failed: no member answered in time, or etcd refused.",
        "ridestatus_controls_evicted_total":
            "G3: control messages for rides not served here dropped from the handover's keep because it was full: lost unless another worker served them.",
        "ridestatus_reconnects": "Reconnects of the current process so far.",
        "ridestatus_mqtt_dropped_messages": "Messages libmosquitto dropped for lack of room in its queue.",
        "ridestatus_mqtt_publish_room":
            "Publishes the connection takes now without holding them back (0: down or full).",
        "ridestatus_mqtt_io_interposed":
            "1 when the MQTT client's reads are buffered under libmosquitto (broker.interposeIO), else 0.",
        "ridestatus_dead_letters_sent_total":
            "Dead letters published on the dead-letter topic (3.5), after its rate limit.",
        "ridestatus_inputs_rejected_total":
            "Inputs refused, by reason code (3.5); each is a dead letter, sent or suppressed.",
        "ridestatus_input_to_status_seconds": "From an input that changes a phase to its status leaving (C2).",
        "ridestatus_cadence_gap_seconds": "Seconds between consecutive statuses of a ride (C1: at most the interval).",
        "ridestatus_fixes_accepted_total": "Telemetry fixes accepted (T1-T7).",
        "ridestatus_fixes_duplicate_total": "Fixes not newer than the vehicle's last one, dropped silently (T3).",
        "ridestatus_statuses_published_total": "Ride statuses published (C1, C2).",
        "ridestatus_state_writes_total":
            "Durable ride states written (L5, C5): on changes that matter and once per sequence block.",
        "ridestatus_statuses_deferred_total":
            "Statuses numbered that waited for room at the broker (C4), then went out.",
        "ridestatus_phase_transitions_total": "Phase changes of rides (P1-P8).",
        "ridestatus_duplicate_starts_total": "Starts of rides already active, ignored (L1).",
        "ridestatus_invalid_statuses_total": "Statuses that failed validation; the last valid one went instead (V7).",
        "ridestatus_active_rides": "Rides active on this worker.",
        "ridestatus_rides": "Rides active on this worker, by phase (P1-P8).",
        "ridestatus_eta_range_coverage":
            "Share of statuses whose car arrived by their latest time (E1's range; target 0.85 to 0.95), by leg and the estimate's horizon: each ride's statuses in a horizon judged by the first one's latest time.",
        "ridestatus_group_members": "Live workers in this worker's view of the group, itself included (G1).",
        "ridestatus_handover_rides_total":
            "Rides taken over, released or fenced in handovers (G3, G4), or lifted above the numbers of another worker that served them too (C5).",
        "ridestatus_priors_total":
            "Areas' learned priors shared with the group, weighed in from it, or refused when read back (E1, A2).",
        "ridestatus_handover_seconds": "From the view that gives buckets to this worker to serving them (G3).",
        "ridestatus_handover_buckets_arriving": "Buckets gained but not served yet (G3).",
        "ridestatus_handover_buckets_served": "Buckets of rides this worker serves (G3).",
        "ridestatus_handover_controls_kept": "Control messages kept for rides on their way to this worker (G3).",
        "ridestatus_vehicle_subscriptions": "Vehicles subscribed for their telemetry (L3).",
        "ridestatus_available_vehicles_indexed": "Available vehicles indexed for quotes (3.4).",
        "ridestatus_quote_seconds": "Time to answer a ride-option request (3.4).",
        "ridestatus_quotes_total": "Ride-option requests answered, by code (3.4).",
        "ridestatus_ready": "1 when connected and recovered (/readyz answers 200), else 0 (L5, L8).",
    ]

    /// The Prometheus text with a `# HELP` line before each metric's `# TYPE` line.
    package static func withHelp(_ text: String) -> String {
        var lines: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
                let help = help[String(name)]
            {
                lines.append("# HELP \(name) \(help)")
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// Bucket edges of the cadence gap around the configured interval, so that the histogram shows whether
    /// the promise (C1: a status at least every interval) holds: edges just above the interval separate the
    /// gaps on time from the late ones; 20 s is the contract's ceiling, and the alert's threshold.
    package static func cadenceGapBuckets(for settings: WorkerSettings) -> [Duration] {
        cadenceGapBuckets(interval: settings.ride.updateInterval)
    }

    package static func cadenceGapBuckets(interval: Double) -> [Duration] {
        let factors = [0.25, 0.5, 0.9, 1.0, 1.02, 1.05, 1.1, 1.2, 1.5, 2]
        let edges = Set(factors.map { ($0 * interval * 1000).rounded() / 1000 } + [20, 30, 60])
        return edges.sorted().map { Duration.milliseconds(Int64(($0 * 1000).rounded())) }
    }
}

extension Timer {
    /// Records a duration measured on a clock.
    func record(_ duration: Duration) {
        let parts = duration.components
        recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
