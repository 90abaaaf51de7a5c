import PropertyBased
import Testing
import WorkerGroup

/// G3, G4: the handover machine against the policy it replaced. `LegacyPath` is the service's handover as it
/// was before ``Handover`` decided it (`RideStatusService+Handover.swift` at e2f4ce8): its maps, flags and
/// order of steps, with the I/O written down as effects instead of done. `NewPath` is the machine with a store
/// that follows its actions, as the service now carries them out. Both see the same random events (members
/// joining and leaving, states written live or read back, release notices, markers back or lost, statuses,
/// bookings, ticks, a rejoin) and must do the same: the same effects in the same order, the same rides held.
@Suite("Handover: the machine does what the service's handover did (G3, G4)")
struct HandoverDifferentialTests {
    /// What either path does that another party could see, or that decides what it serves next.
    enum Effect: Equatable, CustomStringConvertible {
        case wroteReleased(String, StateVersion)
        case notice([Int])
        case fenced(String)
        case rewrote(String)
        case lifted(String, Int)
        case droppedAll(Int)
        case subscribedLoad([Int])
        case unsubscribedLoad([Int])
        case subscribedStatus(String)
        case unsubscribedStatus(String)
        case marker(String)
        case refused
        case restored(String, StateVersion)
        case replayed([Int])
        case waited(Double)
        case booked(String)

        var description: String {
            switch self {
            case .wroteReleased(let r, let v): "wroteReleased(\(r), \(v))"
            case .notice(let b): "notice(\(b.count) buckets)"
            case .fenced(let r): "fenced(\(r))"
            case .rewrote(let r): "rewrote(\(r))"
            case .lifted(let r, let c): "lifted(\(r), \(c))"
            case .droppedAll(let n): "droppedAll(\(n))"
            case .subscribedLoad(let b): "subscribedLoad(\(b.count) buckets)"
            case .unsubscribedLoad(let b): "unsubscribedLoad(\(b.count) buckets)"
            case .subscribedStatus(let r): "subscribedStatus(\(r))"
            case .unsubscribedStatus(let r): "unsubscribedStatus(\(r))"
            case .marker(let m): "marker(\(m))"
            case .refused: "refused"
            case .restored(let r, let v): "restored(\(r), \(v))"
            case .replayed(let b): "replayed(\(b.count) buckets)"
            case .waited(let w): "waited(\(w))"
            case .booked(let r): "booked(\(r))"
            }
        }
    }

    /// The rides a worker holds (its engine), shared by both paths' models.
    struct Engine {
        var held: [String: StateVersion] = [:]
        static let block = 12

        /// G2, G3, C5: a takeover's version: one epoch up, a block (or nothing, at a recovery) above the ceiling.
        static func takenOver(_ version: StateVersion, block: Int) -> StateVersion {
            let reserved = max(version.sequence, version.ceiling)
            return StateVersion(epoch: version.epoch + 1, ceiling: reserved + block, sequence: version.sequence)
        }

        /// C5: a held ride lifted above `ceiling` (``RideEngine/liftSequence(of:above:)``): its sequence goes there,
        /// and its version's ceiling with it; a ride at or above it, or not held, is left.
        mutating func lift(_ ride: String, above ceiling: Int) {
            guard let version = held[ride], ceiling > version.sequence else { return }
            held[ride] = StateVersion(epoch: version.epoch, ceiling: max(version.ceiling, ceiling), sequence: ceiling)
        }

        /// V5: a staged state takes the sequence of its retained status.
        static func merged(_ version: StateVersion, status: Int) -> StateVersion {
            StateVersion(
                epoch: version.epoch, ceiling: max(version.ceiling, status), sequence: max(version.sequence, status))
        }
    }

    /// One step of a run.
    enum Event {
        case members([String])
        case state(ride: String, legacy: Bool, Seen<StateVersion>)
        case release([Int], by: String)
        case marker(index: Int, garbage: Bool)
        case status(ride: String, Seen<Int>)
        case booking(ride: String)
        case tick
        case rejoin
        /// A fence, a release of the ride's bucket by w-b, and the read again's marker, one after the other.
        case takenBack(ride: String, StateVersion)
    }

