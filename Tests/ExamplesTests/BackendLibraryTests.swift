import Foundation
import Testing

/// The echo tools with a backend loaded at run time: `libSwitchyardBSDLoadedFixture.so`
/// (bsd exported as `bsd-loaded`, a product of this package, built next to the tools).
@Suite("echo tools with a backend library", .timeLimit(.minutes(2)))
struct BackendLibraryTests {
    static let libraryName = "libSwitchyardBSDLoadedFixture.so"

    @Test("echo-server --backend-library serves on the loaded backend, and echo-client loads it from SWITCHYARD_BACKEND_PATH")
    func loadedBackend() async throws {
        let library = try Products.path(Self.libraryName)
        let (server, port) = try await startEchoServer(backend: "bsd-loaded", extra: ["--backend-library", library, "--event-loops", "2"])
        defer { server.killIfRunning() }

        // A built-in client against the loaded server, then a loaded client, found through
        // the environment variable, against it.
        let builtIn = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", "bsd", "--port", String(port), "--count", "200", "--size", "4096", "--concurrency", "4"],
            name: "echo-client(bsd)")
        #expect(await builtIn.wait() == .exit(0), "\(builtIn.report)\n\(server.report)")
        expectSummary(builtIn.stdout, messages: 800, bytes: 800 * 4096, backend: "bsd")

        let loaded = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", "bsd-loaded", "--port", String(port), "--count", "2", "--size", String(8 * 1024 * 1024), "--concurrency", "2"],
            environment: ["SWITCHYARD_BACKEND_PATH": (library as NSString).deletingLastPathComponent],
            name: "echo-client(bsd-loaded)")
        #expect(await loaded.wait() == .exit(0), "\(loaded.report)\n\(server.report)")
        expectSummary(loaded.stdout, messages: 4, bytes: 4 * 8 * 1024 * 1024, backend: "bsd-loaded")

        await expectCleanStop(server)
    }

    @Test("A file that is no backend library stops echo-server with an error naming it")
    func notALibrary() async throws {
        let path = NSTemporaryDirectory() + "libnot-a-backend-\(UUID().uuidString.prefix(8)).so"
        try "not a library\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let server = try Subprocess(
            try Products.path("echo-server"), ["--backend-library", path, "--port", "0"], name: "echo-server(bad library)")
        let ending = await server.wait(timeout: .seconds(20))
        #expect(ending != .exit(0), "\(server.report)")
        #expect(server.stderr.contains("cannot load backend library '\(path)'"), "\(server.report)")
    }
}
