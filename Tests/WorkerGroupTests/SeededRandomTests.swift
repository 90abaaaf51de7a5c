import Testing
import WorkerGroup

/// The project's one generator, and the ownership hash built on it, pinned: a seed must replay the same way on
/// every platform and release, and bucket owners must not move between versions of the worker (G1).
@Suite("SeededRandom: SplitMix64, and the bucket hash that must never change")
struct SeededRandomTests {
    @Test("SplitMix64's first outputs for seed 1234567, as the reference implementation (Vigna) gives them")
    func referenceOutputs() {
        var random = SeededRandom(seed: 1_234_567)
        let outputs = (0..<5).map { _ in random.next() }
        #expect(
            outputs == [
                6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423,
                4_593_380_528_125_082_431, 16_408_922_859_458_223_821,
            ])
    }

    @Test("G1: the mix, the buckets and the owners of a few rides are what earlier releases computed")
    func ownershipPinned() {
        // Computed outside Swift (FNV-1a 64, then SplitMix64's finaliser after one golden-ratio step), as the
        // worker has since groups came: a change here would move rides between workers of mixed versions.
        #expect(SeededRandom.mix(0) == 16_294_208_416_658_607_535)
        #expect(SeededRandom.mix(1) == 10_451_216_379_200_822_465)
        #expect(SeededRandom.mix(0xDEAD_BEEF) == 5_395_234_354_446_855_067)
        let group = Ownership(members: ["w-a", "w-b", "w-c"])
        for (ride, bucket, owner) in [
            ("r-1", 6725, "w-c"), ("r-7f3a", 5927, "w-c"), ("ride-42", 1237, "w-a"), ("sim17", 2320, "w-a"),
        ] {
            #expect(Ownership.bucket(of: ride) == bucket, "\(ride)")
            #expect(group.owner(ofRide: ride) == owner, "\(ride)")
        }
    }
}
