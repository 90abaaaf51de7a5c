import FleetModel
import Foundation
import RideDomain
import RideJSON

import struct RideStatusKit.RideTopics

// MARK: - The simulated dispatcher: quotes (3.4) and bookings

extension World {
    /// A quote reply for the ride in `correlationData` (3.4).
    mutating func receiveQuote(correlationData: [UInt8], payload: [UInt8]) {
        let ride = String(decoding: correlationData, as: UTF8.self)
        guard quoteReplies_[ride] == nil else { return }
        quotesAnswered += 1
        quoteReplies_[ride] = payload
    }

    /// Asks `ride-options/request` what is on offer for a ride from near the vehicle (3.4); some riders
    /// ask in German, so they book by a localized name.
    mutating func askForOptions(_ vehicle: inout Vehicle, now: Date, into out: inout [OutgoingMessage]) {
        rideCounter += 1
        let ride = "\(ridePrefix)\(rideCounter)"
        let pickup: Coordinate
        var dropOff: Coordinate
        if let streets {
            // On real streets: the engine's route to the pickup is asked for now, and comes with the assignment.
            pickup = streets.place(from: vehicle.position, metres: 400...1500, random: &random)
            dropOff = streets.place(from: pickup, metres: 500...3000, random: &random)
            askRoute("\(ride)/pickup", from: vehicle.position, to: pickup)
        } else {
            pickup = vehicle.position.moved(
                metres: Double.random(in: 400...1500, using: &random),
                bearing: Double.random(in: 0..<360, using: &random))
            dropOff = randomPlace()
            if dropOff.distance(to: pickup) < 500 {
                dropOff = pickup.moved(metres: 1500, bearing: Double.random(in: 0..<360, using: &random))
            }
        }
        dropOffs[vehicle.id] = dropOff
        let partySize = vehicle.option == "Compact" ? 1 : Int.random(in: 1...3, using: &random)
        let locale = Double.random(in: 0..<1, using: &random) < 0.3 ? #","locale":"de""# : ""
        let request =
            #"{"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude)},"dropOffLocation":{"latitude":\#(dropOff.latitude),"longitude":\#(dropOff.longitude)},"partySize":\#(partySize)\#(locale)}"#
        if let quoteReplies {
            out.append(
                OutgoingMessage(
                    topic: topics.rideOptionsRequest, payload: Array(request.utf8), control: true,
                    responseTopic: quoteReplies, correlationData: Array(ride.utf8)))
            quotesAsked += 1
        }
        out.append(
            OutgoingMessage(
                topic: topics.availability(vehicle: vehicle.id), payload: Array(#"{"available":false}"#.utf8),
                control: true, retain: true))
        vehicle.ride = ride
        // Without quotes, the rider books at the next tick.
        let deadline = now.addingTimeInterval(quoteReplies == nil ? 0 : 3)
        vehicle.stage = .quoting(ride: ride, pickup: pickup, partySize: partySize, deadline: deadline)
    }

    /// The quoted option this vehicle serves, whole (name as the reply gave it, possibly localized; price range,
    /// line items, metered or fixed, party sizes), as a booking carries it; nil when there was no usable reply.
    mutating func quotedOption(for ride: String, vehicle: Vehicle, partySize: Int) -> JSONValue? {
        guard let payload = quoteReplies_.removeValue(forKey: ride), let reply = try? JSONParser.parse(payload),
            reply["code"]?.stringValue == "success", case .array(let options)? = reply["rideOptions"], !options.isEmpty
        else { return nil }
        // Replies list the options that fit the party in catalog order (the one-seat Compact only fits one
        // person); pick the vehicle's own by position, since the names may be localized.
        let fitting = partySize > 1 ? Array(simulatedOptions.dropFirst()) : simulatedOptions
        let wanted = fitting.firstIndex(of: vehicle.option) ?? 0
        let option = options.count == fitting.count ? options[wanted] : options[0]
        guard option["name"]?.stringValue != nil, option["priceRange"] != nil else { return nil }
        return option
    }

    mutating func book(
        _ vehicle: inout Vehicle, ride: String, pickup: Coordinate, partySize: Int, now: Date,
        into out: inout [OutgoingMessage]
    ) {
        let dropOff = dropOffs[vehicle.id] ?? randomPlace()
        let assignLater = Double.random(in: 0..<1, using: &random) < 0.3
        let eta = now.addingTimeInterval(vehicle.position.distance(to: pickup) * 1.3 / 9)
        let vehiclePart = assignLater ? "" : #""vehicleId":"\#(vehicle.id)","#
        let optionPart: String
        let vehicleDetails: String
        if case .object(var quoted)? = quotedOption(for: ride, vehicle: vehicle, partySize: partySize) {
            // Booking from the quote, with its full pricing: the worker's catalog supplies the image and the
            // fare terms, so the rider pays what was quoted (P5).
            ridesBookedByQuote += 1
            quoted["estimatedPickupDate"] = .string(Timestamps.format(eta))
            var writer = JSONWriter(capacity: 1024)
            writer.value(.object(quoted))
            optionPart = #""rideOption":"# + String(decoding: writer.bytes, as: UTF8.self)
            vehicleDetails =
                #""vehicle":{"registrationPlate":"B-RS \#(vehicle.id.dropFirst(2))","manufacturer":"Toyota","model":"Prius"}"#
        } else {
            optionPart =
                #""rideOption":{"name":"Compact","estimatedPickupDate":"\#(Timestamps.format(eta))","priceRange":{"minimumPrice":"9.00","maximumPrice":"14.00","currencyCode":"EUR"},"usesMeteredFare":true},"fare":{"baseCharge":"2.50","perKilometer":"1.10","perMinute":"0.20","currencyCode":"EUR"}"#
            vehicleDetails =
                #""vehicle":{"registrationPlate":"B-RS \#(vehicle.id.dropFirst(2))","manufacturer":"Toyota","model":"Prius","mapAnnotationImage":"https://assets.example/cars/compact.png"}"#
        }
        let booking =
            #"{"rideIdentifier":"\#(ride)",\#(vehiclePart)\#(optionPart),"pickupLocation":{"latitude":\#(pickup.latitude),"longitude":\#(pickup.longitude),"name":"Pickup \#(ride.dropFirst(ridePrefix.count))"},"dropOffLocation":{"latitude":\#(dropOff.latitude),"longitude":\#(dropOff.longitude)},\#(vehicleDetails),"driver":{"displayName":"Driver \#(vehicle.id)","rating":"4.8"},"partySize":\#(partySize)}"#
        out.append(
            OutgoingMessage(topic: topics.control(.start, ride: ride), payload: Array(booking.utf8), control: true))
        // A fifth of drivers pull in around the corner, out of the pickup's arrival radius (P3).
        vehicle.passesPickup = Double.random(in: 0..<1, using: &random) < 0.2
        let engine = takeRoute("\(ride)/pickup")
        if let engine {
            // On real streets the driver pulls in 90 m before the pickup along the engine's route.
            startTrip(
                &vehicle, to: pickup, along: engine.points(stoppingShortBy: vehicle.passesPickup ? 90 : 0))
        } else {
            let stop =
                vehicle.passesPickup ? pickup.moved(metres: 90, bearing: pickup.bearing(to: vehicle.position)) : pickup
            startTrip(&vehicle, to: stop)
        }
        vehicle.routed = Double.random(in: 0..<1, using: &random) < routeShare
        // E2: the route comes with the assignment (a later one, or one for the booking's car): the engine's on
        // real streets, else the made-up road's.
        if assignLater || vehicle.routed {
            let routePart =
                vehicle.routed
                ? #","route":"# + (engine?.message(version: "\(tick)") ?? route(of: vehicle.trip, to: pickup)) : ""
            out.append(
                OutgoingMessage(
                    topic: topics.control(.assign, ride: ride),
                    payload: Array(#"{"vehicleId":"\#(vehicle.id)"\#(routePart)}"#.utf8), control: true))
        }
        vehicle.stage = .toPickup
        ridesStarted += 1
    }
}
