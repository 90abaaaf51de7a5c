public import Foundation

/// Available vehicles by class on a grid of cells, for pickup estimates of quotes (3.4). Updates are O(1);
/// a nearest query scans rings of cells outwards from the pickup and stops as soon as no closer vehicle
/// can exist, so its cost depends on the local density, not on the fleet's size.
public struct FleetIndex: Sendable {
    /// An available vehicle found near a point.
    public struct Candidate: Sendable, Equatable {
        public var vehicleId: String
        public var coordinate: Coordinate
        /// Great-circle metres to the query point.
        public var distance: Double
        public var speed: Double?
        public var updated: Date
    }

    /// What a cell holds: enough to rank without touching the vehicle's record.
    private struct Member {
        var latitude: Double
        var longitude: Double
        var updated: Double
        var slot: Int32
    }

    private struct Record {
        var id: String
        var vehicleClass: Int
        var cell: Int64
        var indexInCell: Int
        var speed: Double?
    }

    /// Cell edge in degrees of latitude and longitude.
    public let cellDegrees: Double
    private var records: [Record?] = []
    private var freeSlots: [Int32] = []
    private var slotOf: [String: Int32] = [:]
    private var classIndex: [String: Int] = [:]
    private var grids: [[Int64: [Member]]] = []
    private var classCounts: [Int] = []

    private static let metresPerDegree = 6_371_008.8 * Double.pi / 180

    /// - Parameter cellDegrees: cell edge; 0.01° is about 1.1 km north-south.
    public init(cellDegrees: Double = 0.01) {
        self.cellDegrees = cellDegrees
    }

    /// Vehicles in the index.
    public var count: Int { slotOf.count }

    /// An available vehicle as the read API lists it.
    public struct Listing: Sendable, Equatable {
        public var vehicleId: String
        public var vehicleClass: String
        public var coordinate: Coordinate
        public var speed: Double?
        public var updated: Date
    }

    /// Every available vehicle, in no order: O(vehicles), no sorting (a reader sorts outside any lock).
    public func listing() -> [Listing] {
        var names = Array(repeating: "", count: classIndex.count)
        for (name, id) in classIndex { names[id] = name }
        return slotOf.compactMap { id, slot in
            guard let record = records[Int(slot)],
                let member = grids[record.vehicleClass][record.cell]?[record.indexInCell]
            else { return nil }
            return Listing(
                vehicleId: id, vehicleClass: names[record.vehicleClass],
                coordinate: Coordinate(latitude: member.latitude, longitude: member.longitude), speed: record.speed,
                updated: Date(timeIntervalSince1970: member.updated))
        }
    }

