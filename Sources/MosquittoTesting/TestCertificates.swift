public import Foundation

/// A throw-away certificate authority and a server certificate for `localhost` and `127.0.0.1`, made with
/// the `openssl` command line tool.
public struct TestCertificates: Sendable {
    public let caCertificate: URL
    public let serverCertificate: URL
    public let serverKey: URL

    public static func generate(in directory: URL) async throws -> TestCertificates {
        let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let openssl else { throw TestBrokerError.commandFailed(command: "openssl", output: "not installed") }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let extensions = path("server.ext")
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: extensions, atomically: true, encoding: .utf8)
        try await TestBroker.run(
            openssl,
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ride-status test CA",
                "-keyout", path("ca.key"), "-out", path("ca.crt"),
            ])
        try await TestBroker.run(
            openssl,
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", path("server.key"),
                "-out", path("server.csr"),
            ])
        try await TestBroker.run(
            openssl,
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", path("server.crt"),
            ])
        return TestCertificates(
            caCertificate: URL(fileURLWithPath: path("ca.crt")),
            serverCertificate: URL(fileURLWithPath: path("server.crt")),
            serverKey: URL(fileURLWithPath: path("server.key")))
    }
}