    // MARK: - The service's handover before the machine (transcribed; I/O written down)

    struct LegacyPath {
        var machine: BucketHandover
        var viewFormed = false
        var fullRead = false
        var staged: [String: StateVersion] = [:]
        var legacy: Set<String> = []
        var markerNonce: String
        var loads: [Int: [Int]] = [:]
        var fenced: [Int: [String: StateVersion]] = [:]
        var releasedHere: [Int: (worker: String, at: Double)] = [:]
        var reclaimed: [Int: Set<String>] = [:]
        var statusReads: [Int: (buckets: [Int], rides: [String])] = [:]
        var readingStatus: Set<String> = []
        var retainedStatuses: [String: Int] = [:]
        var engine = Engine()
        var effects: [Effect] = []
        var members: [String] = []
        let ownEchoes: Bool
        let readsStatuses: Bool
        let releaseTimeout = 6.0
        let releaseMemory = 15.0

        init(ownEchoes: Bool, readsStatuses: Bool) {
            machine = BucketHandover(selfID: "w-a", releaseTimeout: releaseTimeout)
            markerNonce = "n1"
            self.ownEchoes = ownEchoes
            self.readsStatuses = readsStatuses
        }

        func serves(ride: String) -> Bool { machine.serving.contains(Ownership.bucket(of: ride)) }
        func reads(ride: String) -> Bool {
            let bucket = Ownership.bucket(of: ride)
            return machine.isArriving(bucket) || machine.isReclaiming(bucket)
        }
        func isFencedAway(ride: String) -> Bool { fenced[Ownership.bucket(of: ride)]?[ride] != nil }

        mutating func dropStaged(of buckets: [Int]) {
            let lost = Set(buckets)
            staged = staged.filter { !lost.contains(Ownership.bucket(of: $0.key)) }
        }

        @discardableResult
        mutating func forgetFenced(_ ride: String, bucket: Int) -> StateVersion? {
            let kept = fenced[bucket]?.removeValue(forKey: ride)
            if fenced[bucket]?.isEmpty == true { fenced[bucket] = nil }
            return kept
        }

        mutating func chooseRead(members: [String]) {
            self.members = members
            fullRead = members.count == 1
        }

        mutating func membersChanged(_ members: [String], now: Double) {
            self.members = members
            guard viewFormed else { return }
            carryOut(machine.membersChanged(members, now: now), now: now)
        }

        mutating func formFirstView(now: Double) {
            viewFormed = true
            carryOut(machine.membersChanged(members, now: now), now: now, recovering: fullRead)
            let machine = machine
            staged = staged.filter { machine.isArriving(Ownership.bucket(of: $0.key)) }
        }

        mutating func rejoin(nonce: String, now: Double) {
            guard viewFormed, members.count > 1 else { return }
            let dropped = engine.held.count
            engine.held = [:]
            effects.append(.droppedAll(dropped))
            machine = BucketHandover(selfID: "w-a", releaseTimeout: releaseTimeout)
            staged = [:]
            loads = [:]
            fenced = [:]
            releasedHere = [:]
            reclaimed = [:]
            for generation in statusReads.keys.sorted() { forgetStatusReads(of: statusReads[generation]!.rides) }
            statusReads = [:]
            markerNonce = nonce
            carryOut(machine.membersChanged(members, now: now), now: now)
        }

        mutating func tick(now: Double) {
            guard viewFormed else { return }
            carryOut(machine.tick(now: now), now: now)
        }

        mutating func carryOut(_ actions: [BucketHandover.Action], now: Double, recovering: Bool = false) {
            for action in actions {
                switch action {
                case .release(let buckets):
                    release(buckets)
                    forgetReclaims(of: buckets)
                case .resume(let buckets):
                    resume(buckets, now: now)
                case .load(let buckets, let generation):
                    if recovering {
                        carryOut(machine.loaded(buckets, generation: generation, now: now), now: now, recovering: true)
                    } else {
                        load(buckets, generation: generation)
                    }
                case .drop(let buckets):
                    dropStaged(of: buckets)
                    effects.append(.notice(buckets))
                case .serve(let buckets):
                    serve(buckets, now: now, recovering: recovering)
                    if !recovering, let wait = machine.lastServeWait, wait >= 0, wait < 86_400 {
                        effects.append(.waited(wait))
                    }
                }
            }
        }

