// swift package conformance: runs Switchyard's conformance kit and prints its report.
//
// A thin entry over the `switchyard-conformance` tool: every argument it does not take
// itself goes to the tool unchanged (--backend, --pair, --scenario, --list, --json,
// --verbose; `--help` shows them), and `swift package` fails when the tool does (a
// scenario failed, or bad arguments).
//
// A package that depends on Switchyard and ships its own backend as a dynamic library
// product gets it built and handed to the tool as `--backend-library PATH`, so the kit
// runs the package's backend too:
//
//     --backend-product NAME   build this dynamic library product and load it
//                              (repeatable; default: every dynamic library product of
//                              the package the command runs in; none in Switchyard)
//     --no-backend-products    build and load none
//
// The products are built in the configuration `swift package` runs in (`-c release`).
// `--help`, `--version` and `--list` build none: `--list` names the products a run would
// build and load, whose backends it therefore cannot list (SwiftPM still builds the
// runner itself, the plugin's dependency, before the plugin starts: about two minutes
// the first time in a new package, seconds afterwards).
//
// The TLS pairs (`--tls`, a `--pair` with `+tls`) are in `switchyard-conformance-tls`, the
// same tool on the system OpenSSL 3. It is not a dependency of the plugin (that would make
// every run need libssl-dev): the plugin builds it, in that configuration too, and runs it
// instead when the arguments ask for TLS; a build that fails (no libssl-dev) fails the
// command, saying what it needs.
//
// Where the output goes. SwiftPM gathers everything a command plugin (and a process it
// starts) writes on standard output and standard error into one pipe, and prints it on its
// own standard output, which stdio buffers when that is a file or a pipe: a run's progress
// would arrive in bursts, mixed with whatever belongs on standard output, and after
// SwiftPM's own closing error line. What `Diagnostics.progress` says, SwiftPM writes on its
// standard error at once, as `[conformance] message` (the plugin target's name; a message
// of several lines gets the prefix on its first line only). So the plugin runs the tool
// with its own pipes and:
// - forwards what is for people, line by line as each run ends, with
//   `Diagnostics.progress`: the progress lines, the tool's errors, its own lines (the
//   products it builds, their build log when one fails), and the report (from its summary
//   line `Switchyard conformance: …` to the end) as one message, so the table reads
//   without prefixes. All of it is on standard error, in order, before SwiftPM's closing
//   `error:` line when the run failed.
// - writes what is data on its standard output, and nothing else there: the JSON of
//   `--json -` (the tool writes it to a file of the plugin's work directory, which the
//   plugin copies out at the end), and the text of `--help`, `--version` and `--list`.
//   `swift package conformance --json - > report.json` is a JSON file, SwiftPM's build
//   lines being on standard error too.
// - ends with `Diagnostics.error` when the tool failed: the number of failed runs (exit
//   status 1), or that the arguments were refused (2).

import Foundation
import PackagePlugin

