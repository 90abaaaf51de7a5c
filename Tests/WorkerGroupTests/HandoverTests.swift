import Testing
import WorkerGroup

/// G3, G4: the whole handover decided alone: staging, fencing, reclaim, release and the markers, with the clock
/// and the rides held given by the test. Each case the in-memory service tests cover is here as a unit test.
@Suite("Handover: staging, fencing, reclaim and release decided in one machine (G3, G4)")
struct HandoverTests {
    typealias Machine = Handover<StateVersion>
    typealias Action = Machine.Action

    func v(_ epoch: UInt64, _ ceiling: Int, _ sequence: Int) -> StateVersion {
        StateVersion(epoch: epoch, ceiling: ceiling, sequence: sequence)
    }

    func machine(
        _ id: String = "w-a", ownEchoes: Bool = false, readsStatuses: Bool = true
    ) -> Machine {
        Machine(
            selfID: id, releaseTimeout: 6, releaseMemory: 15, markerNonce: "n1", ownEchoes: ownEchoes,
            readsStatuses: readsStatuses)
    }

    /// A ride whose bucket `owner` owns among `members`, its name starting with `prefix`.
    func ride(ownedBy owner: String, among members: [String], prefix: String = "r") -> String {
        let ownership = Ownership(members: members)
        return (0...).lazy.map { "\(prefix)-\($0)" }.first { ownership.owner(ofRide: $0) == owner }!
    }

    /// w-a, alone at its recovery, then beside w-b: it serves its own buckets.
    func besideOther(ownEchoes: Bool = false, readsStatuses: Bool = true) -> Machine {
        var handover = machine(ownEchoes: ownEchoes, readsStatuses: readsStatuses)
        #expect(handover.chooseRead(members: ["w-a"]) == .everything)
        _ = handover.formFirstView(members: ["w-a"], now: 0)
        _ = handover.membersChanged(["w-a", "w-b"], now: 1)
        return handover
    }

    func marker(_ actions: [Action]) -> String? {
        for case .load(_, let marker) in actions { return marker }
        return nil
    }

    func serve(_ actions: [Action]) -> Machine.Serve? {
        for case .serve(let serve) in actions { return serve }
        return nil
    }

    @Test("L5, G1: alone at the recovery, every state read is served at once, just above its ceiling")
    func recoveryAlone() throws {
        var handover = machine()
        #expect(handover.chooseRead(members: ["w-a"]) == .everything)
        #expect(handover.stateRecovered(ride: "r-1", legacy: false, .read(v(1, 24, 13))) == [.stage("r-1")])
        #expect(handover.stateRecovered(ride: "r-1", legacy: false, .read(v(1, 24, 12))).isEmpty, "older")
        #expect(handover.stateRecovered(ride: "r-old", legacy: true, .read(v(1, 12, 3))) == [.stage("r-old")])
        #expect(handover.stateRecovered(ride: "r-bad", legacy: false, .unreadable) == [.refuse], "A2")
        let actions = handover.formFirstView(members: ["w-a"], now: 0)
        let served = try #require(serve(actions))
        #expect(served.kind == .recovery && served.waited == nil)
        #expect(served.rides == ["r-1", "r-old"] && served.legacy == ["r-old"])
        #expect(served.buckets.count == Ownership.bucketCount)
        #expect(marker(actions) == nil, "no subscription: the recovery read everything")
        #expect(handover.servingCount == Ownership.bucketCount && handover.serves(ride: "r-1"))
    }

    @Test("G1, L5: in a group the first view forgets the states read of other workers' buckets")
    func firstViewForgetsForeign() {
        var handover = machine()
        #expect(handover.chooseRead(members: ["w-a", "w-b"]) == .legacyOnly)
        let theirs = ride(ownedBy: "w-b", among: ["w-a", "w-b"])
        _ = handover.stateRecovered(ride: theirs, legacy: true, .read(v(1, 12, 3)))
        let actions = handover.formFirstView(members: ["w-a", "w-b"], now: 0)
        #expect(actions.contains(.unstage([theirs])))
        #expect(marker(actions) == nil, "w-a waits for w-b's release of every bucket it gains")
    }