        mutating func release(_ buckets: [Int]) {
            let lost = Set(buckets)
            for id in engine.held.keys.sorted() where lost.contains(Ownership.bucket(of: id)) {
                effects.append(.wroteReleased(id, engine.held.removeValue(forKey: id)!))
            }
            effects.append(.notice(buckets))
        }

        mutating func load(_ buckets: [Int], generation: Int) {
            let loading = Set(buckets)
            let legacy = legacy
            staged = staged.filter { !loading.contains(Ownership.bucket(of: $0.key)) || legacy.contains($0.key) }
            loads = loads.compactMapValues { earlier in
                let rest = earlier.filter { !loading.contains($0) }
                return rest.isEmpty ? nil : rest
            }
            for earlier in statusReads.keys.sorted() {
                let read = statusReads[earlier]!
                let overtaken = read.rides.filter { loading.contains(Ownership.bucket(of: $0)) }
                guard !overtaken.isEmpty else { continue }
                forgetStatusReads(of: overtaken)
                statusReads[earlier]?.rides.removeAll { loading.contains(Ownership.bucket(of: $0)) }
            }
            loads[generation] = buckets
            effects.append(.subscribedLoad(buckets))
            effects.append(.marker("\(markerNonce):\(generation)"))
        }

        mutating func loadFinished(_ text: String, now: Double) {
            let statuses = text.hasPrefix("s")
            let parts = text.dropFirst(statuses ? 1 : 0).split(separator: ":")
            guard parts.count == 2, parts[0] == markerNonce, let generation = Int(parts[1]) else { return }
            if statuses { return statusesRead(generation: generation, now: now) }
            guard let buckets = loads.removeValue(forKey: generation) else { return }
            let machine = machine
            let lagging = Set(buckets.filter { !machine.arrivesReleased($0) })
            let rides = staged.keys.filter {
                lagging.contains(Ownership.bucket(of: $0)) && engine.held[$0] == nil
            }.sorted()
            effects.append(.unsubscribedLoad(buckets))
            guard !rides.isEmpty, readsStatuses else {
                return carryOut(self.machine.loaded(buckets, generation: generation, now: now), now: now)
            }
            statusReads[generation] = (buckets, rides)
            readingStatus.formUnion(rides)
            for ride in rides { effects.append(.subscribedStatus(ride)) }
            effects.append(.marker("s\(markerNonce):\(generation)"))
        }

        mutating func statusesRead(generation: Int, now: Double) {
            guard let (buckets, rides) = statusReads.removeValue(forKey: generation) else { return }
            for ride in rides {
                readingStatus.remove(ride)
                if let retained = retainedStatuses.removeValue(forKey: ride), let current = staged[ride] {
                    staged[ride] = Engine.merged(current, status: retained)
                }
            }
            carryOut(machine.loaded(buckets, generation: generation, now: now), now: now)
            for ride in rides { effects.append(.unsubscribedStatus(ride)) }
        }

        mutating func forgetStatusReads(of rides: [String]) {
            for ride in rides {
                readingStatus.remove(ride)
                retainedStatuses[ride] = nil
                effects.append(.unsubscribedStatus(ride))
            }
        }

        mutating func takeOverStatus(ride: String, _ seen: Seen<Int>) {
            guard readingStatus.contains(ride) else { return }
            switch seen {
            case .deleted: return
            case .unreadable: effects.append(.refused)
            case .read(let sequence):
                if let kept = retainedStatuses[ride], kept >= sequence { return }
                retainedStatuses[ride] = sequence
            }
        }

