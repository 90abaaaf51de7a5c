import Foundation
import MosquittoTesting
import PropertyBased
import RideDomain
import Testing

/// E1: an area's stop share and speed while moving by hour of the week, in the area's time zone,
/// shrunk toward the area's own values, shared with the group and read back under A2.
@Suite("E1: what an area learns by hour of the week")
struct HourOfWeekTests {
    static func date(_ text: String) -> Date { Timestamps.parse(.string(text))! }

    @Test("E1: the hour of the week is counted from Monday 00:00 local time, summer time included")
    func hours() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let newYork = try #require(TimeZone(identifier: "America/New_York"))
        // Hand-computed: 22 November 2026 is a Sunday, 6 July a Monday, 29 March the day Berlin goes to summer time
        // (at 01:00 UTC, from +1 to +2).
        #expect(AreaLearning.hourOfWeek(t0, in: utc) == 6 * 24 + 9, "Sunday 09:50")
        #expect(AreaLearning.hourOfWeek(t0, in: berlin) == 6 * 24 + 10, "Sunday 10:50 CET")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-07-06T00:30:00Z"), in: utc) == 0, "Monday 00:30")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-07-06T00:30:00Z"), in: berlin) == 2, "Monday 02:30 CEST")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-07-05T23:59:59Z"), in: utc) == 167, "Sunday 23:59")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-07-06T03:00:00Z"), in: newYork) == 167, "Sunday 23:00 EDT (-4)")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-03-29T00:30:00Z"), in: berlin) == 6 * 24 + 1, "01:30 CET")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-03-29T01:30:00Z"), in: berlin) == 6 * 24 + 3, "03:30 CEST")
        #expect(AreaLearning.hourOfWeek(Self.date("1969-12-29T00:00:00Z"), in: utc) == 0, "before 1970: a Monday")
        // 25 October 2026, back to winter time at 01:00 UTC: 02:30 comes twice, both in hour 2 of the Sunday.
        #expect(AreaLearning.hourOfWeek(Self.date("2026-10-25T00:30:00Z"), in: berlin) == 6 * 24 + 2, "02:30 CEST")
        #expect(AreaLearning.hourOfWeek(Self.date("2026-10-25T01:30:00Z"), in: berlin) == 6 * 24 + 2, "02:30 CET")
    }

    @Test("E1: each hour learns the mean of its legs, then with the area's memory; a ride reads it shrunk to the area")
    func rushHour() throws {
        var configuration = RideConfiguration()
        configuration.stopShareLearningRate = 0.1  // a memory of 10 legs
        var learning = AreaLearning()
        let centre = ServiceArea(name: "centre", currencyCode: "EUR", polygons: [])
        let rush = Self.date("2026-11-23T08:15:00Z")  // Monday 08:15 UTC: hour 8
        let night = Self.date("2026-11-23T23:15:00Z")  // hour 23
        let week = 7 * 86_400.0
        // Three weeks of one leg at each: 6 m/s at rush hour, 14 at night, standing 30 % and 5 %.
        for index in 0..<3 {
            let shift = week * Double(index)
            learning.learn(speed: 6, area: centre, at: rush.addingTimeInterval(shift), configuration: configuration)
            learning.learn(speed: 14, area: centre, at: night.addingTimeInterval(shift), configuration: configuration)
            learning.learn(
                stopShare: 0.3, area: centre, at: rush.addingTimeInterval(shift), configuration: configuration)
            learning.learn(
                stopShare: 0.05, area: centre, at: night.addingTimeInterval(shift), configuration: configuration)
        }
        let entry = learning.learned["centre"]!
        #expect(entry.hours[8] == AreaLearning.Hour(stopShare: 0.3, legs: 3, speed: 6, speedLegs: 3))
        #expect(entry.hours[23] == AreaLearning.Hour(stopShare: 0.05, legs: 3, speed: 14, speedLegs: 3))
        #expect(entry.hours.count == 2)
        // The area's own: 6, then 10 % of the way each leg: 6, 6.8, 6.72, 7.448, 7.3032, 7.97288.
        let area = try #require(entry.speed)
        #expect(abs(area - 7.97288) < 1e-9)
        // Three legs of the hour against the area's 2, in the same hour a week later.
        let nextRush = rush.addingTimeInterval(3 * week + 1800)
        let expected = (3 * 6 + 2 * area) / 5
        #expect(abs((learning.speed(for: centre, at: nextRush, configuration: configuration) ?? 0) - expected) < 1e-9)
        let nextNight = night.addingTimeInterval(3 * week)
        let readNight = learning.speed(for: centre, at: nextNight, configuration: configuration) ?? 0
        #expect(abs(readNight - (3 * 14 + 2 * area) / 5) < 1e-9)
        // An hour no leg was driven in: the area's.
        #expect(
            learning.speed(for: centre, at: nextRush.addingTimeInterval(3600), configuration: configuration) == area)
        let share = try #require(entry.stopShare)
        let readShare = learning.stopShare(for: centre, at: nextRush, configuration: configuration) ?? 0
        #expect(abs(readShare - (3 * 0.3 + 2 * share) / 5) < 1e-9)
        // Past the memory (10 legs) an hour weighs 10 against 2, and learns at the area's rate.
        for index in 3..<12 {
            learning.learn(
                speed: 6, area: centre, at: rush.addingTimeInterval(week * Double(index)), configuration: configuration)
        }
        learning.learn(speed: 16, area: centre, at: rush.addingTimeInterval(12 * week), configuration: configuration)
        #expect(abs((learning.learned["centre"]!.hours[8]?.speed ?? 0) - 7) < 1e-9, "6 + 0.1 * (16 - 6)")
        let later = learning.learned["centre"]!.speed!
        let weekAfter = learning.speed(
            for: centre, at: rush.addingTimeInterval(13 * week), configuration: configuration)
        #expect(abs((weekAfter ?? 0) - (10 * 7 + 2 * later) / 12) < 1e-9)
    }

    @Test("E1: in a busy area the hour is today's: this hour's legs soon outweigh what it taught last week")
    func busyHour() throws {
        var busy = AreaLearning()
        let configuration = RideConfiguration()
        // Last week, 20 legs at 6 m/s in this hour; today, 30 in the same hour at 12 m/s.
        for leg in 0..<20 {
            busy.learn(speed: 6, area: nil, at: t0.addingTimeInterval(Double(leg)), configuration: configuration)
        }
        let today = t0.addingTimeInterval(7 * 86_400)
        for leg in 0..<30 {
            busy.learn(
                speed: 12, area: nil, at: today.addingTimeInterval(Double(leg) * 10), configuration: configuration)
        }
        let entry = try #require(busy.learned[""])
        let hour = try #require(entry.hours[AreaLearning.hourOfWeek(today, in: nil)])
        // The hour's memory is full after the first 20: 30 legs at 5 % each, 12 - 6 * 0.95^30.
        let hourSpeed = 12 - 6 * Foundation.pow(0.95, 30.0)
        #expect(abs((hour.speed ?? 0) - hourSpeed) < 1e-9 && hour.speedLegs == 50)
        let areaSpeed = try #require(entry.speed)
        let read = busy.speed(for: nil, at: today.addingTimeInterval(300), configuration: configuration) ?? 0
        #expect(abs(read - (20 * hourSpeed + 2 * areaSpeed) / 22) < 1e-9)
        #expect(read > 10, "today's 12 m/s outweighs last week's 6: \(read)")
    }

    @Test(
        "E1: the area's time zone sets its hours; rides outside every area, and areas without one, take rides.timeZone")
    func timeZones() throws {
        var configuration = RideConfiguration()
        configuration.timeZone = TimeZone(identifier: "America/New_York")
        var learning = AreaLearning()
        let berlin = ServiceArea(
            name: "berlin", currencyCode: "EUR", polygons: [], timeZone: TimeZone(identifier: "Europe/Berlin"))
        let plain = ServiceArea(name: "plain", currencyCode: "EUR", polygons: [])
        learning.learn(speed: 9, area: berlin, at: t0, configuration: configuration)
        learning.learn(speed: 9, area: plain, at: t0, configuration: configuration)
        learning.learn(speed: 9, area: nil, at: t0, configuration: configuration)
        // t0 is Sunday 10:50 in Berlin, 04:50 in New York.
        #expect(learning.learned["berlin"]?.hours.keys.sorted() == [6 * 24 + 10])
        #expect(learning.learned["plain"]?.hours.keys.sorted() == [6 * 24 + 4])
        #expect(learning.learned[""]?.hours.keys.sorted() == [6 * 24 + 4])
        // An hour's stop share is bounded as the area's.
        learning.learn(stopShare: 0.95, area: plain, at: t0, configuration: configuration)
        #expect(learning.learned["plain"]?.hours[6 * 24 + 4]?.stopShare == AreaLearning.highestStopShare)
    }

    @Test("E1: with rides.hoursOfWeek off, no hour is learned or read; shared hours are kept, to share again")
    func off() {
        var configuration = RideConfiguration()
        var learning = AreaLearning()
        learning.learn(speed: 9, area: nil, at: t0, configuration: configuration)
        learning.learn(speed: 13, area: nil, at: t0, configuration: configuration)
        let hourly = learning.speed(for: nil, at: t0, configuration: configuration) ?? 0
        configuration.hoursOfWeek = false
        #expect(learning.speed(for: nil, at: t0, configuration: configuration) == learning.learned[""]?.speed)
        #expect(hourly != learning.learned[""]?.speed, "on, the hour's mean of 11 weighed in")
        var off = AreaLearning()
        off.learn(speed: 9, area: nil, at: t0, configuration: configuration)
        off.learn(stopShare: 0.2, area: nil, at: t0, configuration: configuration)
        var shared = AreaPriors(
            area: "", worker: "w-2", at: t0, detourFactor: 1.2, rides: 0, stopShare: nil, legs: 0, speed: 9,
            speedLegs: 1)
        #expect(off.learned[""]?.hours.isEmpty == true, "off: no hour learned")
        shared.hours = [4: AreaLearning.Hour(speed: 20, speedLegs: 3)]
        off.adopt(shared, configuredFactor: 1.3, configuration: configuration)
        // Kept, to share again (a worker with hours off must not wipe the group's), but not read.
        #expect(off.learned[""]?.hours[4] == AreaLearning.Hour(speed: 20, speedLegs: 3))
        let hourFour = Self.date("2026-11-23T04:30:00Z")
        #expect(off.speed(for: nil, at: hourFour, configuration: configuration) == off.learned[""]?.speed)
    }

    @Test("E1: an hour's value read by a ride lies between the hour's and the area's, whatever the legs")
    func bounded() async {
        await propertyCheck(
            count: 300,
            input: zip(
                Gen.double(in: 0.5...60), Gen.int(in: 0...1_000_000), Gen.double(in: 0.5...60), Gen.double(in: 0...1))
        ) { value, legs, base, rate in
            let read = AreaLearning.hourly(value, legs: legs, toward: base, rate: rate)
            #expect(read >= min(value, base) - 1e-9 && read <= max(value, base) + 1e-9, "\(read)")
        }
    }

    @Test("E1: no legs, or learning off: the area's value, whatever the hour holds")
    func edges() {
        #expect(AreaLearning.hourly(6, legs: 0, toward: 12, rate: 0.05) == 12)
        #expect(AreaLearning.hourly(6, legs: 40, toward: 12, rate: 0) == 12)
        // Legs past the memory (20) weigh as 20: (20 * 6 + 2 * 12) / 22.
        let full = AreaLearning.hourly(6, legs: 40, toward: 12, rate: 0.05)
        #expect(full == 144.0 / 22)
    }

    @Test("E1, A2: the hours are shared, read back as written, valid against priors.schema.json, and weighed in")
    func sharing() async throws {
        var engine = RideEngine()
        let rush = Self.date("2026-11-23T08:15:00Z")
        engine.learning.learn(speed: 6, area: nil, at: rush, configuration: engine.configuration)
        engine.learning.learn(stopShare: 0.3, area: nil, at: rush, configuration: engine.configuration)
        engine.learning.learn(speed: 14.123456, area: nil, at: t0, configuration: engine.configuration)
        let shared = try #require(engine.priorsToShare(worker: "w-1", now: t0).first)
        let text = String(decoding: shared.payload, as: UTF8.self)
        #expect(
            text.hasSuffix(
                #""hours":[{"hour":8,"stopShare":0.3,"legs":1,"speed":6.0,"speedLegs":1},{"hour":153,"speed":14.123,"speedLegs":1}]}"#
            ),
            "\(text)")
        #expect(text.contains(#""speedLegs":2,"timeZone":"UTC","hours":["#), "the zone the hours are counted in")
        let read = try #require(
            try AreaPriors.decode(
                shared.payload, key: AreaPriors.key(area: ""), decoder: InputDecoder(), now: t0, futureTolerance: 5))
        #expect(read.hours[8] == AreaLearning.Hour(stopShare: 0.3, legs: 1, speed: 6, speedLegs: 1))
        #expect(read.hours[153]?.speed == 14.123, "to a thousandth")
        let (code, output) = try await validateJSON(schema: "priors.schema.json", documents: [shared.payload])
        #expect(code == 0, Comment(rawValue: output))
        // Another worker weighs them in: its hour 8 had 10 m/s from 3 legs; (3 * 10 + 1 * 6) / 4 = 9.
        var other = AreaLearning()
        var configuration = RideConfiguration()
        configuration.stopShareLearningRate = 0.1
        for _ in 0..<3 { other.learn(speed: 10, area: nil, at: rush, configuration: configuration) }
        other.adopt(read, configuredFactor: 1.3, configuration: configuration)
        #expect(abs((other.learned[""]?.hours[8]?.speed ?? 0) - 9) < 1e-12)
        #expect(other.learned[""]?.hours[8]?.speedLegs == 3, "the larger count, not the sum")
        #expect(other.learned[""]?.hours[153]?.speed == 14.123, "an hour it had none of: as shared")
        #expect(other.learned[""]?.hours[8]?.stopShare == 0.3)
    }

    @Test("I2: a payload over maxPayloadBytes leaves out the hours that taught the fewest legs")
    func sizeLimit() throws {
        var hours: [Int: AreaLearning.Hour] = [:]
        for hour in AreaLearning.hoursOfWeek {
            hours[hour] = AreaLearning.Hour(
                stopShare: 0.123456, legs: hour + 1, speed: 12.345678, speedLegs: hour + 1)
        }
        let priors = AreaPriors(
            area: "berlin", worker: "w-1", at: t0, detourFactor: 1.2, rides: 9, stopShare: 0.2, legs: 9, speed: 10,
            speedLegs: 9, hours: hours)
        let whole = priors.encoded()
        let all = try #require(
            try AreaPriors.decode(
                whole, key: AreaPriors.key(area: "berlin"), decoder: InputDecoder(), now: t0, futureTolerance: 5))
        #expect(all.hours.count == 168, "168 hours fit the priors' own limit: \(whole.count) bytes")
        let cut = priors.encoded(limit: 2_000)
        #expect(cut.count <= 2_000)
        let read = try #require(
            try AreaPriors.decode(
                cut, key: AreaPriors.key(area: "berlin"), decoder: InputDecoder(), now: t0, futureTolerance: 5))
        #expect(!read.hours.isEmpty && read.hours.count < 168)
        #expect(read.hours.keys.min() == 168 - read.hours.count, "the hours with the most legs kept")
        #expect(read.speed == 10 && read.detourFactor == 1.2, "the area's own values always")
        // No room for one hour: neither hours nor their zone (a reader refuses one without the other).
        let bare = priors.encoded(limit: 200)
        let text = String(decoding: bare, as: UTF8.self)
        #expect(!text.contains("hours") && !text.contains("timeZone"), "\(text)")
        #expect(throws: Never.self) {
            try AreaPriors.decode(
                bare, key: AreaPriors.key(area: "berlin"), decoder: InputDecoder(), now: t0, futureTolerance: 5)
        }
    }

    @Test(
        "A2: hours read from the broker that break a check are refused, naming the rule",
        arguments: [
            (#"[{"hour":168,"speed":9,"speedLegs":1}]"#, "outside 0...167"),
            (#"[{"hour":2.5,"speed":9,"speedLegs":1}]"#, "whole number"),
            (#"[{"hour":3,"speed":9,"speedLegs":1},{"hour":3,"speed":8,"speedLegs":1}]"#, "named twice"),
            (#"[{"hour":3,"speed":70,"speedLegs":1}]"#, "0.5...60 m/s"),
            (#"[{"hour":3,"speed":9}]"#, "speedLegs is required"),
            (#"[{"hour":3,"speedLegs":4}]"#, "speedLegs without a speed"),
            (#"[{"hour":3,"stopShare":0.95,"legs":1}]"#, "outside 0...0.9"),
            (#"[{"hour":3,"legs":1}]"#, "legs without a stopShare"),
            (#"[3]"#, "must be objects"),
            (#"{"hour":3}"#, "must be an array"),
        ])
    func refused(hours: String, detail: String) {
        let payload = Array(
            #"{"area":"berlin","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"timeZone":"UTC","hours":\#(hours)}"#
                .utf8)
        do {
            _ = try AreaPriors.decode(
                payload, key: AreaPriors.key(area: "berlin"), decoder: InputDecoder(), now: t0, futureTolerance: 5)
            Issue.record("accepted \(hours)")
        } catch {
            #expect(error.detail.contains(detail) && error.detail.contains("A2"), "\(error.detail)")
        }
    }

    @Test("E1: a ride starting at rush hour takes its hour's slower speed; one at night the faster")
    func ridesTakeTheirHour() throws {
        var harness = Harness()
        let rush = t0  // hour 153 in rides.timeZone (UTC)
        let night = t0.addingTimeInterval(12 * 3600)  // hour 165
        let week = 7 * 86_400.0
        for index in 0..<10 {
            let shift = week * Double(index)
            harness.engine.learning.learn(
                speed: 5, area: nil, at: rush.addingTimeInterval(shift), configuration: RideConfiguration())
            harness.engine.learning.learn(
                speed: 15, area: nil, at: night.addingTimeInterval(shift), configuration: RideConfiguration())
        }
        let area = try #require(harness.engine.learning.learned[""]?.speed)
        // Ten weeks on, each hour's 10 legs against the area's 2.
        harness.start(ride: "r-1", vehicle: "v-1", at: rush.addingTimeInterval(10 * week))
        harness.start(ride: "r-2", vehicle: "v-2", at: night.addingTimeInterval(10 * week))
        let atRush = try #require(harness.engine.ride("r-1")?.cruisePrior)
        let atNight = try #require(harness.engine.ride("r-2")?.cruisePrior)
        #expect(abs(atRush - (10 * 5 + 2 * area) / 12) < 1e-4 && abs(atNight - (10 * 15 + 2 * area) / 12) < 1e-4)
        #expect(atRush < area && area < atNight, "\(atRush) \(area) \(atNight)")
    }

    @Test("E1, A2: hours counted in another zone are left alone; the area's values are still weighed in")
    func zones() throws {
        // The sharing worker counts hours outside every area in Berlin time; this one in UTC.
        var configuration = RideConfiguration()
        configuration.timeZone = TimeZone(identifier: "Europe/Berlin")
        var berlin = RideEngine(configuration: configuration)
        berlin.learning.learn(speed: 9, area: nil, at: t0, configuration: configuration)
        let payload = try #require(berlin.priorsToShare(worker: "w-2", now: t0).first?.payload)
        #expect(String(decoding: payload, as: UTF8.self).contains(#""timeZone":"Europe/Berlin""#))
        var utc = RideEngine()
        let topic = "ridestatus/priors/\(AreaPriors.key(area: ""))"
        _ = utc.receivePriors(
            key: AreaPriors.key(area: ""), topic: topic, payload: payload, now: t0, worker: "w-1", since: t0)
        #expect(utc.learning.learned[""]?.speed == 9, "the area's value weighed in")
        #expect(utc.learning.learned[""]?.hours.isEmpty == true, "Berlin's hour 154 is not UTC's")
        // A worker in the same zone takes them; "Etc/UTC" and "UTC" are one zone.
        var same = RideEngine(configuration: configuration)
        _ = same.receivePriors(
            key: AreaPriors.key(area: ""), topic: topic, payload: payload, now: t0, worker: "w-1", since: t0)
        #expect(same.learning.learned[""]?.hours.keys.sorted() == [6 * 24 + 10])
        for name in ["Etc/UTC", "Zulu", "Universal", "GMT"] {
            configuration.timeZone = TimeZone(identifier: name)
            #expect(AreaLearning.zoneName(of: nil, configuration) == "UTC", "\(name)")
        }
    }

    @Test("E1: a zone named two ways keeps one clock, and its hours are shared; another clock's are not")
    func aliases() throws {
        // Hand-checked pairs: IANA links (the same zone) and zones that differ in summer or always.
        let newYork = TimeZone(identifier: "America/New_York")
        #expect(AreaLearning.sameClock("US/Eastern", as: newYork, around: t0) == true)
        #expect(AreaLearning.sameClock("Asia/Calcutta", as: TimeZone(identifier: "Asia/Kolkata"), around: t0) == true)
        #expect(AreaLearning.sameClock("America/Chicago", as: newYork, around: t0) == false, "an hour apart, always")
        // Summer time an hour apart only on the nights of its changes (00:00 and 01:00 UTC), the rest of the year
        // the same offsets: told apart by their transitions.
        #expect(
            AreaLearning.sameClock("Europe/Chisinau", as: TimeZone(identifier: "Europe/Kyiv"), around: t0) == false)
        #expect(
            AreaLearning.sameClock("Europe/London", as: TimeZone(identifier: "Africa/Abidjan"), around: t0) == false,
            "the same in winter only")
        #expect(AreaLearning.sameClock("Not/AZone", as: newYork, around: t0) == nil, "unknown to Foundation")
        #expect(AreaLearning.sameClock("Africa/Abidjan", as: nil, around: t0) == false, "UTC without its tables")
        // Through the priors: a worker counting in America/New_York takes the hours of one counting in US/Eastern,
        // not those of one counting in America/Chicago.
        func shared(in zone: String) throws -> [UInt8] {
            var configuration = RideConfiguration()
            configuration.timeZone = TimeZone(identifier: zone)
            var engine = RideEngine(configuration: configuration)
            engine.learning.learn(speed: 9, area: nil, at: t0, configuration: configuration)
            return try #require(engine.priorsToShare(worker: "w-2", now: t0).first?.payload)
        }
        var configuration = RideConfiguration()
        configuration.timeZone = newYork
        let topic = "ridestatus/priors/\(AreaPriors.key(area: ""))"
        for (zone, taken) in [("US/Eastern", true), ("America/Chicago", false)] {
            var reader = RideEngine(configuration: configuration)
            _ = reader.receivePriors(
                key: AreaPriors.key(area: ""), topic: topic, payload: try shared(in: zone), now: t0, worker: "w-1",
                since: t0)
            #expect(reader.learning.learned[""]?.speed == 9, "\(zone): the area's value weighed in")
            #expect(reader.learning.learned[""]?.hours.isEmpty == !taken, "\(zone)")
        }
    }

    @Test("I2, A2: the priors' size limit is their own: a worker with a small rides.maxPayloadBytes still reads them")
    func ownLimit() throws {
        var hours: [Int: AreaLearning.Hour] = [:]
        for hour in AreaLearning.hoursOfWeek {
            hours[hour] = AreaLearning.Hour(stopShare: 0.123, legs: 2_000_000_000, speed: 12.5, speedLegs: 30)
        }
        let priors = AreaPriors(
            area: "", worker: "w-2", at: t0, detourFactor: 1.2, rides: 9, stopShare: 0.2, legs: 9, speed: 10,
            speedLegs: 9, hours: hours, timeZone: "UTC")
        let payload = priors.encoded()
        #expect(payload.count > 4_096 && payload.count <= AreaPriors.maximumBytes, "\(payload.count) bytes")
        // Counts past the most a reader accepts are written as that most: every reader still takes them.
        #expect(String(decoding: payload, as: UTF8.self).contains(#""legs":1000000000,"#))
        var configuration = RideConfiguration()
        configuration.maxPayloadBytes = 4_096
        var small = RideEngine(configuration: configuration)
        let (adopted, refusal, _) = small.receivePriors(
            key: AreaPriors.key(area: ""), topic: "ridestatus/priors/\(AreaPriors.key(area: ""))", payload: payload,
            now: t0, worker: "w-1", since: t0)
        #expect(refusal == nil && adopted != nil)
        #expect(small.learning.learned[""]?.hours.count == 168)
        // hours and timeZone come together.
        for broken in [
            #"{"area":"","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"hours":[]}"#,
            #"{"area":"","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"timeZone":"UTC"}"#,
            #"{"area":"","worker":"w-2","at":"2026-11-22T09:50:00.000Z","detourFactor":1.1,"rides":4,"legs":2,"timeZone":"","hours":[]}"#,
        ] {
            #expect(throws: Rejection.self) {
                try AreaPriors.decode(
                    Array(broken.utf8), key: AreaPriors.key(area: ""), decoder: InputDecoder(), now: t0,
                    futureTolerance: 5)
            }
        }
    }
}