    @Test("G3, C5: a newcomer loads what the old owner released, keeps the newest copy, and serves a block above")
    func takeoverAfterRelease() throws {
        var newcomer = machine("w-b")
        _ = newcomer.chooseRead(members: ["w-a", "w-b"])
        #expect(newcomer.formFirstView(members: ["w-a", "w-b"], now: 0).isEmpty, "waits for w-a's release")
        let mine = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        let r = ride(ownedBy: "w-b", among: ["w-a", "w-b"])
        let released = newcomer.releaseNoticed(mine, by: "w-a", now: 2)
        let load = try #require(marker(released))
        #expect(load == "n1:1")
        #expect(newcomer.stateSeen(ride: r, legacy: false, .read(v(1, 24, 13)), held: nil, now: 2.1) == [.stage(r)])
        #expect(newcomer.stateSeen(ride: r, legacy: false, .read(v(1, 24, 12)), held: nil, now: 2.1).isEmpty)
        #expect(newcomer.stateSeen(ride: r, legacy: false, .unreadable, held: nil, now: 2.1) == [.refuse], "A2")
        let done = newcomer.markerReturned(load, now: 2.5) { _ in false }
        #expect(done.first == .endLoad(mine))
        let served = try #require(serve(done))
        #expect(served.kind == .takeover && served.rides == [r] && served.waited == 2.5)
        #expect(!done.contains { if case .readStatuses = $0 { true } else { false } }, "released: states are fresh")
        #expect(newcomer.markerReturned(load, now: 3) { _ in false }.isEmpty, "a marker counts once")
    }

    @Test("C5, G2: a leaving worker's floors, heard before its buckets move, bound the takeover; kept a while only")
    func floorsBoundTakeover() throws {
        let buckets = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        let theirs = ride(ownedBy: "w-b", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: theirs)
        let floor = SequenceFloor(epoch: 3, ceiling: 80)
        // SIGTERM: w-b's notice lists no bucket released and the floors of those it held rides in; its offline
        // presence follows, and w-a loads w-b's buckets as a dead owner's.
        var survivor = besideOther()
        #expect(
            survivor.releaseNoticed([], floors: [bucket: SequenceFloor(epoch: 2, ceiling: 90)], by: "w-b", now: 4)
                .isEmpty, "no bucket released: nothing loads yet")
        _ = survivor.releaseNoticed([], floors: [bucket: floor], by: "w-b", now: 4.1)
        let load = try #require(marker(survivor.membersChanged(["w-a"], now: 5)))
        _ = survivor.stateSeen(ride: theirs, legacy: false, .read(v(1, 24, 13)), held: nil, now: 5.1)
        let statuses = survivor.markerReturned(load, now: 5.2) { _ in false }
        var served = try #require(serve(survivor.markerReturned("s" + load, now: 5.3) { _ in false }), "\(statuses)")
        #expect(served.rides == [theirs])
        #expect(served.floors == [bucket: SequenceFloor(epoch: 3, ceiling: 90)], "two notices' floors merge")
        #expect(served.buckets.count == buckets.count)

        // Used once: the bucket's next takeover has no floor left, and one heard longer than floorMemory ago is
        // forgotten at a tick.
        var later = besideOther()
        _ = later.releaseNoticed([], floors: [bucket: floor], by: "w-b", now: 4)
        _ = later.tick(now: 4 + Machine.floorMemory + 1)
        let late = try #require(marker(later.membersChanged(["w-a"], now: 70)))
        _ = later.stateSeen(ride: theirs, legacy: false, .read(v(1, 24, 13)), held: nil, now: 70.05)
        _ = later.markerReturned(late, now: 70.1) { _ in false }
        served = try #require(serve(later.markerReturned("s" + late, now: 70.2) { _ in false }))
        #expect(served.floors.isEmpty, "a floor older than floorMemory is gone")

