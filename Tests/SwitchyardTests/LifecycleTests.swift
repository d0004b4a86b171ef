import Switchyard
import Synchronization
import Testing

/// The lifecycle's state machine, against a fake transport (no sockets): the backends'
/// behaviour under it is the conformance kit's (SuspendResumeScenarios).
@Suite("Lifecycle")
struct LifecycleTests {
    @Test("Suspend and resume go through every state, in order, and are idempotent")
    func statesInOrder() async throws {
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(100))
        let seen = Recorded<LifecycleState>()
        let observation = lifecycle.observe { seen.append($0) }
        #expect(lifecycle.current == .active)
        try await lifecycle.resume()  // active: nothing to do
        await lifecycle.suspend()
        #expect(lifecycle.current == .suspended)
        await lifecycle.suspend()  // suspended: nothing to do
        try await lifecycle.resume()
        #expect(lifecycle.current == .active)
        observation.cancel()
        await lifecycle.suspend()
        #expect(seen.all == [.suspending, .suspended, .resuming, .active])
    }

    @Test("A suspend waits for background work that ends within the grace period, and expires nothing")
    func workEndsInTime() async throws {
        let lifecycle = Lifecycle(gracePeriod: .seconds(10))
        let expirations = Recorded<String>()
        let work = lifecycle.beginBackgroundWork("upload") { expirations.append("upload") }
        #expect(lifecycle.outstandingBackgroundWork == 1)
        let start = ContinuousClock.now
        let suspended = Task { await lifecycle.suspend() }
        try await Task.sleep(for: .milliseconds(100))
        #expect(lifecycle.current == .suspending)
        work.end()
        await suspended.value
        let elapsed = ContinuousClock.now - start
        #expect(lifecycle.current == .suspended)
        #expect(expirations.all.isEmpty)
        #expect(!work.isExpired && work.isFinished)
        #expect(elapsed < .seconds(5), "the suspend took \(elapsed) after the work ended")
        work.end()  // idempotent
        #expect(lifecycle.outstandingBackgroundWork == 0)
    }

    @Test("When the grace period runs out, each outstanding expiration handler runs once, in order, on time")
    func graceRunsOut() async throws {
        let grace: Duration = .milliseconds(300)
        let lifecycle = Lifecycle(gracePeriod: grace)
        let expirations = Recorded<String>()
        let first = lifecycle.beginBackgroundWork("first") { expirations.append("first") }
        let ended = lifecycle.beginBackgroundWork("ended") { expirations.append("ended") }
        let second = lifecycle.beginBackgroundWork("second") { expirations.append("second") }
        ended.end()
        let start = ContinuousClock.now
        await lifecycle.suspend()
        let elapsed = ContinuousClock.now - start
        #expect(expirations.all == ["first", "second"])
        #expect(first.isExpired && second.isExpired && !ended.isExpired)
        #expect(elapsed >= grace, "the suspend returned after \(elapsed), before the grace period")
        #expect(elapsed < grace + .milliseconds(500), "the suspend took \(elapsed) with a grace period of \(grace)")
        first.end()  // after expiry: nothing
        #expect(expirations.all == ["first", "second"])
        #expect(lifecycle.outstandingBackgroundWork == 0)
    }

    @Test("Cancelling the task that suspends does not cut the grace period short")
    func cancellationDoesNotShortenGrace() async throws {
        let grace: Duration = .milliseconds(300)
        let lifecycle = Lifecycle(gracePeriod: grace)
        let expired = Recorded<ContinuousClock.Instant>()
        _ = lifecycle.beginBackgroundWork { expired.append(.now) }
        let start = ContinuousClock.now
        let suspending = Task { await lifecycle.suspend() }
        suspending.cancel()
        await suspending.value
        let at = try #require(expired.all.first)
        #expect(at - start >= grace)
    }

    @Test("Work begun while suspended expires at once; after resume work is waited for again")
    func workWhileSuspended() async throws {
        let lifecycle = Lifecycle(gracePeriod: .seconds(10))
        await lifecycle.suspend()
        let expired = Recorded<Int>()
        let late = lifecycle.beginBackgroundWork { expired.append(1) }
        let deadline = ContinuousClock.now + .seconds(5)
        while expired.all.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(expired.all == [1] && late.isExpired)
        #expect(lifecycle.outstandingBackgroundWork == 0)
        try await lifecycle.resume()
        let work = lifecycle.beginBackgroundWork()
        #expect(lifecycle.outstandingBackgroundWork == 1)
        work.end()
    }

    @Test("A resume called during a suspend runs after it; calls run in order")
    func resumeDuringSuspendWaits() async throws {
        let lifecycle = Lifecycle(gracePeriod: .seconds(10))
        let seen = Recorded<LifecycleState>()
        let observation = lifecycle.observe { seen.append($0) }
        defer { observation.cancel() }
        let work = lifecycle.beginBackgroundWork()
        let suspending = Task { await lifecycle.suspend() }
        try await Task.sleep(for: .milliseconds(50))
        let resuming = Task { try await lifecycle.resume() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(lifecycle.current == .suspending)
        work.end()
        await suspending.value
        try await resuming.value
        #expect(seen.all == [.suspending, .suspended, .resuming, .active])
        #expect(lifecycle.current == .active)
    }

    @Test("A listener closes when a suspend begins and reopens on the same port on resume")
    func listenerReopensOnSamePort() async throws {
        let transport = FakeTransport()
        let lifecycle = Lifecycle(gracePeriod: .seconds(10))
        let listener = try await lifecycle.listen(on: Endpoint(host: "127.0.0.1", port: 0), using: transport)
        #expect(listener.localAddress.port == FakeTransport.firstPort)
        #expect(listener.isListening)
        let work = lifecycle.beginBackgroundWork()
        let suspending = Task { await lifecycle.suspend() }
        // Closed at once, during the grace phase.
        let deadline = ContinuousClock.now + .seconds(5)
        while transport.openListeners > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
        #expect(transport.openListeners == 0 && !listener.isListening)
        #expect(lifecycle.current == .suspending)
        work.end()
        await suspending.value
        await #expect(throws: TransportError.self) {
            _ = try await lifecycle.listen(on: Endpoint(host: "127.0.0.1", port: 0), using: transport)
        }
        try await lifecycle.resume()
        #expect(transport.listened == [
            Endpoint(host: "127.0.0.1", port: 0), Endpoint(host: "127.0.0.1", port: FakeTransport.firstPort),
        ])
        #expect(transport.openListeners == 1 && listener.isListening)
        #expect(listener.localAddress.port == FakeTransport.firstPort)
        listener.close()
        #expect(transport.openListeners == 0)
        await lifecycle.suspend()
        try await lifecycle.resume()
        #expect(transport.listened.count == 2, "a closed listener was reopened")
    }

    @Test("A listener that cannot reopen is closed for good and resume throws its error; the rest resume")
    func listenerFailsToReopen() async throws {
        let transport = FakeTransport()
        let lifecycle = Lifecycle(gracePeriod: .zero)
        let failing = try await lifecycle.listen(on: Endpoint(host: "127.0.0.1", port: 0), using: transport)
        let healthy = try await lifecycle.listen(on: Endpoint(host: "127.0.0.1", port: 0), using: transport)
        await lifecycle.suspend()
        transport.refusePort(failing.localAddress.port)
        await #expect {
            try await lifecycle.resume()
        } throws: { error in
            (error as? TransportError)?.reason == .addressInUse
        }
        #expect(lifecycle.current == .active)
        #expect(!failing.isListening && healthy.isListening)
        var iterator = failing.connections.makeAsyncIterator()
        #expect(await iterator.next() == nil, "the failed listener's connections did not end")
        healthy.close()
    }

    @Test("A registered channel refuses calls at once while suspended, without connecting, and calls again after resume")
    func channelRefusesWhileSuspended() async throws {
        let transport = FakeTransport()
        let lifecycle = Lifecycle(gracePeriod: .zero)
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 9), transport: transport)
        let registration = lifecycle.register(channel)
        await lifecycle.suspend()
        await #expect {
            _ = try await channel.startCall(handler: NoCallHandler())
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .unavailable && error?.reason == .suspended
        }
        #expect(transport.connects == 0)
        try await lifecycle.resume()
        // The fake refuses every connect: the call got as far as connecting.
        await #expect {
            _ = try await channel.startCall(handler: NoCallHandler())
        } throws: { error in
            (error as? TransportError)?.reason == .refused
        }
        #expect(transport.connects == 1)
        // Cancelling the registration while suspended lets the channel call again.
        await lifecycle.suspend()
        registration.cancel()
        await #expect {
            _ = try await channel.startCall(handler: NoCallHandler())
        } throws: { error in
            (error as? TransportError)?.reason == .refused
        }
        #expect(transport.connects == 2)
    }
}

