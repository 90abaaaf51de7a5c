/// What the handover compares of two copies of a ride's durable state (G2, G3, G4): the owner's epoch first,
/// then whatever orders copies under one epoch. The machine holds these keys, never the rides themselves
/// (`RideDomain` depends on this module, not the other way round).
public protocol HandoverVersion: Comparable, Sendable {
    /// G2: the epoch of the owner that wrote the copy.
    var epoch: UInt64 { get }
    /// C5: the highest sequence the copy reserved.
    var ceiling: Int { get }
    /// C5: the ride's number when the copy was written.
    var sequence: Int { get }
}

/// G3: the version of a ride's durable state: its epoch, the highest sequence it reserved (the ceiling, or the
/// sequence if that is higher), and its sequence. Of two copies read during a handover, the greater is served.
/// A release write ties with the block write before it on epoch and ceiling (it reserves nothing new): the
/// sequence breaks the tie, so the copy with the last status's numbers wins.
public struct StateVersion: HandoverVersion, Hashable, CustomStringConvertible {
    public var epoch: UInt64
    public var ceiling: Int
    public var sequence: Int

    public init(epoch: UInt64, ceiling: Int, sequence: Int) {
        self.epoch = epoch
        self.ceiling = ceiling
        self.sequence = sequence
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.epoch, lhs.ceiling, lhs.sequence) < (rhs.epoch, rhs.ceiling, rhs.sequence)
    }

    public var description: String { "\(epoch)/\(ceiling)/\(sequence)" }
}

/// One copy of something read from the broker, as the handover sees it.
public enum Seen<Version: Sendable & Equatable>: Sendable, Equatable {
    /// A zero-length retained message: the ride was stopped and its state deleted.
    case deleted
    /// A payload that fails the checks of A2.
    case unreadable
    /// A copy that reads, with its version.
    case read(Version)

    /// The version of a copy that reads; nil for a deleted or unreadable one.
    public var version: Version? {
        if case .read(let version) = self { return version }
        return nil
    }
}

/// G3, G4: the whole handover of one worker's rides as the group changes: which buckets it releases, loads and
/// serves (``BucketHandover``), which copies of ride states it keeps while a bucket arrives, which rides it stops
/// publishing because another worker writes them under a newer epoch (fencing), when it reads a bucket again to
/// take such rides back (reclaim), and the markers that close each read. Events in, actions out: no I/O and
/// no clock (each event brings `now`, in seconds).
///
/// The service carries the actions out, and keeps the payloads (the rides and statuses read) in a plain store
/// that follows them: ``Action/stage(_:)`` keeps the state just seen, ``Action/unstage(_:)`` forgets, and so on.
/// The machine keeps only the payloads' versions, generic over ``HandoverVersion``.
public struct Handover<Version: HandoverVersion>: Sendable {
    public enum Action: Sendable, Equatable {
        // Rides held here.
        /// G3, G4: stop serving the held rides of these buckets, writing each one's last state (marked
        /// released), then publish the release notice for the buckets.
        case release([Int])
        /// G3: publish a release notice for these buckets: they were only on their way here, nothing of them
        /// was served (their new owner may count on this worker as their previous owner).
        case notice([Int])
        /// G4: another worker wrote this held ride under a newer epoch: stop publishing it at once, writing
        /// nothing. (Whether its state is kept follows as ``keepFenced(_:)``.)
        case fence(String)
        /// A2: another client wrote this held ride's state (a deletion, an older owner's last write, a
        /// forgery, or under MQTT 5 a copy of its epoch below this worker's): write this worker's own state over
        /// it, so that a restart does not lose the ride.
        case rewrite(String)
        /// G3, G4: this worker was declared dead while cut off (its own will came back): stop serving every held
        /// ride without writing anything; the buckets come back by the handover.
        case dropAll
        /// C5: another worker's release notice brought floors for these buckets, which are served here: that
        /// worker served them too (two workers took them over from the same read while their views split, under
        /// the same epoch; or a previous owner waited out released late). Each held ride of such a bucket numbers
        /// its next status above the floor's ceiling, under its own epoch, its state written at once with the
        /// floor as its sequence; one already above is left as it is.
        case lift([Int: SequenceFloor])
        /// C5: another worker wrote this held ride's state under the same epoch and above this worker's copy: it
        /// serves the ride too (two workers took it over from the same read while their views split) and may
        /// publish up to `above`, its ceiling. The ride numbers its next status above that; the other's retained
        /// state says as much to a restart meanwhile, so nothing is written now (the next status reserves
        /// first, as any past its ceiling does). Each worker's reservation lifts the other, so a subscriber
        /// keeping the highest sequence drops only the statuses of theirs that cross in flight, and when the
        /// other is killed with `-9` (no release notice, no floors) this one is already above all it could have
        /// shown (under MQTT 3.1.1, within half a block: ``stateSeen(ride:legacy:_:held:now:)``).
        case liftRide(String, above: Int)

