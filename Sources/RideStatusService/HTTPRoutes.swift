import Foundation
import Hummingbird
import RideAccess
import RideJSON

/// The routes of the read API (`/v1`) and of share links (`/share/{token}`), each asking ``HTTPAccess`` first.
struct Routes: Sendable {
    let api: ReadAPI
    let feed: LiveFeed
    let access: HTTPAccess
    let share: (any WorkerHTTPServer.ShareSource)?

    func addReadAPI(to router: Router<BasicRequestContext>, openAPI: String?) {
        let v1 = router.group("/v1")
        v1.get("/rides") { request, _ in
            let query = request.uri.queryParameters
            return await scoped(request) { scope in
                WorkerHTTPServer.json(
                    api.rides(
                        phase: query["phase"].map(String.init), cursor: query["cursor"].map(String.init),
                        limit: query["limit"].map(String.init), only: scope.ride))
            }
        }
        v1.get("/rides/:id") { request, context in
            let ride = try Self.ride(context)
            return await scoped(request, ride: ride) { scope in
                let reply = api.ride(ride)
                // A share token's ride may be served by another worker of the group: its retained status then.
                if reply.status == 404, scope.ride == ride, let share,
                    let status = await share.current(ride, timeout: .seconds(2))
                {
                    return WorkerHTTPServer.json(.ok(status))
                }
                return WorkerHTTPServer.json(reply)
            }
        }
        v1.get("/rides/:id/track") { request, context in
            let ride = try Self.ride(context)
            return await scoped(request, ride: ride) { _ in WorkerHTTPServer.json(api.track(ride)) }
        }
        v1.get("/vehicles") { request, _ in
            await scoped(request, fleetWide: true) { _ in
                WorkerHTTPServer.json(api.vehicles(limit: request.uri.queryParameters["limit"].map(String.init)))
            }
        }
        v1.get("/workers") { request, _ in
            await scoped(request, fleetWide: true) { _ in WorkerHTTPServer.json(api.workers()) }
        }
        v1.get("/areas") { request, _ in
            await scoped(request) { _ in WorkerHTTPServer.json(api.areas()) }
        }
        // The document describes the API; it holds no ride, so it needs no token.
        v1.get("/openapi.json") { _, _ in
            guard let openAPI else {
                return WorkerHTTPServer.json(
                    .problem(404, "notFound", "docs/openapi.json was not found beside the web root"))
            }
            return WorkerHTTPServer.text(openAPI, contentType: "application/json")
        }
        v1.get("/live") { request, _ in
            await scoped(request) { scope in
                if case .ride(let ride, let until) = scope {
                    guard let share else { return WorkerHTTPServer.json(Self.problem(.sharingOff, status: 404)) }
                    return Self.events(share.watch(ride, until: until))
                }
                return Self.events(feed.watch())
            }
        }
    }

    /// `/share/{token}`: the page of one ride, its status and its events. The token is the link: it travels in
    /// the path (an EventSource sends no headers), the page sends no referrer (its map's tiles come from
    /// elsewhere), and no answer is cached.
    func addShareLinks(to router: Router<BasicRequestContext>, page: String?) {
        let links = router.group("/share")
        links.get("/:token") { request, context in
            let answer = await shared(context) { _, _ in
                guard let page else {
                    return WorkerHTTPServer.json(
                        .problem(404, "notFound", "share.html was not found in the web root (http.webRoot)"))
                }
                return Self.page(page)
            }
            // A browser following a link that opens nothing gets the page with the refusal's status, and the page
            // says why (it asks /status); any other client gets the JSON error.
            guard answer.status.code == 401, let page, request.headers[.accept]?.contains("text/html") == true else {
                return answer
            }
            var refused = Self.page(page)
            refused.status = answer.status
            return Self.noStore(refused)
        }
        links.get("/:token/status") { _, context in
            await shared(context) { ride, _ in
                guard let status = await share?.current(ride, timeout: .seconds(2)) else {
                    return WorkerHTTPServer.json(
                        .problem(404, "unknownRide", "no status of \(ride) on the broker: not booked yet, or ended"))
                }
                return WorkerHTTPServer.json(.ok(status))
            }
        }
        links.get("/:token/live") { _, context in
            await shared(context) { ride, until in
                guard let share else { return WorkerHTTPServer.json(Self.problem(.sharingOff, status: 404)) }
                return Self.events(share.watch(ride, until: until))
            }
        }
    }

