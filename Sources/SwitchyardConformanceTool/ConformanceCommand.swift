// switchyard-conformance: runs the conformance kit over backend pairs and prints the
// report, one row per scenario and one column per pair.
//
//     switchyard-conformance [--backend NAME]... [--pair CLIENT:SERVER]... [--backend-library PATH]...
//                            [--tls] [--scenario N|N-M|NAME]... [--list] [--json PATH|-] [--verbose]
//     switchyard-conformance --version
//
// Output: a progress line per run as it ends, then the report (a table, then the reasons
// of failures and long skips, each line led by `[scenario pair]`), on standard output, or
// on standard error with `--json -`, which leaves standard output to the JSON alone. Every
// write goes straight to its descriptor (Output.swift), so progress arrives as it happens
// in a pipe or a file too.
//
// Exit status: 0 when no scenario failed (skips are not failures), 1 when one failed, 2
// for bad arguments. `swift package conformance` (Plugins/SwitchyardConformancePlugin)
// runs it. The selection, the runs and the report are the kit's (ConformanceRunner,
// ConformanceReport); this module only reads the options and writes the results.
//
// Two builds of this one tool (ConformanceTool.main(tls:)), so that running the kit needs
// no libssl-dev:
// - `switchyard-conformance` (Sources/switchyard-conformance) has no TLS pairs and no
//   OpenSSL. A selection that asks for them (`--tls`, a `--pair` with `+tls`) is handed to
//   `switchyard-conformance-tls` in the same directory, executed in its place with the
//   same arguments; without it, that is a bad argument (exit 2) whose message says how to
//   build it (see ConformanceCommand+TLSBuild.swift).
// - `switchyard-conformance-tls` (Sources/switchyard-conformance-tls) is the same tool
//   with the TLS pairs of SwitchyardConformanceTLS (ConformanceToolTLS), on the system
//   OpenSSL 3.

import ArgumentParser
import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardConformance

