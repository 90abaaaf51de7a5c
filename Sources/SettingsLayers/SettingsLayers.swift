public import Foundation
import Yams

/// A setting that cannot be used: its key, and why, in one sentence a start-up error can print.
public struct SettingsProblem: Error, CustomStringConvertible, Equatable, Sendable {
    public var key: String
    public var message: String
    public var description: String { "configuration key '\(key)': \(message)" }

    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }
}

/// How the project's services read their settings, the same for the worker and `ride-push`. Sources, later
/// ones winning: built-in defaults, a YAML file, environment variables, command-line flags.
///
/// - The file is the `--config` one, which must exist; without one, ``defaultFile`` in the working directory,
///   else in the checkout the executable was built in; without either, the defaults alone.
/// - Nested YAML keys become dotted ones (`rides: {updateInterval: 5}` is `rides.updateInterval`); a list is
///   its items joined with commas.
/// - Relative paths in the file (the keys in ``pathKeys``) resolve against the file's folder, so a service
///   behaves the same from any working directory; paths from the environment or flags resolve against the
///   working directory.
/// - Each key has an environment variable: `rides.updateInterval` is `RIDESTATUS_RIDES_UPDATE_INTERVAL`.
/// - An unknown key, or a value out of its range, is a ``SettingsProblem`` naming it.
public struct SettingsLayers<Settings>: Sendable {
    /// Applies one key's text to the settings, or throws a ``SettingsProblem`` naming the key.
    public typealias Setter = @Sendable (inout Settings, String) throws -> Void

    /// The keys, in the file's spelling, each with how its text is read.
    public let keys: [String: Setter]
    /// Keys naming files that belong with the configuration.
    public let pathKeys: Set<String>
    /// `RIDESTATUS_` for the worker, `RIDEPUSH_` for `ride-push`.
    public let environmentPrefix: String
    /// `config/worker.yaml` for the worker: where the file is looked for when none is given.
    public let defaultFile: String

    public init(keys: [String: Setter], pathKeys: Set<String>, environmentPrefix: String, defaultFile: String) {
        self.keys = keys
        self.pathKeys = pathKeys
        self.environmentPrefix = environmentPrefix
        self.defaultFile = defaultFile
    }

    /// Applies `key = value`; an unknown key is a problem naming it.
    public func apply(_ key: String, _ value: String, to settings: inout Settings) throws {
        guard let setter = keys[key] else { throw SettingsProblem(key: key, message: "unknown key") }
        try setter(&settings, value)
    }

    /// Applies the file, then the environment, then `overrides` (the flags, in order) to `settings`.
    ///
    /// - Parameter fileFound: called with the file's folder before its keys apply (the worker points its catalog
    ///   beside the file there).
    /// - Returns: the file read, as an absolute path; nil when there was none.
    @discardableResult
    public func load(
        into settings: inout Settings, file: String?, environment: [String: String], overrides: [(String, String)],
        executable: String, workingDirectory: String, fileFound: (inout Settings, URL) -> Void = { _, _ in }
    ) throws -> String? {
        if let file, !FileManager.default.fileExists(atPath: file) {
            throw SettingsProblem(key: "--config", message: "file \(file) does not exist")
        }
        var read: String?
        if let path = file ?? defaultConfigurationFile(executable: executable, workingDirectory: workingDirectory) {
            let url = URL(fileURLWithPath: path).standardizedFileURL
            let folder = url.deletingLastPathComponent()
            let text = try String(contentsOf: url, encoding: .utf8)
            let root: Any?
            do {
                root = try Yams.load(yaml: text)
            } catch {
                throw SettingsProblem(key: path, message: "is not valid YAML: \(error)")
            }
            // An empty file (or one of comments only) is no mapping and no settings.
            guard let mapping = root.map({ $0 as? [String: Any] }) ?? [:] else {
                throw SettingsProblem(key: path, message: "is not a YAML mapping")
            }
            read = url.path
            fileFound(&settings, folder)
            for (key, value) in Self.flatten(mapping) {
                try apply(key, pathKeys.contains(key) ? Self.resolve(value, against: folder) : value, to: &settings)
            }
        }
        for key in keys.keys.sorted() {
            if let value = environment[environmentName(key)] { try apply(key, value, to: &settings) }
        }
        for (key, value) in overrides { try apply(key, value, to: &settings) }
        return read
    }

