import CMosquittoIO
import Foundation
import MosquittoTesting
import Testing

@testable import MQTTClient

/// The read buffer under libmosquitto (`mosquitto_io.h`): libmosquitto's small reads of its socket are served
/// in order from one large read, nothing read for one connection reaches the next, and everything else (other
/// files, other threads, a thread that has not entered) reads and writes as the system does.
@Suite("SocketReadBuffer: libmosquitto's reads served from one large read")
struct SocketReadBufferTests {
    /// A non-blocking, connected pair of sockets: the buffer reads `ends.0`, the test writes `ends.1`.
    final class Pair {
        let ends: (Int32, Int32)
        init() {
            var fds: [Int32] = [-1, -1]
            let type = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue)
            precondition(socketpair(AF_UNIX, type, 0, &fds) == 0)
            ends = (fds[0], fds[1])
        }
        deinit {
            close(ends.0)
            close(ends.1)
        }
        func send(_ bytes: [UInt8]) {
            #expect(bytes.withUnsafeBytes { write(ends.1, $0.baseAddress, $0.count) } == bytes.count)
        }
        func unread(_ fd: Int32) -> Int32 {
            var count: Int32 = 0
            _ = ioctl(fd, UInt(FIONREAD), &count)
            return count
        }
    }

    /// A buffer of 4,096 bytes entered on this thread for `fd` while `body` runs.
    func withEntered<Result>(
        fd: Int32, _ body: (OpaquePointer) throws -> Result
    ) rethrows -> Result {
        let buffer = mosquitto_io_buffer_create(4096)!
        defer { mosquitto_io_buffer_destroy(buffer) }
        mosquitto_io_buffer_reset(buffer, fd)
        let before = mosquitto_io_enter(buffer)
        defer { mosquitto_io_enter(before) }
        return try body(buffer)
    }

    /// One read as libmosquitto makes it: `count` bytes asked for, what came back (nil: -1, with errno).
    func read(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { mosquitto_io_read(fd, $0.baseAddress, count) }
        return got < 0 ? nil : Array(bytes.prefix(got))
    }

    @Test("libmosquitto's patch is in place in this process (libmosquitto is a shared library here)")
    func installed() {
        #expect(mosquitto_io_install() == 0)
        #expect(SocketReadBuffer.installation == 0)
    }

    @Test("a thousand one-byte reads: one system read, the bytes in order; then EAGAIN as from the socket")
    func smallReadsFromOneRead() {
        let pair = Pair()
        let sent = (0..<1000).map { UInt8($0 % 251) }
        pair.send(sent)
        withEntered(fd: pair.ends.0) { buffer in
            var received: [UInt8] = []
            for _ in 0..<1000 { received += read(pair.ends.0, 1) ?? [] }
            #expect(received == sent)
            #expect(mosquitto_io_buffer_counters(buffer).requested_reads == 1000)
            #expect(mosquitto_io_buffer_counters(buffer).system_reads == 1)
            #expect(mosquitto_io_buffer_pending(buffer) == 0)
            errno = 0
            let empty = read(pair.ends.0, 1)
            let error = errno
            #expect(empty == nil)
            #expect(error == EAGAIN)
        }
    }

    @Test("a read of more than is buffered gets what is buffered; the end of the stream comes after it")
    func endOfStreamAfterBufferedBytes() {
        let pair = Pair()
        pair.send(Array(1...10))
        shutdown(pair.ends.1, Int32(SHUT_WR))
        withEntered(fd: pair.ends.0) { buffer in
            #expect(read(pair.ends.0, 4) == [1, 2, 3, 4])
            #expect(mosquitto_io_buffer_pending(buffer) == 6)
            #expect(read(pair.ends.0, 100) == [5, 6, 7, 8, 9, 10])
            #expect(read(pair.ends.0, 1) == [])
        }
    }

    @Test("reset: bytes a closed connection left in the buffer never reach the next one on the same number")
    func resetForgetsTheOldConnection() {
        let pair = Pair()
        pair.send(Array("old connection".utf8))
        withEntered(fd: pair.ends.0) { buffer in
            #expect(read(pair.ends.0, 1) == Array("o".utf8))
            #expect(mosquitto_io_buffer_pending(buffer) == 13)
            mosquitto_io_buffer_reset(buffer, pair.ends.0)
            #expect(mosquitto_io_buffer_pending(buffer) == 0)
            pair.send(Array("new".utf8))
            #expect(read(pair.ends.0, 100) == Array("new".utf8))
        }
    }

    @Test("a read at least as large as the buffer goes straight into the caller's memory")
    func largeReadIsDirect() {
        let pair = Pair()
        let sent = (0..<10_000).map { UInt8($0 % 253) }
        pair.send(sent)
        withEntered(fd: pair.ends.0) { buffer in
            // Through the 4,096-byte buffer, no read could return more than 4,096 bytes.
            var received = read(pair.ends.0, 8192) ?? []
            #expect(received.count == 8192)
            while received.count < sent.count, let bytes = read(pair.ends.0, 8192) { received += bytes }
            #expect(received == sent)
            #expect(mosquitto_io_buffer_pending(buffer) == 0)
            #expect(mosquitto_io_buffer_counters(buffer).system_reads == 2)
        }
    }

    @Test("other files, and threads that have not entered, read from the system; nothing is buffered for them")
    func otherReadsPassThrough() {
        let pair = Pair()
        let other = Pair()
        pair.send([1, 2, 3])
        other.send([4, 5, 6])
        // Not entered: the system's read, exactly the bytes asked for.
        #expect(read(pair.ends.0, 1) == [1])
        #expect(pair.unread(pair.ends.0) == 2)
        withEntered(fd: pair.ends.0) { buffer in
            #expect(read(other.ends.0, 1) == [4])
            #expect(other.unread(other.ends.0) == 2)
            #expect(mosquitto_io_buffer_counters(buffer).requested_reads == 0)
        }
    }

    @Test("entered: libmosquitto's one-byte wake-up to another file is not written; its socket's writes are")
    func wakeUpByteSkipped() {
        let pair = Pair()
        let wakeUp = Pair()
        var byte: UInt8 = 0
        var other: UInt8 = 1
        withEntered(fd: pair.ends.0) { buffer in
            #expect(mosquitto_io_write(wakeUp.ends.0, &byte, 1) == 1)
            #expect(wakeUp.unread(wakeUp.ends.1) == 0)
            #expect(mosquitto_io_buffer_counters(buffer).skipped_wakeups == 1)
            #expect(mosquitto_io_write(pair.ends.0, &byte, 1) == 1)
            #expect(pair.unread(pair.ends.1) == 1)
            // Only libmosquitto's wake-up byte (0) is skipped: any other single byte is written.
            #expect(mosquitto_io_write(wakeUp.ends.0, &other, 1) == 1)
            #expect(wakeUp.unread(wakeUp.ends.1) == 1)
        }
        // Not entered: written.
        #expect(mosquitto_io_write(wakeUp.ends.0, &byte, 1) == 1)
        #expect(wakeUp.unread(wakeUp.ends.1) == 2)
    }

    @Test("turned off (broker.interposeIO false) a client buffers nothing and marks nothing; on, it says installed")
    func switchedOff() throws {
        let off = SocketReadBuffer(enabled: false)
        #expect(off.interposition == .disabled)
        off.reset(socket: 7)
        #expect(off.pendingBytes == 0 && off.counters == (0, 0, 0))
        let skipsBefore = mosquitto_io_queueing_skips()
        let wakeUp = Pair()
        var byte: UInt8 = 0
        off.queueing { #expect(mosquitto_io_write(wakeUp.ends.0, &byte, 1) == 1) }
        #expect(wakeUp.unread(wakeUp.ends.1) == 1, "the wake-up byte is written: libmosquitto as it always was")
        #expect(mosquitto_io_queueing_skips() == skipsBefore)
        #expect(SocketReadBuffer(enabled: true).interposition == .installed, "Debian's libmosquitto takes the patch")
        var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:1", clientID: "io-off")
        configuration.interposeIO = false
        #expect(try MQTTClient(configuration: configuration).ioInterposition == .disabled)
        #expect(SocketReadBuffer.reason(5).contains("not built here"))
    }

    @Test("a thread marked as queueing (a publish from the cadence) skips the wake-up byte; unmarked it writes it")
    func queueingSkipsWakeUp() {
        let wakeUp = Pair()
        var byte: UInt8 = 0
        var packet: [UInt8] = [0x30, 2, 0, 0]
        let skipsBefore = mosquitto_io_queueing_skips()
        SocketReadBuffer(enabled: true).queueing {
            #expect(mosquitto_io_write(wakeUp.ends.0, &byte, 1) == 1)
            // Anything else (a whole packet) is written even while marked.
            #expect(mosquitto_io_write(wakeUp.ends.0, &packet, packet.count) == packet.count)
        }
        #expect(wakeUp.unread(wakeUp.ends.1) == 4)
        #expect(mosquitto_io_queueing_skips() == skipsBefore + 1)
        #expect(mosquitto_io_write(wakeUp.ends.0, &byte, 1) == 1)
        #expect(wakeUp.unread(wakeUp.ends.1) == 5)
    }
}

