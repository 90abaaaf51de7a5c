/// G6: a grant a publish is made under. The caller (the worker, in etcd mode) opens a gate with a token (its etcd
/// lease) and the time the grant ends by this process's monotonic clock, and publishes what the grant covers with
/// that token. A gated publish leaves only while its token's gate is open: one still in the outbox or held back
/// (``OrderedResend``) when the gate closes is dropped, never handed to libmosquitto; and if one handed on is not
/// yet acknowledged when it closes, or when another token's gate replaces it, the connection is reset
/// (``MQTTClient/fence(now:announce:abort:)``), so that neither libmosquitto nor the kernel sends its bytes later.
/// What remains: a pause between the check and the `write` of the bytes, and bytes the network or the broker's
/// kernel already took (docs/model-check.md).
struct PublishGate: Equatable {
    var token: UInt64
    var until: ContinuousClock.Instant
    /// The network thread checked the gated publishes in flight against this gate since it was set (and reset the
    /// connection if one was no longer admitted).
    var checked = false
    /// The same, since the gate's end passed.
    var closeChecked = false

    /// Whether a publish made under `token` (0: ungated) may be handed to libmosquitto `now`.
    static func admits(_ token: UInt64, gate: PublishGate?, now: ContinuousClock.Instant) -> Bool {
        guard token != 0 else { return true }
        guard let gate, gate.token == token else { return false }
        return now < gate.until
    }
}