    /// Adds or moves an available vehicle.
    public mutating func update(
        vehicleId: String, vehicleClass: String, coordinate: Coordinate, speed: Double?, at time: Date
    ) {
        let classID = classID(for: vehicleClass)
        let cell = cellKey(coordinate)
        let member = Member(
            latitude: coordinate.latitude, longitude: coordinate.longitude, updated: time.timeIntervalSince1970,
            slot: 0)
        if let slot = slotOf[vehicleId], let record = records[Int(slot)] {
            if record.vehicleClass == classID && record.cell == cell {
                var moved = member
                moved.slot = slot
                grids[classID][cell]![record.indexInCell] = moved
                records[Int(slot)]!.speed = speed
                return
            }
            remove(vehicleId: vehicleId)
        }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = Int32(records.count)
            records.append(nil)
        }
        var placed = member
        placed.slot = slot
        let index = grids[classID][cell, default: []].count
        grids[classID][cell, default: []].append(placed)
        records[Int(slot)] = Record(id: vehicleId, vehicleClass: classID, cell: cell, indexInCell: index, speed: speed)
        slotOf[vehicleId] = slot
        classCounts[classID] += 1
    }

    /// Removes a vehicle (no longer available); unknown ids are ignored.
    public mutating func remove(vehicleId: String) {
        guard let slot = slotOf.removeValue(forKey: vehicleId), let record = records[Int(slot)] else { return }
        records[Int(slot)] = nil
        freeSlots.append(slot)
        classCounts[record.vehicleClass] -= 1
        var members = grids[record.vehicleClass].removeValue(forKey: record.cell) ?? []
        let last = members.removeLast()
        if record.indexInCell < members.count {
            members[record.indexInCell] = last
            records[Int(last.slot)]!.indexInCell = record.indexInCell
        }
        if !members.isEmpty { grids[record.vehicleClass][record.cell] = members }
    }

    /// Removes every vehicle whose position is older than `date`; returns how many.
    @discardableResult
    public mutating func removeUpdated(before date: Date) -> Int {
        let limit = date.timeIntervalSince1970
        var stale: [String] = []
        for grid in grids {
            for members in grid.values {
                for member in members where member.updated < limit {
                    if let record = records[Int(member.slot)] { stale.append(record.id) }
                }
            }
        }
        for id in stale { remove(vehicleId: id) }
        return stale.count
    }

    /// The `limit` nearest vehicles of `vehicleClass` within `maxDistance` metres of `point`, updated at or
    /// after `notBefore`, nearest first.
    public func nearest(
        _ vehicleClass: String, to point: Coordinate, limit: Int, maxDistance: Double, notBefore: Date
    ) -> [Candidate] {
        guard limit > 0, let classID = classIndex[vehicleClass], classCounts[classID] > 0 else { return [] }
        let grid = grids[classID]
        let minimumTime = notBefore.timeIntervalSince1970
        let cosLatitude = cos(point.latitude * .pi / 180)
        let cellHeight = cellDegrees * Self.metresPerDegree
        // The narrowest cell within reach bounds how far each ring is, whatever its latitude.
        let reachDegrees = maxDistance / Self.metresPerDegree
        let cosFarthest = cos(min(89.9, abs(point.latitude) + reachDegrees) * .pi / 180)
        let ringStep = min(cellHeight, cellHeight * cosFarthest)
        let maxRing = Int((maxDistance / ringStep).rounded(.up)) + 1
        let row0 = Int64((point.latitude / cellDegrees).rounded(.down))
        let column0 = Int64((point.longitude / cellDegrees).rounded(.down))
        // A flat-earth distance rejects vehicles cheaply: those beyond the limit, or farther than the worst of
        // a full list, each with 1 % to spare (near those bounds it differs from the great circle). Ranking,
        // limit and result use the great-circle distance of E1 itself, so a vehicle just inside `maxDistance`
        // is never lost to the approximation.
        func rough(_ metres: Double) -> Double { (metres * 1.01 + 1) * (metres * 1.01 + 1) }
        var cutoff = rough(maxDistance)

        var best: [(distance: Double, member: Member)] = []
        best.reserveCapacity(limit + 1)
        var seen = 0
        func consider(_ members: [Member]) {
            seen += members.count
            for member in members where member.updated >= minimumTime {
                let dy = (member.latitude - point.latitude) * Self.metresPerDegree
                let dx = (member.longitude - point.longitude) * Self.metresPerDegree * cosLatitude
                guard dx * dx + dy * dy <= cutoff else { continue }
                let distance = point.distance(to: Coordinate(latitude: member.latitude, longitude: member.longitude))
                guard distance <= maxDistance else { continue }
                if best.count == limit {
                    guard distance < best[limit - 1].distance else { continue }
                    best.removeLast()
                }
                var index = best.count
                while index > 0 && best[index - 1].distance > distance { index -= 1 }
                best.insert((distance, member), at: index)
                if best.count == limit { cutoff = min(cutoff, rough(best[limit - 1].distance)) }
            }
        }
        for ring in 0...maxRing {
            if ring == 0 {
                if let members = grid[Self.key(row0, column0)] { consider(members) }
            } else {
                let r = Int64(ring)
                for column in (column0 - r)...(column0 + r) {
                    if let members = grid[Self.key(row0 - r, column)] { consider(members) }
                    if let members = grid[Self.key(row0 + r, column)] { consider(members) }
                }
                for row in (row0 - r + 1)...(row0 + r - 1) {
                    if let members = grid[Self.key(row, column0 - r)] { consider(members) }
                    if let members = grid[Self.key(row, column0 + r)] { consider(members) }
                }
            }
            // Anything in ring + 1 is at least `ring` whole cells away (less a margin: on a parallel the
            // great circle is a little shorter than the cells' width).
            let bound = Double(ring) * ringStep * 0.999
            if best.count == limit && best[limit - 1].distance <= bound { break }
            if seen == classCounts[classID] || bound > maxDistance { break }
        }
        return best.compactMap { entry in
            guard let record = records[Int(entry.member.slot)] else { return nil }
            let coordinate = Coordinate(latitude: entry.member.latitude, longitude: entry.member.longitude)
            return Candidate(
                vehicleId: record.id, coordinate: coordinate, distance: entry.distance,
                speed: record.speed, updated: Date(timeIntervalSince1970: entry.member.updated))
        }
    }

    // MARK: Internals

    private mutating func classID(for vehicleClass: String) -> Int {
        if let id = classIndex[vehicleClass] { return id }
        let id = grids.count
        classIndex[vehicleClass] = id
        grids.append([:])
        classCounts.append(0)
        return id
    }

    private func cellKey(_ coordinate: Coordinate) -> Int64 {
        Self.key(
            Int64((coordinate.latitude / cellDegrees).rounded(.down)),
            Int64((coordinate.longitude / cellDegrees).rounded(.down)))
    }

    private static func key(_ row: Int64, _ column: Int64) -> Int64 { row << 32 | (column & 0xFFFF_FFFF) }
}
