/// How a status maps onto SiriKit (`INRideStatus`), as pure tables that build and are tested everywhere;
/// `RideStatus+Intents.swift` applies them where the Intents framework exists.
public enum IntentsMapping {
    /// `INRidePhase`'s raw values (Apple's SDK headers): unknown 0, received 1, confirmed 2, ongoing 3,
    /// completed 4, approachingPickup 5, pickup 6. The contract never sends unknown.
    public static func phaseRawValue(_ phase: RidePhase) -> Int {
        switch phase {
        case .received: return 1
        case .confirmed: return 2
        case .ongoing: return 3
        case .completed: return 4
        case .approachingPickup: return 5
        case .pickup: return 6
        }
    }

    /// The phase for an `INRidePhase` raw value; nil for unknown (0) and values SiriKit does not define.
    public static func phase(rawValue: Int) -> RidePhase? {
        RidePhase.allCases.first { phaseRawValue($0) == rawValue }
    }

    /// Which `INRideCompletionStatus` factory a completion status stands for.
    public enum Completion: Sendable, Hashable {
        /// `completed()`, or `completed(feedbackType:)` when feedback is asked for.
        case completed(feedback: [CompletionStatus.FeedbackType])
        /// `completed(settled:)`: paid.
        case settled(Money)
        /// `completed(outstanding:)`: payment still due.
        case outstanding(Money)
        /// `canceledByUser()`.
        case canceledByUser
        /// `canceledByService()`.
        case canceledByService
        /// `canceledMissedPickup()`.
        case canceledMissedPickup
    }

    /// The factory for a completion status (V3): a missed pickup before a cancellation, a cancellation before a
    /// completion; a payment settles unless it is outstanding.
    public static func completion(_ status: CompletionStatus) -> Completion {
        if status.missedPickup { return .canceledMissedPickup }
        if status.canceled { return status.canceledBy == .user ? .canceledByUser : .canceledByService }
        if let payment = status.paymentAmount { return status.outstanding ? .outstanding(payment) : .settled(payment) }
        return .completed(feedback: status.feedbackType)
    }
}
