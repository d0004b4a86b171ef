import CSwitchyardBackendABI
import Foundation
import Switchyard
import SwitchyardBackendKit
import Synchronization
import Testing
import SwitchyardBackendLoader

/// The C boundary itself, without a shared library: a test-double backend is exported
/// (`LoadableBackend.export`) and loaded back from the table (`LoadableBackend.load(entry:)`),
/// so every call, value and error goes through the C table and its structs as it does
/// from a library, and the test double says exactly what arrived on the other side.
@Suite("The backend library boundary")
struct BoundaryTests {
    /// A fresh name per backend: an export is kept per name.
    static func bridged(_ script: Script, localEndpoint: (@Sendable () -> Endpoint)? = nil) throws -> TransportBackend {
        let name = "scripted-\(UUID().uuidString.prefix(8))"
        let backend = TransportBackend(
            name: name, summary: "a scripted test double", usesSockets: true, localEndpoint: localEndpoint
        ) { configuration in
            script.recorded.withLock { $0.configuration = configuration }
            if let error = script.makeError { throw error }
            return ScriptedTransport(script)
        }
        return try LoadableBackend.load(entry: LoadableBackend.export(backend), origin: "in-process table \(name)")
    }

    static let codes: [TransportError.Code] = [
        .cancelled, .unknown, .invalidArgument, .deadlineExceeded, .notFound, .permissionDenied,
        .resourceExhausted, .failedPrecondition, .aborted, .unimplemented, .internal, .unavailable,
    ]

    @Test("Every code, and a reason, message and native error of their own, cross intact from make, connect and listen", arguments: codes)
    func errorsCross(code: TransportError.Code) async throws {
        let error = TransportError(
            code: code, reason: .init("a reason of its own"), message: "naïve ✓ \(code), 100% (not a format)",
            native: .init(domain: .init("custom"), code: -42, name: "E_CUSTOM"))
        let script = Script(error: error)
        #expect(throws: error) { try Self.bridged(Script(makeError: error)).make(TransportConfiguration()) }
        let transport = try Self.bridged(script).make(TransportConfiguration())
        await #expect(throws: error) { try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 1)) }
        await #expect(throws: error) { try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0)) }
        await transport.shutdownNow()
    }

    @Test("An error without a native error arrives without one")
    func errorWithoutNative() async throws {
        let error = TransportError(code: .unavailable, reason: .refused, message: "refused")
        let transport = try Self.bridged(Script(error: error)).make(TransportConfiguration())
        await #expect(throws: error) { try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 1)) }
        await transport.shutdownNow()
    }

