import CMosquittoIO

/// The network thread's read buffer under libmosquitto (`mosquitto_io.h`): while the thread reads, each of
/// libmosquitto's small reads of the connection (one per byte of a packet's header) is served from one large
/// `read`, and the wake-up byte libmosquitto writes to its own socket pair for each packet queued meanwhile
/// (each PUBACK; the client never reads that pair) is not written.
///
/// Measured on the drain of `make bench-e2e` (151,000 queued QoS 1 fixes, `perf stat` of the worker's system
/// calls over the drain): 7.4 system calls per received message without, 1.1 with (docs/performance.md).
///
/// Without the patch (``MQTTConfiguration/interposeIO`` off, libmosquitto linked statically, an import it does
/// not have, or a platform where `CMosquittoIO` does not build it) nothing is buffered and libmosquitto reads
/// and wakes as it always did: ``MQTTClient/ioInterposition`` says which.
final class SocketReadBuffer: @unchecked Sendable {
    // Safe because only the network thread uses it; the client (which owns it) is released only after that
    // thread has ended, since the thread holds the client.
    private let buffer: OpaquePointer?
    /// Whether this client's reads and wake-ups go through the patch.
    let interposition: MQTTIOInterposition

    /// 0 when libmosquitto's `read` or `write` (on Debian's libmosquitto both) go through this module, else the
    /// reason neither does (`mosquitto_io_install`). Patched once per process, by the first client that asks.
    static let installation: Int32 = mosquitto_io_install()

    /// Bytes read at once: about 250 fixes. A read libmosquitto asks for that is at least as large, made while
    /// nothing is buffered, goes straight into its packet.
    static let capacity = 64 * 1024

    /// - Parameter enabled: false leaves libmosquitto unpatched (unless another client in the process asked).
    init(enabled: Bool) {
        if !enabled {
            interposition = .disabled
        } else if Self.installation == 0 {
            interposition = .installed
        } else {
            interposition = .unavailable(reason: Self.reason(Self.installation))
        }
        buffer = interposition == .installed ? mosquitto_io_buffer_create(Self.capacity) : nil
    }

    /// `mosquitto_io_install`'s reasons, in words.
    static func reason(_ code: Int32) -> String {
        switch code {
        case 1: "libmosquitto is not loaded as a shared library"
        case 2: "libmosquitto's dynamic section cannot be read"
        case 3: "libmosquitto imports neither read nor write"
        case 4: "libmosquitto's import table could not be made writable"
        case 5: "not built here (Linux with glibc on x86-64 or arm64 only, and not the UnbufferedIO trait)"
        default: "code \(code)"
        }
    }

    deinit {
        if let buffer { mosquitto_io_buffer_destroy(buffer) }
    }

    /// A new connection (or none): forgets what the old one left unread; reads of `socket` are buffered from
    /// now on (-1: nothing is, for TLS, where OpenSSL reads the socket).
    func reset(socket: Int32) {
        if let buffer { mosquitto_io_buffer_reset(buffer, socket) }
    }

    /// Bytes read from the connection that libmosquitto has not taken yet.
    var pendingBytes: Int {
        guard let buffer else { return 0 }
        return mosquitto_io_buffer_pending(buffer)
    }

    /// libmosquitto's reads (and requests) and the system calls made for them.
    var counters: (requestedReads: UInt64, systemReads: UInt64, skippedWakeups: UInt64) {
        guard let buffer else { return (0, 0, 0) }
        let counters = mosquitto_io_buffer_counters(buffer)
        return (counters.requested_reads, counters.system_reads, counters.skipped_wakeups)
    }

    /// Runs `body` (libmosquitto queueing a packet; the client marks its publishes) without libmosquitto's
    /// wake-up byte, on any thread: the caller signals ``NetworkWake``, once per batch of packets. Measured
    /// at the cadence of `make bench-scale`: docs/performance.md.
    func queueing<Result>(_ body: () -> Result) -> Result {
        guard interposition == .installed else { return body() }
        let before = mosquitto_io_queueing(1)
        defer { mosquitto_io_queueing(before) }
        return body()
    }

    /// Runs `body` (a `mosquitto_loop_read`) with this thread's reads going through the buffer.
    func reading<Result>(_ body: () -> Result) -> Result {
        guard let buffer else { return body() }
        let before = mosquitto_io_enter(buffer)
        defer { mosquitto_io_enter(before) }
        return body()
    }
}

/// Whether a client's reads and wake-ups go through `CMosquittoIO`'s patch of libmosquitto.
public enum MQTTIOInterposition: Sendable, Equatable, CustomStringConvertible {
    /// Patched: reads buffered, wake-up bytes skipped.
    case installed
    /// Turned off by ``MQTTConfiguration/interposeIO``.
    case disabled
    /// Asked for, but not possible here; the reason in words.
    case unavailable(reason: String)

    public var description: String {
        switch self {
        case .installed: "installed"
        case .disabled: "disabled by the configuration"
        case .unavailable(let reason): "unavailable: \(reason)"
        }
    }
}