@main
struct SwitchyardConformancePlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        let requested = extractor.extractOption(named: "backend-product")
        let loadNone = extractor.extractFlag(named: "no-backend-products") > 0
        let passed = extractor.remainingArguments
        let products = try backendProducts(in: context.package, requested: requested, loadNone: loadNone)
        let plainTool = try context.tool(named: "switchyard-conformance").url

        // What only answers: built nothing, runs nothing; its text is data, on standard output.
        if passed.contains("--help") || passed.contains("-h") {
            Self.writeOut(
                """
                swift package conformance [--backend-product NAME]... [--no-backend-products] [TOOL OPTIONS]

                  --backend-product NAME  Build this dynamic library product of the package and load it as a
                                          backend (repeatable). Default: every dynamic library product of the
                                          package the command runs in.
                  --no-backend-products   Build and load none.

                Through this command, the progress lines and the report go to standard error (each run's
                line as it ends, shown as `[conformance] …`), and standard output holds only the JSON of
                --json - (or the text of --help, --version, --list).

                The tool's options (switchyard-conformance):


                """)
            try relay(tool: plainTool, arguments: passed, context: context, dataOnStandardOutput: true)
            return
        }
        if passed.contains("--version") {
            try relay(tool: plainTool, arguments: passed, context: context, dataOnStandardOutput: true)
            return
        }
        let tool = try Self.asksForTLS(passed) ? buildTLSTool() : plainTool
        if passed.contains("--list") {
            if products.isEmpty {
                Self.writeOut("Backend products a run builds and loads: none\n\n")
            } else {
                Self.writeOut(
                    "Backend products a run builds and loads: \(products.joined(separator: ", ")). --list builds none, so "
                        + "their backends are not in the lists below, and --backend cannot name them here; a run adds "
                        + "every pair with them.\n\n")
            }
            let hint = products.isEmpty
                ? nil : "with --list the package's own backends (\(products.joined(separator: ", "))) are not loaded: a run without --list builds and loads them"
            try relay(tool: tool, arguments: passed, context: context, dataOnStandardOutput: true, refusalHint: hint)
            return
        }

        var libraries: [String] = []
        for product in products {
            Diagnostics.progress("swift package conformance: building the backend product '\(product)'")
            let result = try packageManager.build(.product(product), parameters: .init(configuration: .inherit))
            guard result.succeeded else {
                Diagnostics.progress(result.logText)
                throw ConformancePluginError("building the backend product '\(product)' failed (its build log is above)")
            }
            guard let library = result.builtArtifacts.first(where: { $0.kind == .dynamicLibrary }) else {
                throw ConformancePluginError("building '\(product)' made no dynamic library")
            }
            libraries += ["--backend-library", library.url.path]
        }
        try relay(tool: tool, arguments: libraries + passed, context: context, dataOnStandardOutput: Self.asksForJSONOnStandardOutput(passed))
    }

    /// Runs the tool and relays its output (see the header): what it writes for people,
    /// line by line with `Diagnostics.progress`; when `dataOnStandardOutput`, what it
    /// writes on its standard output, at its end, on the plugin's standard output.
    /// Ends with `Diagnostics.error` when the tool failed.
    func relay(tool: URL, arguments: [String], context: PluginContext, dataOnStandardOutput: Bool, refusalHint: String? = nil) throws {
        let people = Pipe()
        var dataFile: URL?
        let process = Process()
        process.executableURL = tool
        process.arguments = arguments
        process.standardError = people
        if dataOnStandardOutput {
            let file = context.pluginWorkDirectoryURL.appendingPathComponent("standard-output-\(getpid())")
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                throw ConformancePluginError("cannot make \(file.path) for the tool's standard output")
            }
            dataFile = file
            process.standardOutput = try FileHandle(forWritingTo: file)
        } else {
            process.standardOutput = people
        }
        defer { if let dataFile { try? FileManager.default.removeItem(at: dataFile) } }
        try process.run()

        var forwarder = LineForwarder()
        while case let data = people.fileHandleForReading.availableData, !data.isEmpty {
            forwarder.take(data)
        }
        forwarder.finish()
        process.waitUntilExit()
        if let dataFile {
            FileHandle.standardOutput.write(try Data(contentsOf: dataFile))
        }

        // SwiftPM builds the plugin's own tool as `switchyard-conformance-tool`: say the name people know.
        let name = tool.lastPathComponent.hasPrefix("switchyard-conformance-tls") ? "switchyard-conformance-tls" : "switchyard-conformance"
        switch process.terminationReason {
        case .exit where process.terminationStatus == 0:
            return
        case .exit where process.terminationStatus == 1 && forwarder.failedRuns != nil:
            let failed = forwarder.failedRuns ?? 0
            Diagnostics.error("\(failed == 1 ? "1 run" : "\(failed) runs") FAILED: the report above names \(failed == 1 ? "it" : "them") and says why")
        case .exit where process.terminationStatus == 2:
            Diagnostics.error("\(name) refused its arguments (exit status 2); it said why above" + (refusalHint.map { "; \($0)" } ?? ""))
        case .exit:
            Diagnostics.error("\(name) ended with exit status \(process.terminationStatus); what it said is above")
        case .uncaughtSignal:
            Diagnostics.error(
                "\(name) was killed by signal \(process.terminationStatus): a run crashed the process; the last progress line above names it")
        @unknown default:
            Diagnostics.error("\(name) ended abnormally (status \(process.terminationStatus))")
        }
    }

    /// Writes `text` on the plugin's standard output (unbuffered, so in order with the
    /// tool's data it copies there).
    static func writeOut(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Whether the tool's arguments ask for the JSON report on standard output: `--json -`
    /// or `--json=-`.
    static func asksForJSONOnStandardOutput(_ arguments: [String]) -> Bool {
        for (index, argument) in arguments.enumerated() {
            if argument == "--json=-" { return true }
            if argument == "--json", index + 1 < arguments.count, arguments[index + 1] == "-" { return true }
        }
        return false
    }

    /// Whether the tool's arguments ask for TLS pairs: `--tls`, or a `--pair` value with
    /// `+tls` on a side (`bsd+tls:libuv+tls`). The rule of the tool's own hand-off
    /// (Sources/SwitchyardConformanceTool/ConformanceCommand+TLSBuild.swift), which a
    /// plugin cannot import.
    static func asksForTLS(_ arguments: [String]) -> Bool {
        func namesTLS(_ pair: Substring) -> Bool {
            pair.split(whereSeparator: { $0 == ":" || $0 == "→" }).contains { $0.hasSuffix("+tls") }
        }
        for (index, argument) in arguments.enumerated() {
            if argument == "--tls" { return true }
            if argument == "--pair", index + 1 < arguments.count, namesTLS(Substring(arguments[index + 1])) { return true }
            if argument.hasPrefix("--pair="), namesTLS(argument.dropFirst("--pair=".count)) { return true }
        }
        return false
    }

    /// Builds `switchyard-conformance-tls` (the tool with the TLS pairs) in the
    /// configuration `swift package` runs in, and returns where it is.
    func buildTLSTool() throws -> URL {
        let name = "switchyard-conformance-tls"
        Diagnostics.progress("swift package conformance: building \(name), the tool with the TLS pairs (on the system OpenSSL 3: libssl-dev)")
        let result = try packageManager.build(.product(name), parameters: .init(configuration: .inherit))
        guard result.succeeded else {
            Diagnostics.progress(result.logText)
            throw ConformancePluginError(
                "building \(name) failed (its build log is above); the TLS pairs need the system OpenSSL 3: on Debian, apt-get install libssl-dev")
        }
        guard let tool = result.builtArtifacts.first(where: { $0.kind == .executable && $0.url.lastPathComponent == name }) else {
            throw ConformancePluginError("building \(name) made no executable of that name")
        }
        return tool.url
    }

    /// The dynamic library products to build and load: those `requested`, or by default
    /// every dynamic library product of `package` (none in Switchyard itself, whose
    /// backends the tool links).
    func backendProducts(in package: Package, requested: [String], loadNone: Bool) throws -> [String] {
        if loadNone { return [] }
        let libraries = package.products(ofType: LibraryProduct.self)
        func isDynamic(_ product: LibraryProduct) -> Bool {
            if case .dynamic = product.kind { return true }
            return false
        }
        if requested.isEmpty {
            if package.products.contains(where: { $0.name == "SwitchyardConformance" }) { return [] }
            return libraries.filter(isDynamic).map(\.name)
        }
        for name in requested {
            guard let product = libraries.first(where: { $0.name == name }) else {
                let known = libraries.filter(isDynamic).map(\.name)
                throw ConformancePluginError(
                    "--backend-product \(name): the package '\(package.displayName)' has no library product of that name; its dynamic library products: \(known.isEmpty ? "(none)" : known.joined(separator: ", "))")
            }
            guard isDynamic(product) else {
                throw ConformancePluginError(
                    "--backend-product \(name): a backend is loaded from a dynamic library; declare the product with `type: .dynamic`")
            }
        }
        return requested
    }
}

