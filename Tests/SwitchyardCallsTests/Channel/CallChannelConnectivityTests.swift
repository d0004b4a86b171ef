import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import Synchronization
import Testing

/// A ``CallChannel`` driving its connectivity state over the in-memory backend: the idle
/// timeout, fail-fast and wait-for-ready calls while connects fail, the state stream.
/// (Kit scenario 76 checks the backoff's timing on every backend pair.)
@Suite("A CallChannel's connectivity state, idle timeout and wait-for-ready calls", .serialized, .timeLimit(.minutes(1)))
struct CallChannelConnectivityTests {
    @Test("Without calls for its idle timeout the channel closes its connection and goes idle; an open call keeps it; the next call connects again")
    func idleTimeout() async throws {
        let (client, server) = try Self.transports()
        let echo = try await Self.echoServer(on: server)
        defer { echo.close() }
        let counting = CountingTransport(client)
        let channel = CallChannel(
            target: Endpoint(host: "127.0.0.1", port: echo.localAddress.port), transport: counting,
            configuration: ChannelConfiguration(idleTimeout: .milliseconds(200)))
        defer { channel.close() }
        #expect(channel.connectivityState == .idle)

        // A call held open past the idle timeout keeps the connection.
        try await channel.withCall { call in
            try await call.write([1])
            try await Task.sleep(for: .milliseconds(400))
            #expect(channel.connectivityState == .ready, "a call open past the idle timeout keeps the channel ready")
        }
        let ended = ContinuousClock.now
        try await Self.waitUntil(seconds: 3) { channel.connectivityState == .idle }
        let idleAfter = ContinuousClock.now - ended
        #expect(idleAfter >= .milliseconds(190), "idle \(idleAfter) after the last call, before its 200 ms timeout")
        #expect(counting.connects == 1)

        try await channel.withCall { call in try await call.write([2]) }
        #expect(counting.connects == 2, "the call after the idle timeout connected again")
    }

