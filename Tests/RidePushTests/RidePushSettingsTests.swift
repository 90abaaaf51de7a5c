import Foundation
import RidePush
import RidePushService
import SettingsLayers
import Testing

/// `ride-push` reads its settings the way the worker does ("it shares the worker's configuration
/// style"): `config/ride-push.yaml`, then `RIDEPUSH_*` environment variables, then flags; relative paths in the
/// file from its folder; a bad value stops start-up with a sentence naming the key.
@Suite("ride-push settings: file, environment, flags")
struct RidePushSettingsTests {
    /// A folder holding `ride-push.yaml` with `body`.
    func configuration(_ body: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("push-settings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("ride-push.yaml")
        try body.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    static let apns = "apns: {keyFile: AuthKey.p8, keyId: K1, teamId: T1, bundleId: com.example.rides}"
    static let minimal = "http: {shareKeys: keys/share.json}\n\(apns)"

    @Test("The file, then the environment, then flags; the file's relative paths resolve against its folder")
    func layers() throws {
        let file = try configuration(
            """
            \(Self.apns)
            push: {minimumInterval: 20, refreshInterval: 90, urgentPerHour: 6}
            http: {port: 8091, shareKeys: keys/share.json}
            """)
        let folder = file.deletingLastPathComponent().standardizedFileURL.path
        let settings = try RidePushSettings.load(
            file: file.path,
            environment: [
                "RIDEPUSH_HTTP_PORT": "8092", "RIDEPUSH_PUSH_URGENT_PER_HOUR": "4",
                "RIDEPUSH_FCM_ACCOUNT_FILE": "relative/account.json", "RIDESTATUS_HTTP_PORT": "1",
            ],
            overrides: [("push.urgentPerHour", "3")], workingDirectory: "/elsewhere")
        #expect(settings.configurationFile == file.standardizedFileURL.path)
        #expect(settings.shareKeys == "\(folder)/keys/share.json")
        #expect(settings.apns.keyFile == "\(folder)/AuthKey.p8" && settings.apns.bundleID == "com.example.rides")
        // The environment's path is the operator's, relative to where ride-push runs: left as given.
        #expect(settings.fcm.accountFile == "relative/account.json")
        #expect(settings.httpPort == 8092, "the environment wins over the file; the worker's variables are not read")
        #expect(settings.service.group.planner.urgentPushesPerHour == 3, "a flag wins over both")
        #expect(settings.service.group.planner.minimumInterval == 20)
        #expect(settings.service.group.planner.refreshInterval == 90)
        #expect(settings.member.hasSuffix("-8092"), "the member id defaults to host and port")
    }

    @Test("What stops start-up is named: a missing key, a value out of range, a key that is not one")
    func problems() throws {
        func problem(_ body: String, overrides: [(String, String)] = []) -> String {
            do {
                let file = try configuration(body)
                _ = try RidePushSettings.load(file: file.path, environment: [:], overrides: overrides)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(problem(Self.minimal) == "accepted")
        #expect(problem("apns: {keyFile: k.p8, keyId: K, teamId: T, bundleId: B}").contains("'http.shareKeys'"))
        #expect(problem("http: {shareKeys: s.json}").contains("nowhere to push"))
        #expect(
            problem("http: {shareKeys: s.json}\napns: {keyFile: k.p8, keyId: K, teamId: T}").contains(
                "'apns.bundleId': is required with apns.keyFile"))
        #expect(problem(Self.minimal, overrides: [("push.minimumInterval", "0")]).hasSuffix("1...3600 seconds"))
        #expect(problem(Self.minimal, overrides: [("apns.tokenRenewal", "600")]).hasSuffix("1500...3300 seconds"))
        #expect(
            problem(Self.minimal, overrides: [("push.minimumInterval", "30"), ("push.refreshInterval", "20")])
                .contains("below push.minimumInterval"))
        #expect(problem(Self.minimal, overrides: [("push.logLevel", "loud")]).contains("'push.logLevel'"))
        #expect(problem("\(Self.apns)\nhttp: {shareKeys: s.json, prot: 1}").contains("'http.prot': unknown key"))
        #expect(problem("- a list").contains("is not a YAML mapping"))
        // --set key=value, as both services read it: the value may hold "=" (a URL's query); no "=" is no setting.
        #expect(SettingValue.assignment("apns.url=https://x/?a=b")! == ("apns.url", "https://x/?a=b"))
        #expect(SettingValue.assignment("http.host=")! == ("http.host", ""))
        #expect(SettingValue.assignment("http.host") == nil)
        #expect(
            (try? RidePushSettings.load(file: "/no/such/ride-push.yaml", environment: [:])) == nil,
            "a --config that does not exist stops start-up")
    }

    @Test("config/ride-push.yaml documents every key, sets only its defaults, and is found from the checkout")
    func shippedFile() throws {
        let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
            .standardizedFileURL
        let file = checkout.appendingPathComponent(RidePushSettings.defaultConfigPath)
        let text = try String(contentsOf: file, encoding: .utf8)
        let undocumented = RidePushSettings.undocumentedKeys(in: text)
        #expect(undocumented.isEmpty, "not in config/ride-push.yaml: \(undocumented)")
        // As shipped it names nowhere to push: start-up says so rather than running idle.
        #expect(throws: RidePushSettings.Problem.self) {
            try RidePushSettings.load(file: file.path, environment: [:])
        }
        // Given the two required keys, the file changes nothing from the built-in defaults.
        let required = [("http.shareKeys", "s.json"), ("fcm.accountFile", "a.json")]
        let shipped = try RidePushSettings.load(file: file.path, environment: [:], overrides: required)
        var defaults = RidePushSettings()
        for (key, value) in required { try defaults.apply(key, value) }
        #expect("\(shipped.with(file: nil))" == "\(defaults)")
        // Found without --config from an executable in <checkout>/.build/<mode>/.
        let found = try RidePushSettings.load(
            file: nil, environment: [:], overrides: required,
            executable: checkout.appendingPathComponent(".build/debug/ride-push").path, workingDirectory: "/")
        #expect(found.configurationFile == file.path)
    }
}

extension RidePushSettings {
    fileprivate func with(file: String?) -> RidePushSettings {
        var copy = self
        copy.configurationFile = file
        return copy
    }
}