/// Forwards the tool's output for people with `Diagnostics.progress`: each line as it
/// is complete (a run's progress line is, when the run ends), blank ones left out; from
/// the report's summary line (`Switchyard conformance: …`) to the end, one message, so
/// only its first line carries SwiftPM's prefix.
struct LineForwarder {
    static let reportStart = "Switchyard conformance: "

    private var pending: [UInt8] = []
    private var report: [String]?
    /// The failed runs the report's summary line counts (`… 2 FAILED, …`); `nil` before it.
    private(set) var failedRuns: Int?

    mutating func take(_ data: Data) {
        pending += data
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: pending[..<newline], as: UTF8.self)
            pending.removeSubrange(...newline)
            forward(line)
        }
    }

    /// Forwards what is left: a line without its newline (the heading of a run that
    /// crashed the tool), and the report.
    mutating func finish() {
        if !pending.isEmpty {
            forward(String(decoding: pending, as: UTF8.self))
            pending = []
        }
        if var report {
            while report.last?.isEmpty == true { report.removeLast() }
            Diagnostics.progress(report.joined(separator: "\n"))
            self.report = nil
        }
    }

    private mutating func forward(_ line: String) {
        if report != nil {
            report?.append(line)
        } else if line.hasPrefix(Self.reportStart) {
            report = [line]
            failedRuns = Self.failedCount(in: line)
        } else if !line.isEmpty {
            Diagnostics.progress(line)
        }
    }

    /// `2` from `Switchyard conformance: 3 scenarios on 1 pair: 1 passed, 2 FAILED, …`.
    static func failedCount(in summary: String) -> Int? {
        guard let range = summary.range(of: " FAILED") else { return nil }
        let digits = summary[..<range.lowerBound].reversed().prefix(while: \.isNumber)
        return Int(String(digits.reversed()))
    }
}

struct ConformancePluginError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
