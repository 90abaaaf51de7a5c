public import AsyncHTTPClient
import Foundation
import Locking
import NIOCore
import NIOHTTP1

/// etcd's v3 API through its JSON gateway (`/v3/...`, served by every etcd 3.4 member on its client URL), over
/// async-http-client: the few calls a group's ownership authority needs (G6). Not a client protocol of its own:
/// each call is one POST of the gateway's documented JSON, keys and values base64, 64-bit integers as strings,
/// fields in snake_case (checked against Debian's etcd-server 3.4.23, `EtcdGatewayTests`).
///
/// Several endpoints (the members of one cluster): a call goes to the one that last answered, and on a transport
/// failure or an answer of 5xx moves on to the next, each at most once per call. Each request has its own time
/// limit: a lease's holder must learn within a bounded time that it could not renew.
public final class EtcdGateway: Sendable {
    /// The members' client URLs, `http://host:port`.
    public let endpoints: [String]
    /// The time limit of one request to one member.
    public let requestTimeout: Duration
    private let client: HTTPClient
    private let timeLimit: TimeAmount
    private let current = Locked(0)

    public init(endpoints: [String], requestTimeout: Duration = .seconds(2), client: HTTPClient = .shared) {
        precondition(!endpoints.isEmpty, "etcd needs at least one endpoint")
        self.endpoints = endpoints.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.requestTimeout = requestTimeout
        let (seconds, attoseconds) = requestTimeout.components
        timeLimit = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        self.client = client
    }

    // MARK: - Leases

    /// A lease of `ttl` seconds (`/v3/lease/grant`); etcd may grant a longer one than asked, never a shorter.
    public func grant(ttl: Int64) async throws(EtcdError) -> EtcdLease {
        let answer: LeaseAnswer = try await call("/v3/lease/grant", LeaseRequest(ttl: ttl, id: nil))
        guard let id = answer.id.flatMap(Int64.init), let granted = answer.ttl.flatMap(Int64.init), granted > 0 else {
            throw .malformed("lease/grant answered without an ID and a TTL: \(answer)")
        }
        return EtcdLease(id: id, ttl: granted, revision: answer.header?.revisionValue ?? 0)
    }

    /// Renews a lease once (`/v3/lease/keepalive`, one answer per POST): the TTL it has again, in seconds, or 0
    /// when etcd no longer knows it (it expired or was revoked, and its keys are deleted).
    public func keepAlive(_ lease: Int64) async throws(EtcdError) -> Int64 {
        let answer: KeepAliveAnswer = try await call("/v3/lease/keepalive", LeaseRequest(ttl: nil, id: "\(lease)"))
        return answer.result?.ttl.flatMap(Int64.init) ?? 0
    }

    /// The keys bound to a lease (`/v3/lease/timetolive` with `keys`); empty when etcd no longer knows it.
    public func keys(of lease: Int64) async throws(EtcdError) -> [String] {
        let answer: TimeToLiveAnswer = try await call(
            "/v3/lease/timetolive", TimeToLiveRequest(id: "\(lease)", keys: true))
        return try (answer.keys ?? []).map { key throws(EtcdError) in
            guard let data = Data(base64Encoded: key), let name = String(data: data, encoding: .utf8) else {
                throw .malformed("a lease's key that is not base64 UTF-8: \(key)")
            }
            return name
        }
    }

    /// Ends a lease at once, deleting every key bound to it (`/v3/lease/revoke`). A lease that is gone already is
    /// not an error: the outcome is the same.
    public func revoke(_ lease: Int64) async throws(EtcdError) {
        do {
            let _: LeaseAnswer = try await call("/v3/lease/revoke", LeaseRequest(ttl: nil, id: "\(lease)"))
        } catch .refused(_, let message) where message.contains("requested lease not found") {
            return
        }
    }

    // MARK: - Keys

