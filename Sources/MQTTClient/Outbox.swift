/// Publishes handed over by other threads, in the order they were made, for the network thread to give
/// libmosquitto (``MQTTClient/drainOutbox(state:onNetworkThread:)``).
///
/// Before it, the publishing thread called libmosquitto itself, under the client's lock: libmosquitto
/// allocated each message's copies on that thread and freed them on the network thread once written, and the
/// two threads took the client's lock and libmosquitto's mutexes in turn for every status. At the
/// 100,000-ride cadence of `make bench-scale` (`perf record` of the worker, 20,000 statuses a second) the
/// publishing thread spent 11 % of the worker's time in glibc's `_int_malloc`, the network thread 7 % freeing,
/// and futex waits and wake-ups on those locks were another 20 %. Here a publish copies its topic and payload
/// into one growing byte buffer under the outbox's own lock, which nothing holds for more than a copy or a
/// swap; the network thread swaps the buffer for an empty one once per turn and publishes the batch, so
/// libmosquitto allocates and frees on one thread and the client's lock is taken once per batch. Measured in
/// docs/performance.md.
///
/// A plain value: the client keeps it behind its own lock and carries out what it returns.
struct Outbox {
    /// One publish: where its topic (followed by a NUL) and payload are in ``Batch/bytes``.
    struct Entry {
        var topic: Range<Int>
        var payload: Range<Int>
        var qos: MQTTQoS
        var retain: Bool
        var properties: MQTTProperties
        var waiter: CheckedContinuation<Void, any Error>?
        /// G6: the token of the gate it is made under, 0 for none (``PublishGate``).
        var gate: UInt64 = 0
    }

    /// Publishes and the bytes they point into. The network thread hands back an emptied batch in each swap,
    /// so both buffers keep their capacity and a steady stream allocates nothing here.
    struct Batch {
        var bytes: [UInt8] = []
        var entries: [Entry] = []

        mutating func removeAll() {
            // A batch with a very large payload does not keep its memory for the client's life.
            bytes.removeAll(keepingCapacity: bytes.capacity <= Outbox.keptCapacity)
            entries.removeAll(keepingCapacity: true)
        }

        /// The topic of `entry`, as a Swift string (only a publish that must be held needs one).
        func topic(of entry: Entry) -> String { String(decoding: bytes[entry.topic], as: UTF8.self) }
    }

    private(set) var batch = Batch()
    /// How many more publishes libmosquitto may take now, as the network thread last counted them (0 while
    /// disconnected or holding): ``MQTTClient/publishRoom`` subtracts what waits here.
    var room = 0
    /// Set once the client stops: publishes fail at once with it.
    var closed: MQTTError?
    /// The broker's Maximum Packet Size from the last CONNACK that carried one (MQTT 5), 0 for none.
    var maximumPacketSize = 0
    /// The broker's Maximum QoS from the last CONNACK that carried one; 2 (libmosquitto's start) until then.
    var maximumQoS = 2

    /// Bytes a buffer keeps between batches: 4 MiB, about 3,000 statuses.
    static let keptCapacity = 4 << 20

    var count: Int { batch.entries.count }

    /// Queues a publish; returns whether the outbox was empty before it (then the network thread needs waking).
    mutating func append(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTProperties,
        waiter: CheckedContinuation<Void, any Error>?, gate: UInt64 = 0
    ) -> Bool {
        let wasEmpty = batch.entries.isEmpty
        let topicStart = batch.bytes.count
        var topic = topic
        topic.withUTF8 { batch.bytes.append(contentsOf: $0) }
        let topicEnd = batch.bytes.count
        batch.bytes.append(0)
        let payloadStart = batch.bytes.count
        batch.bytes.append(contentsOf: payload)
        batch.entries.append(
            Entry(
                topic: topicStart..<topicEnd, payload: payloadStart..<batch.bytes.count, qos: qos, retain: retain,
                properties: properties, waiter: waiter, gate: gate))
        return wasEmpty
    }

    /// Takes every queued publish, leaving `spare` (emptied) in its place. The room shrinks by what was taken
    /// until the network thread counts it again, so a publisher never sees the batch's places as free.
    mutating func take(swappingWith spare: inout Batch) {
        spare.removeAll()
        swap(&batch, &spare)
        room = max(0, room - spare.entries.count)
    }

    /// The size of a PUBLISH as libmosquitto's `send__publish` counts it against the broker's Maximum Packet
    /// Size (without the fixed header's first byte): known here, a publish libmosquitto would refuse for its
    /// size throws at once, as it did when the caller's thread called libmosquitto, so that the worker never
    /// publishes a status whose durable state was refused (C5, L5).
    static func packetSize(topicBytes: Int, payloadBytes: Int, qos: MQTTQoS, properties: MQTTProperties?) -> Int {
        func varint(_ value: Int) -> Int { value < 128 ? 1 : value < 16_384 ? 2 : value < 2_097_152 ? 3 : 4 }
        var length = 2 + topicBytes + payloadBytes + (qos == .atMostOnce ? 0 : 2)
        if let properties {
            // Each property: its identifier (one byte), then its value (strings and binary with a 2-byte length).
            var list = 0
            if let topic = properties.responseTopic { list += 3 + topic.utf8.count }
            if let data = properties.correlationData { list += 3 + data.count }
            if properties.messageExpiry != nil { list += 5 }
            if let type = properties.contentType { list += 3 + type.utf8.count }
            for (name, value) in properties.userProperties { list += 5 + name.utf8.count + value.utf8.count }
            length += varint(list) + list
        }
        return length + varint(length)
    }
}
