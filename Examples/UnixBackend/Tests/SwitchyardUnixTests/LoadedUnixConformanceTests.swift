import Glibc
import Switchyard
import SwitchyardBackendLoader
import SwitchyardConformance
import Testing

/// The backend as a host loads it at run time: `libSwitchyardUnixBackend.so` (the
/// `.dynamic` product, built beside the tests by `swift build --build-tests`), loaded
/// through its C entry point, runs the whole kit on `unix→unix`. Every call, endpoint
/// (paths included), error and the local endpoint cross the C boundary.
@Suite("Conformance of the unix backend loaded from its library", .serialized)
struct LoadedUnixConformanceTests {
    static let loaded: Result<TransportBackend, any Error> = Result {
        try LoadableBackend.load(path: try libraryPath())
    }

    init() {
        ConformanceKit.prepareProcess()
    }

    @Test("The library's backend is unix, on the unix network, and listens on fresh paths")
    func registration() throws {
        let backend = try Self.loaded.get()
        #expect(backend.name == "unix")
        #expect(backend.network == "unix")
        let first = backend.localEndpoint()
        #expect(first.path?.hasSuffix(".sock") == true, "\(first)")
        #expect(backend.localEndpoint() != first)
    }

    @Test("Loaded unix→unix passes every conformance scenario that applies", arguments: ConformanceKit.scenarios.map(\.name))
    func scenario(_ name: String) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        let backend = try Self.loaded.get()
        do {
            try await ConformanceKit.run(scenario, client: backend, server: backend)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            // Skipped, with the reason, never passed. Swift Testing 6.3 counts a cancelled
            // case as passed in its console output, so a warning says it too.
            Issue.record("skipped: \(skip.reason)", severity: .warning)
            try Test.cancel("skipped: \(skip.reason)")
        }
    }
}

/// `libSwitchyardUnixBackend.so` in the build folder that holds the running tests.
private func libraryPath() throws -> String {
    let name = "libSwitchyardUnixBackend.so"
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    var folder = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    for _ in 0..<4 {
        folder = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
        if access(folder + "/" + name, F_OK) == 0 { return folder + "/" + name }
    }
    throw LibraryMissing(name: name)
}

private struct LibraryMissing: Error, CustomStringConvertible {
    var name: String
    var description: String { "\(name) is not beside the tests: build with `swift build --build-tests`, which builds the SwitchyardUnixBackend product" }
}
