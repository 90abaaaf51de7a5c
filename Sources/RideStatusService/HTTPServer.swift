import Hummingbird
import Logging
import ServiceLifecycle

/// `/metrics`, `/healthz` and `/readyz` on hummingbird, as a `Service` of the worker's `ServiceGroup`.
/// It binds where `metrics.host` says: loopback by default, an IPv6 address (`::1`, `::`) as well as IPv4.
struct WorkerHTTPServer: Service {
    let host: String
    let port: Int
    private let application: Application<RouterResponder<BasicRequestContext>>

    init(
        host: String, port: Int, logger: Logger, isReady: @escaping @Sendable () -> Bool,
        metricsText: @escaping @Sendable () -> String
    ) {
        self.host = host
        self.port = port
        let router = Router()
        router.get("/metrics") { _, _ in
            Self.text(metricsText(), contentType: "text/plain; version=0.0.4")
        }
        router.get("/healthz") { _, _ in Self.text("ok\n") }
        router.get("/readyz") { _, _ in
            isReady() ? Self.text("ready\n") : Self.text("not ready\n", status: .serviceUnavailable)
        }
        var serverLogger = logger
        serverLogger[metadataKey: "http.address"] = "\(host):\(port)"
        application = Application(
            router: router, configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            logger: serverLogger)
    }

    func run() async throws {
        do {
            try await application.run()
        } catch {
            throw WorkerSettings.Problem(key: "metrics.port", message: "cannot serve HTTP on \(host):\(port): \(error)")
        }
    }

    private static func text(_ body: String, contentType: String = "text/plain", status: HTTPResponse.Status = .ok)
        -> Response
    {
        Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
