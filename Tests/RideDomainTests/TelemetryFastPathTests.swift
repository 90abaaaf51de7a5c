import Foundation
import RideDomain
import Testing

import struct RideStatusKit.DeadLetter
import struct RideStatusKit.TelemetryFix

/// The telemetry fast path against the general decoder (T1, T6, I2, I3): both must give the same fix or
/// the same rejection for every payload.
@Suite("Telemetry fast path: differential test against the general decoder")
struct TelemetryFastPathTests {
    struct Mixer: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11 ^ state
        }
    }

    static let seeds: [String] = [
        #"{"vehicleId":"v-1","timestamp":"2026-11-22T09:50:01.250Z","latitude":52.520008,"longitude":13.404954,"speed":8.3,"course":92.5,"horizontalAccuracy":4.0,"sequence":1234}"#,
        #"{"timestamp":1795341000.5,"latitude":-33.86,"longitude":151.2,"speed":-1,"course":360}"#,
        #"{ "timestamp" : "2026-11-22T10:50:01+01:00" , "latitude" : 52.5 , "longitude" : 13.4 , "extra" : "x" , "n" : null }"#,
        #"{"vehicleId":"v-2","timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":0,"longitude":0}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":123.4,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":1e2,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":01.5,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":13.4,"speed":null,"course":null,"sequence":null}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":"52.5","longitude":13.4}"#,
        #"{"timestamp":"yesterday","latitude":52.5,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5}"#,
        #"{"_type":"location","lat":52.5,"lon":13.4,"tst":1795341000,"vel":36}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":13.4,"note":"caf\u00e9","deep":{"a":[1,2]}}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.123456789012345678,"longitude":13.4}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":13.4,"latitude":53.5}"#,
        #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":13.4} trailing"#,
        "{}", "[]", "", "null", #"{"timestamp":"2026-11-22T09:50:01Z","latitude":52.5,"longitude":-"}"#,
    ]

    func outcome(_ body: () throws(Rejection) -> TelemetryFix?) -> String {
        do throws(Rejection) {
            return "fix \(String(describing: try body()))"
        } catch {
            return "rejected \(error.reason.rawValue): \(error.detail)"
        }
    }

    @Test("seeds, and 20,000 random byte mutations of them, decode identically on both paths")
    func differential() {
        let decoder = InputDecoder()
        var random = Mixer(state: 7)
        var corpus: [[UInt8]] = Self.seeds.map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:.-+eE0123456789 ntrufalsx\é"#.utf8) + [0xFF, 0x00, 0xC3]
        for _ in 0..<20_000 {
            var payload = corpus[Int.random(in: 0..<Self.seeds.count, using: &random)]
            for _ in 0..<Int.random(in: 1...3, using: &random) where !payload.isEmpty {
                let position = Int.random(in: 0..<payload.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: payload[position] = alphabet.randomElement(using: &random)!
                case 1: payload.remove(at: position)
                default: payload.insert(alphabet.randomElement(using: &random)!, at: position)
                }
            }
            corpus.append(payload)
        }
        var fastAccepted = 0
        var mismatches: [String] = []
        for payload in corpus {
            let fast = outcome { () throws(Rejection) in try decoder.telemetry(vehicleId: "v-1", payload: payload) }
            let general = outcome { () throws(Rejection) in
                try decoder.generalTelemetry(vehicleId: "v-1", payload: payload)
            }
            if fast != general {
                mismatches.append("\(String(decoding: payload, as: UTF8.self)): \(fast) vs \(general)")
            }
            if fast.hasPrefix("fix") { fastAccepted += 1 }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
        #expect(fastAccepted > 100, "the corpus exercises accepted fixes too")
    }
}
