import Foundation
public import Hummingbird
public import Logging

/// A4 on a hummingbird router: a request whose `Host` is not one of ``AllowedHosts`` gets 421 Misdirected Request
/// (RFC 9110, 15.5.20: "not able to produce a response for this combination of scheme and authority") with a JSON
/// problem, before any route or file runs. 421 rather than 403: nothing is wrong with who asks, the request was
/// addressed to a name this server does not serve, and a client may retry under the right one.
///
/// `exempt` paths answer whatever the host: the liveness and readiness probes, which say nothing about rides and
/// which an orchestrator addresses by the pod's IP address.
public struct HostCheck<Context: RequestContext>: RouterMiddleware {
    public let hosts: AllowedHosts
    public let exempt: Set<String>
    let logger: Logger

    public init(hosts: AllowedHosts, exempt: Set<String> = ["/healthz", "/readyz"], logger: Logger) {
        self.hosts = hosts
        self.exempt = exempt
        self.logger = logger
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard !hosts.allows(authority: request.head.authority), !exempt.contains(request.uri.path) else {
            return try await next(request, context)
        }
        logger.debug(
            "refused: a request for a host this server does not serve (A4, http.allowedHosts)",
            metadata: ["http.host": .string(request.head.authority ?? "none"), "http.path": .string(request.uri.path)])
        let detail = "this server answers only requests for \(hosts) (A4); set http.allowedHosts to serve another name"
        var body = ByteBuffer()
        body.writeString(#"{"detail":"#)
        body.writeString(Self.quoted(detail))
        body.writeString(#","reason":"misdirectedHost"}"#)
        return Response(
            status: .misdirectedRequest, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: body))
    }

    /// A JSON string of ASCII text without control characters (the detail is built here, from settings).
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