    // MARK: Access

    /// Runs `body` with the request's scope, or answers the refusal. `ride`: the ride the path names (a share
    /// token for another is refused); `fleetWide`: a path that shows more than one ride (a share token is
    /// refused).
    private func scoped(
        _ request: Request, ride: String? = nil, fleetWide: Bool = false,
        _ body: (HTTPAccess.Scope) async throws -> Response
    ) async -> Response {
        switch await access.scope(authorization: request.headers[.authorization]) {
        case .failure(let refusal): return Self.refused(refusal)
        case .success(let scope):
            if case .ride(let granted, _) = scope {
                if fleetWide { return Self.noStore(Self.refused(.fleetWide)) }
                if let ride, ride != granted { return Self.noStore(Self.refused(.otherRide)) }
            }
            let response: Response
            do {
                response = try await body(scope)
            } catch {
                response = WorkerHTTPServer.json(.problem(400, "invalidQuery", "\(error)"))
            }
            // What a share token opens is the link's alone, wherever it is asked for.
            return scope.ride == nil ? response : Self.noStore(response)
        }
    }

    private func shared(_ context: BasicRequestContext, _ body: (String, Date) async -> Response) async -> Response {
        guard share != nil else { return Self.noStore(WorkerHTTPServer.json(Self.problem(.sharingOff, status: 404))) }
        let token = context.parameters.get("token") ?? ""
        switch await access.scope(shareToken: token) {
        case .failure(let refusal): return Self.noStore(Self.refused(refusal))
        case .success(.ride(let ride, let until)): return Self.noStore(await body(ride, until))
        case .success(.everything): return Self.noStore(Self.refused(.fleetWide))
        }
    }

    private static func page(_ page: String) -> Response {
        var response = WorkerHTTPServer.text(page, contentType: "text/html; charset=utf-8")
        response.headers[.contentSecurityPolicy] = "frame-ancestors 'none'"
        return response
    }

    private static func refused(_ refusal: HTTPAccess.Refusal) -> Response {
        var response = WorkerHTTPServer.json(.problem(refusal.status, refusal.reason, refusal.detail))
        if refusal.status == 401 {
            // RFC 6750: which scheme, and for a token that failed, that it was the token.
            response.headers[.wwwAuthenticate] =
                refusal.bearerError.map { "Bearer realm=\"ride-status\", error=\"\($0)\"" }
                ?? "Bearer realm=\"ride-status\""
        }
        return response
    }

    private static func problem(_ refusal: ShareLinks.Refusal, status: Int = 401) -> ReadAPI.Reply {
        .problem(status, refusal.rawValue, refusal.detail)
    }

    /// Share answers are the link's alone: never cached, never referred onwards, never framed.
    private static func noStore(_ response: Response) -> Response {
        var response = response
        response.headers[.cacheControl] = "no-store"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }

    /// An event stream, or 503 when the share feed follows as many pages as it may.
    private static func events(_ events: AsyncStream<[UInt8]>?) -> Response {
        guard let events else {
            var busy = WorkerHTTPServer.json(
                .problem(503, "busy", "this worker follows as many share pages as it may; try again shortly"))
            busy.headers[.retryAfter] = "30"
            return busy
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                for await event in events { try await writer.write(ByteBuffer(bytes: event)) }
                try await writer.finish(nil)
            })
    }

    /// The ride of a `/v1/rides/{id}` path, percent-decoded (the page encodes it).
    private static func ride(_ context: BasicRequestContext) throws -> String {
        let raw = try context.parameters.require("id")
        return raw.removingPercentEncoding ?? raw
    }
}

extension HTTPAccess.Scope {
    /// The one ride a share token opens; nil for everything.
    var ride: String? {
        if case .ride(let ride, _) = self { return ride }
        return nil
    }
}
