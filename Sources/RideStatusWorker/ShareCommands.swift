import ArgumentParser
import Foundation
import RideAccess
import RideStatusService

/// `ride-status-worker share-key`: a new Ed25519 key for share links. The private key goes to a file
/// of its own (mode 600) for whoever signs links (dispatch); its public half joins the key set the workers
/// verify with (`http.shareKeys`).
struct ShareKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share-key",
        abstract: "Makes a share-link signing key and adds its public half to the workers' key set.",
        discussion: """
            Rotation: make a new key with a new --id, restart the workers so they read the set, sign new links \
            with the new key, and remove the old key's entry from the set (then restart) once its last link has \
            expired. Workers hold only public keys; keep the private key where links are signed.
            """)

    @Option(help: "The key's id, carried in every token it signs (I1: 1-64 of A-Z a-z 0-9 . _ : -).") var id: String
    @Option(
        name: .customLong("private-key"), help: "Where to write the private key (a JWK, mode 600); never overwritten.")
    var privateKey: String
    @Option(name: .customLong("key-set"), help: "The workers' key set (JWKS, http.shareKeys): made if missing.")
    var keySet: String

    func run() async throws {
        let (privateJWK, publicJWK) = try ShareLinks.generateKey(id: id)
        var keys: [Any] = []
        if FileManager.default.fileExists(atPath: keySet) {
            let data = try Data(contentsOf: URL(fileURLWithPath: keySet))
            guard let set = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                let existing = set["keys"] as? [[String: Any]]
            else { throw ValidationError("\(keySet) is not a key set ({\"keys\": [...]})") }
            guard !existing.contains(where: { $0["kid"] as? String == id }) else {
                throw ValidationError("\(keySet) already holds a key '\(id)': choose another --id")
            }
            keys = existing
        }
        keys.append(try JSONSerialization.jsonObject(with: Data(publicJWK.utf8)))
        // The private key first, created exclusively with mode 600: a failure leaves the set as it was.
        let descriptor = open(privateKey, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw ValidationError("cannot create \(privateKey) (it may exist already: keys are never overwritten)")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        try handle.write(contentsOf: Data((privateJWK + "\n").utf8))
        try handle.close()
        let set = try JSONSerialization.data(
            withJSONObject: ["keys": keys], options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try (set + Data("\n".utf8)).write(to: URL(fileURLWithPath: keySet), options: .atomic)
        print("share-key: '\(id)': private key in \(privateKey) (mode 600), public key added to \(keySet)")
    }
}

/// `ride-status-worker share-link`: a link that shows one ride until it expires.
struct ShareLinkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share-link",
        abstract: "Prints a share link for one ride, signed with a key from share-key.")

    @Option(help: "The ride the link shows.") var ride: String
    @Option(name: .customLong("private-key"), help: "The signing key (share-key's --private-key).")
    var privateKey: String
    @Option(
        name: .customLong("expires-in"),
        help: "How long the link works: seconds, or with a unit: 90m, 2h, 1d (at most 7d). Default 2h.")
    var expiresIn = "2h"
    @Option(name: .customLong("base-url"), help: "Where the workers' HTTP server is reached.")
    var baseURL = "http://127.0.0.1:9466"

    func run() async throws {
        guard let lifetime = Self.seconds(expiresIn) else {
            throw ValidationError("--expires-in '\(expiresIn)' is not seconds or a number with s, m, h or d")
        }
        let jwk = try String(contentsOfFile: privateKey, encoding: .utf8)
        let signer = try await ShareLinks.Signer(privateJWK: jwk)
        let now = Date()
        let expires = now.addingTimeInterval(lifetime)
        let token = try await signer.token(ride: ride, expires: expires, now: now)
        let base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        print("\(base)/share/\(token)")
        FileHandle.standardError.write(
            Data(
                "share-link: \(ride) until \(ISO8601DateFormatter().string(from: expires)) (key '\(signer.keyID)')\n"
                    .utf8))
    }

    static func seconds(_ text: String) -> TimeInterval? {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        if let unit = text.last.flatMap({ units[$0] }), let value = Double(text.dropLast()), value > 0 {
            return value * unit
        }
        return Double(text).flatMap { $0 > 0 ? $0 : nil }
    }
}