    /// Every key under `prefix`, and the store's revision when they were read (`/v3/kv/range`, linearizable).
    public func range(prefix: String) async throws(EtcdError) -> (revision: Int64, pairs: [EtcdKeyValue]) {
        let answer: RangeAnswer = try await call(
            "/v3/kv/range", RangeRequest(key: Self.base64(prefix), rangeEnd: Self.base64(Self.prefixEnd(prefix))))
        return (answer.header?.revisionValue ?? 0, try (answer.kvs ?? []).map { kv throws(EtcdError) in try kv.pair() })
    }

    /// One transaction (`/v3/kv/txn`): if every comparison holds, the `success` operations, else the `failure`
    /// ones, atomically. etcd takes at most 128 operations in each list by default (`--max-txn-ops`).
    public func transaction(
        when compare: [EtcdCompare], then success: [EtcdOperation], otherwise failure: [EtcdOperation] = []
    ) async throws(EtcdError) -> EtcdTransactionResult {
        let request = TransactionRequest(
            compare: compare.map(\.json), success: success.map(\.json), failure: failure.map(\.json))
        let answer: TransactionAnswer = try await call("/v3/kv/txn", request)
        var ranges: [[EtcdKeyValue]] = []
        var previous: [EtcdKeyValue?] = []
        let branch = (answer.succeeded ?? false) ? success : failure
        for (index, response) in (answer.responses ?? []).enumerated() {
            if let range = response.responseRange {
                ranges.append(try (range.kvs ?? []).map { kv throws(EtcdError) in try kv.pair() })
            }
            // A put that asked for the key's previous value: nil where the key did not exist.
            if index < branch.count, case .put(_, _, _, previous: true) = branch[index] {
                previous.append(try response.responsePut?.prevKv.map { kv throws(EtcdError) in try kv.pair() })
            }
        }
        return EtcdTransactionResult(
            succeeded: answer.succeeded ?? false, revision: answer.header?.revisionValue ?? 0, ranges: ranges,
            previous: previous)
    }

    // MARK: - Transport

    private func call<Request: Encodable, Answer: Decodable>(_ path: String, _ body: Request) async throws(EtcdError)
        -> Answer
    {
        let payload: Data
        do {
            payload = try Self.encoder.encode(body)
        } catch {
            throw .malformed("request to \(path) did not encode: \(error)")
        }
        let start = current.withLock { $0 }
        var failures: [String] = []
        for step in 0..<endpoints.count {
            let index = (start + step) % endpoints.count
            let endpoint = endpoints[index]
            var request = HTTPClientRequest(url: endpoint + path)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: payload))
            let status: Int
            let bytes: ByteBuffer
            do {
                let response = try await client.execute(request, timeout: timeLimit)
                status = Int(response.status.code)
                bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
            } catch {
                failures.append("\(endpoint): \(error)")
                continue
            }
            if status >= 500 {
                failures.append("\(endpoint): HTTP \(status) \(String(buffer: bytes).prefix(200))")
                continue
            }
            current.withLock { $0 = index }
            guard status == 200 else {
                let problem = try? Self.decoder.decode(GatewayError.self, from: Data(bytes.readableBytesView))
                throw .refused(status: status, message: problem?.message ?? String(buffer: bytes))
            }
            do {
                return try Self.decoder.decode(Answer.self, from: Data(bytes.readableBytesView))
            } catch {
                throw .malformed("\(path) answered what does not read: \(String(buffer: bytes).prefix(300))")
            }
        }
        current.withLock { $0 = (start + 1) % endpoints.count }
        throw .unreachable(failures)
    }

    /// Field names are spelled out where they are written (`ID` and `TTL` are not snake_case).
    private static let encoder = JSONEncoder()
    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }()

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// The end of a prefix's range: the prefix with its last byte raised by one (etcd's `clientv3.GetPrefixRangeEnd`).
    static func prefixEnd(_ prefix: String) -> [UInt8] {
        var bytes = Array(prefix.utf8)
        while let last = bytes.last {
            if last < 0xff {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
            bytes.removeLast()
        }
        return [0]  // every key
    }
}

// MARK: - Values

