import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A plain HTTP/1.1 GET on loopback, for probing a worker's `/readyz` and `/metrics` from tests and the
/// load harness. Returns the status code and body, or nil when nothing answers.
public func httpGet(
    host: String = "127.0.0.1", port: Int, path: String, hostHeader: String? = nil
) -> (status: Int, body: String)? {
    httpExchange(host: host, port: port, method: "GET", path: path, hostHeader: hostHeader, body: nil)
}

/// A plain HTTP/1.1 POST of a JSON `body` on loopback (etcd's gateway in tests): the status code and body, or nil
/// when nothing answers.
public func httpPost(host: String = "127.0.0.1", port: Int, path: String, json body: String) -> (
    status: Int, body: String
)? {
    httpExchange(host: host, port: port, method: "POST", path: path, hostHeader: nil, body: body)
}

private func httpExchange(host: String, port: Int, method: String, path: String, hostHeader: String?, body: String?)
    -> (status: Int, body: String)?
{
    guard let fd = TestBroker.connectTCP(host: host, port: port) else { return nil }
    defer { close(fd) }
    // A server that accepts and never answers fails this request after 5 s instead of blocking the caller's
    // thread (one of the cooperative pool's two on this machine) for good.
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
    let content = body.map { "Content-Type: application/json\r\nContent-Length: \($0.utf8.count)\r\n" } ?? ""
    let request = Array(
        "\(method) \(path) HTTP/1.1\r\nHost: \(hostHeader ?? "localhost:\(port)")\r\n\(content)Connection: close\r\n\r\n\(body ?? "")"
            .utf8)
    _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = read(fd, &buffer, buffer.count)
        if count <= 0 { break }
        response += buffer[0..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let statusText = text.split(separator: " ").dropFirst().first, let status = Int(statusText) else {
        return nil
    }
    let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, body)
}

/// One HTTP/1.1 GET with `headers`, reading at most `seconds` (an event stream never ends by itself): the
/// status, the response's header fields (names lowercased) and what of the body came.
public func httpRequest(
    host: String = "127.0.0.1", port: Int, path: String, headers: [String: String] = [:], seconds: Double = 5
) -> (status: Int, headers: [String: String], body: String)? {
    guard let fd = TestBroker.connectTCP(host: host, port: port) else { return nil }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
    for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
    // `Host` is the server's loopback name and port (A4) unless `headers` names another.
    var fields = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
    if !headers.keys.contains(where: { $0.lowercased() == "host" }) { fields = "Host: localhost:\(port)\r\n" + fields }
    let request = Array("GET \(path) HTTP/1.1\r\n\(fields)Connection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let count = read(fd, &buffer, buffer.count)
        if count == 0 { break }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
            break
        }
        response += buffer[0..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    let parts = text.components(separatedBy: "\r\n\r\n")
    let head = parts.first?.components(separatedBy: "\r\n") ?? []
    guard let statusText = head.first?.split(separator: " ").dropFirst().first, let status = Int(statusText) else {
        return nil
    }
    var fieldsRead: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fieldsRead[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return (status, fieldsRead, parts.dropFirst().joined(separator: "\r\n\r\n"))
}
