public import Foundation

#if canImport(ActivityKit) && os(iOS)
    public import ActivityKit
#endif

/// The rider's lock screen: what a Live Activity on iPhone (ActivityKit) or a Live Update on Android
/// shows of a ride, made from its status. The attributes are fixed for the activity's life; the content state
/// changes with each status. Plain Swift, so that the kit builds on Linux for the push service.
public struct RideActivityAttributes: Sendable, Hashable, Codable {
    public var rideIdentifier: String
    /// The pickup's and drop-off's names, when the booking gave them.
    public var pickupName: String?
    public var dropOffName: String?
    /// The ride option as the rider booked it (its localized name when it has one).
    public var rideOption: String

    public init(rideIdentifier: String, pickupName: String?, dropOffName: String?, rideOption: String) {
        self.rideIdentifier = rideIdentifier
        self.pickupName = pickupName
        self.dropOffName = dropOffName
        self.rideOption = rideOption
    }

    /// The activity's attributes from a ride's first status, each text cut to ``ContentState/textLimit`` bytes.
    public init(status: RideStatus) {
        self.init(
            rideIdentifier: status.rideIdentifier,
            pickupName: status.pickupLocation.name.map { ContentState.cut($0) },
            dropOffName: status.dropOffLocation.name.map { ContentState.cut($0) },
            rideOption: ContentState.cut(status.rideOption.localizedName ?? status.rideOption.name))
    }

    /// What the lock screen shows now.
    public struct ContentState: Sendable, Hashable, Codable {
        public var phase: RidePhase
        /// The next arrival: the pickup's before the car is there, the drop-off's from then on; none once the ride
        /// has ended.
        public var estimatedArrival: Date?
        /// The latest the arrival is expected (a range's end), once the worker publishes one; nil until then.
        public var estimatedArrivalLatest: Date?
        /// The vehicle's manufacturer and model, and its plate. (The contract's status carries no colour.)
        public var vehicleModel: String?
        public var registrationPlate: String?
        public var driverName: String?
        /// From 0 (booked) to 1 (arrived at the drop-off), for a progress bar (``progress(of:)``).
        public var progress: Double
        /// How the ride ended, once it has.
        public var ending: Ending?
        /// The car has not reported lately (C3): the lock screen should say so rather than show it moving.
        public var stale: Bool
        /// The status's sequence and time (C5): a state never replaces a newer one.
        public var sequence: Int
        public var issuedAt: Date

        public enum Ending: String, Sendable, Hashable, Codable {
            case completed, canceled, missedPickup
        }

        /// The most bytes of UTF-8 any text of the lock screen keeps: with every text at this length, an APNs
        /// update stays under its 4 KB (``LiveActivityPush``).
        public static let textLimit = 120

        public init(status: RideStatus) {
            phase = status.phase
            let completion = status.completionStatus
            ending =
                completion.map { completion in
                    if completion.canceled { return .canceled }
                    if completion.missedPickup { return .missedPickup }
                    return completion.completed ? .completed : nil
                } ?? nil
            if ending != nil || status.phase == .completed {
                estimatedArrival = nil
                estimatedArrivalLatest = nil
            } else if [.received, .confirmed, .approachingPickup].contains(status.phase) {
                estimatedArrival = status.estimatedPickupDate ?? status.rideOption.estimatedPickupDate
                estimatedArrivalLatest = status.estimatedPickupDateLatest
            } else {
                estimatedArrival = status.estimatedDropOffDate
                estimatedArrivalLatest = status.estimatedDropOffDateLatest
            }
            let model = [status.vehicle.manufacturer, status.vehicle.model].compactMap { $0 }.joined(separator: " ")
            vehicleModel = model.isEmpty ? nil : Self.cut(model)
            registrationPlate = status.vehicle.registrationPlate.map { Self.cut($0) }
            driverName = status.driver?.displayName.map { Self.cut($0) }
            progress = Self.progress(of: status)
            stale = status.stale
            sequence = status.sequence
            issuedAt = status.issuedAt
        }

