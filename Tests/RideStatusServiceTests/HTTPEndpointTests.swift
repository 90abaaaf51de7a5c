import Foundation
import MosquittoTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `/metrics`, `/healthz` and `/readyz` on hummingbird, against the built worker and a real mosquitto.
@Suite("HTTP endpoint end to end", .serialized)
struct HTTPEndpointTests {
    @Test("IPv6: bound to ::1 it answers there (health, readiness, metrics, 404) and not on 127.0.0.1")
    func ipv6Loopback() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker, metricsHost: "::1")
            try await worker.start()
            #expect(httpGet(host: "::1", port: worker.metricsPort, path: "/healthz")?.body == "ok\n")
            #expect(httpGet(host: "::1", port: worker.metricsPort, path: "/readyz")?.status == 200)
            let metrics = try #require(httpGet(host: "::1", port: worker.metricsPort, path: "/metrics"))
            #expect(metrics.status == 200 && metrics.body.contains("ridestatus_connects_total"), "\(metrics.body)")
            #expect(httpGet(host: "::1", port: worker.metricsPort, path: "/nothing-here")?.status == 404)
            // Loopback only, and only the address asked for.
            #expect(httpGet(host: "127.0.0.1", port: worker.metricsPort, path: "/healthz") == nil)
            #expect(await worker.terminate().code == 0)
        }
    }

    @Test("L8: a port already taken stops the worker with a message naming metrics.port, not a hang")
    func portTaken() async throws {
        try await withTestBroker { broker in
            // Something else listens on the port first.
            let port = try TestBroker.freePort()
            let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(holder) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let listening = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 && listen(holder, 1) == 0
                }
            }
            try #require(listening)
            let log = broker.directory.appendingPathComponent("port-taken.log")
            let process = try ChildProcess(
                executable: WorkerProcess.executable,
                arguments: [
                    "--broker", broker.url, "--worker-id", "w-taken", "--metrics-port", "\(port)", "--state-dir",
                    broker.directory.appendingPathComponent("state").path,
                ],
                output: log)
            #expect(await process.exited(within: 15))
            #expect(process.exitCode != 0)
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(text.contains("metrics.port") && text.contains("127.0.0.1:\(port)"), "\(text)")
        }
    }
}