/// The client's network thread through the buffer, against a real mosquitto: every message arrives whole and in
/// order across the buffer's edges (sizes from 0 bytes to well above its 64 KiB), with far fewer system reads
/// than libmosquitto asked for.
@Suite("SocketReadBuffer in the client, against a real mosquitto", .serialized)
struct SocketReadBufferIntegrationTests {
    @Test("3,000 queued QoS 1 messages of 0 B to 200 KiB arrive whole and in order; reads are batched")
    func messagesWholeAndInOrder() async throws {
        try await withTestBroker { broker in
            // A session that keeps the subscription while its client is away: the broker queues what follows
            // and sends it back to back when the client returns, as after a worker's restart.
            let id = "reader-\(UUID().uuidString.prefix(8))"
            let away = try await connectedClient(broker, id: id, cleanStart: false)
            try await away.subscribe("load/#", qos: .atLeastOnce)
            await away.disconnect()
            let sender = try await connectedClient(broker)
            var generator = SystemRandomNumberGenerator()
            var sent: [[UInt8]] = []
            for index in 0..<3000 {
                let size = index % 500 == 7 ? 200 * 1024 : Int.random(in: 0...600, using: &generator)
                let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index) }
                sent.append(payload)
                try sender.publishWithoutWaiting(topic: "load/\(index % 10)", payload: payload, qos: .atLeastOnce)
            }
            #expect(await sender.flush(timeout: .seconds(30)))
            await sender.disconnect()
            let receiver = try await connectedClient(broker, id: id, cleanStart: false)
            let received = try await receive(receiver, count: sent.count, timeout: .seconds(60))
            #expect(received.map(\.payload) == sent)
            await receiver.disconnect()
            // The network thread has ended: its counters are final. libmosquitto asks for at least 3 reads per
            // message (its first byte, each byte of its length, the rest).
            let counters = receiver.readBuffer.counters
            #expect(counters.requestedReads >= 3 * 3000)
            #expect(counters.systemReads * 4 < counters.requestedReads)
            #expect(counters.skippedWakeups >= 3000)
        }
    }

    /// The payload of message `index` in ``connectionLostMidStream()``: its index, then bytes that depend on it.
    static func payload(_ index: Int) -> [UInt8] {
        Array("\(index):".utf8) + [UInt8](repeating: UInt8(index % 90 + 33), count: 150 + index % 300)
    }

    @Test("a connection lost in the middle of a flood: after the reconnect every message arrives intact")
    func connectionLostMidStream() async throws {
        try await withTestBroker { broker in
            let id = "drop-\(UUID().uuidString.prefix(8))"
            let away = try await connectedClient(broker, id: id, cleanStart: false)
            try await away.subscribe("load/#", qos: .atLeastOnce)
            await away.disconnect()
            let sender = try await connectedClient(broker)
            let count = 5000
            for index in 0..<count {
                try sender.publishWithoutWaiting(
                    topic: "load/\(index % 10)", payload: Self.payload(index), qos: .atLeastOnce)
            }
            #expect(await sender.flush(timeout: .seconds(30)))
            await sender.disconnect()
            // A small hand-over buffer keeps the network thread at most 100 messages ahead of this reader, so
            // the cuts below land while the broker is still sending, however loaded the machine is.
            let receiver = try await connectedClient(broker, id: id, cleanStart: false) { $0.bufferCapacity = 100 }
            // The connection is cut (as a dead network would) three times while the broker is still sending:
            // bytes of the lost connection may sit in the buffer, the next socket usually gets the same number,
            // and the persistent session sends the rest (and what was in flight, again) on it. With the reset on
            // reconnect removed, this test failed 7 runs of 7 (the stream never recovered); with one cut, 1 of 3.
            let (seen, malformed, cuts) = try await withThrowingTaskGroup(of: (Set<Int>, Int, Int).self) { group in
                group.addTask {
                    var seen = Set<Int>()
                    var malformed = 0
                    var iterator = receiver.messages.makeAsyncIterator()
                    let cuts = [300, 1500, 3000]
                    var cut = 0
                    while seen.count < count, let message = await iterator.next() {
                        if cut < cuts.count && seen.count >= cuts[cut] && receiver.reconnectCount == cut {
                            receiver.simulateNetworkFailure()
                            cut += 1
                        }
                        let digits = message.payload.prefix { $0 != UInt8(ascii: ":") }
                        let text = String(decoding: digits, as: UTF8.self)
                        if let index = Int(text), index < count, message.payload == Self.payload(index) {
                            seen.insert(index)
                        } else {
                            malformed += 1
                        }
                    }
                    return (seen, malformed, cut)
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(60))
                    throw TimedOut(what: "every message after the connection was lost")
                }
                let result = try await group.next()!
                group.cancelAll()
                return result
            }
            #expect(seen.count == count)
            #expect(malformed == 0)
            // A cut waits for the reconnect after the one before it: three cuts, two reconnects at least.
            #expect(cuts == 3)
            await receiver.disconnect()
        }
    }

    @Test("TLS: OpenSSL reads the socket, so nothing is buffered; wake-up bytes are still skipped; in order")
    func tlsIsNotBuffered() async throws {
        try await withTestBroker(TestBroker.Options(tls: true)) { broker in
            let client = try await connectedTLSClient(broker)
            try await client.subscribe("secure/#", qos: .atLeastOnce)
            for index in 0..<200 {
                try client.publishWithoutWaiting(topic: "secure/\(index)", payload: Array("\(index)".utf8))
            }
            let received = try await receive(client, count: 200, timeout: .seconds(30))
            #expect(received.map { String(decoding: $0.payload, as: UTF8.self) } == (0..<200).map(String.init))
            await client.disconnect()
            let counters = client.readBuffer.counters
            #expect(counters.requestedReads == 0)
            // One for each PUBACK the network thread queued while it read.
            #expect(counters.skippedWakeups >= 200)
        }
    }
}
