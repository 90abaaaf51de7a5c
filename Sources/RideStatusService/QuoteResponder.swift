import Foundation
import MQTTClient
import RideDomain

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.RideOptionsReply
import struct RideStatusKit.RideTopics

/// Answers requests (3.4 quotes, and the replies of `status/get`) on the requester's Response Topic (A1).
/// Pricing needs no lock: it works on a copy of the quoter (copy-on-write, no copy of the fleet index).
struct QuoteResponder<Transport: WorkerTransport>: Sendable {
    let transport: Transport
    let topics: RideTopics
    let decoder: InputDecoder
    let metrics: WorkerMetrics
    let time: WorkerTime

    /// 3.4: a quote from the catalog and the live fleet, or a failure reply that says why. Returns what to
    /// dead-letter (3.5): a malformed request, a reply topic that A1 refuses.
    func answer(_ request: MQTTMessage, quoter: RideOptionQuoter?, now: Date) -> [Rejection] {
        var rejection: Rejection?
        let answer = quote(request, quoter: quoter, now: now) { rejection = $0 }
        return [rejection, reply(to: request, payload: answer.encoded())].compactMap { $0 }
    }

    private func quote(
        _ request: MQTTMessage, quoter: RideOptionQuoter?, now: Date, rejected: (Rejection) -> Void
    ) -> RideOptionsReply {
        let started = time.instant
        let answer: RideOptionsReply
        if let quoter {
            do throws(Rejection) {
                answer = quoter.quote(try decoder.rideOptionsRequest(payload: request.payload), now: now)
            } catch {
                rejected(error)
                answer = RideOptionsReply(
                    code: .failure, expirationDate: now.addingTimeInterval(quoter.catalog.quotes.timeToLive),
                    reason: error.reason.rawValue, detail: error.detail)
            }
        } else {
            answer = RideOptionsReply(
                code: .failureServiceTemporarilyUnavailable, expirationDate: now.addingTimeInterval(60),
                reason: "noCatalog", detail: "this worker has no ride-option catalog")
        }
        metrics.quoteDuration.record(time.instant - started)
        metrics.quoteAnswered(answer.code)
        return answer
    }

    /// A1: publishes a reply on the request's Response Topic with its Correlation Data, only when that topic
    /// lies under the reply prefix. Returns the rejection to dead-letter otherwise (no reply is sent).
    func reply(to request: MQTTMessage, payload: [UInt8]) -> Rejection? {
        let responseTopic = request.properties.responseTopic
        if let problem = topics.replyTopicProblem(responseTopic) { return problem }
        try? transport.publish(
            responseTopic ?? "", payload,
            properties: MQTTProperties(
                correlationData: request.properties.correlationData, contentType: "application/json"))
        return nil
    }
}