        // Only a member's notice counts, as for releases.
        var deaf = besideOther()
        _ = deaf.releaseNoticed([], floors: [bucket: floor], by: "w-a", now: 4)
        let own = try #require(marker(deaf.membersChanged(["w-a"], now: 5)))
        let direct = deaf.markerReturned(own, now: 5.1) { _ in false }
        #expect(serve(direct)?.floors.isEmpty ?? true, "its own notice is not heard")
    }

    @Test(
        "C5, G3: floors a notice brings for buckets served here lift the held rides' numbering at once (two takers from the same read); floors of buckets not served here only wait for a takeover"
    )
    func floorsOfServedBucketsLift() {
        let members = ["w-a", "w-b"]
        let mine = Ownership.bucket(of: ride(ownedBy: "w-a", among: members))
        let theirs = Ownership.bucket(of: ride(ownedBy: "w-b", among: members))
        let floor = SequenceFloor(epoch: 1, ceiling: 240)
        var handover = besideOther()
        // SIGTERM's notice (no bucket released) and a release (the later taker giving the bucket up once the
        // views agree): both lift what is served here, and only that.
        let leaving = handover.releaseNoticed([], floors: [mine: floor, theirs: floor], by: "w-b", now: 4)
        #expect(leaving == [.lift([mine: floor])])
        let released = handover.releaseNoticed([mine], floors: [mine: floor], by: "w-b", now: 5)
        #expect(released.first == .lift([mine: floor]), "\(released)")
        #expect(
            handover.releaseNoticed([theirs], floors: [theirs: floor], by: "w-b", now: 6).allSatisfy {
                if case .lift = $0 { false } else { true }
            })
        // Not from itself, and nothing without floors.
        #expect(handover.releaseNoticed([], floors: [mine: floor], by: "w-a", now: 7).isEmpty)
        #expect(handover.releaseNoticed([], by: "w-b", now: 8).isEmpty)
    }

    @Test("G3, V5: a dead owner's rides read their retained statuses; the newest kept, one failing A2 refused")
    func takeoverReadsStatuses() throws {
        var survivor = besideOther()
        let theirs = ride(ownedBy: "w-b", among: ["w-a", "w-b"])
        let died = survivor.membersChanged(["w-a"], now: 5)
        let load = try #require(marker(died))
        _ = survivor.stateSeen(ride: theirs, legacy: false, .read(v(1, 24, 13)), held: nil, now: 5.1)
        let states = survivor.markerReturned(load, now: 5.2) { _ in false }
        let buckets = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        #expect(states == [.endLoad(buckets), .readStatuses([theirs], marker: "s" + load)])
        #expect(survivor.readsStatus(ofRide: theirs))
        #expect(survivor.statusSeen(ride: theirs, .read(20)) == [.keepStatus(theirs)])
        #expect(survivor.statusSeen(ride: theirs, .read(19)).isEmpty, "older than the one kept")
        #expect(survivor.statusSeen(ride: theirs, .deleted).isEmpty)
        #expect(survivor.statusSeen(ride: theirs, .unreadable) == [.refuse], "A2")
        #expect(survivor.statusSeen(ride: "r-other", .read(30)).isEmpty, "not read")
        let done = survivor.markerReturned("s" + load, now: 5.3) { _ in false }
        #expect(done.first == .mergeStatuses([theirs]) && done.last == .endStatusReads([theirs]))
        #expect(try #require(serve(done)).rides == [theirs])

        var plain = besideOther(readsStatuses: false)
        let load2 = try #require(marker(plain.membersChanged(["w-a"], now: 5)))
        _ = plain.stateSeen(ride: theirs, legacy: false, .read(v(1, 24, 13)), held: nil, now: 5.1)
        #expect(try #require(serve(plain.markerReturned(load2, now: 5.2) { _ in false })).rides == [theirs])
    }

    @Test(
        "A2, G4, C5: a write over a held ride: a newer epoch fences it; under its own epoch the same copy is left, one below is an echo under MQTT 3.1.1 and under MQTT 5 written over, lifted past first when its ceiling passes the ride's number"
    )
    func writesOverHeld() {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        var handover = besideOther()
        let held = v(1, 24, 13)
        for other: Seen<StateVersion> in [.read(v(1, 12, 2)), .read(v(0, 500, 480)), .deleted, .unreadable] {
            #expect(handover.stateSeen(ride: r, legacy: false, other, held: held, now: 2) == [.rewrite(r)], "A2")
        }
        // The same version: the same reservation (another taker level with this one, C5): nothing to undo.
        #expect(handover.stateSeen(ride: r, legacy: false, .read(v(1, 24, 13)), held: held, now: 2).isEmpty)
        // Below it but reserved past its number: another taker a status behind in its block (C5) under MQTT 5,
        // lifted above and written over; under 3.1.1 it may be this worker's own older reservation, left.
        #expect(
            handover.stateSeen(ride: r, legacy: false, .read(v(1, 20, 10)), held: held, now: 2)
                == [.liftRide(r, above: 20), .rewrite(r)])
        var echoing = besideOther(ownEchoes: true)
        #expect(echoing.stateSeen(ride: r, legacy: false, .read(v(1, 12, 2)), held: held, now: 2).isEmpty, "3.1.1")
        #expect(echoing.stateSeen(ride: r, legacy: false, .read(v(1, 20, 10)), held: held, now: 2).isEmpty, "3.1.1")
        #expect(echoing.stateSeen(ride: r, legacy: false, .read(v(0, 12, 2)), held: held, now: 2) == [.rewrite(r)])
        #expect(
            handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: held, now: 2)
                == [.fence(r), .keepFenced(r)], "G4")
        #expect(handover.isFencedAway(ride: r) && handover.watches(ride: r))
    }

    @Test(
        "C5, G3: a write of a held ride under its epoch above this worker's copy is another taker's reservation (views split): it lifts the ride to its ceiling under MQTT 5 and 3.1.1 alike, nothing rewritten; two such takers answering each other's writes stop writing, each (under MQTT 5) at or above every ceiling the other wrote"
    )
    func sameEpochWriteAboveLifts() {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let held = v(2, 24, 13)
        for echoes in [false, true] {
            var handover = besideOther(ownEchoes: echoes)
            #expect(
                handover.stateSeen(ride: r, legacy: false, .read(v(2, 36, 25)), held: held, now: 2)
                    == [.liftRide(r, above: 36)], "a block above")
            #expect(
                handover.stateSeen(ride: r, legacy: false, .read(v(2, 24, 14)), held: held, now: 2)
                    == [.liftRide(r, above: 24)], "the same ceiling, a status further")
            #expect(handover.stateSeen(ride: r, legacy: false, .read(v(2, 24, 13)), held: held, now: 2).isEmpty)
        }
        // Two takers of one read, both under epoch 2, each answering the other's writes as the service does: a lift
        // moves the held copy and writes nothing; a rewrite writes the held copy (lifted first when both come).
        // Their last reservations cross in flight, and an older one of w-a's reaches w-b late.
        for ownEchoes in [false, true] {
            var machines = ["w-a": besideOther(ownEchoes: ownEchoes), "w-b": besideOther(ownEchoes: ownEchoes)]
            var held = ["w-a": v(2, 24, 13), "w-b": v(2, 36, 25)]
            var written = ["w-a": [24, 12], "w-b": [36]]
            var inFlight: [(to: String, version: StateVersion)] = [
                ("w-a", v(2, 36, 25)), ("w-b", v(2, 24, 13)), ("w-b", v(2, 12, 2)),
            ]
            var rewrites = 0
            while let (to, version) = inFlight.first, rewrites < 10 {
                inFlight.removeFirst()
                let from = to == "w-a" ? "w-b" : "w-a"
                for action in machines[to]!.stateSeen(ride: r, legacy: false, .read(version), held: held[to]!, now: 2) {
                    let mine = held[to]!
                    switch action {
                    case .liftRide(_, let ceiling) where ceiling > mine.sequence:
                        held[to] = v(2, max(mine.ceiling, ceiling), ceiling)
                    case .liftRide: break
                    case .rewrite:
                        rewrites += 1
                        written[to]!.append(mine.ceiling)
                        inFlight.append((from, mine))
                    default: Issue.record("\(action)")
                    }
                }
            }
            #expect(rewrites < 10, "rewrites answering rewrites without end (3.1.1: \(ownEchoes))")
            #expect(held["w-a"]!.sequence >= 36, "w-a above w-b's reservation: \(held)")
            if ownEchoes {
                #expect(rewrites == 0, "3.1.1 writes nothing back")
            } else {
                // Under MQTT 5 each ends at or above every ceiling the other wrote: either may be killed with -9.
                #expect(held["w-a"]!.sequence >= written["w-b"]!.max()!, "\(held), \(written)")
                #expect(held["w-b"]!.sequence >= written["w-a"]!.max()!, "\(held), \(written)")
            }
        }
    }

    @Test(
        "G3, G4, C5: a ride fenced off is served again when the fencing worker releases its bucket, whichever comes first",
        arguments: ["fence first", "notice first"])
    func fencedThenReleasedBack(order: String) throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: r)
        var handover = besideOther()
        let fence: [Action]
        if order == "notice first" {
            #expect(handover.releaseNoticed([bucket], by: "w-b", now: 2).isEmpty, "nothing fenced yet")
            fence = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 3)
        } else {
            fence = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
            #expect(fence == [.fence(r), .keepFenced(r)])
            let notice = handover.releaseNoticed([bucket], by: "w-b", now: 3)
            #expect(notice == [.load([bucket], marker: "n1:2")])
        }
        if order == "notice first" { #expect(fence == [.fence(r), .keepFenced(r), .load([bucket], marker: "n1:2")]) }
        // The read brings w-b's release write; a ride of the bucket still held here comes back as it is.
        let held = ride(ownedBy: "w-a", among: ["w-a", "w-b"], prefix: "held-\(bucket)")
        #expect(
            handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 490)), held: nil, now: 3.1)
                == [.stage(r), .keepFenced(r)])
        let states = handover.markerReturned("n1:2", now: 3.2) { $0 == held }
        #expect(states == [.endLoad([bucket]), .readStatuses([r], marker: "sn1:2")])
        let done = handover.markerReturned("sn1:2", now: 3.3) { $0 == held }
        let expected = Machine.Serve(buckets: [bucket], rides: [r], legacy: [], kind: .resume, waited: nil)
        #expect(done == [.mergeStatuses([r]), .unfence([r]), .serve(expected), .endStatusReads([r])])
        #expect(!handover.isFencedAway(ride: r))
    }

    @Test("G3, G4, C5: a retained copy that lags what was seen live: the ride continues above what was seen")
    func laggingRetainedCopy() throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: r)
        var handover = besideOther(readsStatuses: false)
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        let load = try #require(marker(handover.releaseNoticed([bucket], by: "w-b", now: 3)))
        // The node answers the read with this worker's own older state.
        #expect(handover.stateSeen(ride: r, legacy: false, .read(v(1, 24, 13)), held: nil, now: 3.1) == [.stage(r)])
        let done = handover.markerReturned(load, now: 3.2) { _ in false }
        #expect(done.contains(.promote(r)), "what was seen live replaces the lagging copy")
        #expect(try #require(serve(done)).rides == [r])
    }

    @Test("G3, G4: a fenced ride that ended meanwhile (its state deleted) stays ended when its bucket comes back")
    func fencedThenEnded() throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: r)
        var before = besideOther()
        _ = before.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        #expect(before.stateSeen(ride: r, legacy: false, .deleted, held: nil, now: 2.5) == [.unfence([r])])
        #expect(before.releaseNoticed([bucket], by: "w-b", now: 3).isEmpty, "nothing to read again")

        // Ended during the read: the read finds no state.
        var during = besideOther(readsStatuses: false)
        _ = during.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        let load = try #require(marker(during.releaseNoticed([bucket], by: "w-b", now: 3)))
        #expect(during.stateSeen(ride: r, legacy: false, .deleted, held: nil, now: 3.1) == [.unfence([r])])
        let done = during.markerReturned(load, now: 3.2) { _ in false }
        #expect(try #require(serve(done)).rides.isEmpty, "it stays ended")
    }

    @Test(
        "G3, G4: a second ride fenced off after the read again ended is read again for itself; a release is remembered only a while"
    )
    func releaseRemembered() throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: r)
        let second = (0...).lazy.map { "r-two-\($0)" }.first { Ownership.bucket(of: $0) == bucket }!
        var handover = besideOther(readsStatuses: false)
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        let load = try #require(marker(handover.releaseNoticed([bucket], by: "w-b", now: 3)))
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 490)), held: nil, now: 3.1)
        // The second ride is held here: the read brings its own retained copy back, which undoes nothing.
        #expect(
            handover.stateSeen(ride: second, legacy: false, .read(v(1, 24, 7)), held: v(1, 24, 7), now: 3.1).isEmpty)
        _ = handover.markerReturned(load, now: 3.2) { $0 == second }
        let late = handover.stateSeen(ride: second, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 7), now: 10)
        #expect(late == [.fence(second), .keepFenced(second), .load([bucket], marker: "n1:3")])
        // Past the memory (15 s here) a fence stays: two views that differ do not pass a ride back and forth.
        var later = besideOther()
        _ = later.releaseNoticed([bucket], by: "w-b", now: 3)
        #expect(
            later.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 18.1)
                == [.fence(r), .keepFenced(r)])
        // Nor from a worker that is no longer a member.
        var gone = besideOther()
        _ = gone.releaseNoticed([bucket], by: "w-b", now: 3)
        _ = gone.membersChanged(["w-a"], now: 3.5)
        #expect(
            gone.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 4) == [.fence(r)] + [
                .keepFenced(r)
            ])
    }

    @Test("G3, G4: a read again whose marker is lost is asked for anew; the lost marker, late, does nothing")
    func lostMarker() throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        let bucket = Ownership.bucket(of: r)
        var handover = besideOther(readsStatuses: false)
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        let first = try #require(marker(handover.releaseNoticed([bucket], by: "w-b", now: 3)))
        #expect(handover.tick(now: 3 + 29).isEmpty, "not before five release timeouts")
        let again = handover.tick(now: 3 + 30)
        let second = try #require(marker(again))
        #expect(second != first)
        #expect(handover.markerReturned(first, now: 34) { _ in false }.isEmpty, "overtaken")
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 490)), held: nil, now: 34)
        #expect(try #require(serve(handover.markerReturned(second, now: 34.1) { _ in false })).rides == [r])
    }

    @Test("G4: a previous owner that never releases is waited for one interval, then loaded anyway")
    func waitedOut() {
        var newcomer = machine("w-b")
        _ = newcomer.chooseRead(members: ["w-a", "w-b"])
        _ = newcomer.formFirstView(members: ["w-a", "w-b"], now: 0)
        let mine = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        #expect(newcomer.tick(now: 5.9).isEmpty)
        let late = newcomer.tick(now: 6)
        #expect(late == [.waitedOut(mine), .load(mine, marker: "n1:1")])
    }

    @Test("G3, G4: declared dead while cut off, a worker drops every ride and rejoins as a newcomer")
    func rejoin() throws {
        let r = ride(ownedBy: "w-a", among: ["w-a", "w-b"])
        var handover = besideOther()
        _ = handover.stateSeen(ride: r, legacy: false, .read(v(2, 500, 480)), held: v(1, 24, 13), now: 2)
        let actions = handover.rejoin(members: ["w-a", "w-b"], nonce: "n2", now: 3)
        #expect(actions == [.dropAll, .unfence([r])], "it waits for w-b's release of its buckets")
        #expect(handover.servingCount == 0 && handover.pendingCount > 0 && !handover.isFencedAway(ride: r))
        let mine = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-a")
        let load = try #require(marker(handover.releaseNoticed(mine, by: "w-b", now: 4)))
        #expect(load == "n2:1", "a new nonce: a marker of its life before does not count")
        #expect(handover.markerReturned("n1:1", now: 4.1) { _ in false }.isEmpty)

        var alone = machine()
        _ = alone.chooseRead(members: ["w-a"])
        _ = alone.formFirstView(members: ["w-a"], now: 0)
        #expect(alone.rejoin(members: ["w-a"], nonce: "n2", now: 1).isEmpty, "alone, nobody took anything over")
    }

    @Test("G3: a marker nonce that starts with 's' still completes its loads (not taken for a status marker)")
    func nonceStartingWithS() throws {
        var newcomer = Machine(
            selfID: "w-b", releaseTimeout: 6, releaseMemory: 15, markerNonce: "s1x", ownEchoes: false,
            readsStatuses: true)
        _ = newcomer.chooseRead(members: ["w-a", "w-b"])
        _ = newcomer.formFirstView(members: ["w-a", "w-b"], now: 0)
        let mine = Ownership(members: ["w-a", "w-b"]).buckets(of: "w-b")
        let load = try #require(marker(newcomer.releaseNoticed(mine, by: "w-a", now: 1)))
        #expect(load == "s1x:1")
        #expect(serve(newcomer.markerReturned(load, now: 2) { _ in false }) != nil, "served")
        #expect(newcomer.markerReturned("ss1x:1", now: 2) { _ in false }.isEmpty, "its status marker: no read")
        #expect(newcomer.markerReturned("1x:1", now: 2) { _ in false }.isEmpty)
    }

    @Test("G3: a release notice from this worker itself, or before the first view, counts for nothing")
    func noticesHeard() {
        var handover = machine()
        #expect(!handover.hearsReleases(from: "w-b"), "before the first view")
        _ = handover.chooseRead(members: ["w-a"])
        _ = handover.formFirstView(members: ["w-a"], now: 0)
        #expect(handover.hearsReleases(from: "w-b") && !handover.hearsReleases(from: "w-a"))
        #expect(handover.releaseNoticed([1, 2], by: "w-a", now: 1).isEmpty)
    }
}
