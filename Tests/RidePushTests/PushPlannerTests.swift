import Foundation
import RidePush
import RideStatusKit
import Testing

/// A ride's statuses as the worker publishes them: one every `interval` seconds from `start`.
struct StatusMaker {
    var ride = "ride-push-1"
    var start = Date(timeIntervalSince1970: 1_795_340_000)
    var sequence = 0

    mutating func next(
        _ phase: RidePhase, at offset: TimeInterval, arrival: TimeInterval? = 300, completion: CompletionStatus? = nil
    ) -> RideStatus {
        sequence += 1
        let issuedAt = start.addingTimeInterval(offset)
        return RideStatus(
            rideIdentifier: ride, phase: phase, completionStatus: completion,
            vehicle: Vehicle(
                location: VehicleLocation(latitude: 52.52, longitude: 13.41, timestamp: issuedAt),
                registrationPlate: "B-RS 1042", manufacturer: "Tesla", model: "Model 3"),
            driver: Driver(displayName: "Ana"),
            rideOption: RideOption(name: "Compact", estimatedPickupDate: start.addingTimeInterval(300)),
            estimatedPickupDate: [.received, .confirmed, .approachingPickup].contains(phase)
                ? arrival.map { start.addingTimeInterval($0) } : nil,
            estimatedDropOffDate: [.pickup, .ongoing].contains(phase)
                ? arrival.map { start.addingTimeInterval($0) } : nil,
            pickupLocation: Place(latitude: 52.5219, longitude: 13.4132),
            dropOffLocation: Place(latitude: 52.5096, longitude: 13.3759), sequence: sequence, issuedAt: issuedAt)
    }
}

let phone = try! PushDevice(service: .apns, token: String(repeating: "ab", count: 32))
let android = try! PushDevice(service: .fcm, token: "fcm-token:APA91b-example_1")

@Suite("ride-push's planner: what goes to a lock screen, and when")
struct PushPlannerTests {
    @Test("A device's first registration subscribes to its ride; the first status goes at priority 10")
    func firstPush() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        let registered = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        #expect(registered.subscribe == maker.ride && registered.pushes.isEmpty)
        let second = try planner.register(android, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        #expect(second.subscribe == nil, "one subscription per ride, however many devices")
        let actions = planner.status(maker.next(.confirmed, at: 0), now: maker.start)
        #expect(actions.pushes.count == 2)
        #expect(actions.pushes.allSatisfy { $0.priority == .urgent && $0.event == .update && $0.sequence == 1 })
        #expect(planner.subscribedRides == 1 && planner.registrations == 2)
    }

