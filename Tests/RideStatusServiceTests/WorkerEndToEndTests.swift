import Foundation
import MQTTClient
import MosquittoTesting
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideTopics

/// The built worker against a real mosquitto started on a free loopback port, observed by MQTT clients.
@Suite("ride-status-worker end to end", .serialized)
struct WorkerEndToEndTests {
    @Test("a full ride from booking to stop through every phase (P1-P5, C2, L2, L3)")
    func fullRide() async throws {
        try await withTestBroker { broker in
            // The longest cadence C1 allows (20 s), so that C2 below tells "at once" from "at the next cadence"
            // by a wide margin on a loaded machine (40 fixes and a status took 5 s in a full parallel run).
            let worker = try WorkerProcess(broker: broker, interval: 20)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            try await observer.publish("rides/r-full/start", booking(ride: "r-full", vehicle: nil))
            try await observer.waitFor("received") { _ in observer.statuses("r-full").last?.phase == "received" }
            try await observer.publish(
                "rides/r-full/assign", #"{"vehicleId":"v-full","driver":{"displayName":"Ada L."}}"#)
            try await observer.waitFor("confirmed") { _ in observer.statuses("r-full").last?.phase == "confirmed" }
            // The vehicle subscription follows the assignment (L3); fixes sent until one is taken.
            let far = pickupPoint.moved(metres: 400, bearing: 90)
            var time = Date().addingTimeInterval(-200)
            for _ in 0..<100 where observer.statuses("r-full").last?.phase != "approachingPickup" {
                time = time.addingTimeInterval(1)
                try await observer.publish("fleet/vehicles/v-full/position", fix("v-full", far, at: time, speed: 8))
                try await Task.sleep(for: .milliseconds(30))
            }
            try await observer.waitFor("approachingPickup (P2)") { _ in
                observer.statuses("r-full").last?.phase == "approachingPickup"
            }
            let approachedAt = Date()
            for step in 1...40 {
                time = time.addingTimeInterval(1)
                let point = pickupPoint.moved(metres: max(10, 400 - Double(step) * 12), bearing: 90)
                try await observer.publish(
                    "fleet/vehicles/v-full/position", fix("v-full", point, at: time, speed: step >= 33 ? 0 : 12))
            }
            try await observer.waitFor("pickup (P3)") { _ in observer.statuses("r-full").last?.phase == "pickup" }
            #expect(
                Date().timeIntervalSince(approachedAt) < 10,
                "C2: phase changes publish at once, not at the 20 s cadence")
            try await observer.publish("rides/r-full/event", #"{"type":"passengerOnBoard"}"#)
            try await observer.waitFor("ongoing (P4)") { _ in observer.statuses("r-full").last?.phase == "ongoing" }
            try await observer.publish("rides/r-full/event", #"{"type":"arrivedAtDropOff"}"#)
            try await observer.waitFor("completed (P5)") { _ in observer.statuses("r-full").last?.phase == "completed" }
            let completed = try #require(observer.statuses("r-full").last)
            #expect(completed["completionStatus"]?["completed"] == .bool(true))
            #expect(completed["completionStatus"]?["paymentAmount"]?["currencyCode"]?.stringValue == "EUR")
            let phases = observer.statuses("r-full").compactMap(\.phase)
            var distinct: [String] = []
            for phase in phases where distinct.last != phase { distinct.append(phase) }
            #expect(distinct == ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"])
            let sequences = observer.statuses("r-full").compactMap(\.sequence)
            #expect(zip(sequences.dropFirst(), sequences).allSatisfy { $0 > $1 }, "C5")

            try await observer.publish("rides/r-full/stop", "")
            try await observer.waitFor("zero-length retained status (L2)") { messages in
                messages.contains { $0.topic == "rides/r-full/status" && $0.payload.isEmpty }
            }
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("14: the broker password never reaches the log or /metrics; from a file it is not warned about")
    func passwordStaysSecret() async throws {
        let secret = "pw-\(UUID().uuidString.prefix(12))"
        try await withTestBroker(TestBroker.Options(users: ["ride-worker": secret])) { broker in
            let inURL = try WorkerProcess(
                url: "mqtt://ride-worker:\(secret)@\(broker.host):\(broker.port)", directory: broker.directory,
                workerID: "w-url", interval: 1)
            try await inURL.start()
            let metrics = httpGet(host: inURL.metricsHost, port: inURL.metricsPort, path: "/metrics")?.body ?? ""
            #expect(!metrics.isEmpty && !metrics.contains(secret))
            #expect(!inURL.logText.contains(secret), "the password is redacted from every log line")
            #expect(inURL.logText.contains("mqtt://ride-worker:***@"), "the URL is logged, redacted")
            #expect(inURL.logText.contains("broker.passwordFile"), "a warning says where the password belongs")
            #expect(await inURL.terminate().code == 0)

            let file = broker.directory.appendingPathComponent("broker-password")
            try (secret + "\n").write(to: file, atomically: true, encoding: .utf8)
            let fromFile = try WorkerProcess(
                url: "mqtt://ride-worker@\(broker.host):\(broker.port)", directory: broker.directory,
                workerID: "w-file", interval: 1, extra: ["--set", "broker.passwordFile=\(file.path)"])
            try await fromFile.start()
            #expect(!fromFile.logText.contains(secret) && !fromFile.logText.contains("passwordFile ("))
            // What `ps` shows every user of the host: the command line, without the password.
            let pid = try #require(fromFile.process?.pid)
            let commandLine = try String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)
            #expect(commandLine.contains("passwordFile") && !commandLine.contains(secret))
            #expect(await fromFile.terminate().code == 0)
        }
    }

    @Test("I1, 14: identifiers with '/', '+', '#', NUL or a space in any field never reach a topic, through the worker")
    func topicInjection() async throws {
        try await withTestBroker(TestBroker.Options(sysInterval: 1)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-inj", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["#"])
            try await observer.publish("rides/r-ok/start", booking(ride: "r-ok", vehicle: "v-ok"))
            try await observer.waitFor("the good ride") { _ in !observer.statuses("r-ok").isEmpty }
            let hostile = ["v/x", "v+x", "v#x", "v x", "v\\u0000x", "+", "#"]
            for vehicle in hostile {
                try await observer.publish("rides/r-bad/start", booking(ride: "r-bad", vehicle: vehicle))
                try await observer.publish("rides/r-ok/assign", #"{"vehicleId":"\#(vehicle)"}"#)
            }
            // Every one refused as I1 (dead letters are rate limited per reason; the counter is not).
            func refused() -> Double {
                let text = httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body ?? ""
                return text.split(separator: "\n").first {
                    $0.hasPrefix(#"ridestatus_inputs_rejected_total{reason="invalidIdentifier"}"#)
                }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            }
            let deadline = Date().addingTimeInterval(15)
            while refused() < Double(2 * hostile.count) && Date() < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(refused() == Double(2 * hostile.count))
            let letters = observer.messages.filter { $0.topic == "ridestatus/deadletter" }.map {
                String(decoding: $0.payload, as: UTF8.self)
            }
            #expect(letters.allSatisfy { $0.contains("invalidIdentifier") }, Comment(rawValue: letters.joined()))
            // Nothing the worker published went to a topic made of those identifiers.
            let topics = Set(observer.messages.map(\.topic))
            #expect(!topics.contains { $0.contains("v/x") || $0.contains("v x") || $0.contains("/x/") })
            #expect(observer.statuses("r-bad").isEmpty)
            #expect(worker.readyStatus() == 200)
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("G2: every status and state publish carries the user properties worker and epoch")
    func ownershipProperties() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-g2", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", "ridestatus/state/#"])
            try await observer.publish("rides/r-g2/start", booking(ride: "r-g2", vehicle: "v-g2"))
            try await observer.waitFor("two statuses and a state") { messages in
                messages.filter { $0.topic == "rides/r-g2/status" }.count >= 2
                    && messages.contains { $0.topic == RideTopics().state(ride: "r-g2") }
            }
            try await observer.publish("rides/r-g2/stop", "")
            try await observer.waitFor("the end of the ride (L2)") { messages in
                messages.contains { $0.topic == "rides/r-g2/status" && $0.payload.isEmpty }
                    && messages.contains { $0.topic == RideTopics().state(ride: "r-g2") && $0.payload.isEmpty }
            }
            let published = observer.messages.filter {
                $0.topic.hasSuffix("r-g2/status") || $0.topic.hasSuffix("/r-g2")
            }
            #expect(published.count >= 5)
            for message in published {
                let properties = Dictionary(message.properties.userProperties, uniquingKeysWith: { first, _ in first })
                #expect(properties["worker"] == "w-g2", "\(message.topic): \(message.properties.userProperties)")
                #expect(properties["epoch"] == "1", "\(message.topic): one owner since the booking")
            }
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("G1, L8: two workers on one broker see each other join and leave, presence carrying the incarnation")
    func groupMembership() async throws {
        try await withTestBroker { broker in
            let first = try WorkerProcess(broker: broker, workerID: "w-one", interval: 1)
            try await first.start()
            let observer = try await Observer(broker, filters: ["ridestatus/workers/+"])
            let second = try WorkerProcess(broker: broker, workerID: "w-two", interval: 1)
            try await second.start()
            func members(_ worker: WorkerProcess) -> Double? {
                httpGet(host: worker.metricsHost, port: worker.metricsPort, path: "/metrics")?.body
                    .split(separator: "\n").first { $0.hasPrefix("ridestatus_group_members ") }
                    .flatMap { Double($0.split(separator: " ")[1]) }
            }
            try await observer.waitFor("both workers to see a group of 2", timeout: 10) { _ in
                members(first) == 2 && members(second) == 2
            }
            // Each birth carries the incarnation its will carries (G1): a number of milliseconds since 1970.
            let births = observer.messages.filter { $0.topic == "ridestatus/workers/w-two" && !$0.payload.isEmpty }
            let birth = try #require(births.last.map { try JSONParser.parse($0.payload) })
            #expect(birth["state"]?.stringValue == "online")
            let incarnation = try #require(birth["incarnation"]?.doubleValue)
            #expect(incarnation > 1_700_000_000_000 && incarnation <= Date().timeIntervalSince1970 * 1000)

            #expect(await second.terminate().code == 0)
            try await observer.waitFor("the first worker to see the second leave (L8)", timeout: 10) { _ in
                members(first) == 1
            }
            let goodbye = try #require(
                observer.messages.last { $0.topic == "ridestatus/workers/w-two" }.map {
                    try JSONParser.parse($0.payload)
                })
            #expect(goodbye["state"]?.stringValue == "offline")
            #expect(goodbye["incarnation"]?.doubleValue == incarnation, "the goodbye names the birth's incarnation")
            #expect(first.logText.contains("group membership changed (G1)"))
            await observer.stop()
            #expect(await first.terminate().code == 0)
        }
    }

    @Test("stop removes the vehicle subscription ($SYS count) and clears the retained status (L2, L3)")
    func stopTearsDown() async throws {
        try await withTestBroker(TestBroker.Options(sysInterval: 1)) { broker in
            let worker = try WorkerProcess(broker: broker, interval: 5)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["$SYS/broker/subscriptions/count", "rides/+/status"])
            func subscriptionCount() -> Int? {
                observer.messages.last { $0.topic == "$SYS/broker/subscriptions/count" }
                    .flatMap { Int(String(decoding: $0.payload, as: UTF8.self)) }
            }
            try await observer.waitFor("$SYS count", timeout: 5) { _ in subscriptionCount() != nil }
            // Let the worker's start-up subscription changes settle: the count must hold for 2 s.
            var before = try #require(subscriptionCount())
            for _ in 0..<5 {
                try await Task.sleep(for: .seconds(2))
                let now = try #require(subscriptionCount())
                if now == before { break }
                before = now
            }
            try await observer.publish("rides/r-stop/start", booking(ride: "r-stop", vehicle: "v-stop"))
            try await observer.waitFor("one more subscription", timeout: 6) { _ in
                (subscriptionCount() ?? 0) == before + 1
            }
            try await observer.publish("rides/r-stop/stop", #"{"reason":"done"}"#)
            try await observer.waitFor("subscription removed", timeout: 6) { _ in (subscriptionCount() ?? 0) == before }
            // A new subscriber gets no retained status for the ride: the first thing it sees is a live marker.
            let late = try await Observer(broker, filters: ["rides/r-stop/status"])
            try await late.publish("rides/r-stop/status", "marker")
            let first = try await late.waitFor("marker") { !$0.isEmpty }
            #expect(String(decoding: first[0].payload, as: UTF8.self) == "marker")
            await late.stop()
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test(
        "bad input battery: dead letters with reasons, worker alive, healthy ride unaffected (I1-I3, T1, T2, T4, T5, P8)"
    )
    func badInput() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", "ridestatus/deadletter"])
            try await observer.publish("rides/r-ok/start", booking(ride: "r-ok", vehicle: "v-ok"))
            try await observer.waitFor("healthy ride") { _ in !observer.statuses("r-ok").isEmpty }
            let near = pickupPoint.moved(metres: 2000, bearing: 90)
            for _ in 0..<20 where observer.statuses("r-ok").last?["vehicle"]?["location"] == .null {
                try await observer.publish("fleet/vehicles/v-ok/position", fix("v-ok", near))
                try await Task.sleep(for: .milliseconds(100))
            }
            let now = Date()
            let battery: [(String, String, DeadLetter.Reason)] = [
                ("rides/r-ok/start", String(repeating: "x", count: 17_000), .payloadTooLarge),
                ("rides/r-ok/event", "{not json", .malformedJSON),
                ("rides/r-ok/event", "[1,2]", .malformedJSON),
                ("rides/r-x/start", #"{"rideIdentifier":"r-x"}"#, .missingField),
                ("rides/r-ok/event", #"{"type":"flying"}"#, .invalidField),
                ("rides/bad:id!/start", booking(ride: "bad:id!", vehicle: "v-1"), .invalidIdentifier),
                ("rides/r-y/start", booking(ride: "r-z", vehicle: "v-1"), .identifierMismatch),
                (
                    "fleet/vehicles/v-ok/position", fix("v-ok", Coordinate(latitude: 91, longitude: 13)),
                    .invalidCoordinates
                ),
                (
                    "fleet/vehicles/v-ok/position",
                    #"{"timestamp":"\#(Timestamps.format(now))","latitude":0,"longitude":0}"#, .nullIsland
                ),
                (
                    "fleet/vehicles/v-ok/position", fix("v-ok", near, at: now.addingTimeInterval(120)),
                    .timestampInFuture
                ),
                (
                    "fleet/vehicles/v-ok/position",
                    fix("v-ok", near.moved(metres: 50_000, bearing: 0), at: now.addingTimeInterval(1)), .impossibleSpeed
                ),
                (
                    "fleet/vehicles/v-ok/position",
                    #"{"timestamp":"\#(Timestamps.format(now.addingTimeInterval(2)))","latitude":52.53,"longitude":13.44,"horizontalAccuracy":500}"#,
                    .poorAccuracy
                ),
                ("rides/r-nope/cancel", #"{"canceledBy":"user"}"#, .unknownRide),
                ("rides/r-ok/event", #"{"type":"arrivedAtDropOff"}"#, .eventNotAllowed),
                (
                    "rides/r-same/start",
                    booking(ride: "r-same", vehicle: "v-1").replacingOccurrences(of: "52.5096", with: "52.5219")
                        .replacingOccurrences(of: "13.3759", with: "13.4132"), .invalidBooking
                ),
            ]
            let sequenceBefore = observer.statuses("r-ok").last?.sequence ?? 0
            for (topic, payload, _) in battery { try await observer.publish(topic, payload) }
            let expected = Set(battery.map(\.2.rawValue))
            let letters = try await observer.waitFor("every dead letter") { messages in
                let reasons = Set(
                    messages.filter { $0.topic == "ridestatus/deadletter" }.compactMap {
                        (try? JSONParser.parse($0.payload))?["reason"]?.stringValue
                    })
                return expected.isSubset(of: reasons)
            }.filter { $0.topic == "ridestatus/deadletter" }
            #expect(letters.count >= battery.count)
            #expect(worker.readyStatus() == 200, "the worker is alive")
            try await Task.sleep(for: .milliseconds(1500))
            let statuses = observer.statuses("r-ok")
            #expect(statuses.last?.phase == "confirmed", "the healthy ride is unaffected")
            #expect((statuses.last?.sequence ?? 0) > sequenceBefore, "and keeps its cadence")
            #expect(statuses.last?["vehicle"]?["location"]?["latitude"]?.doubleValue == near.latitude)
            #expect(worker.logText.contains("input rejected (T1)"), "log lines name the rule")
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("SIGKILL and restart: rides resume within 2 s with phase, sequence and location intact (L5, C5)")
    func killAndResume() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-durable", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", "ridestatus/workers/+"])
            try await observer.publish("rides/r-d/start", booking(ride: "r-d", vehicle: "v-d"))
            try await observer.waitFor("confirmed") { _ in observer.statuses("r-d").last?.phase == "confirmed" }
            let spot = pickupPoint.moved(metres: 1500, bearing: 45)
            for _ in 0..<20 where observer.statuses("r-d").last?["vehicle"]?["location"] == .null {
                try await observer.publish("fleet/vehicles/v-d/position", fix("v-d", spot))
                try await Task.sleep(for: .milliseconds(100))
            }
            try await observer.publish("rides/r-d/event", #"{"type":"arrivedAtPickup"}"#)
            try await observer.waitFor("pickup") { _ in observer.statuses("r-d").last?.phase == "pickup" }
            try await Task.sleep(for: .milliseconds(300))
            let lastSequence = try #require(observer.statuses("r-d").last?.sequence)
            await worker.kill()
            try await observer.waitFor("will: offline (L8)") { messages in
                messages.contains {
                    $0.topic == "ridestatus/workers/w-durable"
                        && String(decoding: $0.payload, as: UTF8.self).contains("offline")
                }
            }
            observer.clear()
            let restart = Date()
            try await worker.start()
            try await observer.waitFor("a resumed status", timeout: 5) { _ in !observer.statuses("r-d").isEmpty }
            // Measured from the start command, so process start-up and the connection are included: a bound from
            // above on "within 2 s of reconnecting".
            #expect(Date().timeIntervalSince(restart) < 2, "resumed within 2 s (L5)")
            let resumed = try #require(observer.statuses("r-d").first)
            #expect(resumed.phase == "pickup")
            #expect((resumed.sequence ?? 0) > lastSequence)
            #expect(resumed["vehicle"]?["location"]?["latitude"]?.doubleValue == spot.latitude)
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("A2, L5: retained states with a 2^63-1 sequence, a '+' vehicle or another ride's id never stop the worker")
    func hostileDurableState() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-a2", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", "ridestatus/deadletter"])
            try await observer.publish("rides/r-good/start", booking(ride: "r-good", vehicle: "v-good"))
            try await observer.waitFor("confirmed") { _ in !observer.statuses("r-good").isEmpty }
            await worker.kill()
            // The worker's own state, read back from a broker anyone may have written to.
            let state = try await Observer(broker, filters: [RideTopics().state(ride: "r-good")])
            let stored = try await state.waitFor("the good ride's state") { !$0.isEmpty }
            let text = String(decoding: try #require(stored.first).payload, as: UTF8.self)
            await state.stop()
            let sequence = try #require(try JSONParser.parse(Array(text.utf8)).sequence)
            let hostile = [
                (
                    "r-max",
                    text.replacingOccurrences(
                        of: #""sequence":\#(sequence),"#, with: #""sequence":9223372036854775807,"#
                    )
                    .replacingOccurrences(of: "r-good", with: "r-max")
                ),
                (
                    "r-plus",
                    text.replacingOccurrences(of: "v-good", with: "+").replacingOccurrences(
                        of: "r-good", with: "r-plus")
                ),
                ("r-other", text),
            ]
            for (ride, payload) in hostile {
                try await observer.publish(RideTopics().state(ride: ride), payload, retain: true)
            }
            observer.clear()
            for _ in 0..<2 {
                try await worker.start()
                try await observer.waitFor("the good ride resumes") { _ in !observer.statuses("r-good").isEmpty }
                await worker.kill()
                observer.clear()
            }
            try await worker.start()
            let letters = try await observer.waitFor("three dead letters naming A2") { messages in
                messages.filter { $0.topic == "ridestatus/deadletter" }.count >= 3
            }.filter { $0.topic == "ridestatus/deadletter" }.map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(letters.allSatisfy { $0.contains("A2") }, Comment(rawValue: letters.joined(separator: "\n")))
            #expect(
                letters.contains { $0.contains("identifierMismatch") }
                    && letters.contains { $0.contains("invalidIdentifier") })
            #expect(worker.readyStatus() == 200, "alive and ready after three starts")
            #expect(worker.logText.contains("ride state refused (A2)"))
            #expect(observer.statuses("r-max").isEmpty && observer.statuses("r-plus").isEmpty)
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("A2, L5: a ride state deleted on the broker while the worker runs is written again; a restart keeps the ride")
    func stateDeletedBehindTheWorker() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-del", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            try await observer.publish("rides/r-del/start", booking(ride: "r-del", vehicle: "v-del"))
            try await observer.waitFor("statuses") { _ in observer.statuses("r-del").count >= 2 }
            #expect(!worker.logText.contains("changed on the broker"), "its own state writes never come back to it")
            // A zero-length retained message deletes the retained state.
            try await observer.publish(RideTopics().state(ride: "r-del"), "", retain: true)
            let deadline = Date().addingTimeInterval(5)
            while !worker.logText.contains("changed on the broker by another client (A2)") && Date() < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            // The log line comes just before the write: the reader may subscribe before the write arrives, and then
            // sees it live (not flagged retained). Once it has, a second reader must find it retained.
            let reader = try await Observer(broker, filters: [RideTopics().state(ride: "r-del")])
            try await reader.waitFor("the state written again") { messages in
                messages.contains { !$0.payload.isEmpty }
            }
            await reader.stop()
            let second = try await Observer(broker, filters: [RideTopics().state(ride: "r-del")])
            let retained = try await second.waitFor("the state retained again") { messages in
                messages.contains { $0.retain && !$0.payload.isEmpty }
            }
            #expect(retained.contains { $0.retain && !$0.payload.isEmpty })
            await second.stop()
            await worker.kill()
            observer.clear()
            try await worker.start()
            try await observer.waitFor("the ride resumes after a restart (L5)") { _ in
                !observer.statuses("r-del").isEmpty
            }
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test(
        "C5, A2: on a real broker, another worker's write of a ride under its epoch reserving up to 500 (views split) makes the next status 501, not a rewrite; a restart continues above it"
    )
    func sameEpochWriteLiftsOnARealBroker() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-co", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", RideTopics().state(ride: "r-co")])
            try await observer.publish("rides/r-co/start", booking(ride: "r-co", vehicle: "v-co"))
            try await observer.waitFor("statuses") { _ in observer.statuses("r-co").count >= 2 }
            let states = try await observer.waitFor("its state") { messages in
                messages.contains { $0.topic == RideTopics().state(ride: "r-co") && !$0.payload.isEmpty }
            }
            let own = String(
                decoding: try #require(states.last { $0.topic == RideTopics().state(ride: "r-co") }).payload,
                as: UTF8.self)
            let ceiling = try #require(try JSONParser.parse(Array(own.utf8))["sequenceCeiling"]?.doubleValue)
            #expect(ceiling < 500)
            // Another worker that took the ride over from the same read, under the same epoch, reserved up to 500.
            let foreign = own.replacingOccurrences(
                of: #""sequenceCeiling":\#(Int(ceiling))"#, with: #""sequenceCeiling":500"#)
            try await observer.publish(RideTopics().state(ride: "r-co"), foreign, retain: true)
            try await observer.waitFor("the next status above 500") { _ in
                observer.statuses("r-co").contains { ($0["sequence"]?.doubleValue ?? 0) > 500 }
            }
            let sequences = observer.statuses("r-co").compactMap { $0["sequence"]?.doubleValue }
            #expect(sequences.first { $0 > 500 } == 501, "\(sequences.suffix(4))")
            #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "C5: \(sequences)")
            #expect(!worker.logText.contains("changed on the broker by another client (A2)"), "not rewritten")
            await worker.kill()
            observer.clear()
            try await worker.start()
            try await observer.waitFor("the ride resumes above 501 after a restart (L5)") { _ in
                !observer.statuses("r-co").isEmpty
            }
            let resumed = try #require(observer.statuses("r-co").first?["sequence"]?.doubleValue)
            #expect(resumed > 501, "\(resumed)")
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("control messages sent while the worker is down are processed on return; duplicates change nothing (L6)")
    func controlWhileDown() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-l6", interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            try await observer.publish("rides/r-l6/start", booking(ride: "r-l6", vehicle: "v-l6"))
            try await observer.waitFor("confirmed") { _ in observer.statuses("r-l6").last?.phase == "confirmed" }
            #expect(await worker.terminate().code == 0)
            try await observer.publish("rides/r-l6/event", #"{"type":"passengerOnBoard"}"#)
            try await observer.publish("rides/r-l6/event", #"{"type":"passengerOnBoard"}"#)
            try await observer.publish("rides/r-l6b/start", booking(ride: "r-l6b", vehicle: "v-l6b"))
            observer.clear()
            try await worker.start()
            try await observer.waitFor("ongoing after return") { _ in observer.statuses("r-l6").last?.phase == "ongoing"
            }
            try await observer.waitFor("ride booked while down") { _ in !observer.statuses("r-l6b").isEmpty }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!worker.logText.contains("eventNotAllowed"), "the duplicate event is not an error")
            #expect(observer.statuses("r-l6").allSatisfy { $0.phase == "ongoing" || $0.phase == "confirmed" })
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("SIGTERM: presence offline, QoS 1 flushed, exit 0 within 5 s (L8)")
    func gracefulShutdown() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, workerID: "w-term", interval: 1)
            let observer = try await Observer(broker, filters: ["ridestatus/workers/+"])
            try await worker.start()
            try await observer.waitFor("online") { messages in
                messages.contains { String(decoding: $0.payload, as: UTF8.self).contains(#""state":"online""#) }
            }
            let (code, seconds) = await worker.terminate()
            #expect(code == 0)
            #expect(seconds < 5)
            try await observer.waitFor("offline") { messages in
                messages.last.map { String(decoding: $0.payload, as: UTF8.self).contains(#""state":"offline""#) }
                    ?? false
            }
            let late = try await Observer(broker, filters: ["ridestatus/workers/w-term"])
            let retained = try await late.waitFor("retained presence") { !$0.isEmpty }
            #expect(retained[0].retain && String(decoding: retained[0].payload, as: UTF8.self).contains("offline"))
            await late.stop()
            await observer.stop()
        }
    }

    @Test("broker restart: every active ride publishes at once after reconnecting (C4)")
    func brokerRestart() async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, interval: 20)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            for ride in ["r-c4a", "r-c4b"] {
                try await observer.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            try await observer.waitFor("both rides") { _ in
                !observer.statuses("r-c4a").isEmpty && !observer.statuses("r-c4b").isEmpty
            }
            try await broker.restart()
            let back = Date()
            let watcher = try await Observer(broker, filters: ["rides/+/status"])
            // Retained statuses arrive at once; wait for live ones with a newer sequence than the retained.
            let retainedA = observer.statuses("r-c4a").last?.sequence ?? 0
            let retainedB = observer.statuses("r-c4b").last?.sequence ?? 0
            try await watcher.waitFor("republished statuses", timeout: 8) { messages in
                let live = messages.filter { !$0.retain }.compactMap { message -> (String, Int)? in
                    guard let json = try? JSONParser.parse(message.payload) else { return nil }
                    return (json["rideIdentifier"]?.stringValue ?? "", json.sequence ?? 0)
                }
                return live.contains { $0.0 == "r-c4a" && $0.1 > retainedA }
                    && live.contains { $0.0 == "r-c4b" && $0.1 > retainedB }
            }
            #expect(Date().timeIntervalSince(back) < 8, "well before the 20 s cadence")
            await watcher.stop()
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test(
        "C4, C5: broker frozen across a tick, then restarted (cleanly, then losing its data): no older status after a newer one, retained the newest",
        arguments: [false, true])
    func orderingAcrossBrokerRestart(losingData: Bool) async throws {
        try await withTestBroker(TestBroker.Options(persistence: true)) { broker in
            let worker = try WorkerProcess(broker: broker, interval: 1)
            try await worker.start()
            // A persistent session: what the broker takes in while this observer reconnects still reaches it,
            // in the order the broker received it.
            let observer = try await Observer(broker, filters: ["rides/+/status"], persistentSession: true)
            let rides = (0..<20).map { "r-c5-\($0)" }
            for ride in rides { try await observer.publish("rides/\(ride)/start", booking(ride: ride, vehicle: nil)) }
            try await observer.waitFor("every ride") { _ in rides.allSatisfy { !observer.statuses($0).isEmpty } }
            try await Task.sleep(for: .milliseconds(1_500))  // the broker saves the observer's session (1 s)
            broker.freeze()
            try await Task.sleep(for: .milliseconds(1_500))  // a cadence tick: statuses in flight, unacknowledged
            if losingData { try await broker.restartLosingData() } else { try await broker.restart() }
            try await observer.waitFor("statuses after the restart", timeout: 10) { _ in
                observer.client.reconnectCount > 0 && observer.messages.filter { !$0.retain }.count > 60
            }
            try await Task.sleep(for: .milliseconds(2_500))
            var regressions: [String] = []
            var newest: [String: Int] = [:]
            for message in observer.messages where !message.retain && !message.payload.isEmpty {
                guard let json = try? JSONParser.parse(message.payload), let ride = json["rideIdentifier"]?.stringValue,
                    let sequence = json.sequence
                else { continue }
                if let seen = newest[ride], sequence < seen { regressions.append("\(ride): \(sequence) after \(seen)") }
                newest[ride] = max(newest[ride] ?? 0, sequence)
            }
            #expect(regressions.isEmpty, "C5: an older status after a newer one: \(regressions)")
            // The retained status is the newest (a new subscriber gets it first), never one the worker superseded.
            let late = try await Observer(broker, filters: ["rides/+/status"])
            try await late.waitFor("retained statuses") { _ in rides.allSatisfy { !late.statuses($0).isEmpty } }
            for ride in rides {
                let retained = try #require(late.statuses(ride).first?.sequence)
                #expect(
                    retained >= (newest[ride] ?? 0),
                    "C5: \(ride) retained \(retained), newest seen \(newest[ride] ?? 0)")
            }
            await late.stop()
            await observer.stop()
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("cadence: 200 rides at a 1 s interval, maximum gap at most interval + 0.5 s (C1, C6)")
    func cadence() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, interval: 1)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status"])
            for index in 0..<200 {
                try await observer.publish(
                    "rides/r-\(index)/start", booking(ride: "r-\(index)", vehicle: "v-\(index % 50)"))
            }
            try await observer.waitFor("all rides") { messages in Set(messages.map(\.topic)).count == 200 }
            observer.clear()
            let window = Date()
            try await Task.sleep(for: .seconds(5))
            var arrivals: [String: [Date]] = [:]
            for message in observer.messages where !message.payload.isEmpty {
                guard let json = try? JSONParser.parse(message.payload),
                    let issued = json["issuedAt"]?.stringValue.flatMap(Timestamps.parse)
                else { continue }
                arrivals[message.topic, default: []].append(issued)
            }
            var maxGap = 0.0
            for (_, times) in arrivals {
                let all = [window] + times.sorted()
                for (a, b) in zip(all, all.dropFirst()) { maxGap = max(maxGap, b.timeIntervalSince(a)) }
            }
            #expect(arrivals.count == 200)
            #expect(maxGap <= 1.5, "maximum cadence gap \(maxGap) s")
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("status/get answers the current status or unknownRide, with the correlation data (L7)")
    func statusGet() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, interval: 5)
            try await worker.start()
            let observer = try await Observer(broker, filters: ["rides/+/status", "replies/me"])
            try await observer.publish("rides/r-get/start", booking(ride: "r-get", vehicle: "v-get"))
            try await observer.waitFor("status") { _ in !observer.statuses("r-get").isEmpty }
            let request = MQTTProperties(responseTopic: "replies/me", correlationData: [1, 2, 3])
            try await observer.publish("rides/r-get/status/get", "{}", properties: request)
            try await observer.publish(
                "rides/r-none/status/get", "",
                properties: MQTTProperties(responseTopic: "replies/me", correlationData: [9]))
            let replies = try await observer.waitFor("two replies") {
                $0.filter { $0.topic == "replies/me" }.count == 2
            }
            .filter { $0.topic == "replies/me" }
            let current = try #require(replies.first { $0.properties.correlationData == [1, 2, 3] })
            #expect((try JSONParser.parse(current.payload))["rideIdentifier"]?.stringValue == "r-get")
            let unknown = try #require(replies.first { $0.properties.correlationData == [9] })
            #expect(String(decoding: unknown.payload, as: UTF8.self) == #"{"code":"failure","reason":"unknownRide"}"#)
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("A1: a reply goes only under replies/; another ride's status topic as Response Topic gets a dead letter")
    func repliesOnlyUnderThePrefix() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, interval: 20)
            try await worker.start()
            // Everything on the broker, to see that no reply lands anywhere.
            let observer = try await Observer(broker, filters: ["#"])
            for ride in ["r-a1", "r-b1"] {
                try await observer.publish("rides/\(ride)/start", booking(ride: ride, vehicle: "v-\(ride)"))
            }
            try await observer.waitFor("statuses") { _ in
                !observer.statuses("r-a1").isEmpty && !observer.statuses("r-b1").isEmpty
            }
            observer.clear()
            // Ride A's status, driver's phone included, onto ride B's status topic: refused.
            for target in [
                "rides/r-b1/status", RideTopics().state(ride: "r-b1"), "fleet/vehicles/v-x/position", "replies/+",
            ] {
                try await observer.publish(
                    "rides/r-a1/status/get", "{}",
                    properties: MQTTProperties(responseTopic: target, correlationData: [7]))
            }
            try await observer.publish(
                "ride-options/request", #"{}"#, properties: MQTTProperties(responseTopic: "rides/r-b1/status"))
            let letters = try await observer.waitFor("five dead letters (A1)") {
                $0.filter { $0.topic == "ridestatus/deadletter" }.count >= 5
            }.filter { $0.topic == "ridestatus/deadletter" }.compactMap { try? JSONParser.parse($0.payload) }
            let a1 = letters.filter { ($0["detail"]?.stringValue ?? "").contains("(A1)") }
            #expect(a1.count == 5)
            #expect(a1.allSatisfy { $0["reason"]?.stringValue == "invalidField" })
            try await Task.sleep(for: .milliseconds(300))
            #expect(observer.statuses("r-b1").isEmpty, "nothing landed on ride B's status topic")
            #expect(
                !observer.messages.contains {
                    $0.properties.correlationData == [7] && !$0.topic.hasSuffix("/status/get")
                },
                "no reply anywhere")
            // Under the prefix it answers.
            try await observer.publish(
                "rides/r-a1/status/get", "{}",
                properties: MQTTProperties(responseTopic: "replies/app-1", correlationData: [8]))
            try await observer.waitFor("the reply under replies/") { messages in
                messages.contains { $0.topic == "replies/app-1" && $0.properties.correlationData == [8] }
            }
            await observer.stop()
            _ = await worker.terminate()
        }
    }

    @Test("a wrong configuration value stops start-up naming the key and the range (C1)")
    func badConfiguration() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("badconfig-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let process = try ChildProcess(
            executable: WorkerProcess.executable, arguments: ["--update-interval", "25", "--metrics-port", "0"],
            output: log)
        #expect(await process.exited(within: 10))
        #expect(process.exitCode == 2)
        let message = try String(contentsOf: log, encoding: .utf8)
        #expect(message.contains("rides.updateInterval") && message.contains("0.1...20"), "\(message)")
    }
}
