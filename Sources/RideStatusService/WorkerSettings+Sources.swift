import Foundation
import MQTTClient
import RideDomain
import SettingsLayers

// MARK: - What the worker reads beside its keys: which keys are paths, secrets, the catalog

extension WorkerSettings {

    /// Keys naming files that belong with the configuration: relative ones in the file resolve against its
    /// folder. `worker.stateDir` is data, not configuration: it stays relative to the working directory.
    static let pathKeys: Set<String> = [
        "rideOptions.catalog", "broker.caFile", "broker.certificateFile", "broker.keyFile", "broker.passwordFile",
        "http.webRoot", "http.shareKeys", "http.operatorTokenFile",
    ]

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