/// A lease etcd granted: its id, its TTL in seconds, and the store's revision at the grant.
public struct EtcdLease: Sendable, Equatable {
    public var id: Int64
    public var ttl: Int64
    public var revision: Int64

    public init(id: Int64, ttl: Int64, revision: Int64) {
        self.id = id
        self.ttl = ttl
        self.revision = revision
    }
}

/// One key as etcd keeps it.
public struct EtcdKeyValue: Sendable, Equatable {
    public var key: String
    public var value: [UInt8]
    /// The revision of the transaction that created the key (since its last deletion).
    public var createRevision: Int64
    /// The revision of its last change.
    public var modRevision: Int64
    /// The lease it is bound to; 0 for none.
    public var lease: Int64

    public init(key: String, value: [UInt8], createRevision: Int64, modRevision: Int64, lease: Int64) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.lease = lease
    }
}

/// A comparison of a transaction.
public enum EtcdCompare: Sendable, Equatable {
    /// The key does not exist.
    case absent(String)
    /// The key exists and is bound to this lease.
    case boundTo(String, lease: Int64)

    var json: CompareJSON {
        switch self {
        case .absent(let key):
            CompareJSON(
                key: EtcdGateway.base64(key), target: "CREATE", result: "EQUAL", createRevision: "0", lease: nil)
        case .boundTo(let key, let lease):
            CompareJSON(
                key: EtcdGateway.base64(key), target: "LEASE", result: "EQUAL", createRevision: nil, lease: "\(lease)")
        }
    }
}

/// An operation of a transaction.
public enum EtcdOperation: Sendable, Equatable {
    /// Writes the key, bound to `lease` (0: to none); with `previous`, the value it replaced comes back in
    /// ``EtcdTransactionResult/previous`` (etcd's `prev_kv`).
    case put(String, value: [UInt8], lease: Int64, previous: Bool = false)
    /// Deletes the key.
    case delete(String)
    /// Reads the key: its value comes back in ``EtcdTransactionResult/ranges``, in order.
    case get(String)
    /// Reads the key as it was at `revision` (etcd keeps its history until it is compacted; a compacted revision
    /// fails the whole transaction).
    case getAt(String, revision: Int64)

    var json: OperationJSON {
        switch self {
        case .put(let key, let value, let lease, let previous):
            OperationJSON(
                requestPut: PutJSON(
                    key: EtcdGateway.base64(key), value: EtcdGateway.base64(value),
                    lease: lease == 0 ? nil : "\(lease)",
                    prevKv: previous ? true : nil))
        case .delete(let key): OperationJSON(requestDeleteRange: KeyJSON(key: EtcdGateway.base64(key)))
        case .get(let key): OperationJSON(requestRange: KeyJSON(key: EtcdGateway.base64(key)))
        case .getAt(let key, let revision):
            OperationJSON(requestRange: KeyJSON(key: EtcdGateway.base64(key), revision: "\(revision)"))
        }
    }
}

/// What a transaction did: which branch ran, the store's revision after it (the revision of its writes, when it
/// wrote), and the keys its reads found, one list per ``EtcdOperation/get(_:)`` in order.
public struct EtcdTransactionResult: Sendable, Equatable {
    public var succeeded: Bool
    public var revision: Int64
    public var ranges: [[EtcdKeyValue]]
    /// What each ``EtcdOperation/put(_:value:lease:previous:)`` with `previous` of the branch that ran replaced, in
    /// order: nil where the key did not exist.
    public var previous: [EtcdKeyValue?] = []
}

/// Why a call to etcd failed.
public enum EtcdError: Error, Equatable, CustomStringConvertible {
    /// No endpoint answered (each one's failure).
    case unreachable([String])
    /// etcd answered with an error (HTTP status and its message): a transaction that breaks a limit, for example.
    case refused(status: Int, message: String)
    /// An answer that does not read as the gateway's documented JSON.
    case malformed(String)

    public var description: String {
        switch self {
        case .unreachable(let failures): "no etcd endpoint answered: \(failures.joined(separator: "; "))"
        case .refused(let status, let message): "etcd refused (HTTP \(status)): \(message)"
        case .malformed(let detail): "etcd's answer does not read: \(detail)"
        }
    }
}