    @Test("C5: one push in flight per activity; meanwhile only the newest state waits, never an older one")
    func newestOnly() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let first = try #require(planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes.first)
        for second in stride(from: 5.0, through: 40, by: 5) {
            #expect(
                planner.status(maker.next(.approachingPickup, at: second), now: maker.start + second).pushes.isEmpty)
        }
        let newest = maker.sequence
        var older = maker.next(.confirmed, at: 41)
        older.sequence = 3
        #expect(planner.status(older, now: maker.start + 41).pushes.isEmpty, "an older sequence changes nothing")
        let next = planner.outcome(.delivered, of: first, now: maker.start + 42).pushes
        #expect(next.count == 1)
        #expect(next.first?.sequence == newest, "the newest state, not the ones in between")
        #expect(next.first?.state.phase == .approachingPickup && next.first?.priority == .urgent)
    }

    @Test("C2: a phase change or an arrival moving more than 60 s goes at priority 10; smaller changes at 5")
    func priorities() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        var now = maker.start
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: now).get()
        func send(_ status: RideStatus) -> Push? {
            now = status.issuedAt
            guard let push = planner.status(status, now: now).pushes.first else { return nil }
            _ = planner.outcome(.delivered, of: push, now: now)
            return push
        }
        #expect(send(maker.next(.confirmed, at: 0, arrival: 300))?.priority == .urgent)
        #expect(send(maker.next(.confirmed, at: 20, arrival: 330))?.priority == .routine, "30 s: routine")
        #expect(send(maker.next(.confirmed, at: 40, arrival: 400))?.priority == .urgent, "70 s since the last push")
        #expect(send(maker.next(.approachingPickup, at: 41, arrival: 400))?.priority == .urgent, "a new phase")
        #expect(send(maker.next(.approachingPickup, at: 42, arrival: 410)) == nil, "within 15 s of the last")
    }

    @Test("At most 12 priority-10 pushes per activity in a rolling hour; beyond, the change goes at priority 5")
    func budget() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        var urgent = 0
        var routine = 0
        // The arrival jumps by 2 minutes every 20 s: each one wants priority 10.
        for step in 0..<40 {
            let offset = Double(step) * 20
            let status = maker.next(.approachingPickup, at: offset, arrival: 600 + Double(step % 2) * 120)
            for push in planner.status(status, now: status.issuedAt).pushes {
                if push.priority == .urgent { urgent += 1 } else { routine += 1 }
                _ = planner.outcome(.delivered, of: push, now: status.issuedAt)
            }
        }
        #expect(urgent == 12 && routine == 28, "\(urgent) urgent, \(routine) routine in 800 s")
        // An hour after the first, the budget has room again.
        let later = maker.next(.approachingPickup, at: 3601, arrival: 900)
        #expect(planner.status(later, now: later.issuedAt).pushes.first?.priority == .urgent)
    }

    @Test(
        "APNs timestamps grow with every push to an activity, even for statuses in one second; at most one second ahead"
    )
    func timestamps() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        var stamps: [Int] = []
        func deliver(_ actions: PushActions, at time: Date) {
            for push in actions.pushes {
                stamps.append(push.timestamp)
                _ = planner.outcome(.delivered, of: push, now: time)
            }
        }
        for (phase, offset) in [(RidePhase.approachingPickup, 0.1), (.pickup, 0.4), (.ongoing, 0.8)] {
            let status = maker.next(phase, at: offset)
            deliver(planner.status(status, now: status.issuedAt), at: status.issuedAt)
        }
        let start = Int(maker.start.timeIntervalSince1970)
        // The third in one second would go two ahead of the clock: it waits for the next second.
        #expect(stamps == [start, start + 1])
        deliver(planner.tick(now: maker.start + 0.95), at: maker.start + 0.95)
        #expect(stamps == [start, start + 1])
        deliver(planner.tick(now: maker.start + 1), at: maker.start + 1)
        #expect(stamps == [start, start + 1, start + 2])
        let later = maker.next(.ongoing, at: 20, arrival: 330)
        deliver(planner.status(later, now: later.issuedAt), at: later.issuedAt)
        #expect(stamps == [start, start + 1, start + 2, start + 20])
    }

    @Test("A device taken over from another process: its first push waits for the next second and goes above it")
    func takenOver() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        let takeover = maker.start + 10.3
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: takeover, takenOver: true)
            .get()
        let status = maker.next(.approachingPickup, at: 10.2)
        // The old owner may have sent up to one above this second (10) by its rule: nothing goes in it.
        #expect(planner.status(status, now: takeover).pushes.isEmpty)
        #expect(planner.tick(now: maker.start + 10.9).pushes.isEmpty)
        // Statuses keep coming, each issued in the second it arrives: the first push goes in the next second all
        // the same, with the newest state.
        let newer = maker.next(.approachingPickup, at: 11)
        let push = try #require(planner.status(newer, now: maker.start + 11).pushes.first)
        #expect(push.timestamp == Int(maker.start.timeIntervalSince1970) + 12)
        #expect(push.sequence == newer.sequence && push.priority == .urgent)
    }

    @Test("C1, C3: a healthy ride's stale-date is always ahead; a silent worker's activity goes stale")
    func staleness() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        var staleDate = Date.distantPast
        var pushes = 0
        // Statuses every 5 s for 30 minutes, then silence for 5; the planner ticks every second.
        for second in 0..<(35 * 60) {
            let now = maker.start.addingTimeInterval(Double(second))
            var actions = planner.tick(now: now)
            if second < 30 * 60, second % 5 == 0 {
                actions.pushes +=
                    planner.status(
                        maker.next(.ongoing, at: Double(second), arrival: 1900 - Double(second) / 2), now: now
                    ).pushes
            }
            for push in actions.pushes {
                pushes += 1
                staleDate = try #require(push.staleDate)
                _ = planner.outcome(.delivered, of: push, now: now)
            }
            if second < 30 * 60 + 20 { #expect(staleDate > now, "stale at \(second) s") }
        }
        #expect(staleDate <= maker.start.addingTimeInterval(30 * 60 + 120), "silent since 30 min: stale by 32")
        // Routine pushes at most every 15 s: not every status becomes a push.
        #expect(pushes <= 30 * 60 / 15 + 1, "\(pushes) pushes")
    }

    @Test("V3, L2: a completion ends the activity at priority 10; once delivered the device and subscription go")
    func completionEnds() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let first = try #require(planner.status(maker.next(.ongoing, at: 0), now: maker.start).pushes.first)
        _ = planner.outcome(.delivered, of: first, now: maker.start)
        let done = maker.next(.completed, at: 30, completion: CompletionStatus(completed: true))
        let end = try #require(planner.status(done, now: done.issuedAt).pushes.first)
        #expect(end.event == .end && end.priority == .urgent && end.state.ending == .completed)
        #expect(end.dismissalDate == done.issuedAt.addingTimeInterval(900) && end.staleDate == nil)
        #expect(planner.stopped(ride: maker.ride, now: done.issuedAt).pushes.isEmpty, "the end is already out")
        let after = planner.outcome(.delivered, of: end, now: done.issuedAt)
        #expect(after.removed == [Removed(ride: maker.ride, device: phone, reason: .rideEnded)])
        #expect(after.unsubscribe == [maker.ride] && planner.registrations == 0)
        // A device that registers late (its ride's status is gone after the stop) is told the ride ended, for
        // an hour; then the ride is forgotten.
        #expect(
            planner.register(android, ride: maker.ride, expires: .distantFuture, now: done.issuedAt).failure
                == .rideEnded)
        _ = planner.tick(now: done.issuedAt + 3601)
        #expect(
            planner.register(android, ride: maker.ride, expires: .distantFuture, now: done.issuedAt + 3601).isSuccess)
    }

    @Test("A registration lasts as long as its share token: an expired one is removed, and with it the subscription")
    func expiry() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: maker.start + 600, now: maker.start).get()
        _ = try planner.register(android, ride: maker.ride, expires: maker.start + 300, now: maker.start).get()
        // Registering again with a later token moves the expiry on.
        _ = try planner.register(android, ride: maker.ride, expires: maker.start + 900, now: maker.start).get()
        for push in planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes {
            _ = planner.outcome(.delivered, of: push, now: maker.start)
        }
        #expect(planner.tick(now: maker.start + 599).removed.isEmpty)
        let first = planner.tick(now: maker.start + 600)
        #expect(
            first.removed == [Removed(ride: maker.ride, device: phone, reason: .expired)] && first.unsubscribe.isEmpty)
        let last = planner.tick(now: maker.start + 900)
        #expect(last.removed.map(\.reason) == [.expired] && last.unsubscribe == [maker.ride])
        #expect(planner.registrations == 0 && planner.subscribedRides == 0)
    }

    @Test("A push that failed may still have reached APNs: the next one's timestamp is higher all the same")
    func timestampAfterRetry() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let first = try #require(planner.status(maker.next(.confirmed, at: 0.2), now: maker.start).pushes.first)
        _ = planner.outcome(.retry(after: nil), of: first, now: maker.start + 0.3)
        _ = planner.status(maker.next(.approachingPickup, at: 0.5), now: maker.start + 0.5)
        let second = try #require(planner.tick(now: maker.start + 2).pushes.first)
        #expect(second.sequence == 2 && second.timestamp == first.timestamp + 1)
    }

    @Test("L2: a stop without a completion ends the activity with the last state; with none known, it just goes")
    func stopEnds() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let first = try #require(planner.status(maker.next(.approachingPickup, at: 0), now: maker.start).pushes.first)
        // The stop comes while the first push is still out: the end waits for it.
        #expect(planner.stopped(ride: maker.ride, now: maker.start + 1).pushes.isEmpty)
        let end = try #require(planner.outcome(.delivered, of: first, now: maker.start + 2).pushes.first)
        #expect(
            end.event == .end && end.priority == .urgent && end.sequence == 1 && end.state.phase == .approachingPickup)
        #expect(end.timestamp > first.timestamp)
        #expect(planner.outcome(.delivered, of: end, now: maker.start + 3).unsubscribe == [maker.ride])

        var other = StatusMaker(ride: "ride-push-2")
        _ = try planner.register(android, ride: other.ride, expires: .distantFuture, now: other.start).get()
        let stopped = planner.stopped(ride: other.ride, now: other.start)
        #expect(stopped.pushes.isEmpty && stopped.unsubscribe == [other.ride])
        #expect(stopped.removed.map(\.reason) == [.rideEnded])
        _ = other.next(.received, at: 0)
    }

    @Test("A 503 outage: retries back off with jitter, the pending count stays one per activity, then the newest goes")
    func outage() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        let devices = try (0..<5).map { try PushDevice(service: .apns, token: String(format: "%064lx", $0 + 1)) }
        for device in devices {
            _ = try planner.register(device, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        }
        var inFlight = planner.status(maker.next(.approachingPickup, at: 0), now: maker.start).pushes
        var attempts = 0
        var waits: [TimeInterval] = []
        var now = maker.start
        // APNs answers 503 for two minutes; statuses keep coming every 5 s.
        while now < maker.start + 120 {
            now += 1
            var actions = planner.tick(now: now)
            if Int(now.timeIntervalSince(maker.start)) % 5 == 0 {
                actions.pushes +=
                    planner.status(
                        maker.next(.approachingPickup, at: now.timeIntervalSince(maker.start)), now: now
                    ).pushes
            }
            inFlight += actions.pushes
            for push in inFlight {
                attempts += 1
                _ = planner.outcome(.retry(after: nil), of: push, now: now)
                waits.append(now.timeIntervalSince(maker.start))
            }
            inFlight = []
            #expect(planner.pending <= planner.registrations, "bounded by the registrations")
        }
        #expect(planner.pending == devices.count)
        // Backoff 1, 2, 4, ... 60 s (half to all of it): about 7 tries per device in two minutes, not 120.
        #expect(attempts <= devices.count * 9 && attempts >= devices.count * 5, "\(attempts) attempts")
        // APNs is back: each device gets the newest state once.
        now += 61
        let back = planner.tick(now: now).pushes
        #expect(back.count == devices.count && back.allSatisfy { $0.sequence == maker.sequence })
        for push in back { _ = planner.outcome(.delivered, of: push, now: now) }
        #expect(planner.pending == 0 && planner.tick(now: now + 1).pushes.isEmpty)
    }

    @Test("APNs back after an outage: the first delivery ends every other activity's backoff, not its Retry-After")
    func recovery() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        let devices = try (0..<4).map { try PushDevice(service: .apns, token: String(format: "%064lx", $0 + 1)) }
        for device in devices {
            _ = try planner.register(device, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        }
        let first = planner.status(maker.next(.approachingPickup, at: 0), now: maker.start).pushes
        #expect(first.count == 4)
        // APNs fails for 100 s (backoffs grow to tens of seconds); one device is told to wait an hour.
        let told = first[3].device
        let others = Set(first.prefix(3).map(\.device))
        var now = maker.start
        _ = planner.outcome(.retry(after: 3600), of: first[3], now: now)
        var inFlight = Array(first.prefix(3))
        while now < maker.start + 100 {
            for push in inFlight { _ = planner.outcome(.retry(after: nil), of: push, now: now) }
            now += 1
            inFlight = planner.tick(now: now).pushes
        }
        while inFlight.isEmpty {
            now += 1
            try #require(now < maker.start + 200, "a retry within the longest backoff (60 s)")
            inFlight = planner.tick(now: now).pushes
        }
        #expect(!inFlight.contains { $0.device == told })
        // One retry goes through (APNs is back): the others waiting out a backoff go at once; the one asked to
        // wait does not.
        let released = planner.outcome(.delivered, of: inFlight[0], now: now).pushes
        #expect(Set(released.map(\.device)) == others.subtracting(inFlight.map(\.device)))
        #expect(!released.contains { $0.device == told })
    }

    @Test("A Retry-After longer than the backoff is honoured")
    func retryAfter() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let push = try #require(planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes.first)
        _ = planner.outcome(.retry(after: 30), of: push, now: maker.start)
        #expect(planner.tick(now: maker.start + 29).pushes.isEmpty)
        #expect(planner.tick(now: maker.start + 30).pushes.count == 1)
    }

    @Test("410 or BadDeviceToken removes the registration; with the ride's last device, the subscription")
    func unregistered() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        _ = try planner.register(android, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let pushes = planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes
        let apns = try #require(pushes.first { $0.device == phone })
        let fcm = try #require(pushes.first { $0.device == android })
        let first = planner.outcome(.unregistered, of: apns, now: maker.start)
        #expect(first.removed == [Removed(ride: maker.ride, device: phone, reason: .unregistered)])
        #expect(first.unsubscribe.isEmpty && planner.devices(of: maker.ride) == [android])
        #expect(planner.outcome(.unregistered, of: fcm, now: maker.start).unsubscribe == [maker.ride])
    }

    @Test("An expired credential asks for a new one and retries after a backoff, not in a loop")
    func credentialExpired() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let push = try #require(planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes.first)
        let actions = planner.outcome(.credentialExpired, of: push, now: maker.start)
        #expect(actions.renewCredential == .apns && actions.pushes.isEmpty)
        #expect(planner.tick(now: maker.start + 1).pushes.count == 1)
    }

    @Test("A refused push is dropped; the registration stays and the next state goes as usual")
    func refused() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        _ = try planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).get()
        let push = try #require(planner.status(maker.next(.confirmed, at: 0), now: maker.start).pushes.first)
        let actions = planner.outcome(.refused(reason: "BadPriority"), of: push, now: maker.start)
        #expect(actions.refused.map { $0.1 } == ["BadPriority"] && planner.registrations == 1)
        #expect(planner.status(maker.next(.approachingPickup, at: 1), now: maker.start + 1).pushes.count == 1)
    }

    @Test("A ride takes at most 5 devices; an ended ride takes none; a token is never printed")
    func registrationLimits() throws {
        var planner = PushPlanner()
        var maker = StatusMaker()
        for index in 0..<5 {
            #expect(
                planner.register(
                    try PushDevice(service: .fcm, token: "t\(index)"), ride: maker.ride, expires: .distantFuture,
                    now: maker.start
                )
                .isSuccess)
        }
        #expect(
            planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).failure
                == .tooManyDevices)
        #expect(
            planner.register(
                try PushDevice(service: .fcm, token: "t0"), ride: maker.ride, expires: .distantFuture, now: maker.start
            ).isSuccess,
            "again: no change")
        _ = planner.status(
            maker.next(.completed, at: 0, completion: CompletionStatus(completed: true)), now: maker.start)
        #expect(
            planner.register(phone, ride: maker.ride, expires: .distantFuture, now: maker.start).failure == .rideEnded)
        #expect(!"\(phone)".contains(phone.token) && "\(phone)".hasPrefix("apns device "))
        #expect(throws: PushDevice.Problem.malformedToken) { try PushDevice(service: .apns, token: "not hex") }
        #expect(throws: PushDevice.Problem.malformedToken) { try PushDevice(service: .fcm, token: "") }
        #expect(throws: PushDevice.Problem.malformedToken) {
            try PushDevice(service: .fcm, token: String(repeating: "x", count: 513))
        }
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
    var failure: Failure? { if case .failure(let failure) = self { failure } else { nil } }
}
