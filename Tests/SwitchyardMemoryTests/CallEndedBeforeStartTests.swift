@testable import Switchyard
import SwitchyardMemory
import Synchronization
import Testing

/// A channel holds a call from before the call starts (so a suspend or a network change
/// cannot miss it), so a terminate or a cancel can reach the call first: when another
/// call's connection breaks, or the channel closes, while this one is between its connect
/// and its start. Its handler must still hear why. (echo-client hung on this, about one
/// run in 150: its second call was ended by the first's broken connection before it
/// started, and waited for an echo forever.)
@Suite("A call ended before it started", .timeLimit(.minutes(1)))
struct CallEndedBeforeStartTests {
    @Test("A call terminated before start(handler:) tells its handler the error, once")
    func terminatedBeforeStart() async throws {
        let (call, transports) = try await unstartedCall()
        let handler = EndRecorder()
        call.terminate(with: TransportError(code: .unavailable, reason: .closed, message: "another call's connection broke"))
        call.start(handler: handler)
        let status = try await handler.firstEnd()
        #expect(status.error?.code == .unavailable)
        #expect(status.error?.reason == .closed)
        try await Task.sleep(for: .milliseconds(50))
        #expect(handler.ends == 1)
        for transport in transports { await transport.shutdownNow() }
    }

    @Test("A call cancelled before start(handler:) tells its handler it was cancelled")
    func cancelledBeforeStart() async throws {
        let (call, transports) = try await unstartedCall()
        let handler = EndRecorder()
        call.cancel()
        call.start(handler: handler)
        let status = try await handler.firstEnd()
        #expect(status.error?.code == .cancelled)
        #expect(status.error?.reason == .callCancelled)
        for transport in transports { await transport.shutdownNow() }
    }

    /// A client call on a connected in-memory connection, not yet started.
    private func unstartedCall() async throws -> (Call, [MemoryTransport]) {
        let server = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0), options: ListenOptions())
        listener.acceptConnections { _ in }
        let connection = try await client.connect(to: listener.localAddress, options: ConnectOptions())
        return (Call(role: .client, connection: connection, options: CallConfiguration()), [client, server])
    }
}

/// Counts a handler's ends and hands out the first.
private final class EndRecorder: CallHandler {
    private let state = Mutex<(ends: Int, first: CallStatus?)>((0, nil))
    var ends: Int { state.withLock { $0.ends } }

    func call(_ call: Call, didReceive message: [UInt8]) {}
    func callDidReceiveEnd(_ call: Call) {}
    func callDidWriteData(_ call: Call) {}
    func call(_ call: Call, didCloseWith status: CallStatus) {
        state.withLock { state in
            state.ends += 1
            if state.first == nil { state.first = status }
        }
    }

    /// The first end's status; fails after 5 s (the call never told its handler).
    func firstEnd() async throws -> CallStatus {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let status = state.withLock({ $0.first }) { return status }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the handler heard no end within 5 s")
        throw CancellationError()
    }
}
