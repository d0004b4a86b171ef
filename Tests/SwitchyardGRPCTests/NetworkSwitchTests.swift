import Glibc
import GRPCCore
import Switchyard
import SwitchyardGRPC
import SwitchyardNetlink
import SwitchyardPosix
import Synchronization
import Testing

/// GRPCCore's RPCs across a real Wi-Fi to cellular switch, in network namespaces laid out
/// as the kit's (``SwitchLayout``): a `NetlinkConnectivityMonitor` in the client's
/// namespace reports the move of the default route from `wlan0-…` to `wwan0-…`, and the
/// client transport's channel ends the RPCs of the old path `unavailable`.
@Suite("GRPCCore's RPCs across a Wi-Fi to cellular switch, in network namespaces", .serialized, .timeLimit(.minutes(2)))
struct NetworkSwitchTests {
    /// How long after the monitor's report an open RPC may take to end (the kit's bound
    /// for a channel's calls).
    static let endBound: Duration = .milliseconds(100)

    static var available: Bool { getuid() == 0 && access("/usr/sbin/ip", X_OK) == 0 }

    @Test(
        "A server-streaming RPC ends unavailable within 100 ms of the reported switch, and the next RPC goes over the cellular link",
        .enabled(if: available, "needs root and iproute2 (/usr/sbin/ip) to make network namespaces"),
        arguments: [Backend.bsd, Backend.libuv])
    func switchEndsStream(backend: Backend) async throws {
        try await withSwitchLayout(backend) { layout, server, client, monitor, reported in
            try await withEcho(server: server, client: client, address: Endpoint(host: SwitchLayout.serverAddress, port: 0), monitor: monitor) {
                client, probe, _ in
                let received = ReceivedCount()
                let open = Task { () -> (error: (any Error)?, at: ContinuousClock.Instant) in
                    do {
                        try await client.serverStreaming(
                            request: ClientRequest(message: [1], metadata: ["count": "1", "hold": ""]), descriptor: EchoService.expand,
                            serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                        ) { response in
                            for try await _ in response.messages { received.add() }
                        }
                        return (nil, .now)
                    } catch {
                        return (error, .now)
                    }
                }
                #expect(await probe.wait { _ in received.count == 1 }, "the streaming RPC's first message did not arrive")
                #expect(probe.peers.first?.contains(SwitchLayout.wifiAddress + ":") == true, "the RPC's peer: \(probe.peers)")
                try layout.switchToCellular()
                let (error, ended) = await open.value
                let rpcError = try #require(error as? RPCError, "the streaming RPC ended with \(String(describing: error))")
                #expect(rpcError.code == .unavailable, "\(rpcError)")
                #expect(rpcError.message.hasPrefix("connectivity changed: "), "\(rpcError)")
                let report = try #require(reported.instant, "the monitor did not report the cellular link")
                let late = ended - report
                print("grpc across a switch (\(backend)): the streaming RPC ended \(late) after the monitor's report")
                #expect(late < Self.endBound, "the streaming RPC ended \(late) after the monitor's report")

                let next = try await client.get([3])
                #expect(try next.message == [3])
                #expect(probe.peers.last?.contains(SwitchLayout.cellularAddress + ":") == true, "the next RPC's peer: \(probe.peers)")
            }
        }
    }

    @Test(
        "With GRPCCore's retry policy for unavailable, a unary RPC the switch ended succeeds on its retry over the cellular link",
        .enabled(if: available, "needs root and iproute2 (/usr/sbin/ip) to make network namespaces"),
        arguments: [Backend.bsd, Backend.libuv])
    func retryAcrossSwitch(backend: Backend) async throws {
        let retry = RetryPolicy(
            maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(50), backoffMultiplier: 2,
            retryableStatusCodes: [.unavailable])
        let config = SwitchyardClientTransport.Config.defaults {
            $0.serviceConfig = ServiceConfig(methodConfig: [
                MethodConfig(names: [MethodConfig.Name(service: EchoService.service, method: "Flaky")], executionPolicy: .retry(retry))
            ])
        }
        try await withSwitchLayout(backend) { layout, server, client, monitor, _ in
            try await withEcho(
                server: server, client: client, address: Endpoint(host: SwitchLayout.serverAddress, port: 0), monitor: monitor, clientConfig: config
            ) { client, probe, _ in
                let flaky = Task {
                    try await client.unary(
                        request: ClientRequest(message: [1]), descriptor: EchoService.flaky, serializer: BytesCoder(),
                        deserializer: BytesCoder(), options: .defaults
                    ) { try $0.message }
                }
                #expect(await probe.wait { $0.started == 1 }, "the first attempt did not reach the server")
                try layout.switchToCellular()
                let reply = try await flaky.value
                #expect(String(decoding: reply, as: UTF8.self) == "attempt 2")
                #expect(probe.peers.count == 2 && probe.peers[1].contains(SwitchLayout.cellularAddress + ":"), "the attempts' peers: \(probe.peers)")
            }
        }
    }