        mutating func serve(_ buckets: [Int], now: Double, recovering: Bool, resuming: Set<String>? = nil) {
            let gained = Set(buckets)
            for id in staged.keys.sorted() where gained.contains(Ownership.bucket(of: id)) {
                let state = staged[id]!
                if engine.held[id] != nil || resuming.map({ !$0.contains(id) }) == true {
                    staged[id] = nil
                    continue
                }
                let ride = Engine.takenOver(state, block: recovering ? 0 : Engine.block)
                engine.held[id] = ride
                effects.append(.restored(id, ride))
                staged[id] = nil
                legacy.remove(id)
            }
            effects.append(.replayed(buckets))
        }

        mutating func stage(ride id: String, legacy isLegacy: Bool, _ seen: Seen<StateVersion>) {
            switch seen {
            case .deleted: if !isLegacy { staged[id] = nil }
            case .unreadable: effects.append(.refused)
            case .read(let ride):
                if isLegacy { legacy.insert(id) }
                if let current = staged[id], !(ride > current) { return }
                staged[id] = ride
            }
        }

        mutating func handleState(ride: String, legacy isLegacy: Bool, _ seen: Seen<StateVersion>, now: Double) {
            if let current = engine.held[ride], !isLegacy {
                stateWritten(ride: ride, seen, current: current, now: now)
            } else {
                if reads(ride: ride) { stage(ride: ride, legacy: isLegacy, seen) }
                if !isLegacy { noteFencedState(ride: ride, seen) }
            }
        }

        mutating func stateWritten(ride: String, _ seen: Seen<StateVersion>, current: StateVersion, now: Double) {
            var other: StateVersion?
            if case .read(let version) = seen { other = version }
            let bucket = Ownership.bucket(of: ride)
            // Added with C5's lift from a same-epoch taker's write (the service before the machine rewrote it, or took
            // it for an echo): a copy of the held epoch above the held one lifts the ride to its ceiling.
            if let other, other.epoch == current.epoch, other > current {
                engine.lift(ride, above: other.ceiling)
                effects.append(.lifted(ride, other.ceiling))
                return
            }
            if let other, other.epoch == current.epoch, machine.isReclaiming(bucket) { return }
            if let other, other.epoch > current.epoch {
                engine.held[ride] = nil
                effects.append(.fenced(ride))
                fenced(ride, by: other, now: now)
                return
            }
            // And a copy equal to the held one is left (two takers level after a lift rewrote each other's); under
            // MQTT 5 one below whose ceiling passes the held number lifts the ride as well as being written over.
            if let other, other.epoch == current.epoch, other == current { return }
            if ownEchoes, let other, other.epoch == current.epoch { return }
            if let other, other.epoch == current.epoch, other.ceiling > current.sequence {
                engine.lift(ride, above: other.ceiling)
                effects.append(.lifted(ride, other.ceiling))
            }
            effects.append(.rewrote(ride))
        }

        mutating func receiveRelease(_ buckets: [Int], worker: String, now: Double) {
            guard worker != "w-a", viewFormed else { return }
            let served = buckets.filter { machine.serving.contains($0) }
            carryOut(machine.released(buckets, by: worker, now: now), now: now)
            guard !served.isEmpty else { return }
            for bucket in served { releasedHere[bucket] = (worker, now) }
            startReclaim(served.filter { fenced[$0] != nil }, now: now)
        }

        mutating func startReclaim(_ buckets: [Int], now: Double) {
            let actions = machine.reclaim(buckets, now: now)
            for case .load(let reading, _) in actions {
                for bucket in reading { reclaimed[bucket] = fenced[bucket].map { Set($0.keys) } }
            }
            carryOut(actions, now: now)
        }

        mutating func resume(_ buckets: [Int], now: Double) {
            var rides: Set<String> = []
            for bucket in buckets {
                let ids = reclaimed.removeValue(forKey: bucket) ?? []
                rides.formUnion(ids)
                for id in ids {
                    guard let seen = forgetFenced(id, bucket: bucket) else { continue }
                    if let read = staged[id], seen > read { staged[id] = seen }
                }
            }
            serve(buckets, now: now, recovering: false, resuming: rides)
            let again = buckets.filter { fenced[$0] != nil && recentlyReleased($0, now: now) }
            if !again.isEmpty { startReclaim(again, now: now) }
        }

