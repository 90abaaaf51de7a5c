import Foundation
import PropertyBased
import RidePush
import RideStatusKit
import Testing

/// Random days of statuses, registrations, outcomes and ticks, checked against what the lock screen relies on.
@Suite("ride-push's planner under random events")
struct PushPlannerPropertyTests {
    /// One step: what happens, and after how many seconds.
    enum Step: Sendable {
        case register(device: Int, ride: Int)
        case unregister(device: Int, ride: Int)
        case status(ride: Int, phase: Int, arrival: Int, ends: Bool)
        case stop(ride: Int)
        case answer(kind: Int)
        case tick
    }

    static let stepGen = zip(Gen.int(in: 0...99), Gen.int(in: 0...3), Gen.int(in: 0...1), Gen.int(in: 0...5))
        .map { kind, device, ride, value -> Step in
            switch kind {
            case 0..<8: .register(device: device, ride: ride)
            case 8..<10: .unregister(device: device, ride: ride)
            case 10..<45: .status(ride: ride, phase: value, arrival: value * 50, ends: kind == 44)
            case 45..<47: .stop(ride: ride)
            case 47..<80: .answer(kind: value)
            default: .tick
            }
        }
    static let runGen = zip(stepGen.array(of: 1...300), Gen.int(in: 0...20).array(of: 300))

    @Test(
        "C5: per device, sequences never go back, timestamps grow, one push in flight; pending stays bounded; the budget holds"
    )
    func invariants() async {
        await propertyCheck(count: 200, input: Self.runGen) { run in
            let (steps, gaps) = run
            var planner = PushPlanner()
            let devices = (0..<4).map { try! PushDevice(service: $0 % 2 == 0 ? .apns : .fcm, token: "a1b2c3d\($0)") }
            var sequences = [0, 0]
            var ended = [false, false]
            var now = Date(timeIntervalSince1970: 1_795_340_000)
            var outstanding: [Push] = []
            // What each device last accepted (delivered or refused: a retried push may repeat its timestamp).
            var accepted: [String: (sequence: Int, timestamp: Int)] = [:]
            var urgentTimes: [String: [Date]] = [:]
            // Devices whose `end` was accepted: nothing more goes to them unless they register again.
            var endedDevices: Set<String> = []
            func key(_ push: Push) -> String { "\(push.ride)/\(push.device.digest)" }
            func take(_ actions: PushActions) {
                for push in actions.pushes {
                    #expect(push.event == .update || push.priority == .urgent, "an end always goes at priority 10")
                    #expect(!endedDevices.contains(key(push)), "nothing after an end")
                    #expect(!outstanding.contains { $0.ride == push.ride && $0.device == push.device }, "one in flight")
                    if let last = accepted[key(push)] {
                        #expect(push.sequence >= last.sequence, "sequence \(push.sequence) after \(last.sequence)")
                        #expect(push.timestamp > last.timestamp, "timestamp \(push.timestamp) after \(last.timestamp)")
                    }
                    // At most a second ahead of the clock (the statuses here are issued at or before `now`): what a
                    // process taking the ride over relies on.
                    #expect(push.timestamp <= Int(now.timeIntervalSince1970) + 1, "timestamp ahead of the clock")
                    outstanding.append(push)
                }
                for removed in actions.removed {
                    outstanding.removeAll { $0.ride == removed.ride && $0.device == removed.device }
                    accepted["\(removed.ride)/\(removed.device.digest)"] = nil
                    urgentTimes["\(removed.ride)/\(removed.device.digest)"] = nil
                }
            }
            func answered(_ push: Push, _ outcome: PushPlanner.Outcome) {
                guard outcome == .delivered || outcome == .refused(reason: "x") else { return }
                accepted[key(push)] = (push.sequence, push.timestamp)
                if push.event == .end { endedDevices.insert(key(push)) }
                if push.priority == .urgent && push.event == .update {
                    var times = urgentTimes[key(push), default: []].filter { now.timeIntervalSince($0) < 3600 }
                    times.append(now)
                    #expect(times.count <= planner.settings.urgentPushesPerHour, "the hour's budget")
                    urgentTimes[key(push)] = times
                }
            }
            var maker = StatusMaker()
            for (index, step) in steps.enumerated() {
                now += Double(gaps[index % gaps.count])
                switch step {
                case .register(let device, let ride):
                    if case .success(let actions) = planner.register(
                        devices[device], ride: "r\(ride)", expires: .distantFuture, now: now)
                    {
                        endedDevices.remove("r\(ride)/\(devices[device].digest)")
                        take(actions)
                    }
                case .unregister(let device, let ride):
                    take(planner.unregister(devices[device], ride: "r\(ride)"))
                case .status(let ride, let phase, let arrival, let ends):
                    guard !ended[ride] else { continue }
                    sequences[ride] += 1
                    maker.ride = "r\(ride)"
                    maker.sequence = sequences[ride] - 1
                    let phases: [RidePhase] = [.received, .confirmed, .approachingPickup, .pickup, .ongoing, .ongoing]
                    var status = maker.next(
                        ends ? .completed : phases[phase], at: now.timeIntervalSince(maker.start),
                        arrival: Double(arrival) + now.timeIntervalSince(maker.start),
                        completion: ends ? CompletionStatus(completed: true) : nil)
                    status.issuedAt = now
                    ended[ride] = ends
                    take(planner.status(status, now: now))
                case .stop(let ride):
                    take(planner.stopped(ride: "r\(ride)", now: now))
                case .answer(let kind):
                    guard !outstanding.isEmpty else { continue }
                    let push = outstanding.removeFirst()
                    let outcomes: [PushPlanner.Outcome] = [
                        .delivered, .delivered, .retry(after: nil), .unregistered, .credentialExpired,
                        .refused(reason: "x"),
                    ]
                    answered(push, outcomes[kind])
                    take(planner.outcome(outcomes[kind], of: push, now: now))
                case .tick:
                    take(planner.tick(now: now))
                }
                #expect(planner.pending <= planner.registrations)
                #expect(planner.subscribedRides <= 2 && planner.registrations <= 8)
            }
        }
    }
}
