import Foundation
import MQTTClient
import RideDomain
import RideStatusService
import SettingsLayers
import Testing

import struct RideStatusKit.CompletionStatus

/// The worker behaves the same from any working directory: paths in a configuration file are read from its
/// folder, and what is configured and missing stops start-up with one clear sentence.
@Suite("Settings: configuration files and their paths")
struct SettingsTests {
    /// A folder holding `config/worker.yaml` with `body` and the repository's catalog beside it.
    func configurationFolder(_ body: String, catalog: Bool = true) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settings-\(UUID().uuidString)")
        let config = folder.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try body.write(to: config.appendingPathComponent("worker.yaml"), atomically: true, encoding: .utf8)
        if catalog {
            let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../config/ride-options.yaml")
            try FileManager.default.copyItem(at: repository, to: config.appendingPathComponent("ride-options.yaml"))
        }
        return folder
    }

    @Test("G1, G3: a broker cluster's nodes, MQTT 3.1.1 and the keepalive come from the settings")
    func clusterSettings() throws {
        var settings = WorkerSettings()
        #expect(settings.keepAlive == 5 && settings.protocolVersion == .v5 && settings.ride.dotsInTopics)
        try settings.apply("broker.url", "mqtt://127.0.0.1:18830, mqtt://127.0.0.1:18831,mqtt://localhost:18832")
        try settings.apply("broker.protocol", "3.1.1")
        try settings.apply("broker.keepAlive", "7")
        try settings.apply("broker.dotsInTopics", "false")
        let configuration = try settings.mqttConfiguration(workerID: "w-1", version: "test")
        #expect(
            configuration.endpoints.map { "\($0.host):\($0.port)" } == [
                "127.0.0.1:18830", "127.0.0.1:18831", "localhost:18832",
            ])
        #expect(configuration.protocolVersion == .v311 && configuration.keepAlive == 7)
        #expect(settings.manySubscriptionsQoS == .atMostOnce, "NATS allows about 63 QoS 1 subscriptions")
        #expect(!settings.ride.dotsInTopics)
        #expect(throws: WorkerSettings.Problem.self) { try settings.apply("broker.protocol", "4") }
        #expect(throws: WorkerSettings.Problem.self) { try settings.apply("broker.keepAlive", "1") }
    }

    @Test("Each number key names its own unit when out of range; every yes-or-no key reads the same words")
    func unitsAndFlags() throws {
        func problem(_ key: String, _ value: String) -> String {
            var settings = WorkerSettings()
            do {
                try settings.apply(key, value)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(problem("rides.updateInterval", "25").hasSuffix("0.1...20 seconds"))
        // V3: a completion's feedback types are rate and tip; anything else stops start-up, naming the key.
        #expect(problem("rides.feedbackTypes", "rate, stars").contains("may only list rate and tip"))
        var feedback = WorkerSettings()
        try feedback.apply("rides.feedbackTypes", "tip")
        #expect(feedback.ride.feedbackTypes == [.tip])
        #expect(problem("rides.speedTimeConstant", "0").hasSuffix("1...3600 seconds"), "a time, though it says Speed")
        #expect(problem("rides.maxSpeed", "0").hasSuffix("1...400 m/s"))
        #expect(problem("rides.arrivalRadius", "0").hasSuffix("1...1000 m"))
        #expect(problem("rides.maxPayloadBytes", "1").hasSuffix("256...1048576 bytes"))
        #expect(problem("rides.trackLength", "2000").hasSuffix("0...1000"), "a count: no unit")
        #expect(problem("rides.detourLearningRate", "2").hasSuffix("0...1"), "a rate: no unit")
        #expect(problem("broker.keepAlive", "1").hasSuffix("2...600 seconds"))
        // E1: the hours of the week outside every area, in an IANA zone.
        #expect(problem("rides.timeZone", "Mars/Olympus").contains("'Mars/Olympus' is not an IANA time zone"))
        var zoned = WorkerSettings()
        try zoned.apply("rides.timeZone", "Asia/Tokyo")
        #expect(
            zoned.ride.timeZone?.identifier == "Asia/Tokyo"
                && WorkerSettings().ride.timeZone == nil)
        try zoned.apply("rides.timeZone", "UTC")
        #expect(zoned.ride.timeZone == nil, "UTC without the zone tables")
        for key in [
            "broker.dotsInTopics", "broker.interposeIO", "worker.takeoverReadsStatuses", "http.readAPI",
            "rides.hoursOfWeek",
        ] {
            var settings = WorkerSettings()
            for (word, value) in [("Yes", true), ("off", false), ("1", true), ("FALSE", false)] {
                try settings.apply(key, word)
                let read =
                    switch key {
                    case "broker.dotsInTopics": settings.ride.dotsInTopics
                    case "broker.interposeIO": settings.interposeIO
                    case "worker.takeoverReadsStatuses": settings.takeoverReadsStatuses
                    case "rides.hoursOfWeek": settings.ride.hoursOfWeek
                    default: settings.readAPI
                    }
                #expect(read == value, "\(key) = \(word)")
            }
            #expect(problem(key, "maybe").hasSuffix("'maybe' is not true or false"), "\(key)")
        }
    }

    @Test("14: the broker password from a file; one in the URL or a flag is warned about and never logged")
    func passwordSources() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)")
        try "from-the-file\nignored\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let fromFile = try WorkerSettings.load(
            file: nil, environment: [:], overrides: [("broker.passwordFile", file.path)], executable: "/nonexistent",
            workingDirectory: "/nonexistent")
        #expect(fromFile.password == "from-the-file" && fromFile.warnings.isEmpty)
        let inURL = try WorkerSettings.load(
            file: nil, environment: [:],
            overrides: [
                ("broker.url", "mqtt://w:hunter2@b1:1883,mqtt://w:hunter2@b2"), ("group.authority", "etcd"),
                ("group.etcdEndpoints", "http://127.0.0.1:2379"),
            ],
            executable: "/nonexistent", workingDirectory: "/nonexistent")
        #expect(inURL.warnings.count == 1 && inURL.warnings[0].contains("broker.passwordFile"))
        #expect(inURL.redactedBrokerURL == "mqtt://w:***@b1:1883,mqtt://w:***@b2")
        let asFlag = try WorkerSettings.load(
            file: nil, environment: [:], overrides: [("broker.password", "hunter2")], executable: "/nonexistent",
            workingDirectory: "/nonexistent")
        #expect(asFlag.warnings.contains { $0.contains("flag") })
        let fromEnvironment = try WorkerSettings.load(
            file: nil, environment: ["RIDESTATUS_BROKER_PASSWORD": "hunter2"], executable: "/nonexistent",
            workingDirectory: "/nonexistent")
        #expect(fromEnvironment.password == "hunter2" && fromEnvironment.warnings.isEmpty)
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(
                file: nil, environment: [:], overrides: [("broker.passwordFile", "/nonexistent/pw")],
                executable: "/nonexistent", workingDirectory: "/nonexistent")
        }
    }

    @Test("3.4: the catalog named relative to the configuration file is found from any working directory")
    func catalogBesideTheFile() throws {
        let folder = try configurationFolder("rideOptions:\n  catalog: ride-options.yaml\n")
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("config/worker.yaml").path
        // The working directory of the tests is elsewhere: the path must not depend on it.
        #expect(FileManager.default.currentDirectoryPath != folder.appendingPathComponent("config").path)
        let settings = try WorkerSettings.load(file: file, environment: [:])
        #expect(settings.catalog != nil)
        #expect(
            settings.rideOptionsCatalogPath
                == folder.appendingPathComponent("config/ride-options.yaml").standardizedFileURL.path)
        #expect(settings.configurationFile == URL(fileURLWithPath: file).standardizedFileURL.path)
        // A file that names no catalog uses the one beside it.
        let bare = try configurationFolder("rides:\n  updateInterval: 3\n")
        defer { try? FileManager.default.removeItem(at: bare) }
        let defaulted = try WorkerSettings.load(
            file: bare.appendingPathComponent("config/worker.yaml").path, environment: [:])
        #expect(defaulted.catalog != nil && defaulted.ride.updateInterval == 3)
    }

    @Test("3.4: a configured catalog that is missing stops start-up naming the key and the resolved path")
    func missingCatalog() throws {
        let folder = try configurationFolder("rideOptions:\n  catalog: nowhere.yaml\n", catalog: false)
        defer { try? FileManager.default.removeItem(at: folder) }
        do {
            _ = try WorkerSettings.load(
                file: folder.appendingPathComponent("config/worker.yaml").path, environment: [:])
            Issue.record("a missing configured catalog must stop start-up")
        } catch let problem as WorkerSettings.Problem {
            #expect(problem.key == "rideOptions.catalog")
            #expect(
                problem.message.contains(folder.appendingPathComponent("config/nowhere.yaml").standardizedFileURL.path))
        }
        // Through the environment it is relative to the working directory, and must exist too.
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(
                file: nil, environment: ["RIDESTATUS_RIDE_OPTIONS_CATALOG": "no/such.yaml"], executable: "",
                workingDirectory: FileManager.default.temporaryDirectory.path)
        }
        // With no catalog configured and none found, quotes are off, not an error.
        let none = try configurationFolder("rides:\n  updateInterval: 3\n", catalog: false)
        defer { try? FileManager.default.removeItem(at: none) }
        #expect(
            try WorkerSettings.load(file: none.appendingPathComponent("config/worker.yaml").path, environment: [:])
                .catalog == nil)
    }

    @Test("--config that does not exist is an error; without --config the checkout's file is found")
    func configurationLookup() throws {
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(file: "/no/such/worker.yaml", environment: [:])
        }
        // An executable in <checkout>/.build/<mode>/ finds <checkout>/config/worker.yaml from anywhere.
        let folder = try configurationFolder("rides:\n  updateInterval: 4\n")
        defer { try? FileManager.default.removeItem(at: folder) }
        let executable = folder.appendingPathComponent(".build/release/ride-status-worker").path
        let settings = try WorkerSettings.load(
            file: nil, environment: [:], executable: executable,
            workingDirectory: FileManager.default.temporaryDirectory.path)
        #expect(settings.ride.updateInterval == 4 && settings.catalog != nil)
    }
}

