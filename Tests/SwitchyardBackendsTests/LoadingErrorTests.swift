import Foundation
import Switchyard
import SwitchyardBackendKit
import SwitchyardBackends
import Testing
import SwitchyardBackendLoader

/// Every way loading a backend library can go wrong gives a clear ``TransportError``
/// naming the file, and nothing crashes. The wrong libraries are small C libraries built
/// here with clang (``CFixture``), in a folder each test removes when it ends.
@Suite("Loading a backend library: errors")
final class LoadingErrorTests {
    let folder: String

    init() throws {
        folder = try Fixtures.temporaryFolder("loading-errors")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Loads `path` and returns the error, which must name the file.
    private func loadError(_ path: String, into registry: BackendRegistry = BackendRegistry(), sourceLocation: SourceLocation = #_sourceLocation) -> TransportError? {
        do {
            let backend = try Backends.loadLibrary(at: path, into: registry)
            Issue.record("loading \(path) succeeded with backend '\(backend.name)'", sourceLocation: sourceLocation)
            return nil
        } catch {
            #expect(error.message.contains(path), "the error does not name the file: \(error)", sourceLocation: sourceLocation)
            return error
        }
    }

    @Test("A file that is not a library is refused with the loader's words")
    func notALibrary() throws {
        let path = folder + "/libnotalibrary.so"
        try "this is text, not ELF\n".write(toFile: path, atomically: true, encoding: .utf8)
        let error = try #require(loadError(path))
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .cannotLoadLibrary)
        #expect(error.message.contains("invalid ELF header") || error.message.contains("file too short"), "\(error)")
    }

