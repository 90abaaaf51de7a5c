import Foundation
import MQTTClient
import RideDomain

// MARK: - Where settings come from: the configuration file, its YAML, the environment, secrets, the catalog

extension WorkerSettings {

    /// Keys naming files that belong with the configuration: relative ones in the file resolve against its
    /// folder. `worker.stateDir` is data, not configuration: it stays relative to the working directory.
    static let pathKeys: Set<String> = [
        "rideOptions.catalog", "broker.caFile", "broker.certificateFile", "broker.keyFile", "broker.passwordFile",
        "http.webRoot", "http.shareKeys", "http.operatorTokenFile",
    ]

    static func resolve(_ value: String, against folder: URL) -> String {
        guard !value.isEmpty, value != "none", !value.hasPrefix("/") else { return value }
        return folder.appendingPathComponent(value).standardizedFileURL.path
    }

    /// `config/worker.yaml` in the working directory, else in the checkout that built `executable`.
    static func defaultConfigurationFile(executable: String, workingDirectory: String) -> String? {
        let here = URL(fileURLWithPath: workingDirectory).appendingPathComponent(defaultConfigPath).standardizedFileURL
            .path
        if FileManager.default.fileExists(atPath: here) { return here }
        guard !executable.isEmpty else { return nil }
        // `.build/release` is a link to `.build/<triple>/release`: walk up from both the path as given and
        // the resolved one, a few levels, to the checkout's `config/worker.yaml`.
        let given = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let resolved = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        for start in [given, resolved] {
            var folder = start.standardizedFileURL
            for _ in 0..<4 {
                folder = folder.deletingLastPathComponent()
                let candidate = folder.appendingPathComponent(defaultConfigPath).path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    /// `rides.updateInterval` -> `RIDESTATUS_RIDES_UPDATE_INTERVAL`.
    public static func environmentName(_ key: String) -> String {
        var name = "RIDESTATUS_"
        for character in key {
            if character == "." {
                name += "_"
            } else if character.isUppercase {
                name += "_" + String(character)
            } else {
                name += String(character).uppercased()
            }
        }
        return name
    }

    static func flatten(_ node: [String: Any], prefix: String = "") -> [(String, String)] {
        var result: [(String, String)] = []
        for (key, value) in node.sorted(by: { $0.key < $1.key }) {
            let path = prefix.isEmpty ? key : "\(prefix).\(key)"
            switch value {
            case let nested as [String: Any]: result += flatten(nested, prefix: path)
            case let list as [Any]: result.append((path, list.map { "\($0)" }.joined(separator: ",")))
            case is NSNull: continue
            default: result.append((path, "\(value)"))
            }
        }
        return result
    }

    /// The broker password from ``passwordFile``, and a warning for a password where `ps`, shell histories and
    /// logs see it: in a URL, or given as a flag.
    mutating func readSecrets(overrides: [(String, String)]) throws {
        if let passwordFile, !passwordFile.isEmpty {
            do {
                password = try MQTTConfiguration.password(fromFile: passwordFile)
            } catch {
                throw Problem(key: "broker.passwordFile", message: "cannot read \(passwordFile)")
            }
        }
        let advice = "put it in broker.passwordFile (a file only the worker can read) or RIDESTATUS_BROKER_PASSWORD"
        if Self.urls(brokerURL).contains(where: { URLComponents(string: $0)?.password != nil }) {
            warnings.append("the broker password is in broker.url, where logs and `ps` may show it: \(advice)")
        }
        if overrides.contains(where: { $0.0 == "broker.password" }) {
            warnings.append("the broker password was given as a flag, which `ps` shows to every user: \(advice)")
        }
    }

    /// Reads the catalog: a missing default file turns quotes off; a missing chosen file or an invalid
    /// catalog stops start-up, naming the entry.
    mutating func loadCatalog() throws {
        let path = rideOptionsCatalogPath
        guard !path.isEmpty, path != "none" else { return }
        guard FileManager.default.fileExists(atPath: path) else {
            if !catalogChosen { return }
            throw Problem(
                key: "rideOptions.catalog",
                message: "file \(path) does not exist (relative paths in a configuration file are read from its folder)"
            )
        }
        catalog = try RideOptionCatalog.load(path: path)
    }
}
