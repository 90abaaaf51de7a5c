public import Foundation
import Locking
import Subprocess
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// A long-running child process (a broker, a worker) started with `posix_spawn`, with every signal unblocked
/// and set to its default.
///
/// Foundation's `Process` lets the child inherit the signal mask of the spawning thread, and the Swift
/// runtime's threads block SIGTERM and SIGINT: a broker or worker started that way ignores a graceful stop.
/// Short commands run through swift-subprocess (``run(_:_:)``), which resets the mask too. Long-running
/// children stay on `posix_spawn`: Subprocess's `run` is structured and reaps its child on a task, so the
/// synchronous waits that tests and harnesses use (`terminate()`, `waitForExit`) held the cooperative pool
/// that task needed (measured: on this 2-core machine 6 end-to-end tests timed out waiting for a child's
/// exit, and the in-memory cadence test starved).
public final class ChildProcess: Sendable {
    public let pid: Int32
    private let exitStatus = Locked<Int32?>(nil)

    /// Starts `executable` with `arguments`; standard output and error go to `output` (appended) or nowhere.
    /// Standard input comes from `input`, or nothing.
    public init(
        executable: String, arguments: [String], environment: [String: String]? = nil, output: URL? = nil,
        input: URL? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let outputPath = output?.path ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 0, input?.path ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process reaches the child: an inherited MQTT socket would keep a connection open
        // after its client closed it (no will, no session end), and a stopped child would hold it.
        // (glibc's closefrom action is not visible to Swift; an entry closed meanwhile is ignored by glibc.)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            if let descriptor = Int32(entry), descriptor > 2 {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environmentPairs = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = environmentPairs.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            throw TestBrokerError.commandFailed(command: executable, output: String(cString: strerror(rc)))
        }
        self.pid = pid
    }

    deinit {
        if isRunning {
            Glibc.kill(pid, SIGKILL)
            _ = waitForExit(timeout: 5)
        }
    }

    /// Whether the child has not exited yet (reaps it when it has).
    public var isRunning: Bool {
        exitStatus.withLock { exitStatus in
            if exitStatus != nil { return false }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                exitStatus = status
                return false
            }
            return result == 0
        }
    }

    /// The raw wait status once the child has exited.
    public var status: Int32? {
        _ = isRunning
        return exitStatus.withLock { $0 }
    }

    /// The exit code, when the child exited normally.
    public var exitCode: Int32? {
        guard let status else { return nil }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : nil
    }

    public func signal(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// Ends the child: `signal` (after a SIGCONT, so that a stopped child can act on it), then SIGKILL if it has not
    /// exited within `grace` seconds. The one way the test clusters (NATS, etcd) stop a member.
    public func end(with signal: Int32, grace: Double) {
        self.signal(SIGCONT)
        self.signal(signal)
        if !waitForExit(timeout: grace) {
            self.signal(SIGKILL)
            waitForExit(timeout: 3)
        }
    }

    /// Polls until the child exits or `timeout` seconds pass; returns whether it exited.
    @discardableResult
    public func waitForExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() > deadline { return false }
            usleep(5_000)
        }
        return true
    }

    /// Like ``waitForExit(timeout:)``, but suspends between polls instead of blocking a thread of the
    /// cooperative pool (on 2 cores, two blocked threads starve every other test's tasks).
    public func exited(within timeout: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// SIGTERM, then SIGKILL if the child has not exited after `grace` seconds.
    public func terminate(grace: Double = 5) {
        signal(SIGTERM)
        if !waitForExit(timeout: grace) {
            signal(SIGKILL)
            waitForExit(timeout: 5)
        }
    }

    /// Runs a short command to its end through swift-subprocess and returns its exit code (nil if a signal
    /// ended it) and what it printed on standard output and error together (at most 1 MiB).
    public static func run(_ executable: String, _ arguments: [String]) async throws -> (
        code: Int32?, output: String
    ) {
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments), input: .none,
            output: .string(limit: 1 << 20), error: .combinedWithOutput)
        let code: Int32? = if case .exited(let code) = result.terminationStatus { code } else { nil }
        return (code, result.standardOutput)
    }
}
