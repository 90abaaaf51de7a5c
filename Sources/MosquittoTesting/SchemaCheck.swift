public import Foundation

/// The checkout's root (this file is `Sources/MosquittoTesting/SchemaCheck.swift`).
public let checkoutRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// Validates `documents` against `schema` in `docs/schema` with `scripts/validate-json.py` (Python's
/// `jsonschema`, the reference validator `make deps` installs); returns the validator's exit code and output.
///
/// The validator runs as a child the caller awaits. The tests did this with `Process.waitUntilExit()`, which
/// blocks a thread of the cooperative pool: on this 2-core machine two such waits at the start of a run (the
/// schema suites and the security suites' set-up scripts, 0.3 to 3 s each when idle) held the whole pool, and
/// in a CI run every test's tasks stalled for 16 s and a worker's readiness wait timed out.
public func validateJSON(schema: String, documents: [[UInt8]]) async throws -> (code: Int32?, output: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    var paths: [String] = []
    for (index, document) in documents.enumerated() {
        let path = directory.appendingPathComponent("\(index).json")
        try Data(document).write(to: path)
        paths.append(path.path)
    }
    return try await ChildProcess.run(
        "/usr/bin/env",
        [
            "python3", checkoutRoot.appendingPathComponent("scripts/validate-json.py").path,
            checkoutRoot.appendingPathComponent("docs/schema").path, schema,
        ] + paths)
}
