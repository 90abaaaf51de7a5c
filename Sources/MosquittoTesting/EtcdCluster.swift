public import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd cluster (Debian's `etcd-server`, 3.4) of `size` members on free loopback ports, each on a fresh
/// data directory, for the group's ownership authority (G6). `make test` installs the package
/// (`scripts/install-deps.sh`).
///
/// Ready means every member answers `/health` with `{"health":"true"}`: the cluster has a leader and the member
/// reaches it.
public final class EtcdCluster: Sendable {
    public struct Member: Sendable {
        public let index: Int
        public let clientPort: Int
        public let peerPort: Int
        /// The member's client URL: `http://127.0.0.1:{clientPort}`.
        public var url: String { "http://127.0.0.1:\(clientPort)" }
        public var name: String { "m\(index)" }
    }

    public let members: [Member]
    public let directory: URL
    private let processes: Locked<[ChildProcess?]>

    /// Every member's client URL.
    public var endpoints: [String] { members.map(\.url) }

    /// Starts `size` members and waits until each is healthy (at most `timeout` seconds).
    public init(size: Int = 3, timeout: Double = 30) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw TestBrokerError.commandFailed(
                command: Self.executable, output: "etcd is not installed: run scripts/install-deps.sh (etcd-server)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("etcd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        members = try (0..<size).map { index in
            Member(index: index, clientPort: try TestBroker.freePort(), peerPort: try TestBroker.freePort())
        }
        processes = Locked(Array(repeating: nil, count: size))
        for member in members { try launch(member, state: "new") }
        do {
            try await waitUntilHealthy(members, timeout: timeout)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops every member and removes their data.
    public func stop() {
        for index in members.indices { signal(index, SIGTERM) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Ends one member at once (SIGKILL), as a crash would.
    public func kill(member index: Int) { signal(index, SIGKILL) }

    /// Stops one member where it is (SIGSTOP): it holds its sockets and answers nothing, as a paused VM would.
    public func pause(member index: Int) { processes.withLock { $0[index] }?.signal(SIGSTOP) }

    /// Lets a paused member go on (SIGCONT).
    public func resume(member index: Int) { processes.withLock { $0[index] }?.signal(SIGCONT) }

    /// Starts a killed member again on its ports and data, and waits until it is healthy.
    public func restart(member index: Int, timeout: Double = 30) async throws {
        try launch(members[index], state: "existing")
        try await waitUntilHealthy([members[index]], timeout: timeout)
    }

    /// The index of the member that leads now, read from each member's `/v3/maintenance/status`; nil when none
    /// answers with a leader.
    public func leader() -> Int? {
        for member in members {
            guard
                let answer = httpPost(port: member.clientPort, path: "/v3/maintenance/status", json: "{}"),
                answer.status == 200,
                let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                let leader = object["leader"] as? String,
                let header = object["header"] as? [String: Any], let me = header["member_id"] as? String
            else { continue }
            if leader == me { return member.index }
        }
        return nil
    }

    /// A member's log, for a failing test's message.
    public func log(of index: Int) -> String {
        (try? String(contentsOf: logFile(members[index]), encoding: .utf8)) ?? ""
    }

    // MARK: - Private

    static let executable = "/usr/bin/etcd"

    private func logFile(_ member: Member) -> URL { directory.appendingPathComponent("\(member.name).log") }

    private func launch(_ member: Member, state: String) throws {
        let cluster = members.map { "\($0.name)=http://127.0.0.1:\($0.peerPort)" }.joined(separator: ",")
        let process = try ChildProcess(
            executable: Self.executable,
            arguments: [
                "--name", member.name, "--data-dir", directory.appendingPathComponent(member.name).path,
                "--listen-client-urls", member.url, "--advertise-client-urls", member.url,
                "--listen-peer-urls", "http://127.0.0.1:\(member.peerPort)",
                "--initial-advertise-peer-urls", "http://127.0.0.1:\(member.peerPort)",
                "--initial-cluster", cluster, "--initial-cluster-state", state,
                "--initial-cluster-token", directory.lastPathComponent,
                // Loopback: a short heartbeat so that a leader's loss is noticed within a second.
                "--heartbeat-interval", "100", "--election-timeout", "1000",
            ],
            environment: ["ETCD_UNSUPPORTED_ARCH": "", "PATH": "/usr/bin:/bin"], output: logFile(member))
        processes.withLock { $0[member.index] = process }
    }

    private func signal(_ index: Int, _ signal: Int32) {
        guard let process = processes.withLock({ $0[index] }) else { return }
        guard signal == SIGTERM || signal == SIGKILL else { return process.signal(signal) }
        processes.withLock { $0[index] = nil }
        process.end(with: signal, grace: 5)
    }

    private func waitUntilHealthy(_ waiting: [Member], timeout: Double) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        for member in waiting {
            while !Self.healthy(member) {
                guard ContinuousClock.now < deadline else {
                    throw TestBrokerError.commandFailed(
                        command: "etcd \(member.name)",
                        output: "not healthy in \(timeout) s; logs:\n"
                            + members.map { log(of: $0.index) }.joined(separator: "\n"))
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    private static func healthy(_ member: Member) -> Bool {
        guard let answer = httpGet(port: member.clientPort, path: "/health"), answer.status == 200 else { return false }
        return answer.body.contains("\"true\"")
    }
}
