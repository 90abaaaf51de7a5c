import Foundation
import RideDomain

import struct RideStatusKit.DeadLetter
import enum RideStatusKit.RidePhase
import struct RideStatusKit.RideStatus
import struct RideStatusKit.RideTopics

/// A fixed clock origin: 2026-11-22T09:50:00Z.
let t0 = Date(timeIntervalSince1970: 1_795_341_000)

let pickup = Coordinate(latitude: 52.5219, longitude: 13.4132)
let dropOff = Coordinate(latitude: 52.5096, longitude: 13.3759)

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func iso(_ date: Date) -> String { Timestamps.format(date) }

func bookingJSON(
    ride: String = "r-1", vehicle: String? = "v-1", extra: String = "",
    fare: String = #","fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#
) -> [UInt8] {
    let vehiclePart = vehicle.map { #""vehicleId":"\#($0)","# } ?? ""
    return bytes(
        #"{"rideIdentifier":"\#(ride)",\#(vehiclePart)"rideOption":{"name":"Compact","estimatedPickupDate":"\#(iso(t0.addingTimeInterval(480)))","priceRange":{"minimumPrice":"12.00","maximumPrice":"15.00","currencyCode":"EUR"},"fareLineItems":[{"title":"Base fare","price":"2.50","currencyCode":"EUR"}],"usesMeteredFare":true},"pickupLocation":{"latitude":52.5219,"longitude":13.4132,"name":"Alexanderplatz"},"dropOffLocation":{"latitude":52.5096,"longitude":13.3759},"waypoints":[],"vehicle":{"registrationPlate":"B-RS 1042","manufacturer":"Toyota","model":"Prius","mapAnnotationImage":"https://assets.example/cars/compact.png"},"driver":{"displayName":"Ada L.","phoneNumber":"+49 30 1234567","rating":"4.9"},"partySize":1\#(fare)\#(extra)}"#
    )
}

func fixJSON(
    vehicle: String = "v-1", at date: Date, _ coordinate: Coordinate, speed: Double? = nil, accuracy: Double? = 5
) -> [UInt8] {
    var text =
        #"{"vehicleId":"\#(vehicle)","timestamp":"\#(iso(date))","latitude":\#(coordinate.latitude),"longitude":\#(coordinate.longitude)"#
    if let speed { text += #","speed":\#(speed)"# }
    if let accuracy { text += #","horizontalAccuracy":\#(accuracy)"# }
    return bytes(text + "}")
}

/// A ride engine plus helpers that send contract messages at chosen times.
struct Harness {
    var engine: RideEngine
    let topics = RideTopics()

    init(configuration: RideConfiguration = RideConfiguration()) {
        engine = RideEngine(configuration: configuration)
    }

    @discardableResult
    mutating func send(_ topic: String, _ payload: [UInt8], at date: Date) -> [RideAction] {
        engine.receive(topic: topic, payload: payload, now: date)
    }

    @discardableResult
    mutating func start(ride: String = "r-1", vehicle: String? = "v-1", at date: Date = t0, fare: Bool = true)
        -> [RideAction]
    {
        send(
            topics.control(.start, ride: ride),
            fare ? bookingJSON(ride: ride, vehicle: vehicle) : bookingJSON(ride: ride, vehicle: vehicle, fare: ""),
            at: date)
    }

    @discardableResult
    mutating func fix(vehicle: String = "v-1", at date: Date, _ coordinate: Coordinate, speed: Double? = nil)
        -> [RideAction]
    {
        send(topics.position(vehicle: vehicle), fixJSON(vehicle: vehicle, at: date, coordinate, speed: speed), at: date)
    }

    @discardableResult
    mutating func event(_ type: String, ride: String = "r-1", at date: Date) -> [RideAction] {
        send(topics.control(.event, ride: ride), bytes(#"{"type":"\#(type)"}"#), at: date)
    }

    mutating func phase(_ ride: String = "r-1") -> RidePhase? { engine.rides[ride]?.phase }
}

extension [RideAction] {
    var statuses: [RideStatus] {
        compactMap { if case .publish(let status, _, _) = $0 { return status } else { return nil } }
    }
    var deadLetters: [DeadLetter] {
        compactMap { if case .deadLetter(let letter) = $0 { return letter } else { return nil } }
    }
    var reasons: [DeadLetter.Reason] { deadLetters.map(\.reason) }
}

/// A point `metres` from `origin` towards `target`.
func toward(_ origin: Coordinate, _ target: Coordinate, metres: Double) -> Coordinate {
    origin.moved(metres: metres, bearing: origin.bearing(to: target))
}
