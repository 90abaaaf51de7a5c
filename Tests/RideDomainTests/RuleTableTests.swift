import Foundation
import RideDomain
import Testing

import enum RideStatusKit.Rule

/// The rule index stays true: `Rule` names exactly the contract's ids, every folder the table in `Rule.swift`
/// names exists, every rule is cited by a test (but those other open work is building), and the contract's
/// copy in `docs/` is the contract's source where that sits beside the checkout.
@Suite("The rule table, the contract and the tests' citations")
struct RuleTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// Rules the contract has and that open work is building: cited by no test yet.
    static let pending: Set<String> = []

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    static func matches(_ pattern: String, in text: String) throws -> [String] {
        let expression = try NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    @Test("Rule names exactly the numbered rules of docs/PROTOCOL.md")
    func rulesAreTheContracts() throws {
        let contract = Set(try Self.matches(#"\*\*([A-Z][0-9])\*\*"#, in: Self.text("docs/PROTOCOL.md")))
        let named = Set(Rule.allCases.map(\.rawValue)).subtracting(["3.5"])
        #expect(!contract.isEmpty)
        #expect(
            named == contract,
            "in Rule only: \(named.subtracting(contract)); in the contract only: \(contract.subtracting(named))")
    }

    @Test("every folder Rule.swift's table names exists")
    func tableFoldersExist() throws {
        let table = try Self.text("Sources/RideStatusKit/Rule.swift")
        let folders = try Self.matches(#"`([A-Za-z/+.]+/)`"#, in: table)
        #expect(folders.count >= 8)
        for folder in folders {
            let path = folder.hasPrefix("Sources/") ? folder : "Sources/RideDomain/" + folder
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(
                atPath: Self.root.appendingPathComponent(path).path, isDirectory: &isDirectory)
            #expect(exists && isDirectory.boolValue, "\(path) named in Rule.swift's table")
        }
    }

    @Test("every rule is cited by a test's name or comment, but the pending ones")
    func everyRuleCited() throws {
        var sources = ""
        let tests = Self.root.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift", file.lastPathComponent != "RuleTableTests.swift" else { continue }
            sources += (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        }
        for rule in Rule.allCases where rule != .deadLetters {
            let cited = try !Self.matches(#"\b(\#(rule.rawValue))\b"#, in: sources).isEmpty
            if Self.pending.contains(rule.rawValue) {
                #expect(!cited, "\(rule) is cited now: take it off the pending list")
            } else {
                #expect(cited, "no test cites \(rule)")
            }
        }
    }

    @Test("docs/PROTOCOL.md is the contract's source, where that sits beside the checkout")
    func protocolCopyIsCurrent() throws {
        let source = Self.root.deletingLastPathComponent().appendingPathComponent("shared/spec/PROTOCOL.md")
        guard FileManager.default.fileExists(atPath: source.path) else { return }
        #expect(try String(contentsOf: source, encoding: .utf8) == Self.text("docs/PROTOCOL.md"))
    }
}