        // Reads.
        /// G3: subscribe to these buckets' durable states, then publish `marker` on this worker's load marker
        /// topic (the broker sends it after their retained states): ``Handover/markerReturned(_:now:held:)``.
        case load([Int], marker: String)
        /// The states of these buckets are in: their subscriptions go.
        case endLoad([Int])
        /// G3, V5: subscribe to these rides' retained statuses, then publish `marker` on the load marker topic.
        case readStatuses([String], marker: String)
        /// The statuses of these rides are read, or their read is given up: their subscriptions go, with any
        /// status kept of them.
        case endStatusReads([String])
        /// G4: a previous owner did not release these buckets within one interval: they load anyway.
        case waitedOut([Int])

        // The store of payloads.
        /// Keep the state just seen as this ride's staged copy (the newest read for a bucket on its way here).
        case stage(String)
        /// Keep the state just seen as this ride's fenced copy (the newest seen of a ride fenced off here).
        case keepFenced(String)
        /// Keep the status just read as this ride's retained status.
        case keepStatus(String)
        /// A2: the payload just seen fails its checks: dead-letter it; it stays retained for a person to see.
        case refuse
        /// Forget the staged copies of these rides.
        case unstage([String])
        /// Forget the fenced copies of these rides.
        case unfence([String])
        /// The fenced copy of this ride (seen live) is newer than the staged one (read again): it replaces it.
        case promote(String)
        /// V5: each of these rides' staged copy takes what its retained status adds (location, sequence, time).
        case mergeStatuses([String])

        // Serving.
        /// G3: serve the staged copies of these rides, then replay the controls kept for the buckets.
        case serve(Serve)
    }