    @Test("An error that is no TransportError arrives as unknown, naming its type")
    func foreignError() async throws {
        struct Oops: Error {}
        let transport = try Self.bridged(Script(foreign: Oops())).make(TransportConfiguration())
        do {
            _ = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 1))
            Issue.record("the connect succeeded")
        } catch let error as TransportError {
            #expect(error.code == .unknown)
            #expect(error.reason.name == "not a transport error")
            #expect(error.message.contains("Oops"), "\(error)")
        }
        await transport.shutdownNow()
    }

    @Test("The configuration, endpoints, options and grace period reach the library as given")
    func valuesCross() async throws {
        let script = Script(error: TransportError(code: .unavailable, reason: .refused, message: "as scripted"))
        let configuration = TransportConfiguration(
            eventLoopCount: 3, stallTimeout: .milliseconds(1500) + .nanoseconds(7), reservedDescriptors: 123)
        let transport = try Self.bridged(script).make(configuration)
        #expect(transport.name.hasPrefix("scripted-"))
        _ = try? await transport.connect(to: Endpoint(host: "fe80::1%eth0", port: 4242), options: ConnectOptions(timeout: .milliseconds(2345)))
        _ = try? await transport.listen(on: Endpoint(host: "example.invalid", port: 65535), options: ListenOptions(backlog: 77))
        await transport.shutdown(gracePeriod: .seconds(3) + .nanoseconds(1))
        let recorded = script.recorded.withLock { $0 }
        #expect(recorded.configuration == configuration)
        #expect(recorded.connect?.endpoint == Endpoint(host: "fe80::1%eth0", port: 4242))
        #expect(recorded.connect?.options == ConnectOptions(timeout: .milliseconds(2345)))
        #expect(recorded.listen?.endpoint == Endpoint(host: "example.invalid", port: 65535))
        #expect(recorded.listen?.options == ListenOptions(backlog: 77))
        #expect(recorded.gracePeriod == .seconds(3) + .nanoseconds(1))

        let defaults = try Self.bridged(script).make(TransportConfiguration())
        #expect(script.recorded.withLock { $0.configuration } == TransportConfiguration())
        await defaults.shutdownNow()
    }

    @Test("The kernel's stall detection switched off crosses to the library; a library built before the interface carried it refuses it with invalidArgument (invalid option), never drops it")
    func kernelStallDetectionOff() async throws {
        let configuration = TransportConfiguration(eventLoopCount: 1, stallTimeout: .seconds(2), kernelStallDetection: false)
        let script = Script(error: TransportError(code: .unavailable, reason: .refused, message: "as scripted"))
        let transport = try Self.bridged(script).make(configuration)
        #expect(script.recorded.withLock { $0.configuration }?.kernelStallDetection == false)
        await transport.shutdownNow()

        // The table of a library built before the field: its size ends before
        // `configuration_size`, so the host cannot know it would read the switch.
        let older = Script(error: TransportError(code: .unavailable, reason: .refused, message: "as scripted"))
        let exported = LoadableBackend.export(
            TransportBackend(name: "scripted-older-\(UUID().uuidString.prefix(8))", summary: "", usesSockets: true) { configuration in
                older.recorded.withLock { $0.configuration = configuration }
                return ScriptedTransport(older)
            })
        let table = UnsafeMutablePointer<sy_backend>.allocate(capacity: 1)
        defer { table.deallocate() }
        table.initialize(to: exported.load(as: sy_backend.self))
        table.pointee.size = UInt32(MemoryLayout<sy_backend>.offset(of: \.configuration_size)!)
        table.pointee.configuration_size = 0
        let backend = try LoadableBackend.load(entry: UnsafeRawPointer(table), origin: "an older table")
        let error = #expect(throws: TransportError.self) { _ = try backend.make(configuration) }
        #expect(error?.code == .invalidArgument && error?.reason == .invalidOption)
        #expect(error?.message.contains("built before the backend library interface carried that setting") == true, "\(String(describing: error))")
        #expect(older.recorded.withLock { $0.configuration } == nil, "the library was asked to make a transport")
        // Without a stall timeout the switch means nothing, and the transport is made.
        let plain = try backend.make(TransportConfiguration(eventLoopCount: 1, kernelStallDetection: false))
        await plain.shutdownNow()
    }

    @Test("Path endpoints cross both ways: file system, abstract and unnamed")
    func pathEndpoints() async throws {
        for path in ["/tmp/switchyard-test.sock", "@switchyard-abstract", ""] {
            let script = Script(error: TransportError(code: .unavailable, reason: .refused, message: "as scripted"))
            let transport = try Self.bridged(script).make(TransportConfiguration())
            _ = try? await transport.connect(to: Endpoint(unixPath: path))
            _ = try? await transport.listen(on: Endpoint(unixPath: path))
            let recorded = script.recorded.withLock { $0 }
            #expect(recorded.connect?.endpoint == Endpoint(unixPath: path))
            #expect(recorded.connect?.endpoint.path == path)
            #expect(recorded.listen?.endpoint == Endpoint(unixPath: path))
            await transport.shutdownNow()
        }
    }

    @Test("A backend's local endpoint crosses, a fresh one each call; without one it is 127.0.0.1, port 0")
    func localEndpoint() throws {
        let counter = Mutex(0)
        let loaded = try Self.bridged(Script()) {
            let call = counter.withLock { count in
                count += 1
                return count
            }
            return Endpoint(unixPath: "/tmp/switchyard-local-\(call).sock")
        }
        #expect(loaded.localEndpoint() == Endpoint(unixPath: "/tmp/switchyard-local-1.sock"))
        #expect(loaded.localEndpoint() == Endpoint(unixPath: "/tmp/switchyard-local-2.sock"))
        #expect(try Self.bridged(Script()).localEndpoint() == Endpoint(host: "127.0.0.1", port: 0))
    }

    @Test("Cancelling the task that connects cancels the connect in the library, also when it was cancelled before")
    func cancellation() async throws {
        let script = Script(waitsForCancellation: true)
        let transport = try Self.bridged(script).make(TransportConfiguration())
        let connecting = Task { try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 1)) }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        connecting.cancel()
        do {
            _ = try await connecting.value
            Issue.record("the cancelled connect succeeded")
        } catch let error as TransportError {
            #expect(error.code == .cancelled)
            #expect(error.reason == .taskCancelled)
        }
        #expect(ContinuousClock.now - started < .seconds(5))

        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 1))
        }
        do {
            _ = try await cancelledFirst.value
            Issue.record("the connect of a cancelled task succeeded")
        } catch let error as TransportError {
            #expect(error.reason == .taskCancelled)
        }
        await transport.shutdownNow()
    }
}

/// What a ``ScriptedTransport`` does, and what reached it.
final class Script: Sendable {
    struct Recorded: Sendable {
        var configuration: TransportConfiguration?
        var connect: (endpoint: Endpoint, options: ConnectOptions)?
        var listen: (endpoint: Endpoint, options: ListenOptions)?
        var gracePeriod: Duration?
    }
    let makeError: TransportError?
    let error: TransportError?
    let foreign: (any Error)?
    let waitsForCancellation: Bool
    let recorded = Mutex(Recorded())

    init(makeError: TransportError? = nil, error: TransportError? = nil, foreign: (any Error)? = nil, waitsForCancellation: Bool = false) {
        self.makeError = makeError
        self.error = error
        self.foreign = foreign
        self.waitsForCancellation = waitsForCancellation
    }

    func fail() async throws -> Never {
        if waitsForCancellation {
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                throw TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect's task was cancelled")
            }
        }
        if let foreign { throw foreign }
        throw error ?? TransportError(code: .internal, reason: .misuse, message: "the script has no error")
    }
}

/// A transport that fails every connect and listen as its script says and records what
/// it was asked.
final class ScriptedTransport: Transport {
    let script: Script
    init(_ script: Script) { self.script = script }
    var name: String { "scripted" }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        script.recorded.withLock { $0.connect = (endpoint, options) }
        try await script.fail()
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        script.recorded.withLock { $0.listen = (endpoint, options) }
        try await script.fail()
    }

    func shutdown(gracePeriod: Duration) async { script.recorded.withLock { $0.gracePeriod = gracePeriod } }
    func shutdownNow() async {}
}
