import Foundation

public import struct RideStatusKit.Booking
public import struct RideStatusKit.FareLineItem
public import struct RideStatusKit.PartySizeOption
public import struct RideStatusKit.Place
public import struct RideStatusKit.PriceRange
public import struct RideStatusKit.RideOption
public import struct RideStatusKit.ScheduledPickupTime

/// The parts of a booking that never change during the ride and that its statuses and fare need. The
/// vehicle, driver and vehicle position are copied into the ride (they change on `assign` and with fixes),
/// so the ride does not keep a second copy of them. State written with a whole booking still decodes.
///
/// Every active ride keeps one, so the ride option and the fare are stored compactly: an option that carries
/// only its name and pickup estimate (as most bookings do) takes 24 bytes instead of 168, and a fare is a
/// pointer instead of 80 bytes inline.
public struct BookingTerms: Sendable, Equatable {
    public let rideIdentifier: String
    private let option: OptionStorage
    public var rideOption: RideOption { option.value }
    public let pickupLocation: Place
    public let dropOffLocation: Place
    public let waypoints: [Place]
    public let scheduledPickupTime: ScheduledPickupTime?
    /// The party size (1...100 at intake), or nil.
    public var partySize: Int? { storedPartySize == 0 ? nil : Int(storedPartySize) }
    private let fareBox: Shared<FareTerms>?
    public var fare: FareTerms? { fareBox?.value }
    /// E2: the route the vehicle drives, from `assign` or `rides/{ride}/route`; nil without one, or once the car
    /// left it (``Ride/advanceOnRoute(_:seconds:)``).
    package var route: RouteTrack?
    /// The party size in two bytes, 0 for none, last: with `Int?` (16 bytes) and the route the box grew out of
    /// malloc's 224-byte class into the 240-byte one, 16 bytes a ride.
    private let storedPartySize: UInt16

    private enum OptionStorage: Sendable, Equatable {
        /// An option with nothing but its name and pickup estimate.
        case named(String, pickup: Date)
        case full(Shared<RideOption>)

        init(_ option: RideOption) {
            let minimal = RideOption(name: option.name, estimatedPickupDate: option.estimatedPickupDate)
            self = option == minimal ? .named(option.name, pickup: option.estimatedPickupDate) : .full(Shared(option))
        }

        var value: RideOption {
            switch self {
            case .named(let name, let pickup): return RideOption(name: name, estimatedPickupDate: pickup)
            case .full(let option): return option.value
            }
        }
    }

    /// What a ride keeps of `booking`, with the fare it pays (the booking's own, or its catalog option's).
    public init(_ booking: Booking, fare: FareTerms?) {
        self.init(
            rideIdentifier: booking.rideIdentifier, rideOption: booking.rideOption,
            pickupLocation: booking.pickupLocation, dropOffLocation: booking.dropOffLocation,
            waypoints: booking.waypoints ?? [], scheduledPickupTime: booking.scheduledPickupTime,
            partySize: booking.partySize, fare: fare)
    }

    init(
        rideIdentifier: String, rideOption: RideOption, pickupLocation: Place, dropOffLocation: Place,
        waypoints: [Place], scheduledPickupTime: ScheduledPickupTime?, partySize: Int?, fare: FareTerms?
    ) {
        self.rideIdentifier = rideIdentifier
        option = OptionStorage(rideOption)
        self.pickupLocation = pickupLocation
        self.dropOffLocation = dropOffLocation
        self.waypoints = waypoints
        self.scheduledPickupTime = scheduledPickupTime
        self.storedPartySize = partySize.map { UInt16(clamping: max(0, $0)) } ?? 0
        fareBox = fare.map(Shared.init)
    }
}

// The durable state's field names (L5), as they were when these were stored properties.
extension BookingTerms: Decodable {
    private enum CodingKeys: String, CodingKey {
        case rideIdentifier, rideOption, pickupLocation, dropOffLocation, waypoints, scheduledPickupTime, partySize
        case fare
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            rideIdentifier: try container.decode(String.self, forKey: .rideIdentifier),
            rideOption: try container.decode(RideOption.Durable.self, forKey: .rideOption).value,
            pickupLocation: try container.decode(Place.Durable.self, forKey: .pickupLocation).value,
            dropOffLocation: try container.decode(Place.Durable.self, forKey: .dropOffLocation).value,
            waypoints: try container.decode([Place.Durable].self, forKey: .waypoints).map(\.value),
            scheduledPickupTime: try container.decodeIfPresent(ScheduledPickupTime.self, forKey: .scheduledPickupTime),
            partySize: try container.decodeIfPresent(Int.self, forKey: .partySize),
            fare: try container.decodeIfPresent(FareTerms.self, forKey: .fare))
    }
}
