import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardTestSupport
import Synchronization
import Testing

/// A client's half-close can still be on its way when the server's status arrives: over
/// TLS the server reads the close_notify record and answers before the FIN is out, and
/// libuv reports its shutdown a loop turn later. The call then closes its connection,
/// which cuts the half-close short. Kit scenario 64 failed on libuv+tls clients about one
/// run in twenty with `cancelled (closed)` from `finishSending()`. Here a connection holds
/// every half-close's completion until it is closed, as libuv does, so the order is certain.
@Suite("A client's half-close that the server's status overtakes", .timeLimit(.minutes(1)))
struct CallHalfCloseTests {
    @Test("finishSending() completes without an error when the call ends OK before the half-close completes")
    func statusBeforeHalfCloseCompletes() async throws {
        let serverTransport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let clientTransport = HeldHalfCloseTransport(try MemoryTransport(configuration: .init(eventLoopCount: 1)))
        let server = try await CallServer.start(transport: serverTransport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        let channel = CallChannel(target: server.localAddress, transport: clientTransport)
        let (replies, status) = try await channel.withCall { call in
            try await call.write([1, 2, 3])
            try await call.finishSending()
            var replies: [[UInt8]] = []
            for try await reply in call.messages { replies.append(reply) }
            return (replies, await call.status())
        }
        #expect(replies == [[1, 2, 3]])
        #expect(status.isOK, "\(status)")
        #expect(clientTransport.heldHalfCloses == 1, "the half-close should have been held until the close")
        server.closeNow()
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }
}

/// A transport whose connections hold each half-close's completion until they are closed,
/// then report `cancelled`/`closed` (the half-close went out; its completion did not).
private final class HeldHalfCloseTransport: Transport {
    let base: any Transport
    private let held = Mutex(0)
    var heldHalfCloses: Int { held.withLock { $0 } }

    init(_ base: any Transport) { self.base = base }

    var name: String { base.name }
    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        HeldHalfCloseConnection(try await base.connect(to: endpoint, options: options)) { self.held.withLock { $0 += 1 } }
    }
    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try await base.listen(on: endpoint, options: options)
    }
    func shutdown(gracePeriod: Duration) async { await base.shutdown(gracePeriod: gracePeriod) }
    func shutdownNow() async { await base.shutdownNow() }
}

/// Forwards everything to its base, except that a half-close's completion waits for the close.
private final class HeldHalfCloseConnection: ForwardingConnection {
    let base: any Connection
    let didHold: @Sendable () -> Void
    private let pending = Mutex<[WriteCompletion]>([])

    init(_ base: any Connection, didHold: @escaping @Sendable () -> Void) {
        self.base = base
        self.didHold = didHold
    }

    func shutdownOutput(completion: WriteCompletion?) {
        base.shutdownOutput(completion: nil)
        guard let completion else { return }
        didHold()
        pending.withLock { $0.append(completion) }
    }

    func close() {
        base.close()
        releaseHeld()
    }

    func reset() {
        base.reset()
        releaseHeld()
    }

    private func releaseHeld() {
        let held = pending.withLock { pending in
            defer { pending = [] }
            return pending
        }
        for completion in held { completion(.closedLocally()) }
    }
}
