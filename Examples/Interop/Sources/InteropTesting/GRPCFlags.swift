/// gRPC's interop programs take boolean flags in two forms, `--use_tls` and
/// `--use_tls=true` (`doc/interop-test-descriptions.md` writes the second). The tools
/// declare them as plain flags; this rewrites the second form into the first
/// (`--use_tls=false` is dropped) before the arguments are parsed.
package enum GRPCFlags {
    /// `arguments` with `--NAME=true` (also `1`, `yes`) as `--NAME`, and
    /// `--NAME=false` (also `0`, `no`) left out, for each of `flags` (without the dashes).
    /// Anything else is kept as it is, for the parser to judge.
    package static func normalize(_ arguments: [String], flags: Set<String>) -> [String] {
        arguments.compactMap { argument in
            guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return argument }
            let name = String(argument[argument.index(argument.startIndex, offsetBy: 2)..<equals])
            guard flags.contains(name) else { return argument }
            switch argument[argument.index(after: equals)...].lowercased() {
            case "true", "1", "yes": return "--\(name)"
            case "false", "0", "no": return nil
            default: return argument
            }
        }
    }
}
