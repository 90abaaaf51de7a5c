/// A device that shows a ride on its lock screen: a Live Activity's push token (APNs) or an app's registration
/// token (FCM). The token is a secret of the rider's device: it is never logged, and nothing prints it
/// (``description`` names the device by a short digest instead).
public struct PushDevice: Sendable, Hashable, CustomStringConvertible {
    /// Where the device's pushes go.
    public enum Service: String, Sendable, Hashable, Codable, CaseIterable {
        /// Apple Push Notification service: a Live Activity's push token (`pushTokenUpdates`), hex.
        case apns
        /// Firebase Cloud Messaging HTTP v1: an Android app's registration token.
        case fcm
    }

    /// Why a token is refused at registration.
    public enum Problem: String, Error, Sendable, Equatable {
        /// Empty, longer than ``maximumTokenBytes``, or (for APNs) not an even number of hex digits.
        case malformedToken
    }

    public let service: Service
    public let token: String

    /// The longest token accepted, bytes. APNs tokens are 32 to 100 bytes as hex; FCM's are about 160 characters.
    public static let maximumTokenBytes = 512

    public init(service: Service, token: String) throws(Problem) {
        let bytes = token.utf8
        guard !bytes.isEmpty, bytes.count <= Self.maximumTokenBytes else { throw .malformedToken }
        switch service {
        case .apns:
            guard bytes.count % 2 == 0, bytes.allSatisfy(Self.isHexDigit) else { throw .malformedToken }
        case .fcm:
            // Printable ASCII without spaces: FCM's tokens are URL-safe base64 with `:` and `-`.
            guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .malformedToken }
        }
        self.service = service
        self.token = service == .apns ? token.lowercased() : token
    }

    /// `apns device 3f2a91c0`: the service and an FNV-1a digest of the token, enough to follow one device through
    /// the logs without the token itself.
    public var description: String { "\(service.rawValue) device \(digest)" }

    /// Eight hex digits of the token's FNV-1a hash (not a secret-keeping hash: 32 bits tell nothing usable of a
    /// token of 256 bits or more).
    public var digest: String {
        var hash: UInt32 = 0x811C_9DC5
        for byte in token.utf8 {
            hash ^= UInt32(byte)
            hash &*= 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
}
