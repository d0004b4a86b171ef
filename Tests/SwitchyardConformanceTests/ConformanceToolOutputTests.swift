import Foundation
import SwitchyardConformance
import Testing

/// What `switchyard-conformance` writes where, run as a process: `--json -` leaves
/// standard output to the JSON alone, the JSON has the totals, the settings and the kit's
/// version, progress arrives in a pipe as each run ends, and `--version` says the kit's
/// version.
///
/// Serialized, with the other suites that run the tool: the kit's runs count the process's
/// descriptors (see `ConformanceTests`).
@Suite("Conformance tool output", .serialized)
struct ConformanceToolOutputTests {
    @Test("--json - writes the JSON alone on standard output: one JSON object, with totals, settings and the kit's version; the rest is on standard error")
    func jsonAloneOnStandardOutput() async throws {
        let arguments = ["--backend", "memory", "--scenario", "8", "--scenario", "30", "--json", "-"]
        let result = try await Tool.run(arguments)
        #expect(result.status == 0, "\(result.standardError)")
        // Nothing but the JSON: the whole of standard output parses as one object.
        #expect(result.standardOutput.hasPrefix("{\n") && result.standardOutput.hasSuffix("}\n"), "\(result.standardOutput)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any], "\(result.standardOutput)")
        let totals = try #require(object["totals"] as? [String: Any], "\(object.keys)")
        #expect(totals["scenarios"] as? Int == 2)
        #expect(totals["pairs"] as? Int == 1)
        #expect(totals["runs"] as? Int == 2)
        #expect(totals["passed"] as? Int == 1)
        #expect(totals["failed"] as? Int == 0)
        #expect(totals["skipped"] as? Int == 1)
        #expect(totals["notRun"] as? Int == 0)
        #expect((totals["seconds"] as? Double).map { $0 >= 0 } == true)
        #expect(object["kitVersion"] as? String == ConformanceKit.version)

        let report = try ConformanceReport(json: Array(result.standardOutput.utf8))
        let settings = try #require(report.settings)
        #expect(settings.arguments == arguments)
        #expect(settings.backends == ["memory"])
        #expect(settings.pairs == ["memory→memory"])
        #expect(settings.scenarios == [8, 30])
        #expect(settings.root == (getuid() == 0))
        #expect(settings.backendLibraries.isEmpty)

        // The people's part went to standard error: the progress, the table, the notes.
        #expect(result.standardError.contains("[1/2] memory→memory 8. Connecting to a port nobody listens on"))
        #expect(result.standardError.contains("Switchyard conformance: 2 scenarios on 1 pair: 1 passed, 0 FAILED, 1 skipped"))
        #expect(result.standardError.contains("\n    [30 memory→memory] skipped: memory→memory has no TCP sockets to put in network namespaces\n"))
    }

    @Test("Progress lines reach a pipe as each run ends, while later runs still go on")
    func progressIsUnbuffered() throws {
        // Scenario 8 takes milliseconds on memory; the others a second or more each.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Tool.path())
        process.arguments = ["--backend", "memory"] + ["8", "13", "17", "22", "47"].flatMap { ["--scenario", $0] }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        var received = Data()
        while !received.contains(UInt8(ascii: "\n")) {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            received += data
        }
        let stillRunning = process.isRunning
        let first = String(decoding: received.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        #expect(first.hasPrefix("[1/5] memory→memory 8. Connecting to a port nobody listens on"), "\(first)")
        #expect(first.contains(": passed in "), "\(first)")
        #expect(stillRunning, "the first progress line arrived only when the tool had ended: its output is buffered")

        _ = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test("--version says the kit's version on standard output, exit 0")
    func version() async throws {
        let result = try await Tool.run(["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput == ConformanceKit.version + "\n")
        #expect(result.standardError.isEmpty)
    }
}
