import Foundation
import Testing

/// Bad input at every tool, run as its users run it: malformed hosts and literals, ports
/// out of range, negative or not numbers, Unix paths too long, out-of-range options, and
/// an unknown `SWITCHYARD_BACKEND`. Each ends the tool before it does anything, with a
/// non-zero exit and a message naming the option and the value (docs/ERRORS.md, "Bad
/// input"). The tables of ExamplesTests and TransferToolsTests cover the rest.
@Suite("Bad input at the tools", .timeLimit(.minutes(3)))
struct ToolBadInputTests {
    /// One malformed run: the arguments (FILE and FOLDER stand for paths the test makes),
    /// the environment added, and the words the message must hold.
    struct Case: CustomTestStringConvertible, Sendable {
        var arguments: [String]
        var environment: [String: String] = [:]
        var mentions: [String]
        var testDescription: String {
            (environment.map { "\($0)=\($1) " }.joined() + arguments.joined(separator: " "))
        }
    }

    static let longPath = "/" + String(repeating: "p", count: 120)

    /// What every host-and-port tool rejects, with the option and value named.
    static func addressCases() -> [Case] {
        [
            Case(arguments: ["--port", "70000"], mentions: ["--port", "70000"]),
            Case(arguments: ["--port", "-1"], mentions: ["--port", "-1"]),
            Case(arguments: ["--port", "http"], mentions: ["'http'", "--port"]),
            Case(arguments: ["--port", "99999999999999999999"], mentions: ["'99999999999999999999'", "--port"]),
            Case(arguments: ["--host", "1.2.3.256"], mentions: ["--host", "invalid IPv4 literal \"1.2.3.256\"", "\"256\" is over 255"]),
            Case(arguments: ["--host", "fe80::1%"], mentions: ["--host", "invalid IPv6 literal \"fe80::1%\"", "zone"]),
            Case(arguments: ["--host", "1::2::3"], mentions: ["--host", "invalid IPv6 literal \"1::2::3\"", "'::' appears more than once"]),
            Case(arguments: ["--host", "bad host"], mentions: ["--host", "invalid host name \"bad host\"", "a space"]),
            Case(arguments: ["--event-loops", "-3"], mentions: ["--event-loops", "-3"]),
            Case(arguments: [], environment: ["SWITCHYARD_BACKEND": "nosuch"], mentions: ["$SWITCHYARD_BACKEND", "'nosuch'", "bsd"]),
            Case(arguments: ["--backend", "nosuch"], environment: ["SWITCHYARD_BACKEND": "bsd"], mentions: ["--backend", "'nosuch'", "bsd"]),
            Case(arguments: [], environment: ["SWITCHYARD_BACKEND_PATH": "FILE"], mentions: ["$SWITCHYARD_BACKEND_PATH", "FILE", "Not a directory"]),
        ]
    }

