import Foundation
import Subprocess
import Switchyard
import SwitchyardBackendKit
import SwitchyardBackendLoader
import SwitchyardTestSupport

/// Where the loading tests find their libraries.
enum Fixtures {
    /// The repository, from this file's place in it.
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .path

    /// The folder of `switchyard_backend.h`.
    static let headerFolder = repository + "/Sources/CSwitchyardBackendABI/include"

    /// `libSwitchyardBSDLoadedFixture.so`: the bsd backend exported as "bsd-loaded", a
    /// `.dynamic` product of this package, next to the test bundle in the build folder
    /// (whatever configuration or scratch path built it).
    static func bsdLoadedLibrary() throws -> String {
        try FixtureLibrary.bsdLoaded(repository: repository)
    }

    /// The fixture library's backend, loaded once per process.
    static let bsdLoaded: Result<TransportBackend, any Error> = Result {
        try LoadableBackend.load(path: try bsdLoadedLibrary())
    }

    /// A fresh temporary folder.
    static func temporaryFolder(_ label: String) throws -> String {
        let path = NSTemporaryDirectory() + "switchyard-\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

struct FixtureFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Small C libraries built at test time with the toolchain's clang: backend libraries that
/// are wrong in one way each, and a valid one whose functions must never be called.
enum CFixture {
    /// clang from PATH, else the Swift toolchain's (gcc may be absent).
    static let clang: String? = {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/clang" }
        return (paths + ["/opt/swift/usr/bin/clang", "/usr/bin/clang"]).first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// A table whose every function is one that does nothing: the host must refuse or
    /// register it without calling any. `-D` flags choose what is wrong with it.
    static let tableSource = """
        #include "switchyard_backend.h"
        #ifndef ABI_VERSION
        #define ABI_VERSION SY_BACKEND_ABI_VERSION
        #endif
        #ifndef TABLE_SIZE
        #define TABLE_SIZE sizeof(sy_backend)
        #endif
        #ifndef NAME
        #define NAME "c-double"
        #endif
        static void nothing(void) {}
        #define SET(field) table.field = (__typeof__(table.field))nothing
        static sy_backend table;
        const sy_backend *switchyard_backend_entry(void) {
            table.abi_version = ABI_VERSION;
            table.size = TABLE_SIZE;
            table.name = NAME;
            table.summary = "a C test double";
            table.network = "tcp";
            table.uses_sockets = true;
            SET(transport_make); SET(transport_release); SET(transport_connect); SET(transport_listen);
            SET(transport_shutdown); SET(transport_shutdown_now); SET(operation_cancel); SET(operation_release);
            SET(listener_release); SET(listener_local_address); SET(listener_accept); SET(listener_close);
            SET(connection_release); SET(connection_event_loop); SET(connection_local_address);
            SET(connection_remote_address); SET(connection_set_handler); SET(connection_start_reading);
            SET(connection_stop_reading); SET(connection_write); SET(connection_write_now_or_queue);
            SET(connection_pending_write_bytes); SET(connection_shutdown_output); SET(connection_close);
            SET(connection_reset); SET(loop_retain); SET(loop_release); SET(loop_in_event_loop); SET(loop_execute);
        #ifdef SET_LOCAL_ENDPOINT
            SET(backend_local_endpoint);
        #endif
        #ifdef LEAVE_NULL
            table.LEAVE_NULL = 0;
        #endif
            return &table;
        }
        """

    /// A shared library with no entry point.
    static let noEntrySource = """
        int switchyard_something_else(void) { return 42; }
        """

    /// Builds `source` with `defines` into `lib<name>.so` in `folder`; returns its path.
    static func build(_ source: String, name: String, defines: [String] = [], in folder: String) async throws -> String {
        guard let clang else { throw FixtureFailure("no clang on PATH or in /opt/swift/usr/bin: the C fixtures need one") }
        let sourcePath = folder + "/\(name).c"
        let libraryPath = folder + "/lib\(name).so"
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let arguments = ["-shared", "-fPIC", "-O1", "-I", Fixtures.headerFolder] + defines.map { "-D" + $0 }
            + ["-o", libraryPath, sourcePath]
        let result = try await run(
            .path(.init(clang)), arguments: Arguments(arguments), output: .discarded, error: .string(limit: 1 << 20))
        guard result.terminationStatus.isSuccess else {
            throw FixtureFailure("clang failed to build \(name) (\(result.terminationStatus)): \(result.standardError)")
        }
        return libraryPath
    }
}

/// The process's open descriptors and what each points at, for leak checks outside the
/// kit.
func openDescriptors() -> [String: String] {
    var found: [String: String] = [:]
    for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        found[fd] = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd)) ?? "?"
    }
    return found
}
