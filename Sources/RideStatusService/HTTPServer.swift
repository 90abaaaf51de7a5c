import Foundation
import Hummingbird
import Logging
import RideAccess
import RideJSON
import ServiceLifecycle
import SettingsLayers

/// The worker's HTTP server on hummingbird, as a `Service` of the worker's `ServiceGroup`:
/// - `/metrics`, `/healthz`, `/readyz` for operators;
/// - the read API under `/v1` (``ReadAPI``, `docs/openapi.json`, served at `/v1/openapi.json`) and the live
///   map's event stream `/v1/live` (``LiveFeed``);
/// - the live map itself at `/` (the files of `http.webRoot`) with Debian's Leaflet at `/leaflet/`;
/// - share links: `/share/{token}` (the page of one ride), `/share/{token}/status` and
///   `/share/{token}/live`, read from the ride's retained status (``ShareFeed``), so a link works on every
///   worker of a group.
/// It binds where `metrics.host` says: loopback by default, an IPv6 address (`::1`, `::`) as well as IPv4.
/// Who may read what is ``HTTPAccess``'s: a token never reaches a log line. Every path but the probes answers only
/// the host names of `http.allowedHosts` (A4, ``HostCheck``), `/metrics` included.
struct WorkerHTTPServer: Service {
    let host: String
    let port: Int
    private let application: Application<RouterResponder<BasicRequestContext>>
    private let feed: LiveFeed
    private let share: (any ShareSource)?

    /// What the routes need beyond the reader.
    struct Content: Sendable {
        var webRoot: String
        var leafletDirectory: String
        var tileURL: String
        var tileAttribution: String
        /// Whether the map and `/v1` are served (`http.readAPI`); `/metrics` and the probes always are.
        var readAPI: Bool
        /// The OpenAPI document (`docs/openapi.json`), when found.
        var openAPIDocument: String?
        /// The share page (`share.html` of the web root), when found.
        var sharePage: String?
        /// The streets the map draws (`http.streets`), served at `/streets.geojson`.
        var streets: [UInt8]? = nil
        var streetsAttribution = ""
    }

    /// What share links read: a ride's status from the broker (``ShareFeed``).
    protocol ShareSource: Sendable {
        func current(_ ride: String, timeout: Duration) async -> [UInt8]?
        func watch(_ ride: String, until: Date) -> AsyncStream<[UInt8]>?
        func run() async
    }

    init(
        host: String, port: Int, hosts: AllowedHosts, logger: Logger, isReady: @escaping @Sendable () -> Bool,
        metricsText: @escaping @Sendable () -> String, reader: any FleetReader, content: Content, time: WorkerTime,
        access: HTTPAccess, share: (any ShareSource)?
    ) {
        self.host = host
        self.port = port
        let api = ReadAPI(reader: reader)
        let feed = LiveFeed(reader: reader, time: time)
        self.feed = feed
        self.share = share
        // HEAD answers wherever GET does (the 405s say `Allow: GET, HEAD`).
        let router = Router(options: .autoGenerateHeadEndpoints)
        // A4: before every route and file, the host the request is addressed to (the probes answer any).
        router.add(middleware: HostCheck(hosts: hosts, logger: logger))
        router.get("/metrics") { _, _ in
            Self.text(metricsText(), contentType: "text/plain; version=0.0.4")
        }
        router.get("/healthz") { _, _ in Self.text("ok\n") }
        router.get("/readyz") { _, _ in
            isReady() ? Self.text("ready\n") : Self.text("not ready\n", status: .serviceUnavailable)
        }
        if content.readAPI {
            let routes = Routes(api: api, feed: feed, access: access, share: share)
            routes.addReadAPI(to: router, openAPI: content.openAPIDocument)
            routes.addShareLinks(to: router, page: content.sharePage)
        }
        router.get("/map-config.json") { _, _ in
            var writer = JSONWriter(capacity: 256)
            writer.beginObject()
            writer.key("tileURL")
            writer.string(content.tileURL)
            writer.key("tileAttribution")
            writer.string(content.tileAttribution)
            if content.streets != nil {
                writer.key("streets")
                writer.string("/streets.geojson")
                writer.key("streetsAttribution")
                writer.string(content.streetsAttribution)
            }
            writer.endObject()
            return Self.json(.init(status: 200, body: writer.bytes))
        }
        if content.readAPI, let streets = content.streets {
            router.get("/streets.geojson") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "application/geo+json", .cacheControl: "no-cache"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: streets)))
            }
        }
        // A known path asked with a method it does not take answers 405 with `Allow` (RFC 9110), not 404.
        router.add(middleware: ReadOnlyPaths())
        // The map's files, then Leaflet's; anything else is a 404 from the router.
        if content.readAPI {
            router.add(middleware: FileMiddleware(content.webRoot, searchForIndexHtml: true, logger: logger))
            router.add(middleware: FileMiddleware(content.leafletDirectory, urlBasePath: "/leaflet", logger: logger))
        }
        var serverLogger = logger
        serverLogger[metadataKey: "http.address"] = "\(host):\(port)"
        application = Application(
            router: router, configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            logger: serverLogger)
    }

    func run() async throws {
        do {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await feed.run() }
                if let share { group.addTask { await share.run() } }
                group.addTask { try await application.run() }
            }
        } catch {
            throw WorkerSettings.Problem(key: "metrics.port", message: "cannot serve HTTP on \(host):\(port): \(error)")
        }
    }

    static func json(_ reply: ReadAPI.Reply) -> Response {
        Response(
            status: HTTPResponse.Status(code: reply.status), headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: reply.body)))
    }

    static func text(_ body: String, contentType: String = "text/plain", status: HTTPResponse.Status = .ok)
        -> Response
    {
        Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}

/// Every path of the read API answers GET (and HEAD) only: another method gets 405 with `Allow`, as RFC 9110
/// asks and schemathesis checks, instead of the router's 404.
struct ReadOnlyPaths: RouterMiddleware {
    typealias Context = BasicRequestContext

    /// The read API's paths, `*` for one segment.
    static let patterns: [[Substring]] = [
        "v1/rides", "v1/rides/*", "v1/rides/*/track", "v1/vehicles", "v1/workers", "v1/areas", "v1/openapi.json",
        "v1/live", "share/*", "share/*/status", "share/*/live",
    ].map { $0.split(separator: "/") }

    static func isKnown(_ path: String) -> Bool {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return patterns.contains { pattern in
            pattern.count == segments.count && zip(pattern, segments).allSatisfy { $0 == "*" || $0 == $1 }
        }
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.method != .get, request.method != .head, Self.isKnown(request.uri.path) else {
            return try await next(request, context)
        }
        return Response(status: .methodNotAllowed, headers: [.allow: "GET, HEAD"])
    }
}
