import Glibc

/// Handing a selection that asks for TLS to `switchyard-conformance-tls`.
///
/// `switchyard-conformance` is built without OpenSSL, so that a backend author runs the
/// kit without `libssl-dev`; its TLS pairs are in `switchyard-conformance-tls`, the same
/// tool with `SwitchyardConformanceTLS`. Asked for them, the plain build executes that
/// one in its place, from the directory it runs from (where `swift build` puts both),
/// with the same arguments, so `switchyard-conformance --tls` and `--pair
/// bsd+tls:libuv+tls` keep working wherever both are built. Without it, the run is a bad
/// argument (exit 2) whose message names the tool, how to build it and what it needs.
extension ConformanceCommand {
    /// The build of this tool that has the TLS pairs.
    static let tlsBuild = "switchyard-conformance-tls"

    /// The first option that asks for TLS pairs, as written (`--tls`, `--pair
    /// 'bsd+tls:libuv+tls'`), or `nil` when none does.
    var optionAskingForTLS: String? {
        if tls { return "--tls" }
        return pairs.first(where: Self.namesTLS).map { "--pair '\($0)'" }
    }

    /// Whether a `--pair` value names a TLS backend on either side: `bsd+tls:libuv+tls`,
    /// and `bsd+tls:libuv` too, which the TLS build refuses with its reason.
    static func namesTLS(_ pair: String) -> Bool {
        pair.split(whereSeparator: { $0 == ":" || $0 == "→" }).contains { $0.hasSuffix("+tls") }
    }

    /// Executes `switchyard-conformance-tls` of this executable's directory in this
    /// process's place, with the same arguments: its output and exit status are the run's.
    ///
    /// - Parameter option: the option that asked for TLS, named in the error.
    /// - Returns: only when it cannot: 2, having said why on standard error (the tool is
    ///   not there: how to build it; it did not start: the system's reason).
    func handOffToTLSBuild(askedBy option: String) -> Int32 {
        let directory = Self.executableDirectory()
        let path = (directory ?? ".") + "/" + Self.tlsBuild
        guard directory != nil, access(path, X_OK) == 0 else {
            Output.standardError.write(
                "switchyard-conformance: error: \(option): the TLS pairs are run by \(Self.tlsBuild), which is not next to this tool"
                    + (directory.map { " (in \($0))" } ?? "")
                    + "; build it with `swift build --product \(Self.tlsBuild)` (it needs the system OpenSSL 3: Debian libssl-dev),"
                    + " or run the kit with `swift package conformance`, which builds it when TLS is asked for\n")
            return 2
        }
        let arguments = [path] + CommandLine.arguments.dropFirst()
        let argv = arguments.map { strdup($0) } + [nil]
        execv(path, argv)
        let error = OutputError(errno: errno)
        for argument in argv { free(argument) }
        Output.standardError.write("switchyard-conformance: error: \(option): cannot run \(path): \(error)\n")
        return 2
    }

    /// The directory of the running executable (`/proc/self/exe`, links resolved), or
    /// `nil` when the system does not say.
    static func executableDirectory() -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1) }
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[..<count], as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
