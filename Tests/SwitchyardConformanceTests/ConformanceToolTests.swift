import Foundation
import Subprocess
import Testing

/// The tool's two builds: `switchyard-conformance`, without OpenSSL (running the kit needs
/// no libssl-dev), hands the TLS pairs to `switchyard-conformance-tls` in its own
/// directory, or refuses them saying how to build it.
///
/// Serialized, with the other suites that run the tool: the kit's runs count the process's
/// descriptors (see `ConformanceTests`).
@Suite("Conformance tool without OpenSSL", .serialized)
struct ConformanceToolTests {
    @Test("switchyard-conformance links neither libssl nor libcrypto; switchyard-conformance-tls links both")
    func plainBuildLinksNoOpenSSL() async throws {
        let plain = try await Self.neededLibraries(of: try Tool.path())
        #expect(plain.contains { $0.hasPrefix("libswiftCore.") }, "readelf found no NEEDED entries: \(plain)")
        #expect(!plain.contains { $0.hasPrefix("libssl.") || $0.hasPrefix("libcrypto.") }, "\(plain)")
        let tls = try await Self.neededLibraries(of: try Tool.sibling("switchyard-conformance-tls"))
        #expect(tls.contains { $0.hasPrefix("libssl.") } && tls.contains { $0.hasPrefix("libcrypto.") }, "\(tls)")
    }

    @Test("Alone in a directory, switchyard-conformance runs plaintext pairs and refuses TLS ones with exit 2, naming the tool to build")
    func aloneRefusesTLS() async throws {
        let directory = try Self.directory(with: ["switchyard-conformance"])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tool = directory + "/switchyard-conformance"

        let plain = try await Tool.run(["--backend", "memory", "--scenario", "8", "--json", "-"], executable: tool)
        #expect(plain.status == 0, "\(plain.standardError)")
        #expect(plain.standardError.contains("1 scenario on 1 pair: 1 passed"), "\(plain.standardError)")

        let asked = [
            (["--tls", "--backend", "memory"], "--tls"),
            (["--pair", "bsd+tls:libuv+tls"], "--pair 'bsd+tls:libuv+tls'"),
            (["--pair=memory+tls→memory+tls"], "--pair 'memory+tls→memory+tls'"),
            (["--pair", "bsd:bsd", "--pair", "bsd+tls:libuv"], "--pair 'bsd+tls:libuv'"),
        ]
        for (arguments, option) in asked {
            let refused = try await Tool.run(arguments + ["--scenario", "3"], executable: tool)
            #expect(refused.status == 2, "\(arguments)")
            #expect(
                refused.standardError
                    == "switchyard-conformance: error: \(option): the TLS pairs are run by switchyard-conformance-tls, which is not next to this tool (in \(directory)); build it with `swift build --product switchyard-conformance-tls` (it needs the system OpenSSL 3: Debian libssl-dev), or run the kit with `swift package conformance`, which builds it when TLS is asked for\n"
            )
            #expect(refused.standardOutput.isEmpty)
        }
    }

    @Test("Beside switchyard-conformance-tls, switchyard-conformance hands it the run with the same arguments; its output and status are the run's")
    func besideHandsOff() async throws {
        let directory = try Self.directory(with: ["switchyard-conformance", "switchyard-conformance-tls"])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tool = directory + "/switchyard-conformance"

        let listed = try await Tool.run(
            ["--tls", "--backend", "memory", "--pair", "bsd+tls:libuv+tls", "--scenario", "3", "--list"], executable: tool)
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput.contains("\nPairs (2): memory+tls→memory+tls, bsd+tls→libuv+tls\n"), "\(listed.standardOutput)")

        let oneSided = try await Tool.run(["--pair", "bsd+tls:libuv", "--scenario", "1"], executable: tool)
        #expect(oneSided.status == 2)
        #expect(oneSided.standardError.contains("a TLS client reaches only a TLS server"), "\(oneSided.standardError)")
    }

    /// The names of the shared libraries an executable needs (its ELF `NEEDED` entries),
    /// as `readelf -d` prints them.
    static func neededLibraries(of path: String) async throws -> [String] {
        let result = try await Subprocess.run(
            .name("readelf"), arguments: ["-d", "--wide", path], output: .string(limit: 1 << 20), error: .string(limit: 1 << 20))
        try #require(result.terminationStatus.isSuccess, "readelf -d \(path): \(result.standardError)")
        // " 0x0000000000000001 (NEEDED)             Shared library: [libssl.so.3]"
        return result.standardOutput.split(separator: "\n").compactMap { line in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { return nil }
            return String(line[line.index(after: open)..<close])
        }
    }

    /// A new temporary directory holding copies of the named build products.
    static func directory(with products: [String]) throws -> String {
        let directory = NSTemporaryDirectory() + "switchyard-conformance-tool-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        for product in products {
            try FileManager.default.copyItem(atPath: try Tool.sibling(product), toPath: directory + "/" + product)
        }
        return directory
    }
}