        func recentlyReleased(_ bucket: Int, now: Double) -> Bool {
            guard let release = releasedHere[bucket] else { return false }
            return now - release.at <= releaseMemory && members.contains(release.worker)
        }

        mutating func fenced(_ ride: String, by other: StateVersion, now: Double) {
            let bucket = Ownership.bucket(of: ride)
            guard machine.serving.contains(bucket) else { return }
            keepFenced(ride, other, bucket: bucket)
            if recentlyReleased(bucket, now: now) { startReclaim([bucket], now: now) }
        }

        mutating func noteFencedState(ride: String, _ seen: Seen<StateVersion>) {
            guard isFencedAway(ride: ride) else { return }
            let bucket = Ownership.bucket(of: ride)
            switch seen {
            case .deleted: forgetFenced(ride, bucket: bucket)
            case .unreadable: return
            case .read(let state): keepFenced(ride, state, bucket: bucket)
            }
        }

        mutating func keepFenced(_ ride: String, _ state: StateVersion, bucket: Int) {
            if let kept = fenced[bucket]?[ride], !(state > kept) { return }
            fenced[bucket, default: [:]][ride] = state
        }

        mutating func forgetReclaims(of buckets: [Int]) {
            for bucket in buckets {
                fenced[bucket] = nil
                releasedHere[bucket] = nil
                reclaimed[bucket] = nil
            }
            dropStaged(of: buckets)
        }

        mutating func booking(ride: String) {
            guard serves(ride: ride), !(isFencedAway(ride: ride) && engine.held[ride] == nil),
                engine.held[ride] == nil
            else { return }
            engine.held[ride] = StateVersion(epoch: 1, ceiling: 12, sequence: 1)
            effects.append(.booked(ride))
        }
    }

    // MARK: - The machine, carried out as the service now does

    struct NewPath {
        var machine: Handover<StateVersion>
        var staged: [String: StateVersion] = [:]
        var fenced: [String: StateVersion] = [:]
        var statuses: [String: Int] = [:]
        var engine = Engine()
        var effects: [Effect] = []
        var members: [String] = []

        init(ownEchoes: Bool, readsStatuses: Bool) {
            machine = Handover(
                selfID: "w-a", releaseTimeout: 6, releaseMemory: 15, markerNonce: "n1", ownEchoes: ownEchoes,
                readsStatuses: readsStatuses)
        }

        mutating func carryOut(
            _ actions: [Handover<StateVersion>.Action], state: StateVersion? = nil, status: Int? = nil
        ) {
            for action in actions {
                switch action {
                case .release(let buckets):
                    let lost = Set(buckets)
                    for id in engine.held.keys.sorted() where lost.contains(Ownership.bucket(of: id)) {
                        effects.append(.wroteReleased(id, engine.held.removeValue(forKey: id)!))
                    }
                    effects.append(.notice(buckets))
                case .notice(let buckets): effects.append(.notice(buckets))
                case .fence(let ride):
                    engine.held[ride] = nil
                    effects.append(.fenced(ride))
                case .rewrite(let ride): effects.append(.rewrote(ride))
                case .liftRide(let ride, let ceiling):
                    engine.lift(ride, above: ceiling)
                    effects.append(.lifted(ride, ceiling))
                case .dropAll:
                    effects.append(.droppedAll(engine.held.count))
                    engine.held = [:]
                case .load(let buckets, let marker):
                    effects.append(.subscribedLoad(buckets))
                    effects.append(.marker(marker))
                case .endLoad(let buckets): effects.append(.unsubscribedLoad(buckets))
                case .readStatuses(let rides, let marker):
                    for ride in rides { effects.append(.subscribedStatus(ride)) }
                    effects.append(.marker(marker))
                case .endStatusReads(let rides):
                    for ride in rides {
                        statuses[ride] = nil
                        effects.append(.unsubscribedStatus(ride))
                    }
                case .waitedOut: break
                // Notices here carry no floors (the old path had none), so no lift comes: HandoverTests has it.
                case .lift: Issue.record("a lift from a notice without floors")
                case .stage(let ride): staged[ride] = state
                case .keepFenced(let ride): fenced[ride] = state
                case .keepStatus(let ride): statuses[ride] = status
                case .refuse: effects.append(.refused)
                case .unstage(let rides): for ride in rides { staged[ride] = nil }
                case .unfence(let rides): for ride in rides { fenced[ride] = nil }
                case .promote(let ride): if let newer = fenced[ride] { staged[ride] = newer }
                case .mergeStatuses(let rides):
                    for ride in rides {
                        if let retained = statuses.removeValue(forKey: ride), let current = staged[ride] {
                            staged[ride] = Engine.merged(current, status: retained)
                        }
                    }
                case .serve(let serve):
                    for id in serve.rides {
                        guard let state = staged.removeValue(forKey: id), engine.held[id] == nil else { continue }
                        let ride = Engine.takenOver(state, block: serve.kind == .recovery ? 0 : Engine.block)
                        engine.held[id] = ride
                        effects.append(.restored(id, ride))
                    }
                    effects.append(.replayed(serve.buckets))
                    if let waited = serve.waited { effects.append(.waited(waited)) }
                }
            }
        }