/// Values appended from any thread.
final class Recorded<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// A transport with no sockets: listeners are records (ports from 40000 up, in order),
/// connects are refused and counted.
private final class FakeTransport: Transport {
    static let firstPort = 40_000
    private struct State {
        var listened: [Endpoint] = []
        var open: Set<Int> = []
        var nextPort = FakeTransport.firstPort
        var refused: Set<Int> = []
        var connects = 0
    }
    private let state = Mutex(State())

    var name: String { "fake" }
    var listened: [Endpoint] { state.withLock { $0.listened } }
    var openListeners: Int { state.withLock { $0.open.count } }
    var connects: Int { state.withLock { $0.connects } }
    func refusePort(_ port: Int) { state.withLock { _ = $0.refused.insert(port) } }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        state.withLock { $0.connects += 1 }
        throw TransportError(code: .unavailable, reason: .refused, message: "the fake transport refuses every connect")
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        let port = try state.withLock { state throws(TransportError) -> Int in
            state.listened.append(endpoint)
            if state.refused.contains(endpoint.port) {
                throw TransportError(code: .unavailable, reason: .addressInUse, message: "port \(endpoint.port) is taken")
            }
            var port = endpoint.port
            if port == 0 {
                port = state.nextPort
                state.nextPort += 1
            }
            state.open.insert(port)
            return port
        }
        return FakeListener(address: Endpoint(host: endpoint.host, port: port)) { [weak self] in
            _ = self?.state.withLock { $0.open.remove(port) }
        }
    }

    func shutdown(gracePeriod: Duration) async {}
    func shutdownNow() async {}
}

private final class FakeListener: Listener {
    let localAddress: Endpoint
    let connections = AcceptedConnections()
    private let onClose: Mutex<(@Sendable () -> Void)?>
    init(address: Endpoint, onClose: @escaping @Sendable () -> Void) {
        localAddress = address
        self.onClose = Mutex(onClose)
    }
    var backendName: String { "fake" }
    func close() {
        let action = onClose.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
        connections.finish()
    }
}

private final class NoCallHandler: CallHandler {
    func call(_ call: Call, didReceive message: [UInt8]) {}
    func call(_ call: Call, didCloseWith status: CallStatus) {}
}