    /// Runs `tool` with `run`'s arguments; expects `status` and every mention on stderr.
    static func expectRejected(
        _ tool: String, _ run: Case, prefix: [String] = [], status: Int32 = 64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let work = try TemporaryFolder()
        let names = try work.fixtures()
        let arguments = (prefix + run.arguments).map { names[$0] ?? $0 }
        let environment = run.environment.mapValues { names[$0] ?? $0 }
        let process = try Subprocess(try Products.path(tool), arguments, environment: environment)
        defer { process.killIfRunning() }
        let ending = await process.wait(timeout: .seconds(30))
        #expect(ending == .exit(status), "\(tool) \(run.testDescription): exit \(status) expected, got \(ending)\n\(process.report)", sourceLocation: sourceLocation)
        #expect(!process.stdout.contains("listening on"), "\(process.report)", sourceLocation: sourceLocation)
        for word in run.mentions {
            #expect(
                process.stderr.contains(names[word] ?? word), "\(tool) \(run.testDescription): the message should mention '\(word)'\n\(process.report)",
                sourceLocation: sourceLocation)
        }
    }

    static let echoServerCases = addressCases() + [
        Case(arguments: ["--path", longPath], mentions: ["--path", "unix:\(longPath)", "121 bytes long", "at most 107"]),
        Case(arguments: ["--path", ""], mentions: ["--path", "the path is empty"]),
        Case(arguments: ["--grace-period", "-1"], mentions: ["--grace-period", "-1"]),
        Case(arguments: ["--grace-period", "nan"], mentions: ["--grace-period", "nan"]),
    ]

    @Test("echo-server names each malformed value and exits 64", arguments: echoServerCases)
    func echoServer(run: Case) async throws {
        try await Self.expectRejected("echo-server", run, prefix: run.arguments.contains("--port") ? [] : ["--port", "0"])
    }

    static let echoClientCases = addressCases() + [
        Case(arguments: ["--path", longPath], mentions: ["--path", "121 bytes long"]),
        Case(arguments: ["--count", "-5"], mentions: ["--count", "-5"]),
        Case(arguments: ["--size", "-1"], mentions: ["--size", "-1"]),
        Case(arguments: ["--connect-timeout", "-2"], mentions: ["--connect-timeout", "-2"]),
        Case(arguments: ["--connect-timeout", "inf"], mentions: ["--connect-timeout", "inf"]),
        Case(arguments: ["--mode", "framed", "--reconnect", "--reconnect-timeout", "0"], mentions: ["--reconnect-timeout", "0"]),
    ]

    @Test("echo-client names each malformed value and exits 64", arguments: echoClientCases)
    func echoClient(run: Case) async throws {
        try await Self.expectRejected("echo-client", run)
    }

    static let transferServerCases = addressCases() + [
        Case(arguments: ["--grace-period", "-1"], mentions: ["--grace-period", "-1"]),
    ]

    @Test("transfer-server names each malformed value and exits 64", arguments: transferServerCases)
    func transferServer(run: Case) async throws {
        try await Self.expectRejected("transfer-server", run, prefix: ["--dir", "FOLDER"])
    }

    static let transferClientCases = addressCases().filter { !$0.arguments.contains("--event-loops") } + [
        Case(arguments: ["--stall-timeout", "-2"], mentions: ["--stall-timeout", "-2"]),
        Case(arguments: ["--reconnect-timeout", "-1"], mentions: ["--reconnect-timeout", "-1"]),
        Case(arguments: ["--id", ""], mentions: ["--id", "\"\"", "not a transfer id"]),
        Case(arguments: ["--leaf-digest", "md5"], mentions: ["--leaf-digest", "md5", "xxh3-128", "sha256"]),
    ]

    @Test("transfer-client names each malformed value and exits 64", arguments: transferClientCases)
    func transferClient(run: Case) async throws {
        try await Self.expectRejected("transfer-client", run, prefix: ["send", "FILE"])
    }

    static let monitorCases: [Case] = [
        Case(arguments: ["--debounce-ms", "-1"], mentions: ["--debounce-ms", "-1"]),
        Case(arguments: ["--debounce-ms", "soon"], mentions: ["--debounce-ms", "'soon'"]),
        Case(arguments: ["--count", "0"], mentions: ["--count", "0"]),
        Case(arguments: ["--duration", "-2"], mentions: ["--duration", "-2"]),
        Case(arguments: ["--reachability-timeout", "0"], mentions: ["--reachability-timeout", "0"]),
        Case(arguments: ["--reachability-url", "http://example.com:70000/"], mentions: ["--reachability-url", "invalid port \"70000\" (1...65535)"]),
        Case(arguments: ["--reachability-url", "http://1.2.3.256/"], mentions: ["--reachability-url", "invalid IPv4 literal \"1.2.3.256\""]),
        Case(arguments: ["--reachability-url", "ftp://example.com/"], mentions: ["--reachability-url", "ftp://example.com/", "http://"]),
        Case(arguments: ["--backend", "nosuch"], mentions: ["--backend", "'nosuch'", "bsd"]),
        Case(
            arguments: ["--reachability-url", "http://example.com/"], environment: ["SWITCHYARD_BACKEND": "nosuch"],
            mentions: ["$SWITCHYARD_BACKEND", "'nosuch'"]),
    ]

    @Test("connectivity-monitor names each malformed value and exits 64", arguments: monitorCases)
    func connectivityMonitor(run: Case) async throws {
        try await Self.expectRejected("connectivity-monitor", run)
    }

    static let conformanceCases: [Case] = [
        Case(arguments: ["--pair", "bsd"], mentions: ["--pair 'bsd'", "CLIENT:SERVER"]),
        Case(arguments: ["--pair", "bsd:nosuch"], mentions: ["--pair", "'nosuch'", "bsd, libuv, memory, simulation"]),
        Case(arguments: ["--scenario", "999"], mentions: ["--scenario 999", "no scenario 999"]),
        Case(arguments: ["--scenario", "-3"], mentions: ["--scenario -3", "no scenario -3"]),
        Case(arguments: ["--scenario", "5-3"], mentions: ["--scenario 5-3", "not a range"]),
        Case(arguments: ["--backend", "memory", "--scenario", "1", "--json", "/nonexistent-folder/report.json"], mentions: ["--json /nonexistent-folder/report.json", "No such file"]),
        Case(arguments: ["--backend-library", "FILE"], mentions: ["FILE"]),
    ]

    @Test("switchyard-conformance names each malformed value and exits 2, running nothing", arguments: conformanceCases)
    func conformanceTool(run: Case) async throws {
        try await Self.expectRejected("switchyard-conformance", run, status: 2)
    }
}
