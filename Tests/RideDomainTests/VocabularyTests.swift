import Foundation
import Testing

/// One contract vocabulary: RideStatusKit declares the contract's types, and the ride domain adds to them in
/// extensions. This reads both modules' sources and fails on a public type name that both declare, naming the
/// files, so that a second `RideStatus` or `Place` cannot come back unnoticed.
@Suite("One vocabulary: no public type is declared in both the kit and the domain")
struct VocabularyTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The names of the public or package types `text` declares, nested ones too.
    static func declaredTypes(in text: String) throws -> Set<String> {
        let kinds = "struct|enum|class|actor|protocol|typealias"
        let expression = try NSRegularExpression(
            pattern: #"^\s*(?:@\w+\s+)*(?:public|package)\s+(?:final\s+)?(?:"# + kinds + #")\s+(\w+)"#,
            options: .anchorsMatchLines)
        return Set(
            expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
                Range($0.range(at: 1), in: text).map { String(text[$0]) }
            })
    }

    /// Each public type name in the Swift files under `module`, with the files that declare it.
    static func declarations(in module: String) throws -> [String: [String]] {
        let directory = root.appendingPathComponent("Sources/\(module)")
        guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
            return [:]
        }
        var found: [String: [String]] = [:]
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for name in try declaredTypes(in: text) { found[name, default: []].append(file.lastPathComponent) }
        }
        return found
    }

    @Test("no public type name is declared both in RideStatusKit and in RideDomain")
    func oneDeclarationPerType() throws {
        let kit = try Self.declarations(in: "RideStatusKit")
        let domain = try Self.declarations(in: "RideDomain")
        #expect(kit["RideStatus"] != nil && kit["Place"] != nil, "the kit's sources were read")
        #expect(domain["RideEngine"] != nil, "the domain's sources were read")
        let twice = Set(kit.keys).intersection(domain.keys).sorted().map {
            "\($0): kit \(kit[$0] ?? []), domain \(domain[$0] ?? [])"
        }
        #expect(twice.isEmpty, "declare it once, in RideStatusKit, and extend it in the domain: \(twice)")
    }

    @Test("the scan finds public and package declarations, nested ones too, and skips internal ones")
    func scanFindsDeclarations() throws {
        let text = """
            public struct RideStatus: Sendable {
                public enum Phase { case a }
                struct Internal {}
            }
            @frozen public enum Kind {}
            package final class Box {}
            // public struct Commented is a comment's text, but a line that starts with // is no declaration
            extension Place {}
            """
        #expect(try Self.declaredTypes(in: text) == ["RideStatus", "Phase", "Kind", "Box"])
    }
}