    @Test("A path where no file is is refused, saying so")
    func missingFile() throws {
        let error = try #require(loadError(folder + "/libnothing-here.so"))
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .cannotLoadLibrary)
        #expect(error.message.contains("No such file"), "\(error)")
    }

    @Test("A shared library without the entry point is refused as no backend library")
    func missingEntryPoint() async throws {
        let path = try await CFixture.build(CFixture.noEntrySource, name: "noentry", in: folder)
        let error = try #require(loadError(path))
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .noEntryPoint)
        #expect(error.message.contains("switchyard_backend_entry"), "\(error)")
    }

    @Test("A library of another interface version is refused, naming both versions")
    func otherVersion() async throws {
        // The rest of its table is valid for version 1: only the version is wrong, and it
        // is read first.
        let path = try await CFixture.build(CFixture.tableSource, name: "version7", defines: ["ABI_VERSION=7u"], in: folder)
        let error = try #require(loadError(path))
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .interfaceVersion)
        #expect(error.message.contains("version 7"), "\(error)")
        #expect(error.message.contains("version \(LoadableBackend.interfaceVersion)"), "\(error)")
    }

    @Test(
        "A malformed table is refused, saying what is wrong",
        arguments: [
            (["LEAVE_NULL=connection_reset"], "connection_reset"),
            (["LEAVE_NULL=transport_make"], "transport_make"),
            (["TABLE_SIZE=16"], "16 bytes"),
            (["NAME=\"\""], "name is empty"),
            (["LEAVE_NULL=name"], "name is NULL"),
            (["LEAVE_NULL=network"], "network is NULL"),
        ])
    func malformedTable(defines: [String], named: String) async throws {
        let path = try await CFixture.build(CFixture.tableSource, name: "malformed", defines: defines, in: folder)
        let error = try #require(loadError(path))
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .malformedBackend)
        #expect(error.message.contains(named), "\(error)")
    }

    @Test("A table built before backend_local_endpoint was added loads, and nothing past its size is read")
    func tableOfTheFirstFields() async throws {
        // The field past the table's size is set to a function that never answers: were it
        // read and called, the local endpoint would not be the default.
        let path = try await CFixture.build(
            CFixture.tableSource, name: "firstfields",
            defines: ["TABLE_SIZE=offsetof(sy_backend,backend_local_endpoint)", "SET_LOCAL_ENDPOINT", "NAME=\"c-first-fields\""],
            in: folder)
        let backend = try Backends.loadLibrary(at: path, into: BackendRegistry())
        #expect(backend.name == "c-first-fields")
        #expect(backend.localEndpoint() == Endpoint(host: "127.0.0.1", port: 0))
    }

    @Test("A library whose backend's name is registered already is refused, and the registry keeps the first")
    func duplicateName() async throws {
        let registry = BackendRegistry()
        let first = TransportBackend(name: "bsd", summary: "the one registered first", usesSockets: true) { _ in
            throw TransportError(code: .unimplemented, reason: .misuse, message: "not made in this test")
        }
        registry.register(first)
        let path = try await CFixture.build(CFixture.tableSource, name: "bsdtoo", defines: ["NAME=\"bsd\""], in: folder)
        let error = try #require(loadError(path, into: registry))
        #expect(error.code == .failedPrecondition)
        #expect(error.reason == .duplicateBackend)
        #expect(error.message.contains("'bsd'"), "\(error)")
        #expect(try registry.backend(named: "bsd").summary == "the one registered first")
    }

    @Test("A valid table registers its backend under its name, and a second load of it is a duplicate")
    func validTableThenDuplicate() async throws {
        let registry = BackendRegistry()
        let path = try await CFixture.build(CFixture.tableSource, name: "cdouble", in: folder)
        let backend = try Backends.loadLibrary(at: path, into: registry)
        #expect(backend.name == "c-double")
        #expect(backend.summary == "a C test double")
        #expect(backend.network == "tcp")
        #expect(backend.usesSockets)
        #expect(registry.names == ["c-double"])
        let error = try #require(loadError(path, into: registry))
        #expect(error.reason == .duplicateBackend)
    }

    @Test("The registry's registerNew refuses a taken name and leaves the registry alone")
    func registerNew() throws {
        let registry = BackendRegistry()
        func backend(_ summary: String) -> TransportBackend {
            TransportBackend(name: "x", summary: summary, usesSockets: false) { _ in
                throw TransportError(code: .unimplemented, reason: .misuse, message: "not made in this test")
            }
        }
        try registry.registerNew(backend("first"))
        #expect(throws: TransportError.self) { try registry.registerNew(backend("second")) }
        do {
            try registry.registerNew(backend("second"))
        } catch {
            #expect(error.code == .failedPrecondition)
            #expect(error.reason == .duplicateBackend)
        }
        #expect(try registry.backend(named: "x").summary == "first")
    }

    @Test("SWITCHYARD_BACKEND_PATH lists lib*.so files per folder, sorted, and skips what is not there")
    func searchPath() throws {
        let second = try Fixtures.temporaryFolder("search-path")
        defer { try? FileManager.default.removeItem(atPath: second) }
        for name in ["libb.so", "liba.so", "notlib.so", "libc.so.1", "libd.txt"] {
            try "x".write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: folder + "/libfolder.so", withIntermediateDirectories: true)
        try "x".write(toFile: second + "/libz.so", atomically: true, encoding: .utf8)
        let found = try LoadableBackend.libraries(inSearchPath: "\(second)::\(folder)/:\(folder)/missing")
        #expect(found == [second + "/libz.so", folder + "/liba.so", folder + "/libb.so"])
    }

    @Test("Loading from SWITCHYARD_BACKEND_PATH stops at the first bad file and names it")
    func searchPathError() async throws {
        let registry = BackendRegistry()
        _ = try await CFixture.build(CFixture.tableSource, name: "agood", defines: ["NAME=\"c-good\""], in: folder)
        try "not ELF".write(toFile: folder + "/libbad.so", atomically: true, encoding: .utf8)
        do {
            try Backends.loadLibraries([], searchPath: folder, into: registry)
            Issue.record("loading a folder with a bad library succeeded")
        } catch {
            #expect(error.reason == .cannotLoadLibrary)
            #expect(error.message.contains(folder + "/libbad.so"), "\(error)")
        }
        #expect(registry.names == ["c-good"])
    }
}
