import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOSSL

/// The HTTP side both push services share: a client (HTTP/2 where the server offers it by ALPN, as APNs does)
/// that trusts a stand-in's certificates instead of the system's when told to, and one POST that returns what
/// the outcome mappings (``APNs/outcome(status:body:retryAfter:)``, ``FCM/outcome(status:body:retryAfter:)``)
/// read.
extension HTTPClient {
    static func forPushService(trustRootsFile: String?) -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.trustRoots = .file(trustRootsFile) }
        return HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: HTTPClient.Configuration(
                tlsConfiguration: tls, timeout: .init(connect: .seconds(10), read: .seconds(30))))
    }

    /// POSTs `body` to `url`; the answer's status, its body (at most 64 KB) and its `retry-after`.
    func post(url: String, headers: [(name: String, value: String)], body: [UInt8]) async throws -> (
        status: Int, body: [UInt8], retryAfter: String?
    ) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await execute(request, timeout: .seconds(30))
        let answer = try await response.body.collect(upTo: 64 * 1024)
        return (Int(response.status.code), Array(buffer: answer), response.headers.first(name: "retry-after"))
    }
}