extension SettingsTests {
    @Test("config/worker.yaml documents every key the worker reads")
    func shippedFileDocumentsEveryKey() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../config/worker.yaml")
        let undocumented = WorkerSettings.undocumentedKeys(in: try String(contentsOf: file, encoding: .utf8))
        #expect(undocumented.isEmpty, "not in config/worker.yaml: \(undocumented)")
    }

    @Test(
        "G1, G6: several broker URLs with the broker as authority refuse to start, naming the setting; etcd needs endpoints"
    )
    func clusteredBrokerNeedsEtcd() throws {
        let cluster = [("broker.url", "mqtt://n1:1883,mqtt://n2:1883")]
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(file: nil, environment: [:], overrides: cluster)
        }
        do {
            _ = try WorkerSettings.load(file: nil, environment: [:], overrides: cluster)
        } catch {
            #expect("\(error)".contains("group.authority") && "\(error)".contains("G6"))
        }
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(file: nil, environment: [:], overrides: [("group.authority", "etcd")])
        }
        #expect(throws: WorkerSettings.Problem.self) {
            try WorkerSettings.load(file: nil, environment: [:], overrides: [("group.etcdEndpoints", "127.0.0.1:2379")])
        }
        let settings = try WorkerSettings.load(
            file: nil, environment: [:],
            overrides: cluster + [
                ("group.authority", "etcd"), ("group.etcdEndpoints", "http://e1:2379, http://e2:2379"),
                ("group.etcdLeaseTTL", "6"),
            ])
        #expect(settings.authority == .etcd && settings.etcdEndpoints == ["http://e1:2379", "http://e2:2379"])
        #expect(settings.etcdLeaseTTL == 6 && settings.etcdPrefix == "/ridestatus/")
        // One broker keeps the broker as its authority by default.
        #expect(try WorkerSettings.load(file: nil, environment: [:]).authority == .broker)
    }
}