// MARK: - The gateway's JSON (64-bit integers as strings, bytes as base64)

struct Header: Decodable {
    var revision: String?
    var revisionValue: Int64? { revision.flatMap(Int64.init) }
}

struct LeaseRequest: Encodable {
    var ttl: Int64?
    var id: String?
    enum CodingKeys: String, CodingKey {
        case ttl = "TTL"
        case id = "ID"
    }
}

struct LeaseAnswer: Decodable, CustomStringConvertible {
    var header: Header?
    var id: String?
    var ttl: String?
    enum CodingKeys: String, CodingKey {
        case header
        case id = "ID"
        case ttl = "TTL"
    }
    var description: String { "ID \(id ?? "none"), TTL \(ttl ?? "none")" }
}

struct TimeToLiveRequest: Encodable {
    var id: String
    var keys: Bool
    enum CodingKeys: String, CodingKey {
        case id = "ID"
        case keys
    }
}

struct TimeToLiveAnswer: Decodable {
    var keys: [String]?
}

struct KeepAliveAnswer: Decodable {
    var result: LeaseAnswer?
}

struct RangeRequest: Encodable {
    var key: String
    var rangeEnd: String
    enum CodingKeys: String, CodingKey {
        case key
        case rangeEnd = "range_end"
    }
}

struct KeyValueJSON: Decodable {
    var key: String?
    var value: String?
    var createRevision: String?
    var modRevision: String?
    var lease: String?

    func pair() throws(EtcdError) -> EtcdKeyValue {
        guard let keyData = key.flatMap({ Data(base64Encoded: $0) }), let name = String(data: keyData, encoding: .utf8)
        else { throw .malformed("a key that is not base64 UTF-8: \(key ?? "none")") }
        let bytes: [UInt8]
        if let value {
            guard let data = Data(base64Encoded: value) else { throw .malformed("the value of \(name) is not base64") }
            bytes = Array(data)
        } else {
            bytes = []
        }
        return EtcdKeyValue(
            key: name, value: bytes, createRevision: createRevision.flatMap(Int64.init) ?? 0,
            modRevision: modRevision.flatMap(Int64.init) ?? 0, lease: lease.flatMap(Int64.init) ?? 0)
    }
}

struct RangeAnswer: Decodable {
    var header: Header?
    var kvs: [KeyValueJSON]?
}

struct CompareJSON: Encodable, Equatable {
    var key: String
    var target: String
    var result: String
    var createRevision: String?
    var lease: String?
    enum CodingKeys: String, CodingKey {
        case key, target, result, lease
        case createRevision = "create_revision"
    }
}

struct PutJSON: Encodable, Equatable {
    var key: String
    var value: String
    var lease: String?
    var prevKv: Bool? = nil
    enum CodingKeys: String, CodingKey {
        case key, value, lease
        case prevKv = "prev_kv"
    }
}

struct KeyJSON: Encodable, Equatable {
    var key: String
    var revision: String? = nil
}

struct OperationJSON: Encodable, Equatable {
    var requestPut: PutJSON? = nil
    var requestDeleteRange: KeyJSON? = nil
    var requestRange: KeyJSON? = nil
    enum CodingKeys: String, CodingKey {
        case requestPut = "request_put"
        case requestDeleteRange = "request_delete_range"
        case requestRange = "request_range"
    }
}

struct TransactionRequest: Encodable {
    var compare: [CompareJSON]
    var success: [OperationJSON]
    var failure: [OperationJSON]
}

struct TransactionAnswer: Decodable {
    struct Response: Decodable {
        var responseRange: RangeAnswer?
        var responsePut: PutAnswer?
    }
    struct PutAnswer: Decodable {
        var prevKv: KeyValueJSON?
    }
    var header: Header?
    var succeeded: Bool?
    var responses: [Response]?
}

struct GatewayError: Decodable {
    var error: String?
    var message: String?
}
