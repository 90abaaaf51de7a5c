import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP relay on a free loopback port to `target`, a child process (Python's asyncio, a few lines), so that a test
/// can cut one process off from one peer while the others go on: ``cut()`` stops the relay (SIGSTOP), which then
/// forwards nothing either way and answers nothing, as a network partition does; ``heal()`` lets it go on. Bytes
/// the relay holds when it is cut are forwarded after the heal, as a partition's retransmissions would be.
public final class TCPRelay: Sendable {
    public let port: Int
    public let target: Int
    private let process: ChildProcess

    /// A relay to `127.0.0.1:{target}`; returns once it accepts connections.
    public init(to target: Int, timeout: Double = 10) async throws {
        self.target = target
        port = try TestBroker.freePort()
        process = try ChildProcess(
            executable: "/usr/bin/python3", arguments: ["-c", Self.script, "\(port)", "\(target)"])
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Self.accepts(port) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw TestBrokerError.commandFailed(command: "tcp relay to \(target)", output: "it did not listen in time")
    }

    deinit { process.end(with: SIGKILL, grace: 0) }

    /// Forwards nothing from now on, either way, and accepts no connection (the connections stay open).
    public func cut() { process.signal(SIGSTOP) }

    /// Forwards again.
    public func heal() { process.signal(SIGCONT) }

    /// Ends the relay.
    public func stop() {
        process.signal(SIGCONT)
        process.terminate(grace: 1)
    }

    private static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static let script = """
        import asyncio, sys
        listen, target = int(sys.argv[1]), int(sys.argv[2])
        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except Exception:
                pass
            finally:
                writer.close()
        async def relay(reader, writer):
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection('127.0.0.1', target)
            except Exception:
                writer.close()
                return
            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        async def main():
            server = await asyncio.start_server(relay, '127.0.0.1', listen)
            async with server:
                await server.serve_forever()
        asyncio.run(main())
        """
}
