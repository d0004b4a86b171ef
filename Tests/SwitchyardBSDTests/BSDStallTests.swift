import Switchyard
import SwitchyardBSD
import Synchronization
import Testing

@Suite("BSD stall monitor on real sockets", .serialized)
struct BSDStallTests {
    /// Measured on Linux 6.18: `TCP_USER_TIMEOUT` also bounds a zero window (the kernel
    /// aborts a connection whose peer keeps its window closed for that long, although it
    /// answers the probes), so with a stall timeout a peer that stops reading for longer
    /// ends the writer with `stalled` (ETIMEDOUT), as on the libuv backend. The stall
    /// monitor itself never takes a closed window for a stall (see `StallDetector`).
    /// This test pins the one error it may end with, and prints which way it went.
    @Test("A peer that stops reading past the stall timeout leaves the writer open or ends it with unavailable (stalled), never another error")
    func slowReader() async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1, stallTimeout: .milliseconds(500)))
        #expect(transport.stallTimeout == .milliseconds(500))
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let client = try await transport.connect(to: listener.localAddress)
        var accepted = listener.connections.makeAsyncIterator()
        let peer = try #require(await accepted.next())
        // The peer never reads: the windows close and the writer's queue holds the rest.
        let closed = ClosedFlag()
        client.setHandler(closed)
        client.startReading()
        let started = ContinuousClock.now
        client.write([UInt8](repeating: 7, count: 32 << 20), completion: nil)
        try await Task.sleep(for: .seconds(3))
        print("slow reader, stall timeout 500 ms: after \(ContinuousClock.now - started): \(closed.closed ? "ended \(String(describing: closed.error))" : "still open")")
        if let error = closed.error {
            #expect(error.code == .unavailable && error.reason == .stalled, "\(error)")
        }
        client.close()
        peer.close()
        listener.close()
        await transport.shutdownNow()
    }

    @Test("A stall timeout that is not positive is an invalid option, named in the message")
    func invalidTimeout() {
        let error = #expect(throws: TransportError.self) {
            _ = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1, stallTimeout: .zero))
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.reason == .invalidOption)
        #expect(error?.message.contains("0 seconds") == true)
    }
}

/// Records whether the connection ended, and how.
private final class ClosedFlag: ConnectionHandler {
    private let state = Mutex<(closed: Bool, error: TransportError?)>((false, nil))
    var closed: Bool { state.withLock { $0.closed } }
    var error: TransportError? { state.withLock { $0.error } }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEnd() {}
    func connectionDidClose(error: TransportError?) { state.withLock { $0 = (true, error) } }
}