    /// G3: what one ``Action/serve(_:)`` serves.
    public struct Serve: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// L5: a worker alone in its first view resumes every ride it read at its recovery: each continues
            /// just above its ceiling (the retained status read with it brings the last sequence the broker kept).
            case recovery
            /// G3: buckets taken over from the group: each ride continues a block above its ceiling.
            case takeover
            /// G3, G4: buckets served here all along whose fenced rides come back (``Handover/releaseNoticed``).
            case resume
        }

        public var buckets: [Int]
        /// The rides to serve, in order (the service skips any it holds already).
        public var rides: [String]
        /// Of those, the ones read on the topic of releases before groups: moved under their bucket once served.
        public var legacy: [String]
        public var kind: Kind
        /// G3: for a takeover, the longest any bucket waited from the view that gave it here (seconds).
        public var waited: Double?
        /// C5, G2: the floors that release notices brought for these buckets (``SequenceFloor``): each ride of
        /// such a bucket continues above its floor as well as above the state read.
        public var floors: [Int: SequenceFloor]

        public init(
            buckets: [Int], rides: [String], legacy: [String], kind: Kind, waited: Double?,
            floors: [Int: SequenceFloor] = [:]
        ) {
            self.buckets = buckets
            self.rides = rides
            self.legacy = legacy
            self.kind = kind
            self.waited = waited
            self.floors = floors
        }
    }

    /// What the recovery reads, once the first view of the group is formed.
    public enum Read: Sendable, Equatable {
        /// Alone: every ride state and status (the worker will own every ride).
        case everything
        /// In a group: only the earlier layout's states; the buckets come by the handover.
        case legacyOnly
    }

    public let selfID: String
    /// MQTT 3.1.1 has no no-local: this worker's own state writes come back, under its own epoch.
    public let ownEchoes: Bool
    /// V5: whether a load of buckets a previous owner did not release reads the rides' retained statuses too.
    public let readsStatuses: Bool
    /// How long a release of a served bucket is remembered for a fence that comes after it (seconds).
    public let releaseMemory: Double

    public private(set) var buckets: BucketHandover
    /// False until the first view of the group is formed at the end of the recovery (L5, G1).
    public private(set) var viewFormed = false
    /// Whether the recovery reads every ride state (the worker was alone in its first view).
    public private(set) var fullRead = false
    /// The live members in the last view.
    private var members: [String] = []
    /// Tells this worker's load markers from those of its life before a rejoin.
    public private(set) var markerNonce: String

    /// Versions of the staged copies, by ride: states read for buckets on their way here (or read again).
    private var staged: [String: Version] = [:]
    /// Staged rides read on the earlier layout's topic.
    private var legacy: Set<String> = []
    /// Loads waiting for their marker: generation to buckets.
    private var loads: [Int: [Int]] = [:]
    /// G4: rides fenced off here in buckets this worker still serves, with the newest version seen, by bucket.
    private var fenced: [Int: [String: Version]] = [:]
    /// Which worker last released a bucket this worker serves, and when.
    private var releasedHere: [Int: (worker: String, at: Double)] = [:]
    /// The rides a read again of their bucket is for: those fenced off before it began.
    private var reclaimed: [Int: Set<String>] = [:]
    /// G3, V5: loads whose rides' statuses are being read, by generation.
    private var statusReads: [Int: (buckets: [Int], rides: [String])] = [:]
    /// The rides whose statuses are read, with the sequence of the status kept of each.
    private var readingStatus: [String: Int?] = [:]
    /// C5, G2: floors heard in release notices, by bucket, with when: kept for ``floorMemory`` whether or not the
    /// bucket is on its way here yet (a leaving worker's notice can come before the view that moves its buckets).
    private var floors: [Int: (floor: SequenceFloor, at: Double)] = [:]

    /// How long a floor heard in a release notice is kept for a serve of its bucket (seconds). Longer than any
    /// load takes (a NATS node's consumer timeouts measured 5 s each); a floor stays a true lower bound however
    /// old, so this only bounds what is kept.
    public static var floorMemory: Double { 60 }

    /// G6: an authority (etcd) grants the buckets: the members decide nothing here, the grants do
    /// (``grantsChanged(_:now:)``).
    public let authority: Bool
    /// G6: the grants heard before the first view was formed.
    private var grantedBeforeView: Set<Int> = []

    public init(
        selfID: String, releaseTimeout: Double, releaseMemory: Double, markerNonce: String, ownEchoes: Bool,
        readsStatuses: Bool, authority: Bool = false
    ) {
        self.authority = authority
        self.selfID = selfID
        self.releaseMemory = releaseMemory
        self.markerNonce = markerNonce
        self.ownEchoes = ownEchoes
        self.readsStatuses = readsStatuses
        buckets = BucketHandover(selfID: selfID, releaseTimeout: releaseTimeout)
    }

    // MARK: Queries

    /// Whether this worker serves `ride`'s bucket now.
    public func serves(ride: String) -> Bool { buckets.serving.contains(Ownership.bucket(of: ride)) }

    /// Whether `ride` was fenced off here and its bucket may come back (its controls are kept meanwhile).
    public func isFencedAway(ride: String) -> Bool { fenced[Ownership.bucket(of: ride)]?[ride] != nil }

    /// Whether a state of `ride` read now is kept for serving: its bucket arrives, or is read again.
    func reads(ride: String) -> Bool {
        let bucket = Ownership.bucket(of: ride)
        return buckets.isArriving(bucket) || buckets.isReclaiming(bucket)
    }

    /// Whether a state of `ride` (not held here) matters to the handover: its bucket is read, or it was fenced
    /// off here. The service need not decode the others' states.
    public func watches(ride: String) -> Bool { reads(ride: ride) || isFencedAway(ride: ride) }

    /// Whether `ride`'s retained status is being read for its takeover (V5).
    public func readsStatus(ofRide ride: String) -> Bool { readingStatus[ride] != nil }

    /// Buckets gained but not yet served.
    public var pendingCount: Int { buckets.pendingCount }

    /// Buckets served now.
    public var servingCount: Int { buckets.serving.count }

    /// How long a release of a served bucket is remembered for a fence that comes after it: the notice and the
    /// fencing state travel on different subscriptions, which a clustered broker may deliver seconds apart.
    public static func releaseMemory(interval: Double) -> Double { max(10, 3 * interval) }

    /// Whether a release notice of `worker` counts (another worker's, once the first view is formed).
    public func hearsReleases(from worker: String) -> Bool { worker != selfID && viewFormed }

    // MARK: Events

    /// L5, G1: the recovery's view marker came back with these members: what it reads next.
    public mutating func chooseRead(members: [String]) -> Read {
        // G6: under an authority nothing is served before its grant, alone or not.
        fullRead = members.count == 1 && !authority
        return fullRead ? .everything : .legacyOnly
    }

    /// L5, G1: the recovery's read is complete: the first view decides which of the states read this worker
    /// serves at once (alone, all of them: a load is complete at once), which wait for a live owner's
    /// release, and which are another's (forgotten).
    public mutating func formFirstView(members: [String], now: Double) -> [Action] {
        viewFormed = true
        self.members = members
        let first = authority ? buckets.granted(grantedBeforeView, now: now) : buckets.membersChanged(members, now: now)
        var actions = carryOut(first, now: now, recovering: fullRead)
        let foreign = staged.keys.filter { !buckets.isArriving(Ownership.bucket(of: $0)) }.sorted()
        if !foreign.isEmpty {
            for ride in foreign { staged[ride] = nil }
            actions.append(.unstage(foreign))
        }
        return actions
    }

    /// G1, G3: the members changed in this worker's view; once the first view is formed, the buckets follow.
    public mutating func membersChanged(_ members: [String], now: Double) -> [Action] {
        self.members = members
        guard viewFormed, !authority else { return [] }
        return carryOut(buckets.membersChanged(members, now: now), now: now)
    }

    /// G6: the buckets the authority grants this worker now (``BucketGrants``): those no longer granted are
    /// released, the new ones load and serve. Before the first view they wait for it.
    public mutating func grantsChanged(_ granted: Set<Int>, now: Double) -> [Action] {
        guard authority else { return [] }
        guard viewFormed else {
            grantedBeforeView = granted
            return []
        }
        return carryOut(buckets.granted(granted, now: now), now: now)
    }

    /// G5, G6: this worker's lease lapsed (the authority's, or the broker's, which gives the authority's back):
    /// another worker may hold its buckets now. It stops serving every ride without writing anything, and its
    /// buckets come back only by new grants.
    public mutating func grantsLapsed(nonce: String, now: Double) -> [Action] {
        guard authority, viewFormed else {
            grantedBeforeView = []
            return []
        }
        return reset(nonce: nonce) + carryOut(buckets.granted([], now: now), now: now)
    }

    /// G3, G4: this worker's own will, of an earlier connection, came back: while it was cut off the others
    /// declared it dead and took its rides over (under higher epochs). It stops serving every ride without
    /// writing anything and starts again as a newcomer, with a new marker nonce (its load generations start
    /// again): its buckets come back by the handover, each above the sequence the others reached. Alone in
    /// its view nobody took anything over: nothing happens (an empty list).
    public mutating func rejoin(members: [String], nonce: String, now: Double) -> [Action] {
        guard viewFormed, members.count > 1, !authority else { return [] }
        self.members = members
        return reset(nonce: nonce) + carryOut(buckets.membersChanged(members, now: now), now: now)
    }

    /// Stops serving every ride without writing anything and forgets every bucket, load, fence and read: the
    /// worker starts again as a newcomer.
    private mutating func reset(nonce: String) -> [Action] {
        var actions: [Action] = [.dropAll]
        if !staged.isEmpty { actions.append(.unstage(staged.keys.sorted())) }
        let fencedRides = fenced.values.flatMap(\.keys).sorted()
        if !fencedRides.isEmpty { actions.append(.unfence(fencedRides)) }
        for generation in statusReads.keys.sorted() {
            if let rides = statusReads[generation]?.rides, !rides.isEmpty { actions.append(.endStatusReads(rides)) }
        }
        buckets = BucketHandover(selfID: selfID, releaseTimeout: buckets.releaseTimeout)
        staged = [:]
        loads = [:]
        fenced = [:]
        releasedHere = [:]
        reclaimed = [:]
        statusReads = [:]
        readingStatus = [:]
        markerNonce = nonce
        return actions
    }

    /// Time passes: a live previous owner that never releases is waited for no more (G4: one interval at
    /// most); a read again that does not end is asked for anew.
    public mutating func tick(now: Double) -> [Action] {
        guard viewFormed else { return [] }
        if !floors.isEmpty { floors = floors.filter { now - $0.value.at <= Self.floorMemory } }
        let bucketActions = buckets.tick(now: now)
        var actions: [Action] = []
        for case .load(let loading, _) in bucketActions where loading.first.map(buckets.isArriving) == true {
            actions.append(.waitedOut(loading))
        }
        return actions + carryOut(bucketActions, now: now)
    }

    /// L5: one ride state read by the recovery (before the first view): the newer copy is kept.
    public mutating func stateRecovered(ride: String, legacy: Bool, _ seen: Seen<Version>) -> [Action] {
        stage(ride: ride, legacy: legacy, seen)
    }

    /// G3, G4, A2, C5: one ride state that another client wrote, live or retained at a load, of a ride this
    /// worker does not hold (`held` nil) or holds under `held`.
    /// - A ride not held: kept if its bucket is on its way here or read again (``Action/stage(_:)``), and kept
    ///   as the newest seen of a ride fenced off here (``Action/keepFenced(_:)``).
    /// - A ride held: under a higher epoch it is a new owner's: this worker stops publishing it at once
    ///   (``Action/fence(_:)``), and takes it back when that owner releases the bucket. Under its own epoch and
    ///   above its own copy it is another taker's reservation (views split): the ride is lifted to its ceiling
    ///   (``Action/liftRide(_:above:)``). Equal to its own copy, or (MQTT 3.1.1) below it, it may be its own
    ///   echo, and is left; so is its own retained copy, read again. Under MQTT 5 a copy below it is another
    ///   client's: lifted above if its ceiling passes the ride's number, and written over
    ///   (``Action/rewrite(_:)``), as is anything else.
    public mutating func stateSeen(
        ride: String, legacy: Bool, _ seen: Seen<Version>, held: Version?, now: Double
    ) -> [Action] {
        guard let held, !legacy else {
            var actions = reads(ride: ride) ? stage(ride: ride, legacy: legacy, seen) : []
            if !legacy { actions += noteFenced(ride: ride, seen) }
            return actions
        }
        let other = seen.version
        let bucket = Ownership.bucket(of: ride)
        // C5: a copy of this epoch above this worker's own is another taker's reservation, even while the bucket is
        // read again (its own copies do not pass what it holds): the ride is lifted, nothing written. Before, MQTT
        // 5 rewrote it (A2), and two takers of one read rewrote each other's states without end while their views
        // split. A copy equal to its own is left for the same reason: two takers level after a lift would answer
        // each other's rewrites without end. A rewrite answers only a copy below this worker's, on which the other
        // lifts, writing nothing back.
        if let other, other.epoch == held.epoch, other > held { return [.liftRide(ride, above: other.ceiling)] }
        // A bucket read again brings this worker's own retained states back (MQTT 5's No Local spares no
        // retained message): nothing to undo.
        if let other, other.epoch == held.epoch, buckets.isReclaiming(bucket) { return [] }
        if let other, other.epoch > held.epoch {
            var actions: [Action] = [.fence(ride)]
            guard buckets.serving.contains(bucket) else { return actions }
            actions += keepFenced(ride: ride, other, bucket: bucket)
            if recentlyReleased(bucket, now: now) { actions += startReclaim([bucket], now: now) }
            return actions
        }
        if let other, other.epoch == held.epoch {
            // Under MQTT 3.1.1 a copy below may be this worker's own echo (an older reservation whose ceiling passes
            // its number): another taker's reservation within this worker's block is not told apart, and lifts
            // nothing (docs/CONTRACT-NOTES.md).
            if other == held || ownEchoes { return [] }
            // Under MQTT 5 it is another client's: a taker one status behind in its block still reserved above this
            // worker's number.
            if other.ceiling > held.sequence { return [.liftRide(ride, above: other.ceiling), .rewrite(ride)] }
        }
        return [.rewrite(ride)]
    }

    /// G3: another worker's release notice (``hearsReleases(from:)``): the buckets it lists have their last
    /// states written. Those arriving here load now. Those served here all along were served by that worker
    /// too for a while (its view lacked this one): the ones of which it fenced a ride off here are read again,
    /// and the rides served again; the release is remembered a while for a fence that comes after it (the
    /// notice and the state travel on different subscriptions, which a clustered broker may deliver apart).
    /// - Parameter floors: the notice's ``SequenceFloor``s by bucket: kept a while, whichever buckets they name
    ///   (a leaving worker's notice at SIGTERM lists floors and no released bucket). Those of buckets served
    ///   here lift the held rides' numbering above them at once (``Action/lift(_:)``): a worker that serves a
    ///   bucket here and there served it too, and a subscriber keeping the highest sequence would drop this
    ///   worker's statuses until its numbers passed that worker's.
    public mutating func releaseNoticed(
        _ released: [Int], floors noticed: [Int: SequenceFloor] = [:], by worker: String, now: Double
    ) -> [Action] {
        guard hearsReleases(from: worker) else { return [] }
        for (bucket, floor) in noticed {
            floors[bucket] = (floors[bucket].map { floor.merged(with: $0.floor) } ?? floor, now)
        }
        let lifted = noticed.filter { buckets.serving.contains($0.key) }
        var actions: [Action] = lifted.isEmpty ? [] : [.lift(lifted)]
        let served = released.filter { buckets.serving.contains($0) }
        actions += carryOut(buckets.released(released, by: worker, now: now), now: now)
        for bucket in served { releasedHere[bucket] = (worker, now) }
        actions += startReclaim(served.filter { fenced[$0] != nil }, now: now)
        return actions
    }

    /// G3: a marker on this worker's load marker topic came back. `{nonce}:{generation}`: that load's states
    /// are all in; its rides' retained statuses are read next where the previous owner did not release the
    /// bucket (it may lag a block behind the rider's screen), else the rides are served.
    /// `s{nonce}:{generation}`: those statuses are in: merged, then the rides are served. A marker of another
    /// nonce (this worker's life before a rejoin) or of a load asked for anew since does nothing.
    /// - Parameter held: whether the worker holds a ride (a bucket read again keeps those it holds).
    public mutating func markerReturned(_ marker: String, now: Double, held: (String) -> Bool) -> [Action] {
        // By the whole nonce, not a leading "s": a nonce may itself start with "s" (base 36), and then every
        // load marker of that life was taken for a status marker and ignored, its buckets never served.
        let parts = marker.split(separator: ":")
        guard parts.count == 2, let generation = Int(parts[1]) else { return [] }
        let head = String(parts[0])
        let statuses: Bool
        if head == markerNonce {
            statuses = false
        } else if head == "s" + markerNonce {
            statuses = true
        } else {
            return []
        }
        if statuses { return statusesRead(generation: generation, now: now) }
        guard let loaded = loads.removeValue(forKey: generation) else { return [] }
        // A bucket its previous owner released comes with each ride's last state, written at the release: only
        // the others (a dead owner's, a SIGTERM's, a read again) may lag a block behind the rider's screen.
        let lagging = Set(loaded.filter { !buckets.arrivesReleased($0) })
        let rides = staged.keys.filter { lagging.contains(Ownership.bucket(of: $0)) && !held($0) }.sorted()
        var actions: [Action] = [.endLoad(loaded)]
        guard !rides.isEmpty, readsStatuses else {
            return actions + carryOut(buckets.loaded(loaded, generation: generation, now: now), now: now)
        }
        statusReads[generation] = (loaded, rides)
        for ride in rides { readingStatus[ride] = .some(nil) }
        actions.append(.readStatuses(rides, marker: "s\(markerNonce):\(generation)"))
        return actions
    }

    /// G3, V5, A2: a retained status of `ride`, of sequence `seen`: kept if the ride's status is being read
    /// and it is newer than the one kept; what fails the checks is refused (the ride is served from its state
    /// alone). A deleted status changes nothing.
    public mutating func statusSeen(ride: String, _ seen: Seen<Int>) -> [Action] {
        guard let kept = readingStatus[ride] else { return [] }
        switch seen {
        case .deleted: return []
        case .unreadable: return [.refuse]
        case .read(let sequence):
            if let kept, kept >= sequence { return [] }
            readingStatus[ride] = sequence
            return [.keepStatus(ride)]
        }
    }

    // MARK: The policy behind the events

    /// Carries out the bucket machine's actions. `recovering`: the recovery has read every state already, so a
    /// load is complete at once.
    private mutating func carryOut(
        _ bucketActions: [BucketHandover.Action], now: Double, recovering: Bool = false
    ) -> [Action] {
        var actions: [Action] = []
        for action in bucketActions {
            switch action {
            case .release(let lost):
                actions.append(.release(lost))
                actions += forgetReclaims(of: lost)
            case .resume(let reread):
                actions += resume(reread, now: now)
            case .load(let loading, let generation):
                if recovering {
                    actions += carryOut(
                        buckets.loaded(loading, generation: generation, now: now), now: now, recovering: true)
                } else {
                    actions += load(loading, generation: generation)
                }
            case .drop(let lost):
                actions += unstage(buckets: Set(lost))
                actions.append(.notice(lost))
            case .serve(let gained):
                let waited = recovering ? nil : buckets.lastServeWait.flatMap { $0 >= 0 && $0 < 86_400 ? $0 : nil }
                actions += serve(gained, kind: recovering ? .recovery : .takeover, waited: waited)
            }
        }
        return actions
    }

    /// The staged copies of these buckets' rides, forgotten (except, with `keepingLegacy`, those of the
    /// earlier layout: no load reads that layout, and L5 upgrades keep rides).
    private mutating func unstage(buckets lost: Set<Int>, keepingLegacy: Bool = false) -> [Action] {
        let rides = staged.keys.filter {
            lost.contains(Ownership.bucket(of: $0)) && !(keepingLegacy && legacy.contains($0))
        }.sorted()
        guard !rides.isEmpty else { return [] }
        for ride in rides { staged[ride] = nil }
        return [.unstage(rides)]
    }

    /// G3: reads these buckets' durable states. What was read of them before is stale (a ride the previous
    /// owner stopped since has no state any more). A load asked for anew replaces the one before for its
    /// buckets (that one's marker may never come), and so does its read of statuses.
    private mutating func load(_ loading: [Int], generation: Int) -> [Action] {
        let set = Set(loading)
        var actions = unstage(buckets: set, keepingLegacy: true)
        loads = loads.compactMapValues { earlier in
            let rest = earlier.filter { !set.contains($0) }
            return rest.isEmpty ? nil : rest
        }
        for earlier in statusReads.keys.sorted() {
            guard let read = statusReads[earlier] else { continue }
            let overtaken = read.rides.filter { set.contains(Ownership.bucket(of: $0)) }
            guard !overtaken.isEmpty else { continue }
            for ride in overtaken { readingStatus[ride] = nil }
            statusReads[earlier]?.rides.removeAll { set.contains(Ownership.bucket(of: $0)) }
            actions.append(.endStatusReads(overtaken))
        }
        loads[generation] = loading
        actions.append(.load(loading, marker: "\(markerNonce):\(generation)"))
        return actions
    }

    /// G3, V5: the retained statuses of a load's rides are in: merged into the staged copies, the rides served
    /// (first, so that their vehicle subscriptions are queued before the statuses' go), the reads ended.
    private mutating func statusesRead(generation: Int, now: Double) -> [Action] {
        guard let (loaded, rides) = statusReads.removeValue(forKey: generation) else { return [] }
        for ride in rides { readingStatus[ride] = nil }
        var actions: [Action] = rides.isEmpty ? [] : [.mergeStatuses(rides)]
        actions += carryOut(buckets.loaded(loaded, generation: generation, now: now), now: now)
        if !rides.isEmpty { actions.append(.endStatusReads(rides)) }
        return actions
    }

    /// G3: serves these buckets' staged rides (with `resuming`, only those of it: a bucket read again serves
    /// only the rides fenced off before the read began; the others' copies are forgotten).
    private mutating func serve(
        _ gained: [Int], kind: Serve.Kind, waited: Double?, resuming: Set<String>? = nil
    ) -> [Action] {
        let set = Set(gained)
        let rides = staged.keys.filter { set.contains(Ownership.bucket(of: $0)) }.sorted()
        var serving: [String] = []
        var forgotten: [String] = []
        for ride in rides {
            staged[ride] = nil
            if let resuming, !resuming.contains(ride) { forgotten.append(ride) } else { serving.append(ride) }
        }
        let moved = serving.filter { legacy.remove($0) != nil }
        var bounds: [Int: SequenceFloor] = [:]
        if kind != .recovery {
            for bucket in gained { if let kept = floors.removeValue(forKey: bucket) { bounds[bucket] = kept.floor } }
        }
        var actions: [Action] = forgotten.isEmpty ? [] : [.unstage(forgotten)]
        actions.append(
            .serve(Serve(buckets: gained, rides: serving, legacy: moved, kind: kind, waited: waited, floors: bounds)))
        return actions
    }

    /// L5, G3, A2: one state read for a bucket on its way here (or read again): the newer copy is kept; a
    /// deleted state removes the ride (it was stopped); one that fails the checks is refused.
    private mutating func stage(ride: String, legacy isLegacy: Bool, _ seen: Seen<Version>) -> [Action] {
        switch seen {
        case .deleted:
            guard !isLegacy, staged.removeValue(forKey: ride) != nil else { return [] }
            return [.unstage([ride])]
        case .unreadable:
            return [.refuse]
        case .read(let version):
            if isLegacy { legacy.insert(ride) }
            if let current = staged[ride], !(version > current) { return [] }
            staged[ride] = version
            return [.stage(ride)]
        }
    }

    /// G4: a later state of a ride fenced off here (the fencing worker's release write, say): kept if newer. A
    /// deleted state (the ride was stopped meanwhile) forgets the ride.
    private mutating func noteFenced(ride: String, _ seen: Seen<Version>) -> [Action] {
        guard isFencedAway(ride: ride) else { return [] }
        let bucket = Ownership.bucket(of: ride)
        switch seen {
        case .deleted:
            forgetFenced(ride, bucket: bucket)
            return [.unfence([ride])]
        case .unreadable:
            return []
        case .read(let version):
            return keepFenced(ride: ride, version, bucket: bucket)
        }
    }

    private mutating func keepFenced(ride: String, _ version: Version, bucket: Int) -> [Action] {
        if let kept = fenced[bucket]?[ride], !(version > kept) { return [] }
        fenced[bucket, default: [:]][ride] = version
        return [.keepFenced(ride)]
    }

    @discardableResult
    private mutating func forgetFenced(_ ride: String, bucket: Int) -> Version? {
        let kept = fenced[bucket]?.removeValue(forKey: ride)
        if fenced[bucket]?.isEmpty == true { fenced[bucket] = nil }
        return kept
    }

    /// Whether a member released this served bucket within ``releaseMemory``.
    private func recentlyReleased(_ bucket: Int, now: Double) -> Bool {
        guard let release = releasedHere[bucket] else { return false }
        return now - release.at <= releaseMemory && members.contains(release.worker)
    }

    /// Reads these served buckets again for the rides fenced off in them so far.
    private mutating func startReclaim(_ reread: [Int], now: Double) -> [Action] {
        guard !reread.isEmpty else { return [] }
        let bucketActions = buckets.reclaim(reread, now: now)
        for case .load(let reading, _) in bucketActions {
            for bucket in reading { reclaimed[bucket] = fenced[bucket].map { Set($0.keys) } }
        }
        return carryOut(bucketActions, now: now)
    }

    /// G3, G4: a read again ended: the rides fenced off before it began are served again from the newer of
    /// what the read found and what was seen of them live (a clustered broker's retained copy can lag). A ride
    /// the read did not find ended meanwhile (its state deleted): it stays ended. Rides fenced off during the
    /// read, after a release still remembered, are read again for themselves.
    private mutating func resume(_ reread: [Int], now: Double) -> [Action] {
        var rides: Set<String> = []
        var actions: [Action] = []
        var unfenced: [String] = []
        for bucket in reread {
            let ids = reclaimed.removeValue(forKey: bucket) ?? []
            rides.formUnion(ids)
            for id in ids.sorted() {
                guard let seen = forgetFenced(id, bucket: bucket) else { continue }
                if let read = staged[id], seen > read {
                    staged[id] = seen
                    actions.append(.promote(id))
                }
                unfenced.append(id)
            }
        }
        if !unfenced.isEmpty { actions.append(.unfence(unfenced)) }
        actions += serve(reread, kind: .resume, waited: nil, resuming: rides)
        let again = reread.filter { fenced[$0] != nil && recentlyReleased($0, now: now) }
        actions += startReclaim(again, now: now)
        return actions
    }

    /// Buckets lost: nothing of them is waited for or read again here any more.
    private mutating func forgetReclaims(of lost: [Int]) -> [Action] {
        var forgotten: [String] = []
        for bucket in lost {
            forgotten += fenced.removeValue(forKey: bucket)?.keys.sorted() ?? []
            releasedHere[bucket] = nil
            reclaimed[bucket] = nil
        }
        // Only a bucket read again has staged states while served.
        return (forgotten.isEmpty ? [] : [.unfence(forgotten)]) + unstage(buckets: Set(lost))
    }
}
