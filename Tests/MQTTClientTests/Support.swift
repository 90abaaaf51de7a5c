import Foundation
import Logging
import MQTTClient
import MosquittoTesting

let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// A client for `broker`, connected.
func connectedClient(
    _ broker: TestBroker, id: String = "c-\(UUID().uuidString.prefix(8))", cleanStart: Bool = true,
    configure: (inout MQTTConfiguration) -> Void = { _ in }
) async throws -> MQTTClient {
    var configuration = MQTTConfiguration(host: broker.host, port: broker.port, clientID: id, cleanStart: cleanStart)
    configure(&configuration)
    let client = try MQTTClient(configuration: configuration, logger: quietLogger)
    try await client.connect(timeout: .seconds(5))
    return client
}

/// A client for `broker`'s TLS listener (host name `localhost`, as in its certificate), trusting the test's CA,
/// connected.
func connectedTLSClient(_ broker: TestBroker, id: String = "tls-\(UUID().uuidString.prefix(8))") async throws
    -> MQTTClient
{
    struct NoTLSListener: Error, CustomStringConvertible {
        var description: String { "the test broker was started without `tls: true`" }
    }
    guard let certificates = broker.certificates, let port = broker.tlsPort else { throw NoTLSListener() }
    var configuration = MQTTConfiguration(host: "localhost", port: port, clientID: id)
    configuration.tls = .init(caFile: certificates.caCertificate.path)
    let client = try MQTTClient(configuration: configuration, logger: quietLogger)
    try await client.connect(timeout: .seconds(5))
    return client
}

/// The next `count` messages of `client`, or a `TimedOut` error.
func receive(_ client: MQTTClient, count: Int = 1, timeout: Duration = .seconds(5)) async throws -> [MQTTMessage] {
    try await withThrowingTaskGroup(of: [MQTTMessage].self) { group in
        group.addTask {
            var received: [MQTTMessage] = []
            var iterator = client.messages.makeAsyncIterator()
            while received.count < count, let message = await iterator.next() { received.append(message) }
            return received
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: "\(count) message(s)")
        }
        let result = try await group.next()!
        group.cancelAll()
        return result
    }
}

/// Waits for the first event matching `predicate`.
func waitForEvent(
    _ client: MQTTClient, timeout: Duration = .seconds(10),
    _ predicate: @escaping @Sendable (MQTTConnectionEvent) -> Bool
) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            for await event in client.events where predicate(event) { return }
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(what: "a connection event")
        }
        try await group.next()
        group.cancelAll()
    }
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
