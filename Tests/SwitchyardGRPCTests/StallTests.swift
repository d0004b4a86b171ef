import Glibc
import GRPCCore
import Switchyard
import SwitchyardCalls
import SwitchyardGRPC
import SwitchyardPosix
import Synchronization
import Testing

/// A real stall under GRPCCore's RPCs: in the namespaces of ``SwitchLayout``, an nft rule
/// in the server's namespace drops every packet of the RPC's connection, and the client's
/// transport, made with a stall timeout, finds the stall and ends the RPC.
@Suite("GRPCCore's RPCs over a path that stalls, in network namespaces", .serialized, .timeLimit(.minutes(2)))
struct StallTests {
    static let stallTimeout: Duration = .seconds(1)
    /// The stall timeout and a generous margin for the detector's period and a loaded machine.
    static let endBound: Duration = .seconds(5)

    static var available: Bool {
        getuid() == 0 && access("/usr/sbin/ip", X_OK) == 0 && (access("/usr/sbin/nft", X_OK) == 0 || access("/sbin/nft", X_OK) == 0)
    }

    @Test(
        "A bidirectional RPC whose packets are dropped ends unavailable, naming the stall, within the transport's stall timeout and a margin",
        .enabled(if: available, "needs root, iproute2 and nftables to make network namespaces and drop packets"),
        arguments: [Backend.bsd, Backend.libuv])
    func stallEndsRPC(backend: Backend) async throws {
        let layout = try #require(SwitchLayout.make(), "could not make the test's network namespaces")
        defer { layout.remove() }
        let server = try await NetworkNamespace.run(in: layout.server) { try backend.transport() }
        let client = try await NetworkNamespace.run(in: layout.client) { try backend.transport(stallTimeout: Self.stallTimeout) }
        // The server's side of the dead connection finds out by its own keepalive, so that
        // the server's graceful shutdown at the end does not wait for it.
        let serverConfig = SwitchyardServerTransport.Config.defaults {
            $0.connection.keepalive = Keepalive(time: .seconds(1), timeout: .seconds(1))
        }
        try await withEcho(
            server: server, client: client, address: Endpoint(host: SwitchLayout.serverAddress, port: 0), serverConfig: serverConfig
        ) { client, _, transport in
            let port = try await transport.listeningAddress.port
            let echoed = Signal()
            let dropped = Signal()
            let open = Task { () -> (error: (any Error)?, at: ContinuousClock.Instant) in
                do {
                    try await client.bidirectionalStreaming(
                        request: StreamingClientRequest(of: [UInt8].self) { writer in
                            try await writer.write([1])
                            await dropped.wait()
                            // Unacknowledged bytes on a path that drops them: the stall.
                            try await writer.write(Array(repeating: 2, count: 4096))
                            while !Task.isCancelled { try await Task.sleep(for: .milliseconds(50)) }
                        },
                        descriptor: EchoService.update, serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                    ) { response in
                        for try await _ in response.messages { echoed.raise() }
                    }
                    return (nil, .now)
                } catch {
                    return (error, .now)
                }
            }
            await echoed.wait()
            try layout.drop(port: port)
            let stalledAt = ContinuousClock.now
            dropped.raise()
            let (error, ended) = await open.value
            let rpcError = try #require(error as? RPCError, "the RPC ended with \(String(describing: error))")
            #expect(rpcError.code == .unavailable, "\(rpcError)")
            #expect(rpcError.message.contains("stalled"), "\(rpcError)")
            print("grpc over a stalled path (\(backend)): the RPC ended \(ended - stalledAt) after the packets were dropped")
            #expect(ended - stalledAt < Self.endBound, "the RPC ended \(ended - stalledAt) after the drop")
            layout.undrop()
        }
    }
}

/// A one-shot event a test waits for.
final class Signal: Sendable {
    private let raised = Mutex(false)
    func raise() { raised.withLock { $0 = true } }
    func wait() async {
        while !raised.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

extension SwitchLayout {
    /// Drops every TCP packet to and from the server's `port` in the server's namespace.
    func drop(port: Int) throws {
        let steps = [
            "ip netns exec \(server) nft add table inet sygr",
            "ip netns exec \(server) nft 'add chain inet sygr in { type filter hook input priority 0; }'",
            "ip netns exec \(server) nft 'add chain inet sygr out { type filter hook output priority 0; }'",
            "ip netns exec \(server) nft add rule inet sygr in tcp dport \(port) drop",
            "ip netns exec \(server) nft add rule inet sygr out tcp sport \(port) drop",
        ]
        for step in steps where !Self.run(step) {
            throw TransportError(code: .internal, reason: .ioError, message: "the test's network step failed: \(step)")
        }
    }

    /// Removes the rules of ``drop(port:)``.
    func undrop() {
        Self.run("ip netns exec \(server) nft delete table inet sygr")
    }
}
