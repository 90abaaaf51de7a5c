public import Foundation

/// When `ride-push` makes a new APNs provider token (an ES256 JWT naming the team and the key). APNs refuses a
/// token older than an hour (`ExpiredProviderToken`) and one renewed within 20 minutes of the last
/// (`TooManyProviderTokenUpdates`). Pure, on injected time: the signer asks ``needsNewToken(now:)`` before each
/// request and reports ``made(at:)``.
public struct ProviderTokenPolicy: Sendable, Equatable {
    /// APNs refuses a new token sooner than this after the last one.
    public static let minimumAge: TimeInterval = 20 * 60
    /// APNs refuses a token older than this.
    public static let maximumAge: TimeInterval = 60 * 60

    /// When a token is replaced in the normal course: well inside APNs's window, so that a clock a few minutes
    /// off on either side does neither harm.
    public let renewalAge: TimeInterval
    public private(set) var issuedAt: Date?
    /// APNs called the token expired before ``minimumAge``: the next token waits for it, and the clock of this
    /// host or of APNs is off (a metric and a log line say so).
    public private(set) var expiredEarly = false

    /// - Parameter renewalAge: seconds, clamped to APNs's 20 to 60 minutes less a margin of 5 minutes each side.
    public init(renewalAge: TimeInterval = 40 * 60) {
        self.renewalAge = min(max(renewalAge, Self.minimumAge + 300), Self.maximumAge - 300)
    }

    /// Whether the next request needs a new token: there is none yet, or the current one reached ``renewalAge``.
    public func needsNewToken(now: Date) -> Bool {
        guard let issuedAt else { return true }
        return now.timeIntervalSince(issuedAt) >= renewalAge
    }

    /// A token was made at `now`.
    public mutating func made(at now: Date) {
        issuedAt = now
        expiredEarly = false
    }

    /// APNs answered `ExpiredProviderToken`. A token at least ``minimumAge`` old is replaced at once; a younger
    /// one cannot be (APNs would refuse the renewal too), so it stays until it is, and ``expiredEarly`` is set.
    /// - Returns: whether to make a new token now.
    public mutating func expired(now: Date) -> Bool {
        guard let issuedAt else { return true }
        if now.timeIntervalSince(issuedAt) >= Self.minimumAge {
            self.issuedAt = nil
            return true
        }
        expiredEarly = true
        return false
    }
}
