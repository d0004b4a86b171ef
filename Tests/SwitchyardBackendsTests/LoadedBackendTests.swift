import Foundation
import Switchyard
import SwitchyardBackendKit
import SwitchyardBackends
import SwitchyardConformance
import Synchronization
import Testing

/// A real Swift backend library (`libSwitchyardBSDLoadedFixture.so`: bsd with its own
/// copy of every module, exported as `bsd-loaded`) loaded and used against the built-in
/// `bsd`: bytes, addresses, errors, loops, shutdown, descriptors.
///
/// Serialized: the descriptor checks count the process's descriptors.
@Suite("A backend loaded from a library", .serialized)
struct LoadedBackendTests {
    static func loaded() throws -> TransportBackend { try Fixtures.bsdLoaded.get() }
    static let configuration = TransportConfiguration(eventLoopCount: 1)

    @Test("The library's registration arrives as the library gave it")
    func registration() throws {
        let backend = try Self.loaded()
        #expect(backend.name == "bsd-loaded")
        #expect(backend.summary == "bsd, loaded from a shared library (a test fixture)")
        #expect(backend.network == "tcp")
        #expect(backend.usesSockets)
        let registry = BackendRegistry()
        try Backends.loadLibrary(at: try Fixtures.bsdLoadedLibrary(), into: registry)
        #expect(registry.names == ["bsd-loaded"])
    }

    @Test("The host exports none of its symbols to the libraries it loads, and a library's stay out of the global scope")
    func symbolsStayApart() throws {
        _ = try Self.loaded()
        // If the host exported its copies (a link with --export-dynamic), a library's
        // references to its C shims would bind to the host's (its Swift symbols are
        // protected and bind within it whatever the host does). RTLD_LOCAL keeps the
        // library's own symbols, its entry point among them, out of the global scope.
        for symbol in ["$s10Switchyard14TransportErrorV4CodeVN", "csy_accept4", "switchyard_backend_entry"] {
            #expect(dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) == nil, "\(symbol) is in the global scope")
        }
    }

    @Test(
        "A loaded backend and the built-in bsd echo bytes both ways round, close, shut down, and leave no descriptor open",
        arguments: ["loaded client", "loaded server"])
    func echo(role: String) async throws {
        await warmUpRuntime()
        // Made before counting: the registry's libuv backend opens its process-wide pipes
        // once, when it is first registered.
        let bsdBackend = try Backends.registry.backend(named: "bsd")
        let before = openDescriptors()
        let loaded = try Self.loaded().make(Self.configuration)
        let bsd = try bsdBackend.make(Self.configuration)
        let (client, server) = role == "loaded client" ? (loaded, bsd) : (bsd, loaded)
        #expect(loaded.name == "bsd-loaded")

        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        #expect(listener.localAddress.port > 0)
        #expect(listener.backendName == server.name)
        listener.acceptConnections { EchoHandler($0).start() }
        let connection = AsyncConnection(try await client.connect(to: listener.localAddress))
        #expect(connection.connection.backendName == client.name)
        #expect(connection.connection.remoteAddress == listener.localAddress)
        #expect(connection.connection.localAddress.port > 0)

        let message = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        try await connection.write(message)
        try await connection.shutdownOutput()
        let echoed = try await connection.readToEnd()
        #expect(echoed == message)
        connection.close()
        listener.close()
        await client.shutdown(gracePeriod: .seconds(1))
        await server.shutdown(gracePeriod: .seconds(1))
        try await expectDescriptors(back: before)
    }