        /// Progress by phase, and within the drive to the pickup and the ride by distance: received 0, confirmed
        /// 0.1, approaching 0.25 to 0.45 as the car nears the pickup (within 1 km), at the pickup 0.5, riding 0.5 to
        /// 1 as the remaining great-circle distance to the drop-off shrinks against the pickup's, completed 1.
        public static func progress(of status: RideStatus) -> Double {
            let car = status.vehicle.location.map { Place(latitude: $0.latitude, longitude: $0.longitude) }
            switch status.phase {
            case .received: return 0
            case .confirmed: return 0.1
            case .approachingPickup:
                guard let car else { return 0.25 }
                return 0.25 + 0.2 * (1 - min(1, metres(car, status.pickupLocation) / 1000))
            case .pickup: return 0.5
            case .ongoing:
                let leg = metres(status.pickupLocation, status.dropOffLocation)
                guard let car, leg > 1 else { return 0.5 }
                return 0.5 + 0.5 * max(0, min(1, 1 - metres(car, status.dropOffLocation) / leg))
            case .completed: return 1
            }
        }

        /// Great-circle metres (haversine): RideDomain has its own, but the kit depends on nothing of the worker.
        static func metres(_ a: Place, _ b: Place) -> Double {
            let radians = Double.pi / 180
            let dLat = (b.latitude - a.latitude) * radians
            let dLon = (b.longitude - a.longitude) * radians
            let h =
                sin(dLat / 2) * sin(dLat / 2)
                + cos(a.latitude * radians) * cos(b.latitude * radians) * sin(dLon / 2) * sin(dLon / 2)
            return 2 * 6_371_000 * asin(min(1, h.squareRoot()))
        }

        /// `text` cut to at most `limit` bytes of UTF-8, on a character's boundary.
        public static func cut(_ text: String, limit: Int = textLimit) -> String {
            guard text.utf8.count > limit else { return text }
            var kept = ""
            var bytes = 0
            for character in text {
                let size = character.utf8.count
                guard bytes + size <= limit else { break }
                kept.append(character)
                bytes += size
            }
            return kept
        }
    }
}

#if canImport(ActivityKit) && os(iOS)
    /// ActivityKit decodes `content-state` with `JSONDecoder`'s default dates (seconds since 2001), as
    /// ``LiveActivityPush`` encodes them. Not compiled on Linux, where the kit is tested.
    extension RideActivityAttributes: ActivityAttributes {}
#endif

/// An APNs push for a ride's Live Activity: the whole JSON body of a `liveactivity` push, under
/// APNs's 4 KB. `content-state` uses `JSONEncoder`'s default date encoding (seconds since 1 January 2001),
/// which is what ActivityKit decodes with; every other date is seconds since 1970, as APNs wants.
public enum LiveActivityPush {
    /// APNs's limit on a Live Activity push's payload, bytes.
    public static let maximumBytes = 4096

    public enum Event: String, Sendable { case update, end }

    /// The payload's bytes.
    /// - Parameters:
    ///   - timestamp: the status's `issuedAt`: APNs keeps only the newest per activity.
    ///   - staleDate: when the lock screen should show the state as out of date, if no newer push came.
    ///   - relevanceScore: which of the rider's activities the Dynamic Island shows first.
    ///   - dismissalDate: for an `end`, when the ended activity leaves the lock screen.
    public static func payload(
        _ state: RideActivityAttributes.ContentState, event: Event, timestamp: Date, staleDate: Date?,
        relevanceScore: Double, dismissalDate: Date? = nil
    ) throws -> [UInt8] {
        struct APS: Encodable {
            var timestamp: Int
            var event: String
            var contentState: RideActivityAttributes.ContentState
            var staleDate: Int?
            var relevanceScore: Double
            var dismissalDate: Int?
            enum CodingKeys: String, CodingKey {
                case timestamp, event
                case contentState = "content-state"
                case staleDate = "stale-date"
                case relevanceScore = "relevance-score"
                case dismissalDate = "dismissal-date"
            }
        }
        struct Body: Encodable { var aps: APS }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = Body(
            aps: APS(
                timestamp: Int(timestamp.timeIntervalSince1970), event: event.rawValue, contentState: state,
                staleDate: staleDate.map { Int($0.timeIntervalSince1970) }, relevanceScore: relevanceScore,
                dismissalDate: dismissalDate.map { Int($0.timeIntervalSince1970) }))
        return Array(try encoder.encode(body))
    }
}