    /// Makes the layout, a transport on `backend` in each namespace and a netlink monitor in
    /// the client's (with the instant it first reported cellular), runs `body`, and removes
    /// the namespaces.
    private func withSwitchLayout(
        _ backend: Backend,
        _ body: (SwitchLayout, any Transport, any Transport, NetlinkConnectivityMonitor, FirstReport) async throws -> Void
    ) async throws {
        let layout = try #require(SwitchLayout.make(), "could not make the test's network namespaces")
        defer { layout.remove() }
        let server = try await NetworkNamespace.run(in: layout.server) { try backend.transport() }
        let client = try await NetworkNamespace.run(in: layout.client) { try backend.transport() }
        let monitor = try await NetworkNamespace.run(in: layout.client) { try NetlinkConnectivityMonitor() }
        defer { monitor.close() }
        try #require(monitor.current.category == .wifi, "the monitor's first path: \(monitor.current)")
        let reported = FirstReport()
        let observation = monitor.observe { path in
            if path.category == .cellular { reported.note() }
        }
        defer { observation.cancel() }
        try await body(layout, server, client, monitor, reported)
    }
}

/// The instant a monitor first reported the path a test waits for.
final class FirstReport: Sendable {
    private let first = Mutex<ContinuousClock.Instant?>(nil)
    var instant: ContinuousClock.Instant? { first.withLock { $0 } }
    func note() { first.withLock { if $0 == nil { $0 = .now } } }
}

/// The kit's Wi-Fi and cellular layout, made from a test: a client namespace with a
/// `wlan0-<PID>` and a `wwan0-<PID>` veth to the server's namespace (10.216.1.0/24 and
/// 10.216.2.0/24), the server's address 10.216.0.1 on its loopback behind both, the
/// client's default route on the Wi-Fi link. Nothing in the machine's own namespace is
/// touched.
struct SwitchLayout: Sendable {
    static let serverAddress = "10.216.0.1"
    static let wifiAddress = "10.216.1.1"
    static let wifiGateway = "10.216.1.2"
    static let cellularAddress = "10.216.2.1"
    static let cellularGateway = "10.216.2.2"
    let client: String
    let server: String
    let wifi: String
    let cellular: String

    static func make() -> SwitchLayout? {
        let pid = getpid()
        let layout = SwitchLayout(client: "sygr-c-\(pid)", server: "sygr-s-\(pid)", wifi: "wlan0-\(pid)", cellular: "wwan0-\(pid)")
        layout.remove()  // leftovers of a run that was killed
        let c = layout.client, s = layout.server
        let steps = [
            "ip netns add \(c)", "ip netns add \(s)",
            "ip -n \(c) link set lo up", "ip -n \(s) link set lo up",
            "ip -n \(c) link add \(layout.wifi) type veth peer name grw-\(pid) netns \(s)",
            "ip -n \(c) addr add \(wifiAddress)/24 dev \(layout.wifi)",
            "ip -n \(s) addr add \(wifiGateway)/24 dev grw-\(pid)",
            "ip -n \(s) link set grw-\(pid) up", "ip -n \(c) link set \(layout.wifi) up",
            "ip -n \(c) link add \(layout.cellular) type veth peer name grc-\(pid) netns \(s)",
            "ip -n \(c) addr add \(cellularAddress)/24 dev \(layout.cellular)",
            "ip -n \(s) addr add \(cellularGateway)/24 dev grc-\(pid)",
            "ip -n \(s) link set grc-\(pid) up", "ip -n \(c) link set \(layout.cellular) up",
            "ip -n \(s) addr add \(serverAddress)/32 dev lo",
            "ip -n \(c) route add default via \(wifiGateway) dev \(layout.wifi)",
        ]
        for step in steps where !run(step) {
            layout.remove()
            return nil
        }
        return layout
    }

    /// The switch, as the kit makes it: the default route moves to the cellular link and
    /// the Wi-Fi link goes down.
    func switchToCellular() throws {
        for step in ["ip -n \(client) route replace default via \(Self.cellularGateway) dev \(cellular)", "ip -n \(client) link set \(wifi) down"]
        where !Self.run(step) {
            throw TransportError(code: .internal, reason: .ioError, message: "the test's network step failed: \(step)")
        }
    }

    /// Removes both namespaces (the veth pairs go with them).
    func remove() {
        Self.run("ip netns del \(client)")
        Self.run("ip netns del \(server)")
    }

    @discardableResult
    static func run(_ command: String) -> Bool {
        system(command + " >/dev/null 2>&1") == 0
    }
}
