import Foundation
import RideDomain

enum TraceError: Error, CustomStringConvertible {
    case tooShort
    case unreadable(String)
    var description: String {
        switch self {
        case .tooShort: return "the trace needs at least two points"
        case .unreadable(let path): return "cannot read a trace from \(path) (GPX trkpt or CSV time,latitude,longitude)"
        }
    }
}

/// Recorded traces: GPX `<trkpt lat=".." lon="..">` or CSV lines `time,latitude,longitude`.
enum Trace {
    static func load(path: String) throws -> [Coordinate] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var points: [Coordinate] = []
        if text.contains("<gpx") || text.contains("<trkpt") {
            for chunk in text.components(separatedBy: "<trkpt").dropFirst() {
                func attribute(_ name: String) -> Double? {
                    guard let range = chunk.range(of: "\(name)=\"") else { return nil }
                    return Double(chunk[range.upperBound...].prefix { $0 != "\"" })
                }
                if let lat = attribute("lat"), let lon = attribute("lon") {
                    points.append(Coordinate(latitude: lat, longitude: lon))
                }
            }
        } else {
            for line in text.split(whereSeparator: \.isNewline) {
                let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                if fields.count >= 3, let lat = Double(fields[1]), let lon = Double(fields[2]) {
                    points.append(Coordinate(latitude: lat, longitude: lon))
                }
            }
        }
        guard !points.isEmpty else { throw TraceError.unreadable(path) }
        return points
    }
}