        mutating func booking(ride: String) {
            guard machine.serves(ride: ride), !(machine.isFencedAway(ride: ride) && engine.held[ride] == nil),
                engine.held[ride] == nil
            else { return }
            engine.held[ride] = StateVersion(epoch: 1, ceiling: 12, sequence: 1)
            effects.append(.booked(ride))
        }
    }

    // MARK: - The runs

    /// Rides in three buckets, two each, so that reads again and fences share buckets.
    static let rides: [String] = {
        var found: [String] = []
        var buckets: [Int: Int] = [:]
        for index in 0... {
            let ride = "r-\(index)"
            let bucket = Ownership.bucket(of: ride)
            if buckets.count < 3 || buckets[bucket] != nil, buckets[bucket, default: 0] < 2 {
                buckets[bucket, default: 0] += 1
                found.append(ride)
            }
            if found.count == 6 { break }
        }
        return found
    }()
    static let workers = ["w-a", "w-b", "w-c"]

    /// Which of `count` markers sent comes back: mostly one of the newest three (a marker comes back soon),
    /// sometimes any (late, or overtaken).
    static func pick(_ index: Int, of count: Int) -> Int {
        index < 24 ? count - 1 - index % min(3, count) : index % count
    }

    static let versionGen = zip(Gen.int(in: 0...3), Gen.int(in: 0...3), Gen.int(in: 0...30)).map { e, c, s in
        StateVersion(epoch: UInt64(e), ceiling: c * 12, sequence: s)
    }
    static let stateGen = zip(Gen.int(in: 0...9), versionGen).map { kind, version -> Seen<StateVersion> in
        kind == 0 ? .deleted : kind == 1 ? .unreadable : .read(version)
    }
    static let statusGen = zip(Gen.int(in: 0...9), Gen.int(in: 0...40)).map { kind, sequence -> Seen<Int> in
        kind == 0 ? .deleted : kind == 1 ? .unreadable : .read(sequence)
    }
    static let eventGen = zip(
        Gen.int(in: 0...99), Gen.int(in: 0..<6), Gen.int(in: 0...7), stateGen, statusGen, Gen.int(in: 0...30)
    ).map { kind, ride, pick, state, status, index -> Event in
        let name = rides[ride]
        switch kind {
        case 0..<6:
            // w-a and any of the others.
            return .members(["w-a"] + [["w-b"], ["w-c"], ["w-b", "w-c"], []][pick % 4])
        case 6..<33: return .state(ride: name, legacy: pick == 7, state)
        case 36..<50:
            let buckets = Array(
                Set(
                    rides.enumerated().filter { ($0.offset + pick) % 3 != 0 }.map {
                        Ownership.bucket(of: $0.element)
                    })
            ).sorted()
            return .release(pick == 0 ? [] : buckets, by: workers[pick % 3])
        case 50..<75: return .marker(index: index, garbage: pick == 0)
        case 75..<83: return .status(ride: name, status)
        case 83..<92: return .booking(ride: name)
        case 92..<95: return .tick
        case 95..<97: return .rejoin
        case 33..<36, 97..<100: return .takenBack(ride: name, StateVersion(epoch: 3, ceiling: 48, sequence: 40))
        default: return .tick
        }
    }
    static let runGen = zip(
        Gen.int(in: 0...3), Gen.bool, Gen.bool, stateGen.array(of: 0...6), eventGen.array(of: 1...50),
        Gen.double(in: 0.05...4).array(of: 50)
    )

