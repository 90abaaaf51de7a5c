// SiriKit's ride types exist on iOS (Mac Catalyst included) and watchOS only. This file is not compiled by this
// project's CI, which runs on Linux: the tables it applies (IntentsMapping.swift) are, and are tested there.
#if canImport(Intents) && (os(iOS) || os(watchOS))
    public import Intents
    public import CoreLocation
    import Foundation

    extension RideStatus {
        /// The status as SiriKit's `INRideStatus`, to hand to `INGetRideStatusIntentResponseObserver` (or to return
        /// from `handle(getRideStatus:)`): phase, completion status, vehicle with its map annotation image, driver,
        /// ride option, places and ETAs.
        /// - Parameter vehicleImage: the car's image. `INImage(url:)` is tried with `vehicle.mapAnnotationImage` when
        ///   none is given, but SiriKit may not load a remote URL: download it and pass `INImage(imageData:)`.
        public func intentsRideStatus(vehicleImage: INImage? = nil) -> INRideStatus {
            let status = INRideStatus()
            status.rideIdentifier = rideIdentifier
            status.phase = INRidePhase(rawValue: IntentsMapping.phaseRawValue(phase)) ?? .unknown
            status.completionStatus = completionStatus.map(Self.intentsCompletion)
            status.vehicle = intentsVehicle(image: vehicleImage)
            status.driver = driver.map {
                INRideDriver(
                    phoneNumber: $0.phoneNumber ?? "", nameComponents: nil, displayName: $0.displayName, image: nil,
                    rating: $0.rating)
            }
            status.rideOption = rideOption.intentsRideOption
            status.estimatedPickupDate = estimatedPickupDate
            status.estimatedPickupEndDate = estimatedPickupEndDate
            status.estimatedDropOffDate = estimatedDropOffDate
            status.pickupLocation = pickupLocation.placemark
            status.dropOffLocation = dropOffLocation.placemark
            status.waypoints = waypoints.map(\.placemark)
            status.scheduledPickupTime = scheduledPickupTime.map {
                INDateComponentsRange(
                    start: Calendar.current.dateComponents(in: .current, from: $0.startDate),
                    end: Calendar.current.dateComponents(in: .current, from: $0.endDate))
            }
            return status
        }

        private func intentsVehicle(image: INImage?) -> INRideVehicle {
            let result = INRideVehicle()
            if let location = vehicle.location {
                result.location = CLLocation(
                    coordinate: CLLocationCoordinate2D(latitude: location.latitude, longitude: location.longitude),
                    // A negative horizontal accuracy would mark the coordinate invalid: 0 when none was sent.
                    altitude: 0, horizontalAccuracy: location.horizontalAccuracy ?? 0, verticalAccuracy: -1,
                    course: location.course ?? -1, speed: location.speed ?? -1, timestamp: location.timestamp)
            }
            result.registrationPlate = vehicle.registrationPlate
            result.manufacturer = vehicle.manufacturer
            result.model = vehicle.model
            result.mapAnnotationImage =
                image ?? vehicle.mapAnnotationImage.flatMap { URL(string: $0) }.flatMap { INImage(url: $0) }
            return result
        }

        private static func intentsCompletion(_ completion: CompletionStatus) -> INRideCompletionStatus {
            let result: INRideCompletionStatus
            switch IntentsMapping.completion(completion) {
            case .canceledMissedPickup: result = .canceledMissedPickup()
            case .canceledByUser: result = .canceledByUser()
            case .canceledByService: result = .canceledByService()
            case .settled(let money): result = .completed(settled: money.intentsAmount)
            case .outstanding(let money): result = .completed(outstanding: money.intentsAmount)
            case .completed(let feedback):
                var options: INRideFeedbackTypeOptions = []
                if feedback.contains(.rate) { options.insert(.rate) }
                if feedback.contains(.tip) { options.insert(.tip) }
                result = .completed(feedbackType: options)
            }
            if !completion.defaultTippingOptions.isEmpty {
                result.defaultTippingOptions = Set(
                    completion.defaultTippingOptions.map { NSDecimalNumber(decimal: $0) })
            }
            return result
        }
    }

    extension RideOption {
        /// The option as SiriKit's `INRideOption`.
        public var intentsRideOption: INRideOption {
            let option = INRideOption(name: name, estimatedPickupDate: estimatedPickupDate)
            option.priceRange = priceRange.map {
                INPriceRange(
                    firstPrice: NSDecimalNumber(decimal: $0.minimumPrice),
                    secondPrice: NSDecimalNumber(decimal: $0.maximumPrice), currencyCode: $0.currencyCode)
            }
            option.usesMeteredFare = usesMeteredFare.map { NSNumber(value: $0) }
            option.disclaimerMessage = disclaimerMessage
            option.specialPricing = specialPricing
            option.fareLineItems = fareLineItems.compactMap {
                INRideFareLineItem(
                    title: $0.title, price: NSDecimalNumber(decimal: $0.price), currencyCode: $0.currencyCode)
            }
            return option
        }
    }

    extension Money {
        /// The amount as SiriKit's `INCurrencyAmount`.
        public var intentsAmount: INCurrencyAmount {
            INCurrencyAmount(amount: NSDecimalNumber(decimal: amount), currencyCode: currencyCode)
        }
    }

    extension Place {
        /// The place as a `CLPlacemark` with its name.
        public var placemark: CLPlacemark {
            CLPlacemark(
                location: CLLocation(latitude: latitude, longitude: longitude), name: name, postalAddress: nil)
        }
    }
#endif