    /// `rides.updateInterval` -> `RIDESTATUS_RIDES_UPDATE_INTERVAL` (with the prefix `RIDESTATUS_`).
    public func environmentName(_ key: String) -> String {
        var name = environmentPrefix
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

    /// ``defaultFile`` in the working directory, else in the checkout that built `executable`.
    public func defaultConfigurationFile(executable: String, workingDirectory: String) -> String? {
        let here = URL(fileURLWithPath: workingDirectory).appendingPathComponent(defaultFile).standardizedFileURL.path
        if FileManager.default.fileExists(atPath: here) { return here }
        guard !executable.isEmpty else { return nil }
        // `.build/release` is a link to `.build/<triple>/release`: walk up from both the path as given and
        // the resolved one, a few levels, to the checkout's file.
        let given = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let resolved = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        for start in [given, resolved] {
            var folder = start.standardizedFileURL
            for _ in 0..<4 {
                folder = folder.deletingLastPathComponent()
                let candidate = folder.appendingPathComponent(defaultFile).path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    /// The keys of the table that a configuration file's text neither sets nor shows commented out (`# name:`
    /// under its section). The shipped files document every key; their tests hold them to it.
    public func undocumentedKeys(in text: String) -> [String] {
        var documented: Set<String> = []
        var section = ""
        for line in text.split(separator: "\n") {
            if let first = line.first, first.isLetter, let colon = line.firstIndex(of: ":") {
                section = String(line[..<colon])
                continue
            }
            guard line.first == " " else { continue }
            var rest = line.drop(while: { $0 == " " })
            if rest.first == "#" { rest = rest.dropFirst().drop(while: { $0 == " " }) }
            guard let colon = rest.firstIndex(of: ":") else { continue }
            let name = rest[..<colon]
            if !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber }) {
                documented.insert("\(section).\(name)")
            }
        }
        return keys.keys.filter { !documented.contains($0) }.sorted()
    }

    /// A relative path from the file, made absolute against its folder; "", "none" and absolute paths stay.
    public static func resolve(_ value: String, against folder: URL) -> String {
        guard !value.isEmpty, value != "none", !value.hasPrefix("/") else { return value }
        return folder.appendingPathComponent(value).standardizedFileURL.path
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
}

/// How a key's text is read: the same words and messages for every key of every service.
public enum SettingValue {
    /// The unit a number key is given in, named in its error.
    public enum Unit: String, Sendable {
        case none = ""
        case seconds = " seconds"
        case metres = " m"
        case metresPerSecond = " m/s"
        case bytes = " bytes"
        case perSecond = " a second"
    }

    /// A number within `range`, in `unit`; anything else is a problem naming the key, the range and the unit.
    public static func number(
        _ text: String, _ key: String, _ range: ClosedRange<Double>, _ unit: Unit = .none
    ) throws(SettingsProblem) -> Double {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw SettingsProblem(key: key, message: "'\(text)' is not a number")
        }
        guard range.contains(value) else {
            throw SettingsProblem(
                key: key,
                message:
                    "\(text) is outside the allowed range \(format(range.lowerBound))...\(format(range.upperBound))\(unit.rawValue)"
            )
        }
        return value
    }

    /// One of a type's raw values, in any case (a log level); anything else is a problem listing them all.
    public static func choice<Choice: RawRepresentable & CaseIterable>(
        _ text: String, _ key: String, as type: Choice.Type = Choice.self
    ) throws(SettingsProblem) -> Choice where Choice.RawValue == String {
        let value = text.trimmingCharacters(in: .whitespaces).lowercased()
        if let choice = Choice(rawValue: value) { return choice }
        let names = Choice.allCases.map(\.rawValue)
        let list = names.count > 1 ? names.dropLast().joined(separator: ", ") + " or " + names.last! : names.joined()
        throw SettingsProblem(key: key, message: "'\(text)' is not \(list)")
    }

    /// A `--set key=value` flag as a key and its value (the value may hold `=`); nil without an `=`.
    public static func assignment(_ text: String) -> (key: String, value: String)? {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        return (String(text[..<equals]), String(text[text.index(after: equals)...]))
    }

    /// A yes-or-no key: true, yes, on, 1 or false, no, off, 0, in any case.
    public static func flag(_ text: String, _ key: String) throws(SettingsProblem) -> Bool {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw SettingsProblem(key: key, message: "'\(text)' is not true or false")
        }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