    @Test("A refused connect crosses the boundary as the built-in backend reports it: code, reason, message, errno")
    func refusedConnect() async throws {
        let loaded = try Self.loaded().make(Self.configuration)
        let bsd = try Backends.registry.makeTransport(named: "bsd", configuration: Self.configuration)
        let listener = try await bsd.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let nobody = listener.localAddress
        listener.close()

        let viaLibrary = await connectError(loaded, nobody)
        let builtIn = await connectError(bsd, nobody)
        #expect(viaLibrary?.code == .unavailable)
        #expect(viaLibrary?.reason == .refused)
        #expect(viaLibrary?.native?.name == "ECONNREFUSED")
        #expect(viaLibrary == builtIn)
        await loaded.shutdownNow()
        await bsd.shutdownNow()
    }

    @Test("Connections on one loop share one event loop object, which runs their callbacks, work and tasks")
    func eventLoops() async throws {
        let loaded = try Self.loaded().make(Self.configuration)
        let bsd = try Backends.registry.makeTransport(named: "bsd", configuration: Self.configuration)
        let listener = try await bsd.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { EchoHandler($0).start() }
        let first = try await loaded.connect(to: listener.localAddress)
        let second = try await loaded.connect(to: listener.localAddress)
        #expect(first.eventLoop === second.eventLoop)
        let loop = first.eventLoop
        #expect(!loop.inEventLoop)

        // The handler's callbacks run on the library's loop thread, which is the loop.
        let probe = LoopProbe(first)
        first.setHandler(probe)
        first.startReading()
        first.write(Array("ping".utf8), completion: { probe.completed($0) })
        try await probe.waitUntil { $0.read == 4 && $0.completions == 1 }
        #expect(probe.state.offLoopCallbacks == 0)

        let onLoop = await withCheckedContinuation { continuation in loop.execute { continuation.resume(returning: loop.inEventLoop) } }
        #expect(onLoop)
        let inTask = await Task(executorPreference: loop) { loop.inEventLoop }.value
        #expect(inTask)

        first.close()
        second.close()
        try await probe.waitUntil { $0.closed }
        #expect(probe.state.closeError == nil)
        listener.close()
        await loaded.shutdownNow()
        await bsd.shutdownNow()
    }

    @Test("A handler is released once its connection ends, and a handler set after the end hears it once")
    func handlerRelease() async throws {
        let loaded = try Self.loaded().make(Self.configuration)
        let bsd = try Backends.registry.makeTransport(named: "bsd", configuration: Self.configuration)
        let listener = try await bsd.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { EchoHandler($0).start() }
        let connection = try await loaded.connect(to: listener.localAddress)
        weak var released: LoopProbe?
        do {
            let probe = LoopProbe(nil)
            released = probe
            connection.setHandler(probe)
            connection.startReading()
            connection.close()
            try await probe.waitUntil { $0.closed }
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while released != nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(released == nil, "the library still holds the host's handler after the connection ended")

        // A connection that ended before it had a handler: the late one hears the end.
        let unattended = try await loaded.connect(to: listener.localAddress)
        unattended.close()
        let late = LoopProbe(nil)
        unattended.setHandler(late)
        try await late.waitUntil { $0.closed }
        #expect(late.state.closeError == nil)
        // One that ended under a handler: a later handler hears nothing more.
        let after = LoopProbe(nil)
        connection.setHandler(after)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!after.state.closed)
        listener.close()
        await loaded.shutdownNow()
        await bsd.shutdownNow()
    }

