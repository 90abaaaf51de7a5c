import Foundation

import struct RideStatusKit.CompletionStatus
import struct RideStatusKit.Driver
import struct RideStatusKit.FareLineItem
import struct RideStatusKit.PartySizeOption
import struct RideStatusKit.Place
import struct RideStatusKit.PriceRange
import struct RideStatusKit.RideOption
import enum RideStatusKit.RidePhase
import struct RideStatusKit.VehicleLocation

// MARK: - Durable state (L5): the contract's values in the shapes every release stored them

// The durable state keeps the shapes values had when the domain stored them with `Codable`: coordinates nested under
// `coordinate`, party sizes flat. The contract's types read the wire's shapes; these read the stored ones.

extension Place {
    /// A place as the durable state keeps it: `{"coordinate": {"latitude", "longitude"}, "name", "address"}`.
    struct Durable: Decodable {
        var value: Place

        private enum CodingKeys: String, CodingKey { case coordinate, name, address }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            value = Place(
                coordinate: try container.decode(Coordinate.self, forKey: .coordinate),
                name: try container.decodeIfPresent(String.self, forKey: .name),
                address: try container.decodeIfPresent(String.self, forKey: .address))
        }
    }
}

extension VehicleLocation {
    /// A position as the durable state keeps it: the coordinate nested, as a place's.
    struct Durable: Decodable {
        var value: VehicleLocation

        private enum CodingKeys: String, CodingKey { case coordinate, course, speed, horizontalAccuracy, timestamp }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            value = VehicleLocation(
                coordinate: try container.decode(Coordinate.self, forKey: .coordinate),
                course: try container.decodeIfPresent(Double.self, forKey: .course),
                speed: try container.decodeIfPresent(Double.self, forKey: .speed),
                horizontalAccuracy: try container.decodeIfPresent(Double.self, forKey: .horizontalAccuracy),
                timestamp: try container.decode(Date.self, forKey: .timestamp))
        }
    }
}

extension RideOption {
    /// An option as the durable state keeps it (L5): the contract's option, with its party sizes flat (`location`
    /// and `length` beside `sizeDescription`, as every release wrote them) rather than in a `partySizeRange`.
    struct Durable: Decodable {
        var value: RideOption

        private enum CodingKeys: String, CodingKey {
            case name, localizedName, estimatedPickupDate, priceRange, disclaimerMessage, fareLineItems
            case usesMeteredFare, specialPricing, availablePartySizeOptions, availablePartySizeOptionsSelectionPrompt
            case expirationDate
        }

        private struct PartySize: Decodable {
            var location: Int
            var length: Int
            var sizeDescription: String
            var priceRange: PriceRange?
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let sizes = try container.decodeIfPresent([PartySize].self, forKey: .availablePartySizeOptions)
            value = RideOption(
                name: try container.decode(String.self, forKey: .name),
                localizedName: try container.decodeIfPresent(String.self, forKey: .localizedName),
                estimatedPickupDate: try container.decode(Date.self, forKey: .estimatedPickupDate),
                priceRange: try container.decodeIfPresent(PriceRange.self, forKey: .priceRange),
                disclaimerMessage: try container.decodeIfPresent(String.self, forKey: .disclaimerMessage),
                fareLineItems: try container.decodeIfPresent([FareLineItem].self, forKey: .fareLineItems) ?? [],
                usesMeteredFare: try container.decodeIfPresent(Bool.self, forKey: .usesMeteredFare),
                specialPricing: try container.decodeIfPresent(String.self, forKey: .specialPricing),
                availablePartySizeOptions: sizes?.map {
                    PartySizeOption(
                        partySizeRange: .init(location: $0.location, length: $0.length),
                        sizeDescription: $0.sizeDescription, priceRange: $0.priceRange)
                },
                availablePartySizeOptionsSelectionPrompt: try container.decodeIfPresent(
                    String.self, forKey: .availablePartySizeOptionsSelectionPrompt),
                expirationDate: try container.decodeIfPresent(Date.self, forKey: .expirationDate))
        }
    }
}
