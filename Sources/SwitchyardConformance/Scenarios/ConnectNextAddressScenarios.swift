import Switchyard
import SwitchyardPosix

// A name with several addresses: KitChecklist.md J4 (an address list tried in order) and
// H1. The name is `localhost`, which every backend resolves to both loopback addresses
// without a query (RFC 6761 section 6.3; the toolkit's `HostResolver`, the in-memory
// backend's own table): a server on one of them leaves the other refused, unreachable
// or black-holed, and a connect must still reach it (RFC 8305, Happy Eyeballs).

extension ConformanceScenario {
    /// 62. A connect to `localhost` reaches a server on either loopback address; the
    /// address nobody listens on is refused and costs nothing.
    public static let connectTriesNextAddress = ConformanceScenario(
        "A connect to a name with several addresses tries the next when one is refused: localhost reaches a server on 127.0.0.1 or on ::1 at once",
        checklist: ["J4", "H1", "A2"], timeLimit: .seconds(60)
    ) { context in
        if context.listensOnPaths { try context.skip("\(context.serverBackend) listens on socket paths: no host names on its network") }
        var hosts = ["127.0.0.1"]
        if hostHasIPv6Loopback() { hosts.append("::1") }
        for host in hosts {
            let listener = try await context.listen(host: host)
            defer { listener.close() }
            let port = listener.localAddress.port
            let name = Endpoint(host: "localhost", port: port)
            let started = KitClock.now
            let client = AsyncConnection(try await context.connect(to: name))
            let elapsed = KitClock.now - started
            let server = AsyncConnection(try await context.accept(from: listener))
            context.record("localhost → \(host)", elapsed)
            context.log("connected to \(name) at \(client.connection.remoteAddress) in \(milliseconds(elapsed)) (the server listens on \(host) only)")
            try context.expectEqual(client.connection.remoteAddress, Endpoint(host: host, port: port), "the remoteAddress of a connect to \(name) with the server on \(host) only")
            try context.expect(elapsed < .seconds(1), "the connect to \(name) took \(milliseconds(elapsed)) with the server on \(host): a refused address must move on to the next at once")
            let ping = ConformancePattern.bytes(count: 1000, seed: UInt64(620_000 + port))
            try await context.step("the client's write over \(host)") { try await client.write(ping) }
            try context.expectBytes(try await context.read(exactly: ping.count, from: server), ping, "what the server on \(host) read")
            client.close()
            server.close()
        }
        // Every address refused: the connect fails refused, at once.
        let closed = try await context.listen(host: "127.0.0.1")
        let name = Endpoint(host: "localhost", port: closed.localAddress.port)
        closed.close()
        let client = context.client
        let started = KitClock.now
        try await context.expectError(code: .unavailable, reason: .refused, "connect to \(name) with nobody listening on either address", within: 2) {
            try await client.connect(to: name)
        }
        context.record("every address refused", KitClock.now - started)
    }

    /// 63. Happy Eyeballs: the first address (`::1`) black-holed or unreachable, the
    /// connect still reaches the second (`127.0.0.1`), a connection attempt delay later
    /// rather than after its timeout, and the abandoned attempt's socket is closed.
    public static let connectRacesUnansweredAddress = ConformanceScenario(
        "A connect to a name whose first address is black-holed or unreachable reaches the next one within a second (Happy Eyeballs), and closes the abandoned attempt",
        checklist: ["J4", "A4"], timeLimit: .seconds(90)
    ) { context in
        guard let clientBackend = context.clientTransportBackend, let serverBackend = context.serverTransportBackend else {
            try context.skip("the runner did not say which backends to make transports of")
        }
        guard clientBackend.travelsOverTCP && serverBackend.travelsOverTCP else {
            try context.skip("\(context.pair) has no TCP sockets to put in a network namespace")
        }
        if let reason = FaultNetwork.unavailableReason { try context.skip("\(reason) (a network namespace and nft)") }
        let network: FaultNetwork
        do {
            network = try FaultNetwork.make(.direct)
        } catch {
            try context.fail("could not make the network namespace: \(error)")
        }
        defer { network.remove() }
        var configuration = context.configuration
        configuration.eventLoopCount = 1
        // Both transports in the client's namespace, whose loopback the nft rules break.
        var transports: [any Transport] = []
        do {
            let server = try await network.makeTransport(serverBackend, in: network.clientNamespace, configuration: configuration)
            transports.append(server)
            let client = try await network.makeTransport(clientBackend, in: network.clientNamespace, configuration: configuration)
            transports.append(client)
            for fault in [FaultNetwork.LoopbackFault.unreachable, .blackHole] {
                let listener = try await context.step("listening on 127.0.0.1 in the namespace") {
                    try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
                }
                defer { listener.close() }
                let port = listener.localAddress.port
                try context.networkStep("breaking [::1]:\(port) (\(fault))") { try network.breakLoopbackIPv6(port: port, fault) }
                let name = Endpoint(host: "localhost", port: port)
                let socketsBefore = DescriptorSnapshot.take().targets.values.filter { $0.hasPrefix("socket:") }.count
                let started = KitClock.now
                let connection = try await context.step("connect to \(name) with [::1] \(fault)", seconds: 15) {
                    try await client.connect(to: name, options: ConnectOptions(timeout: .seconds(8)))
                }
                let elapsed = KitClock.now - started
                let accepted = try await context.accept(from: listener)
                context.record("[::1] \(fault)", elapsed)
                context.log("[::1] \(fault): connected to \(connection.remoteAddress) in \(milliseconds(elapsed))")
                try context.expectEqual(connection.remoteAddress, Endpoint(host: "127.0.0.1", port: port), "the remoteAddress of a connect to \(name) with [::1] \(fault)")
                try context.expect(elapsed < .seconds(1), "the connect to \(name) with [::1] \(fault) took \(milliseconds(elapsed)); the next address must be tried a connection attempt delay (250 ms) after the first, not after its timeout")
                // The attempt to [::1] was abandoned: only the connection's two sockets
                // are new (the client's and the accepted one).
                var newSockets = 0
                let settleDeadline = KitClock.now + .seconds(2)
                repeat {
                    newSockets = DescriptorSnapshot.take().targets.values.filter { $0.hasPrefix("socket:") }.count - socketsBefore
                    if newSockets == 2 { break }
                    try await KitClock.sleep(for: .milliseconds(20))
                } while KitClock.now < settleDeadline
                try context.expectEqual(newSockets, 2, "sockets opened by the connect to \(name) and still open 2 s later (the connection's two ends; a third is the abandoned attempt to [::1])")
                let echo = AsyncConnection(connection)
                let server = AsyncConnection(accepted)
                let ping = ConformancePattern.bytes(count: 1000, seed: 630_000)
                try await context.step("the client's write") { try await echo.write(ping) }
                try context.expectBytes(try await context.read(exactly: ping.count, from: server), ping, "what the server read")
                echo.close()
                server.close()
            }
        } catch {
            for transport in transports { _ = try? await context.within(seconds: 10, "shutting down a transport in a namespace") { await transport.shutdownNow() } }
            throw error
        }
        for transport in transports { _ = try? await context.within(seconds: 10, "shutting down a transport in a namespace") { await transport.shutdownNow() } }
    }
}
