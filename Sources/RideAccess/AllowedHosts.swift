import Foundation

/// The host names an HTTP server answers (A4): a request whose `Host` names another is refused, so that a page
/// of another site, whose name a rebinding DNS server has pointed at this machine, cannot read the fleet through
/// a developer's browser. Shared by the worker's server and ride-push's registration server.
///
/// An entry is `name` (any port: a reverse proxy's public name, whose port the proxy may drop), `name:port`
/// (that port only), an IPv6 literal in brackets with or without a port, or `*` (any host: the check is off).
/// Names compare without case and without a trailing dot.
public struct AllowedHosts: Sendable, Equatable, CustomStringConvertible {
    /// One allowed host.
    public enum Entry: Sendable, Equatable, CustomStringConvertible {
        /// Every host: the check is off (`*`).
        case any
        /// A name or an address; `port` nil matches every port.
        case host(String, port: Int?)

        public var description: String {
            switch self {
            case .any: "*"
            case .host(let name, let port?): name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)"
            case .host(let name, nil): name.contains(":") ? "[\(name)]" : name
            }
        }
    }

    /// A setting's entry that is not a host.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var entry: String
        public var description: String {
            "'\(entry)' is not a host name, `name:port`, a bracketed IPv6 address or `*`"
        }
    }

    public var entries: [Entry]

    public init(_ entries: [Entry]) { self.entries = entries }

    /// The default: the loopback names and addresses at the server's port, and the address it binds when that is
    /// one literal address (not `0.0.0.0` or `::`, which name no host).
    public static func loopback(port: Int, boundHost: String? = nil) -> AllowedHosts {
        var names = ["localhost", "127.0.0.1", "::1"]
        if let boundHost, let bound = Self.normalized(boundHost), !["0.0.0.0", "::", ""].contains(bound),
            !names.contains(bound)
        {
            names.append(bound)
        }
        // Port 0 asks the system for a free one, not known yet: any port of these names then.
        return AllowedHosts(names.map { .host($0, port: port == 0 ? nil : port) })
    }

    /// The entries of a setting (comma-separated in the worker's and ride-push's settings, a list in YAML).
    public init(parsing list: [String]) throws(Problem) {
        var entries: [Entry] = []
        for raw in list {
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            if text == "*" {
                entries.append(.any)
                continue
            }
            guard let (name, port) = Self.split(text), !name.isEmpty, Self.isHostName(name) || name.contains(":")
            else { throw Problem(entry: text) }
            entries.append(.host(name, port: port))
        }
        self.entries = entries
    }

    /// A setting's text (`http.allowedHosts` of the worker and of ride-push): comma-separated entries, `none` or
    /// empty for the default; checked now, so that a bad entry stops start-up naming the key.
    public static func settingList(_ text: String) throws(Problem) -> [String] {
        let list = text == "none" ? [] : text.split(separator: ",").map(String.init)
        _ = try AllowedHosts(parsing: list)
        return list
    }

    /// The hosts a server answers: the setting's list, else (nothing listed, or blanks only) the loopback default
    /// at its port and bound address.
    public static func configured(_ list: [String], port: Int, boundHost: String) -> AllowedHosts {
        guard let hosts = try? AllowedHosts(parsing: list), !hosts.entries.isEmpty else {
            return .loopback(port: port, boundHost: boundHost)
        }
        return hosts
    }

    /// Whether a request addressed to `authority` (HTTP/1.1's `Host`, HTTP/2's `:authority`) may be answered.
    /// A request with no host is refused, unless the check is off.
    public func allows(authority: String?) -> Bool {
        if entries.contains(.any) { return true }
        guard let authority, let (name, port) = Self.split(authority) else { return false }
        return entries.contains { entry in
            guard case .host(let allowed, let allowedPort) = entry else { return true }
            // A Host without a port is the scheme's default; these servers speak plain HTTP.
            return allowed == name && (allowedPort == nil || allowedPort == (port ?? 80))
        }
    }

    public var description: String { entries.map(\.description).joined(separator: ", ") }

    // MARK: - Parsing an authority

    /// `name`, `name:port`, `[v6]` or `[v6]:port`, with the name lowercased and without a trailing dot; nil for
    /// anything else (a port that is not a number, userinfo, a path).
    static func split(_ text: String) -> (name: String, port: Int?)? {
        var name: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == ":" else { return nil }
                portText = rest.dropFirst()
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else {
                // An unbracketed IPv6 address: a setting may name `::1` as `metrics.host` does.
                return normalized(text).map { ($0, nil) }
            }
            name = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
        }
        var port: Int?
        if let portText {
            guard let value = Int(portText), (0...65_535).contains(value) else { return nil }
            port = value
        }
        guard let normalized = normalized(String(name)) else { return nil }
        return (normalized, port)
    }

    static func normalized(_ name: String) -> String? {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        guard !name.contains(where: { "/@?#\\ ".contains($0) }) else { return nil }
        return name
    }

    static func isHostName(_ name: String) -> Bool {
        name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }
}