    @Test("After a refused connect a fail-fast call fails at once with the refusal, without connecting; a wait-for-ready call waits until its deadline")
    func failFastAndWaitForReady() async throws {
        let (client, _) = try Self.transports()
        let counting = CountingTransport(client)
        let target = try await Self.portWithoutListener(on: client)
        // A long backoff: the channel stays in transient failure through the test.
        let channel = CallChannel(
            target: target, transport: counting,
            configuration: ChannelConfiguration(backoff: ConnectionBackoff(initial: .seconds(30), maximum: .seconds(30))))
        defer { channel.close() }

        let first = await #expect(throws: TransportError.self) { try await channel.startCall(handler: NoHandler()) }
        #expect(first?.code == .unavailable)
        #expect(first?.reason == .refused, "\(String(describing: first))")
        #expect(channel.connectivityState == .transientFailure)

        let started = ContinuousClock.now
        let second = await #expect(throws: TransportError.self) { try await channel.startCall(handler: NoHandler()) }
        #expect(second == first, "a fail-fast call in transient failure fails with the last attempt's error")
        #expect(ContinuousClock.now - started < .milliseconds(100))
        #expect(counting.connects == 1, "no attempt before the backoff ends")

        let waitStarted = ContinuousClock.now
        var patient = CallConfiguration(timeout: .milliseconds(300))
        patient.waitForReady = true
        let waitForReady = patient
        let waited = await #expect(throws: TransportError.self) {
            try await channel.startCall(options: waitForReady, handler: NoHandler())
        }
        let waitedFor = ContinuousClock.now - waitStarted
        #expect(waited?.code == .deadlineExceeded)
        #expect(waited?.reason == .timedOut)
        #expect(waitedFor >= .milliseconds(290) && waitedFor < .seconds(2), "the wait-for-ready call waited \(waitedFor)")
        #expect(counting.connects == 1)
    }

    @Test("A wait-for-ready call whose task is cancelled while it waits ends cancelled at once")
    func cancelledWhileWaiting() async throws {
        let (client, _) = try Self.transports()
        let target = try await Self.portWithoutListener(on: client)
        let channel = CallChannel(
            target: target, transport: client,
            configuration: ChannelConfiguration(backoff: ConnectionBackoff(initial: .seconds(30), maximum: .seconds(30))))
        defer { channel.close() }
        var waitForReady = CallConfiguration()
        waitForReady.waitForReady = true
        let waiting = Task { [waitForReady] in
            try await channel.startCall(options: waitForReady, handler: NoHandler())
        }
        try await Self.waitUntil(seconds: 3) { channel.connectivityState == .transientFailure }
        try await Task.sleep(for: .milliseconds(50))
        let cancelled = ContinuousClock.now
        waiting.cancel()
        let error = await #expect(throws: TransportError.self) { try await waiting.value }
        #expect(error?.code == .cancelled)
        #expect(ContinuousClock.now - cancelled < .milliseconds(500))
    }

    @Test("connectivityStates gives the current state first, then each change, and finishes after close with shutdown")
    func stateStream() async throws {
        let (client, server) = try Self.transports()
        let echo = try await Self.echoServer(on: server)
        defer { echo.close() }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: echo.localAddress.port), transport: client)
        let seen = Task {
            var states: [ChannelConnectivityState] = []
            for await state in channel.connectivityStates { states.append(state) }
            return states
        }
        try await Task.sleep(for: .milliseconds(20))
        try await channel.withCall { call in try await call.write([1]) }
        var late = channel.connectivityStates.makeAsyncIterator()
        #expect(await late.next() == .ready, "a later subscriber gets the current state first")
        channel.close()
        #expect(channel.connectivityState == .shutdown)
        #expect(await seen.value == [.idle, .connecting, .ready, .shutdown])
        #expect(await late.next() == .shutdown)
        #expect(await late.next() == nil)
        let closed = await #expect(throws: TransportError.self) { try await channel.startCall(handler: NoHandler()) }
        #expect(closed?.code == .cancelled)
    }

    @Test("A channel configuration out of range fails every call with invalidArgument, before any connect")
    func invalidConfiguration() async throws {
        let (client, _) = try Self.transports()
        let counting = CountingTransport(client)
        for configuration in [
            ChannelConfiguration(idleTimeout: .zero),
            ChannelConfiguration(backoff: ConnectionBackoff(multiplier: 0.5)),
            { var negative = ChannelConfiguration(); negative.retryBufferSize = -1; return negative }(),
        ] {
            let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 9), transport: counting, configuration: configuration)
            let error = await #expect(throws: TransportError.self) { try await channel.startCall(handler: NoHandler()) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.reason == .invalidOption)
        }
        #expect(counting.connects == 0)
    }

    // MARK: helpers

    private static func transports() throws -> (client: MemoryTransport, server: MemoryTransport) {
        (try MemoryTransport(configuration: .init(eventLoopCount: 2)), try MemoryTransport(configuration: .init(eventLoopCount: 2)))
    }

    private static func echoServer(on server: MemoryTransport) async throws -> CallServer {
        try await CallServer.start(transport: server, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
    }

    /// A port where nothing listens: one a listener just let go.
    private static func portWithoutListener(on transport: MemoryTransport) async throws -> Endpoint {
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let port = listener.localAddress.port
        listener.close()
        return Endpoint(host: "127.0.0.1", port: port)
    }

    private static func waitUntil(seconds: Int, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            try #require(ContinuousClock.now < deadline, "timed out")
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// Counts connects and forwards everything.
private final class CountingTransport: Transport {
    let inner: any Transport
    private let count = Mutex(0)
    init(_ inner: any Transport) { self.inner = inner }
    var connects: Int { count.withLock { $0 } }
    var name: String { inner.name }
    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        count.withLock { $0 += 1 }
        return try await inner.connect(to: endpoint, options: options)
    }
    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try await inner.listen(on: endpoint, options: options)
    }
    func shutdown(gracePeriod: Duration) async { await inner.shutdown(gracePeriod: gracePeriod) }
    func shutdownNow() async { await inner.shutdownNow() }
}

private final class NoHandler: CallHandler {
    func call(_ call: Call, didReceive message: [UInt8]) {}
    func call(_ call: Call, didCloseWith status: CallStatus) {}
}
