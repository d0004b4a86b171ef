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
//
// The TLS pairs (`--tls`, a `--pair` with `+tls`) are in `switchyard-conformance-tls`, the
// same tool on the system OpenSSL 3. It is not a dependency of the plugin (that would make
// every run need libssl-dev): the plugin builds it, in that configuration too, and runs it
// instead when the arguments ask for TLS; a build that fails (no libssl-dev) fails the
// command, saying what it needs.

import Foundation
import PackagePlugin

@main
struct SwitchyardConformancePlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        let requested = extractor.extractOption(named: "backend-product")
        let loadNone = extractor.extractFlag(named: "no-backend-products") > 0
        let passed = extractor.remainingArguments

        if passed.contains("--help") || passed.contains("-h") {
            print("""
                swift package conformance [--backend-product NAME]... [--no-backend-products] [TOOL OPTIONS]

                  --backend-product NAME  Build this dynamic library product of the package and load it as a
                                          backend (repeatable). Default: every dynamic library product of the
                                          package the command runs in.
                  --no-backend-products   Build and load none.

                The tool's options (switchyard-conformance):

                """)
        }

        let products = try backendProducts(in: context.package, requested: requested, loadNone: loadNone)
        var libraries: [String] = []
        for product in products {
            print("swift package conformance: building the backend product '\(product)'")
            let result = try packageManager.build(.product(product), parameters: .init(configuration: .inherit))
            guard result.succeeded else {
                print(result.logText)
                throw ConformancePluginError("building the backend product '\(product)' failed (its build log is above)")
            }
            guard let library = result.builtArtifacts.first(where: { $0.kind == .dynamicLibrary }) else {
                throw ConformancePluginError("building '\(product)' made no dynamic library")
            }
            libraries += ["--backend-library", library.url.path]
        }

        let tool = try Self.asksForTLS(passed) ? buildTLSTool() : context.tool(named: "switchyard-conformance").url
        let process = Process()
        process.executableURL = tool
        process.arguments = libraries + passed
        try process.run()
        process.waitUntilExit()
        switch process.terminationReason {
        case .exit where process.terminationStatus == 0:
            return
        case .exit:
            // 1: a scenario failed; 2: bad arguments (the tool said which above).
            exit(process.terminationStatus)
        case .uncaughtSignal:
            throw ConformancePluginError(
                "\(tool.lastPathComponent) was killed by signal \(process.terminationStatus): a run crashed the process; the last progress line above names it")
        @unknown default:
            throw ConformancePluginError("\(tool.lastPathComponent) ended abnormally (status \(process.terminationStatus))")
        }
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
        print("swift package conformance: building \(name), the tool with the TLS pairs (on the system OpenSSL 3: libssl-dev)")
        let result = try packageManager.build(.product(name), parameters: .init(configuration: .inherit))
        guard result.succeeded else {
            // Said on standard output after the log, not thrown: `swift package` shows a
            // thrown error as it arrives, in the middle of the log it is still printing.
            print(result.logText)
            print(
                "swift package conformance: error: building \(name) failed (its build log is above); the TLS pairs need the system OpenSSL 3: on Debian, apt-get install libssl-dev"
            )
            fflush(nil)
            exit(1)
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

struct ConformancePluginError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
