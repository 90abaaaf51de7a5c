public import Foundation
public import RideStatusKit

/// How a ride ended (P5-P7): the contract's `CompletionStatus`, as the worker builds it.
extension CompletionStatus {
    public static func completed(payment: Money?, feedbackType: [FeedbackType], tipping: [Decimal]) -> Self {
        CompletionStatus(
            completed: true, paymentAmount: payment, feedbackType: feedbackType, defaultTippingOptions: tipping)
    }

    public static func canceled(by: CanceledBy, fee: Money?, missedPickup: Bool = false) -> Self {
        CompletionStatus(
            completed: false, canceled: true, missedPickup: missedPickup, outstanding: fee != nil, canceledBy: by,
            paymentAmount: fee)
    }
}

// MARK: - Validation (V1-V6)

/// A status that must not be published, with the rule it breaks.
public struct StatusViolation: Error, Equatable, Sendable, CustomStringConvertible {
    public var rule: Rule
    public var detail: String
    public var description: String { "\(rule): \(detail)" }
}

public enum StatusValidator {
    /// Checks V1-V6; returns the first violation, or `nil` when the status may be published.
    public static func violation(of status: RideStatus, bookedRide: String) -> StatusViolation? {
        if status.rideIdentifier != bookedRide || !Identifier.isValid(status.rideIdentifier) {
            return StatusViolation(rule: .V1, detail: "rideIdentifier '\(status.rideIdentifier)' is not the booking's")
        }
        // V2 holds by construction: `RidePhase` has exactly the six phases and no `unknown`.
        if (status.phase == .completed) != (status.completionStatus != nil) {
            return StatusViolation(rule: .V3, detail: "completionStatus must be present if and only if completed")
        }
        if let completion = status.completionStatus {
            if completion.completed == completion.canceled {
                return StatusViolation(rule: .V3, detail: "exactly one of completed and canceled must be true")
            }
            if completion.missedPickup && !completion.canceled {
                return StatusViolation(rule: .V3, detail: "missedPickup without canceled")
            }
            if (completion.canceledBy != nil) != completion.canceled {
                return StatusViolation(rule: .V3, detail: "canceledBy must be set if and only if canceled")
            }
            if completion.outstanding && completion.paymentAmount == nil {
                return StatusViolation(rule: .V3, detail: "outstanding without a paymentAmount")
            }
            // feedbackType holds only rate and tip by construction (`CompletionStatus.FeedbackType`).
        }
        if isBlank(status.rideOption.name) {
            return StatusViolation(rule: .V4, detail: "rideOption.name is empty")
        }
        if !Timestamps.isRepresentable(status.rideOption.estimatedPickupDate) {
            return StatusViolation(rule: .V4, detail: "rideOption.estimatedPickupDate is not a valid time")
        }
        if status.phase >= .confirmed && (status.vehicle.mapAnnotationImage ?? "").isEmpty {
            return StatusViolation(rule: .V5, detail: "vehicle.mapAnnotationImage is empty from confirmed on")
        }
        if let location = status.vehicle.location {
            if !location.coordinate.isValid || (location.coordinate.latitude == 0 && location.coordinate.longitude == 0)
            {
                return StatusViolation(rule: .V5, detail: "vehicle.location is not a valid position")
            }
        }
        func invalid(_ amount: Decimal, _ code: String) -> Bool { amount < 0 || !Money.isValidCurrencyCode(code) }
        let payment = status.completionStatus?.paymentAmount
        let range = status.rideOption.priceRange
        if let payment, invalid(payment.amount, payment.currencyCode) {
            return StatusViolation(
                rule: .V6,
                detail: "paymentAmount \(payment.amount) \(payment.currencyCode) is negative or not ISO 4217")
        }
        if let range, invalid(range.minimumPrice, range.currencyCode) || invalid(range.maximumPrice, range.currencyCode)
        {
            return StatusViolation(rule: .V6, detail: "priceRange is negative or not ISO 4217")
        }
        // V6: a line item may be negative (a discount); its currency must still be ISO 4217.
        for item in status.rideOption.fareLineItems where !Money.isValidCurrencyCode(item.currencyCode) {
            return StatusViolation(rule: .V6, detail: "fare line item currency \(item.currencyCode) is not ISO 4217")
        }
        // One by one, not as an array: this runs for every status (no allocation on the hot path).
        func valid(_ date: Date?) -> Bool { date.map(Timestamps.isRepresentable) ?? true }
        if !valid(status.estimatedPickupDate) || !valid(status.estimatedPickupEndDate)
            || !valid(status.estimatedDropOffDate)
        {
            return StatusViolation(rule: .V6, detail: "an estimated date is not a valid time")
        }
        if let pickup = status.estimatedPickupDate, let dropOff = status.estimatedDropOffDate, dropOff < pickup {
            return StatusViolation(rule: .V6, detail: "estimatedDropOffDate is before estimatedPickupDate")
        }
        // E1's range: a valid time, never before its estimate (two checks, no array: this runs per status).
        if let latest = status.estimatedPickupDateLatest,
            !valid(latest) || latest < (status.estimatedPickupDate ?? .distantFuture)
        {
            return StatusViolation(
                rule: .V6, detail: "estimatedPickupDateLatest is not a time at or after its estimate")
        }
        if let latest = status.estimatedDropOffDateLatest,
            !valid(latest) || latest < (status.estimatedDropOffDate ?? .distantFuture)
        {
            return StatusViolation(
                rule: .V6, detail: "estimatedDropOffDateLatest is not a time at or after its estimate")
        }
        return nil
    }
}
