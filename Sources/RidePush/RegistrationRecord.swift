import Crypto
import Foundation
import RideStatusKit

/// A registration as the broker keeps it, retained on `{service}/push/devices/{ride}/{key}`:
/// `{"service":"apns","token":"…","expires":"2026-11-28T01:00:00Z"}`. Only `ride-push` may read or write these
/// topics (the broker's `push` role): the record holds the push token, a secret of the rider's device.
extension PushGroup.Record {
    /// Why a record read back from the broker is not taken (A2: the broker is an input like any other).
    public enum Problem: String, Error, Sendable, Equatable {
        /// Not the record's JSON, or a field missing or of the wrong type.
        case malformedRecord
        /// A token the registration API would have refused.
        case malformedToken
        /// The topic's key is not the digest of the record's token: a record written by hand or for another
        /// device.
        case keyMismatch
    }

    private struct Wire: Codable {
        var service: PushDevice.Service
        var token: String
        var expires: Date
    }

    /// The record's payload.
    public func encoded() -> [UInt8] {
        // Only strings and a date: encoding cannot fail.
        let data =
            (try? JSONEncoder.rideStatus.encode(Wire(service: device.service, token: device.token, expires: expires)))
        return data.map { Array($0) } ?? []
    }

    /// A record read from the broker on the topic of `key`.
    public init(payload: [UInt8], key: String) throws(Problem) {
        guard let wire = try? JSONDecoder.rideStatus.decode(Wire.self, from: Data(payload)) else {
            throw .malformedRecord
        }
        let device: PushDevice
        do {
            device = try PushDevice(service: wire.service, token: wire.token)
        } catch {
            throw .malformedToken
        }
        guard device.recordKey == key else { throw .keyMismatch }
        self.init(device: device, expires: wire.expires)
    }
}

extension PushDevice {
    /// The topic level of this device's registration record: 32 hex digits of the SHA-256 of its service and
    /// token. It names the device in the broker without the token, and one device cannot take another's
    /// record.
    public var recordKey: String {
        let digest = SHA256.hash(data: Data("\(service.rawValue):\(token)".utf8))
        return digest.prefix(16).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
