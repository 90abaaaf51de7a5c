import Foundation
import Testing

/// The same cuts on a real 3-node NATS cluster with etcd (MQTT 3.1.1), through relays to every node: `make
/// test-cluster` runs each case once (`CUT_CASES` chooses them, `CUT_RUNS` repeats them). The checks read each
/// status's grant from its sequence (3.1.1 has no user properties) and the retained copies from every node.
@Suite("A worker cut off on a NATS cluster with etcd (G5, G6, G3, C5)", .serialized, .timeLimit(.minutes(12)))
struct CutNATSClusterTests {
    @Test(
        "G5, G6, G3, C5 on NATS: a worker cut off from the broker, from etcd or from both: its rides move on under newer grants, nothing under a lost one is received, no ride lost",
        .serialized, arguments: PartitionCut.selected)
    func cutOff(_ cut: PartitionCut) async throws {
        for index in 1...CutEndToEndTests.runs {
            let outcome = try await CutEndToEndTests.run(cut, nats: true)
            print("NATS: cut from \(cut), run \(index) of \(CutEndToEndTests.runs): \(outcome)")
            CutEndToEndTests.check(outcome, cut: cut)
        }
    }
}
