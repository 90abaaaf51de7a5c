import Foundation
public import RideDomain

public enum TraceError: Error, CustomStringConvertible {
    case tooShort
    case unreadable(String)
    public var description: String {
        switch self {
        case .tooShort: return "the trace needs at least two points"
        case .unreadable(let path): return "cannot read a trace from \(path) (GPX trkpt or CSV time,latitude,longitude)"
        }
    }
}

/// Recorded traces, as `fleet-sim --replay` drives them and `make bench-eta` replays them: GPX
/// `<trkpt lat=".." lon=".."><time>..</time>` or CSV lines `time,latitude,longitude` (time in seconds or ISO
/// 8601).
public enum Trace {
    public struct Point: Sendable {
        /// Seconds since the epoch, or nil when the trace has no time for the point.
        public var time: Double?
        public var coordinate: Coordinate
    }

    public static func load(path: String) throws -> [Point] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var points: [Point] = []
        if text.contains("<gpx") || text.contains("<trkpt") {
            for chunk in text.components(separatedBy: "<trkpt").dropFirst() {
                func attribute(_ name: String) -> Double? {
                    guard let range = chunk.range(of: "\(name)=\"") else { return nil }
                    return Double(chunk[range.upperBound...].prefix { $0 != "\"" })
                }
                let time = chunk.range(of: "<time>").flatMap { range in
                    Timestamps.parse(String(chunk[range.upperBound...].prefix { $0 != "<" }))
                }
                if let lat = attribute("lat"), let lon = attribute("lon") {
                    points.append(
                        Point(time: time?.timeIntervalSince1970, coordinate: Coordinate(latitude: lat, longitude: lon)))
                }
            }
        } else {
            for line in text.split(whereSeparator: \.isNewline) {
                let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                guard fields.count >= 3, let lat = Double(fields[1]), let lon = Double(fields[2]) else { continue }
                let time = Double(fields[0]) ?? Timestamps.parse(fields[0])?.timeIntervalSince1970
                points.append(Point(time: time, coordinate: Coordinate(latitude: lat, longitude: lon)))
            }
        }
        guard !points.isEmpty else { throw TraceError.unreadable(path) }
        return points
    }
}