struct ConformanceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchyard-conformance",
        abstract: "Runs Switchyard's conformance kit over backend pairs and prints the report.",
        discussion: """
            Every selected scenario runs on every selected pair, one run at a time, each with \
            fresh transports, a time limit and a descriptor-leak check. Scenarios that need \
            network namespaces run only as root; on simulation→simulation they run without \
            root, on the run's own simulated network, in its virtual time.

            Output: a progress line per run, written as the run ends (unbuffered, to a \
            terminal, a file or a pipe alike), then the report: a summary line, one row per \
            scenario and one column per pair (passed, FAILED, skipped, and what the scenario \
            measured), and under the table the failures' reasons and the long skip reasons, \
            each on a line that starts with the scenario's number and the pair \
            ("[11 bsd→libuv] FAILED: reason (file:line)") under the scenario's number and \
            name. Run directly, this tool writes all of it to standard output, or to \
            standard error with --json -, which leaves standard output to the JSON alone \
            (through swift package conformance it is always on standard error, as \
            [conformance] lines). The JSON report has the same \
            cells with their measurements, the totals (scenarios, pairs, runs, passed, \
            failed, skipped, notRun, seconds), the run's settings (arguments, backends, \
            pairs, scenarios, root, backendLibraries) and the kit's version (kitVersion).

            The TLS pairs (--tls, a --pair with +tls) are in switchyard-conformance-tls, \
            this tool built with them on the system OpenSSL 3 (libssl-dev); \
            switchyard-conformance runs it, from its own directory, when they are asked for \
            (swift build --product switchyard-conformance-tls builds it).

            Exit status: 0 when no scenario failed (skips are not failures), 1 when a \
            scenario failed, 2 for bad arguments.
            """,
        version: ConformanceKit.version)

    @Option(name: .customLong("backend"), help: ArgumentHelp(
        "A backend to run (repeatable): every pair among the backends given, mixed pairs included. Default: every registered backend (\(Backends.registry.names.joined(separator: ", "))).",
        valueName: "name"))
    var backends: [String] = []

    @Option(name: .customLong("pair"), help: ArgumentHelp(
        "A client and a server backend to run (repeatable), in addition to --backend's pairs. 'bsd+tls:libuv+tls' runs TLS over the pair.",
        valueName: "client:server"))
    var pairs: [String] = []

    @Flag(help: "Run the selected pairs with TLS over both sides (bsd+tls→libuv+tls, ...), with throwaway certificates made by scripts/make-test-certs (needs the openssl tool), instead of plaintext. The TLS scenarios run only on TLS pairs. Runs switchyard-conformance-tls (see below).")
    var tls = false

    // Unconditional: `--scenario -3` is a bad selector to name, not a missing value.
    @Option(name: .customLong("scenario"), parsing: .unconditionalSingleValue, help: ArgumentHelp(
        "A scenario to run (repeatable): its number (8), a range (30-35), its name, or a part of names (every scenario whose name contains it). Default: all.",
        valueName: "n|n-m|name"))
    var scenarios: [String] = []

    @Flag(help: "List the selected scenarios, the registered backends and the selected pairs, and run nothing.")
    var list = false

    @Option(name: .customLong("json"), help: ArgumentHelp(
        "Also write the report as JSON to this file; '-' writes it to standard output, alone (the progress and the table then go to standard error).",
        valueName: "path"))
    var json: String?

    @Flag(help: "Print the scenarios' own log lines (what each one measured and saw) as they run.")
    var verbose = false

    @Option(name: .customLong("backend-library"), help: ArgumentHelp(
        Backends.libraryOptionHelp,
        valueName: "path"))
    var backendLibraries: [String] = []

    /// Runs the selection; returns the exit status.
    ///
    /// - Parameter tlsSupport: the TLS pairs, in the build that has them
    ///   (`switchyard-conformance-tls`); `nil` in the one without OpenSSL, which hands a
    ///   selection that asks for TLS to that build (``handOffToTLSBuild(askedBy:)``).
    func run(registry: BackendRegistry, tlsSupport: ConformanceToolTLS?) async -> Int32 {
        if tlsSupport == nil, let option = optionAskingForTLS {
            return handOffToTLSBuild(askedBy: option)
        }
        do {
            try Backends.loadLibraries(backendLibraries, into: registry)
        } catch {
            Output.standardError.write("switchyard-conformance: error: \(error.message)\n")
            return 2
        }
        let runner: ConformanceRunner
        // The TLS test certificates, made once when a TLS pair needs them, removed at the end.
        var certificates: String?
        defer { if let certificates { tlsSupport?.removeCertificates(certificates) } }
        do {
            var selected: [ConformancePair] = []
            if let tlsSupport {
                let certificateDirectory = { () throws(ConformanceSelectionError) -> String in
                    if let certificates { return certificates }
                    let made = try tlsSupport.makeCertificates()
                    certificates = made
                    return made
                }
                let (tlsPairs, plainPairs) = try tlsSupport.selectPairs(registry, pairs, certificateDirectory)
                if !(tlsPairs.count > 0 && backends.isEmpty && plainPairs.isEmpty) {
                    selected = try ConformanceRunner.selectPairs(registry: registry, backends: backends, pairs: plainPairs)
                }
                if tls {
                    let directory = try certificateDirectory()
                    selected = try selected.map { plain throws(ConformanceSelectionError) in
                        do {
                            return try tlsSupport.pair(plain.client, plain.server, directory)
                        } catch {
                            throw ConformanceSelectionError("--tls over \(plain): \(error)")
                        }
                    }
                }
                for pair in tlsPairs where !selected.contains(where: { $0.description == pair.description }) { selected.append(pair) }
            } else {
                selected = try ConformanceRunner.selectPairs(registry: registry, backends: backends, pairs: pairs)
            }
            runner = ConformanceRunner(pairs: selected, scenarios: try ConformanceRunner.selectScenarios(scenarios))
        } catch {
            Output.standardError.write("switchyard-conformance: error: \(error.message)\n")
            return 2
        }
        if list {
            Output.standardOutput.write(runner.listing(registry: registry))
            return 0
        }

        // Open the JSON file first: a path that cannot be written is a bad argument, said
        // before the runs, not after them.
        var jsonOutput: Output?
        if let json {
            if json == "-" {
                jsonOutput = .standardOutput
            } else {
                do {
                    jsonOutput = try Output(creating: json)
                } catch {
                    Output.standardError.write("switchyard-conformance: error: --json \(json): \(error)\n")
                    return 2
                }
            }
        }
        let people: Output = json == "-" ? .standardError : .standardOutput

        ConformanceKit.prepareProcess()
        let verbose = self.verbose
        let log: @Sendable (String) -> Void = { line in
            if verbose { people.write(line + "\n") }
        }
        var report = await runner.run(log: log) { (progress: ConformanceRunner.Progress) in
            if progress.outcome == nil {
                people.write(progress.heading + (verbose ? "\n" : ": "))
            } else {
                people.write((verbose ? progress.description : progress.result) + "\n")
            }
        }
        report.settings = ConformanceReport.Settings(
            runner: runner, arguments: Array(CommandLine.arguments.dropFirst()), root: getuid() == 0,
            backendLibraries: backendLibraries)
        people.write("\n" + report.text())

        if let jsonOutput {
            do {
                jsonOutput.write(try report.json())
            } catch {
                Output.standardError.write("switchyard-conformance: error: encoding the report as JSON: \(error)\n")
                return 1
            }
            if json != "-" { jsonOutput.close() }
        }
        return report.exitStatus
    }
}

/// The tool's entry point, which each build's `main` calls.
package enum ConformanceTool {
    /// Reads the command line, runs what it selects and exits with the tool's status.
    ///
    /// - Parameter tls: the TLS pairs, given by `switchyard-conformance-tls`; `nil` in
    ///   `switchyard-conformance`, which has no OpenSSL.
    package static func main(tls: ConformanceToolTLS?) async -> Never {
        let command: ConformanceCommand
        do {
            command = try ConformanceCommand.parse()
        } catch {
            // --help is a "clean exit": its text goes to standard output, status 0.
            if ConformanceCommand.exitCode(for: error) == .success {
                Output.standardOutput.write(ConformanceCommand.fullMessage(for: error) + "\n")
                exit(0)
            }
            Output.standardError.write(ConformanceCommand.fullMessage(for: error) + "\n")
            exit(2)
        }
        exit(await command.run(registry: Backends.registry, tlsSupport: tls))
    }
}