    /// The broker's side of a run: the retained ride states (what other workers wrote, and this worker's own
    /// release writes), delivered to a load before its marker, as a broker sends retained messages first.
    struct Broker {
        var retained: [String: Seen<StateVersion>] = [:]
        /// The buckets each load marker closes, from the effects.
        var loads: [String: [Int]] = [:]
        var seen = 0

        /// Takes in the effects since the last call.
        mutating func follow(_ effects: [Effect]) {
            var subscribed: [Int] = []
            for effect in effects[seen...] {
                switch effect {
                case .wroteReleased(let ride, let version): retained[ride] = .read(version)
                case .subscribedLoad(let buckets): subscribed = buckets
                case .marker(let marker): loads[marker] = subscribed
                default: break
                }
            }
            seen = effects.count
        }

        /// The retained states a load of `marker` reads, in ride order.
        func states(for marker: String) -> [(String, Seen<StateVersion>)] {
            guard let buckets = loads[marker].map(Set.init) else { return [] }
            return retained.keys.sorted().filter { buckets.contains(Ownership.bucket(of: $0)) }.map {
                ($0, retained[$0]!)
            }
        }
    }

    /// Runs one random run through the former path and, with `compare`, through the machine too, checking after
    /// each step that both did the same; returns the machine's effects.
    static func run(
        _ run: (Int, Bool, Bool, [Seen<StateVersion>], [Event], [Double]), compare: Bool
    ) -> [Effect] {
        let (start, ownEchoes, readsStatuses, recovered, events, gaps) = run
        var old = LegacyPath(ownEchoes: ownEchoes, readsStatuses: readsStatuses)
        var new = NewPath(ownEchoes: ownEchoes, readsStatuses: readsStatuses)
        var broker = Broker()
        let firstMembers = ["w-a"] + [[], ["w-b"], ["w-c"], ["w-b", "w-c"]][start]
        // The recovery: the view marker, the states read, the first view.
        old.chooseRead(members: firstMembers)
        new.members = firstMembers
        _ = new.machine.chooseRead(members: firstMembers)
        for (index, state) in recovered.enumerated() {
            let ride = rides[index % rides.count]
            broker.retained[ride] = state
            old.stage(ride: ride, legacy: index == 5, state)
            new.carryOut(new.machine.stateRecovered(ride: ride, legacy: index == 5, state), state: state.version)
        }
        var now = 100.0
        old.formFirstView(now: now)
        new.carryOut(new.machine.formFirstView(members: firstMembers, now: now))
        var nonces = 1

        func state(_ ride: String, legacy: Bool, _ seen: Seen<StateVersion>) {
            if compare { old.handleState(ride: ride, legacy: legacy, seen, now: now) }
            let held = legacy ? nil : new.engine.held[ride]
            new.carryOut(
                new.machine.stateSeen(ride: ride, legacy: legacy, seen, held: held, now: now),
                state: seen.version)
        }

        /// One event to both paths; false once they differ.
        func apply(_ event: Event, step: Int) -> Bool {
            broker.follow(new.effects)
            switch event {
            case .members(let members):
                if compare { old.membersChanged(members, now: now) }
                new.members = members
                new.carryOut(new.machine.membersChanged(members, now: now))
            case .state(let ride, let legacy, let seen):
                if !legacy { broker.retained[ride] = seen }
                state(ride, legacy: legacy, seen)
            case .release(let buckets, let worker):
                if compare { old.receiveRelease(buckets, worker: worker, now: now) }
                new.carryOut(new.machine.releaseNoticed(buckets, by: worker, now: now))
            case .marker(let index, let garbage):
                let markers = new.effects.compactMap { if case .marker(let text) = $0 { text } else { nil } }
                guard !markers.isEmpty || garbage else { return true }
                let text = garbage ? "x:1" : markers[pick(index, of: markers.count)]
                // A load's retained states come before its marker.
                for (ride, seen) in broker.states(for: text) { state(ride, legacy: false, seen) }
                if compare { old.loadFinished(text, now: now) }
                let engine = new.engine
                new.carryOut(new.machine.markerReturned(text, now: now) { engine.held[$0] != nil })
            case .status(let ride, let seen):
                if compare { old.takeOverStatus(ride: ride, seen) }
                var sequence: Int?
                if case .read(let value) = seen { sequence = value }
                new.carryOut(new.machine.statusSeen(ride: ride, seen), status: sequence)
            case .booking(let ride):
                if compare { old.booking(ride: ride) }
                new.booking(ride: ride)
            case .tick:
                if compare { old.tick(now: now) }
                new.carryOut(new.machine.tick(now: now))
            case .rejoin:
                nonces += 1
                if compare { old.rejoin(nonce: "n\(nonces)", now: now) }
                new.carryOut(new.machine.rejoin(members: new.members, nonce: "n\(nonces)", now: now))
            case .takenBack(let ride, let version):
                // w-b writes the ride under a newer epoch, releases its bucket, and the read again ends.
                for part: Event in [
                    .state(ride: ride, legacy: false, .read(version)),
                    .release([Ownership.bucket(of: ride)], by: "w-b"), .marker(index: 0, garbage: false),
                ] {
                    guard apply(part, step: step) else { return false }
                }
                return true
            }
            guard compare else { return true }
            #expect(
                old.effects == new.effects,
                "step \(step) (\(event)): before \(old.effects.suffix(6)), now \(new.effects.suffix(6))")
            #expect(old.engine.held == new.engine.held, "step \(step): the rides held")
            #expect(old.staged == new.staged, "step \(step): the states staged")
            return old.effects == new.effects && old.staged == new.staged && old.engine.held == new.engine.held
        }

