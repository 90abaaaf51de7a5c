import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal HTTP/1.1 endpoint for `/metrics`, `/healthz` and `/readyz`: one thread, one request per
/// connection, GET only. Enough for a Prometheus scrape and a container health check.
final class HTTPEndpoint: @unchecked Sendable {
    // Safe because `fd` is written once in `init` and `stopped` only under `lock`.
    typealias Handler = @Sendable (String) -> (status: Int, contentType: String, body: String)
    private let fd: Int32
    let port: Int
    private let lock = NSLock()
    private var stopped = false

    init(host: String, port: Int, handler: @escaping Handler) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WorkerSettings.Problem(key: "metrics.port", message: "cannot create a socket") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw WorkerSettings.Problem(key: "metrics.port", message: "cannot listen on \(host):\(port) (in use?)")
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve(handler) }
        thread.name = "http-endpoint"
        thread.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    private func serve(_ handler: Handler) {
        while !lock.withLock({ stopped }) {
            let client = accept(fd, nil, nil)
            guard client >= 0 else {
                if lock.withLock({ stopped }) { return }
                continue
            }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(client, &buffer, buffer.count)
            let request = count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
            let parts = request.split(separator: " ", maxSplits: 2)
            let (status, type, body) =
                parts.count >= 2 && parts[0] == "GET"
                ? handler(String(parts[1].split(separator: "?").first ?? ""))
                : (405, "text/plain", "method not allowed\n")
            let reason =
                [200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"][status] ?? "OK"
            let payload = Array(body.utf8)
            let head =
                "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(type)\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n"
            let response = Array(head.utf8) + payload
            _ = response.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            close(client)
        }
    }
}