    @Test("Shutting a loaded transport down ends its open connections with cancelled (shutdown) and its listeners' sequences")
    func shutdown() async throws {
        let loaded = try Self.loaded().make(Self.configuration)
        let bsd = try Backends.registry.makeTransport(named: "bsd", configuration: Self.configuration)
        let listener = try await loaded.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let count = AcceptCount()
        let accepted = Task {
            for await connection in listener.connections {
                count.value.add(1, ordering: .relaxed)
                connection.setHandler(LoopProbe(nil))
            }
        }
        let client = try await bsd.connect(to: listener.localAddress)
        let clientProbe = LoopProbe(client)
        client.setHandler(clientProbe)
        client.startReading()
        let acceptDeadline = ContinuousClock.now + .seconds(5)
        while count.value.load(ordering: .relaxed) == 0 && ContinuousClock.now < acceptDeadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let outgoing = try await loaded.connect(to: try await bsd.listen(on: Endpoint(host: "127.0.0.1", port: 0)).localAddress)
        let outgoingProbe = LoopProbe(outgoing)
        outgoing.setHandler(outgoingProbe)

        await loaded.shutdownNow()
        try await outgoingProbe.waitUntil { $0.closed }
        #expect(outgoingProbe.state.closeError?.code == .cancelled)
        #expect(outgoingProbe.state.closeError?.reason == .shutdown)
        await accepted.value  // the listener's sequence ended
        #expect(count.value.load(ordering: .relaxed) == 1)
        // The library's bsd closed the accepted connection: the client hears it end.
        try await clientProbe.waitUntil { $0.readEnd || $0.closed }
        let afterShutdown = await connectError(loaded, listener.localAddress)
        #expect(afterShutdown?.code == .cancelled)
        #expect(afterShutdown?.reason == .shutdown)
        await loaded.shutdownNow()  // idempotent
        await bsd.shutdownNow()
    }

    // MARK: - Helpers

    private func connectError(_ transport: any Transport, _ endpoint: Endpoint) async -> TransportError? {
        do {
            let connection = try await transport.connect(to: endpoint)
            connection.close()
            Issue.record("connecting to \(endpoint) with \(transport.name) succeeded")
            return nil
        } catch let error as TransportError {
            return error
        } catch {
            Issue.record("connecting threw \(type(of: error)), not a TransportError: \(error)")
            return nil
        }
    }

    private func expectDescriptors(back before: [String: String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + .seconds(3)
        var left = openDescriptors().filter { before[$0.key] != $0.value }
        while !left.isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            left = openDescriptors().filter { before[$0.key] != $0.value }
        }
        #expect(left.isEmpty, "descriptors left open: \(left)", sourceLocation: sourceLocation)
    }

    /// The runtime opens descriptors lazily (a timer per clock and priority the first
    /// time a task sleeps there): sleep once on each before counting, as the kit does.
    private func warmUpRuntime() async {
        await withTaskGroup(of: Void.self) { group in
            for priority in [TaskPriority.background, .low, .utility, .medium, .userInitiated, .high] {
                group.addTask(priority: priority) {
                    try? await Task.sleep(for: .milliseconds(1))
                    try? await Task.sleep(for: .milliseconds(1), clock: .suspending)
                }
            }
        }
    }
}

final class AcceptCount: Sendable {
    let value = Atomic(0)
}

/// A handler that records what it hears and whether each callback ran on its
/// connection's loop.
///
/// `@unchecked Sendable`: its state is behind a mutex.
final class LoopProbe: ConnectionHandler, @unchecked Sendable {
    struct State {
        var read = 0
        var completions = 0
        var readEnd = false
        var closed = false
        var closeError: TransportError?
        var offLoopCallbacks = 0
    }
    private let connection: (any Connection)?
    private let recorded = Mutex(State())

    init(_ connection: (any Connection)?) { self.connection = connection }

    var state: State { recorded.withLock { $0 } }

    private func note(_ change: (inout State) -> Void) {
        let onLoop = connection?.eventLoop.inEventLoop ?? true
        recorded.withLock {
            change(&$0)
            if !onLoop { $0.offLoopCallbacks += 1 }
        }
    }

    func completed(_ error: TransportError?) { note { $0.completions += 1 } }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { note { $0.read += bytes.count } }
    func connectionDidReadEnd() { note { $0.readEnd = true } }
    func connectionDidClose(error: TransportError?) {
        note {
            $0.closed = true
            $0.closeError = error
        }
    }

    func waitUntil(seconds: Double = 10, _ condition: (State) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !condition(state) {
            if ContinuousClock.now > deadline { throw FixtureFailure("waited \(seconds) s; the handler saw \(state)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