        for (step, event) in events.enumerated() {
            now += gaps[step]
            guard apply(event, step: step) else { break }
        }
        return new.effects
    }

    @Test("G3, G4: on random runs the machine and the service's former handover do the same, step by step")
    func sameAsBefore() async {
        await propertyCheck(count: 25, input: Self.runGen) { run in
            // Each run is a few dozen milliseconds of work on the shared pool: let the other tests in between.
            await Task.yield()
            _ = Self.run(run, compare: true)
        }
    }

    @Test("G3, G4: the random runs reach the cases that matter: fences, reads again, resumes, takeovers, rejoins")
    func runsReachTheCases() async {
        // A differential test proves little if the runs never get anywhere: count what they reach.
        var fenced = 0
        var resumed = 0
        var restored = 0
        var statusReads = 0
        var rejoined = 0
        var runs = 0
        // In batches until every case is reached (a resume needs a fence, a release and a read again in one run:
        // about one batch of 25 in 10 misses it), at most 200 runs: a machine that never gets there still fails.
        func reached() -> Bool { fenced > 2 && restored > 20 && resumed > 0 && statusReads > 3 && rejoined > 2 }
        while !reached() && runs < 200 {
            runs += 25
            await propertyCheck(count: 25, input: Self.runGen) { run in
                await Task.yield()
                var fencedRides: Set<String> = []
                for effect in Self.run(run, compare: false) {
                    switch effect {
                    case .fenced(let ride):
                        fenced += 1
                        fencedRides.insert(ride)
                    case .restored(let ride, _):
                        restored += 1
                        if fencedRides.contains(ride) { resumed += 1 }
                    case .subscribedStatus: statusReads += 1
                    case .droppedAll: rejoined += 1
                    default: break
                    }
                }
            }
        }
        #expect(
            reached(),
            "\(runs) runs: fenced \(fenced), restored \(restored), served again \(resumed), status reads \(statusReads), rejoins \(rejoined)"
        )
    }
}
