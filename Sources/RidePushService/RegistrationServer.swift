public import Foundation
import Hummingbird
public import Logging
public import RideAccess
import RidePush
public import ServiceLifecycle

/// `ride-push`'s HTTP side: devices register and leave, proving their ride with a share token (the share links' ride
/// token, verified with the same key set as the workers' `http.shareKeys`); operators read `/metrics` and
/// `/healthz`.
///
/// - `POST /v1/rides/{ride}/devices` with `Authorization: Bearer <share token of the ride>` and
///   `{"service": "apns" | "fcm", "token": "<push token>"}`: 201 for a new registration, 200 for a known one;
///   409 `tooManyDevices`, 410 `rideEnded`, 503 `serviceOff` or `brokerUnavailable` (the registration is a
///   retained record in the broker: ``PushGroup``).
/// - `DELETE` on the same path with the same body: 204, or 404 when the device was not registered.
/// - 400 `malformedRegistration` for a body that is not that, 400 `malformedToken` for a push token that is not
///   one; 401 for a share token missing or refused (its reason), 403 `otherRide` for one of another ride.
///
/// The push token travels in the body, never in the path, so that no access log holds it.
public struct RegistrationServer: Service {
    private let application: Application<RouterResponder<BasicRequestContext>>

    public init(
        host: String, port: Int, hosts: AllowedHosts, service: RidePushService, verifier: ShareLinks.Verifier,
        now: @escaping @Sendable () -> Date, metricsText: @escaping @Sendable () -> String, logger: Logger
    ) {
        let router = Router()
        // A4: every path but `/healthz` answers only the hosts of `http.allowedHosts`.
        router.add(middleware: HostCheck(hosts: hosts, logger: logger))
        router.get("/metrics") { _, _ in Self.text(metricsText(), contentType: "text/plain; version=0.0.4") }
        router.get("/healthz") { _, _ in Self.text("ok\n") }
        router.post("/v1/rides/{ride}/devices") { request, context -> Response in
            let ride = try context.parameters.require("ride")
            switch await Self.device(request, ride: ride, verifier: verifier, now: now()) {
            case .failure(let problem): return problem.response
            case .success(let (device, expires)):
                switch await service.register(device, ride: ride, expires: expires) {
                case .success(let new):
                    return Self.json(new ? .created : .ok, ["ride": ride, "device": device.description])
                case .failure(.planner(.tooManyDevices)):
                    return Problem(.conflict, "tooManyDevices", "the ride has as many devices as it may").response
                case .failure(.planner(.rideEnded)):
                    return Problem(.gone, "rideEnded", "the ride has ended").response
                case .failure(.shuttingDown):
                    return Problem(.serviceUnavailable, "shuttingDown", "ride-push is stopping; try again").response
                case .failure(.brokerUnavailable):
                    return Problem(
                        .serviceUnavailable, "brokerUnavailable",
                        "ride-push cannot store the registration now; try again"
                    ).response
                case .failure(.serviceOff(let service)):
                    return Problem(
                        .serviceUnavailable, "serviceOff", "this ride-push sends nothing through \(service.rawValue)"
                    ).response
                }
            }
        }
        router.delete("/v1/rides/{ride}/devices") { request, context -> Response in
            let ride = try context.parameters.require("ride")
            switch await Self.device(request, ride: ride, verifier: verifier, now: now()) {
            case .failure(let problem): return problem.response
            case .success(let (device, _)):
                switch await service.unregister(device, ride: ride) {
                case .success(true): return Response(status: .noContent)
                case .success(false):
                    return Problem(.notFound, "notRegistered", "the device is not registered for the ride").response
                case .failure:
                    return Problem(
                        .serviceUnavailable, "brokerUnavailable",
                        "ride-push cannot remove the registration now; try again"
                    ).response
                }
            }
        }
        var serverLogger = logger
        serverLogger[metadataKey: "http.address"] = "\(host):\(port)"
        application = Application(
            router: router, configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            logger: serverLogger)
    }

    public func run() async throws { try await application.run() }

    /// A refusal as the OpenAPI `Problem` (`reason`, `detail`), as the worker's API answers.
    struct Problem: Error {
        var status: HTTPResponse.Status
        var reason: String
        var detail: String

        init(_ status: HTTPResponse.Status, _ reason: String, _ detail: String) {
            self.status = status
            self.reason = reason
            self.detail = detail
        }

        var response: Response {
            var headers: HTTPFields = [.contentType: "application/json"]
            if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer realm=\"ride-push\"" }
            let body = try! JSONSerialization.data(
                withJSONObject: ["reason": reason, "detail": detail], options: [.sortedKeys])
            return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        }
    }

    /// The device a request registers for `ride`, and until when, once its share token opens that ride.
    static func device(_ request: Request, ride: String, verifier: ShareLinks.Verifier, now: Date) async -> Result<
        (PushDevice, Date), Problem
    > {
        guard let authorization = request.headers[.authorization] else {
            return .failure(
                Problem(.unauthorized, "unauthorized", "send Authorization: Bearer with the ride's share token"))
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .failure(Problem(.unauthorized, "malformedToken", "Authorization takes Bearer and a token"))
        }
        let expires: Date
        switch await verifier.verify(String(parts[1]), now: now) {
        case .failure(let refusal):
            return .failure(Problem(.unauthorized, refusal.rawValue, "the share token opens no ride"))
        case .success(let grant) where grant.ride != ride:
            return .failure(Problem(.forbidden, "otherRide", "this share token opens another ride"))
        case .success(let grant):
            expires = grant.expires
        }
        struct Body: Decodable {
            var service: PushDevice.Service
            var token: String
        }
        var request = request
        guard let bytes = try? await request.collectBody(upTo: 4096),
            let body = try? JSONDecoder().decode(Body.self, from: Data(Array(buffer: bytes)))
        else {
            return .failure(
                Problem(
                    .badRequest, "malformedRegistration", #"the body is {"service": "apns" or "fcm", "token": "..."}"#))
        }
        do {
            return .success((try PushDevice(service: body.service, token: body.token), expires))
        } catch {
            return .failure(Problem(.badRequest, "malformedToken", "not a push token of \(body.service.rawValue)"))
        }
    }

    static func json(_ status: HTTPResponse.Status, _ object: [String: String]) -> Response {
        let body = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func text(_ body: String, contentType: String = "text/plain") -> Response {
        Response(
            status: .ok, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
