import Foundation
import MosquittoTesting
import RideStatusKit
import Testing

/// I1 is stated once, in the kit; the broker's account scripts (Python) keep a copy for names they are given, and
/// this test holds the copy to the rule.
@Suite("I1: one identifier rule")
struct IdentifierRuleTests {
    static let samples: [String] = [
        "r1", "R-2", "ride.42", "a:b_c-d.e", "0", String(repeating: "a", count: 64), "ride-ÿ", "",
        String(repeating: "a", count: 65), "-r", ".", "..", "_x", ":x", "r/1", "r+", "r#", "r 1", "r\n", "rides~2",
        "ride\u{0}", "Ω", "a.b.c", "9z",
    ]

    @Test("I1: the kit's rule accepts 1-64 of A-Z a-z 0-9 . _ : -, the first alphanumeric, and nothing else")
    func rule() {
        let valid = Self.samples.filter { Identifier.isValid($0) }
        #expect(valid == ["r1", "R-2", "ride.42", "a:b_c-d.e", "0", String(repeating: "a", count: 64), "a.b.c", "9z"])
        #expect(Identifier.isValid(bytes: Array("r1".utf8)) && !Identifier.isValid(bytes: [0x72, 0x2F]))
    }

    @Test("I1: scripts/broker-accounts.py's identifier pattern agrees with the kit's rule on every sample")
    func brokerScriptsAgree() async throws {
        let script = checkoutRoot.appendingPathComponent("scripts/broker-accounts.py").path
        // The module's own pattern, loaded from the file (its name has a dash: not importable by name); one line
        // per sample, 1 or 0; samples go in as JSON so that a newline or NUL survives.
        let program = """
            import importlib.util, json, sys
            spec = importlib.util.spec_from_file_location("accounts", sys.argv[1])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for name in json.loads(sys.argv[2]):
                print(1 if module.IDENTIFIER.fullmatch(name) else 0)
            """
        let samples = String(decoding: try JSONEncoder().encode(Self.samples), as: UTF8.self)
        let (code, output) = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", program, script, samples])
        #expect(code == 0, "\(output)")
        let verdicts = output.split(separator: "\n").map { $0 == "1" }
        #expect(verdicts.count == Self.samples.count, "\(output)")
        for (sample, verdict) in zip(Self.samples, verdicts) {
            #expect(
                verdict == Identifier.isValid(sample),
                "broker-accounts.py and the kit differ on \(sample.debugDescription)")
        }
    }
}
