import Switchyard

// IPv6 on real links (KIT-CHECKLIST A13 beyond loopback, H1): the fault scenarios 30 to
// 33 again over a `FaultNetwork` with IPv6 only (unique local addresses, IPv6 default
// routes), and a link-local address with its scope. Every socket pair runs them; they
// need root (and ip, nft) and skip with one line without it, and skip the in-memory
// backend, as the IPv4 ones do.

extension ConformanceScenario {
    /// 64. Scenario 30 over IPv6.
    public static let linkDownStallsCallsOverIPv6 = ConformanceScenario(
        "Over IPv6 (unique local addresses in network namespaces), taking the link down ends a call with data in flight and a call awaiting a reply with unavailable (stalled) within the stall timeout plus one second",
        checklist: ["I2", "E6", "A13"], timeLimit: .seconds(45), run: linkDownStall(.ipv6))

    /// 65. Scenario 31 over IPv6.
    public static let blackHoleStallsCallsOverIPv6 = ConformanceScenario(
        "Over IPv6, a black hole with the carrier up ends a call with data in flight and a call awaiting a reply with unavailable (stalled) within the stall timeout plus one second",
        checklist: ["I2", "E6", "A13"], timeLimit: .seconds(45), run: blackHoleStall(.ipv6))

    /// 66. Scenario 32 over IPv6.
    public static let injectedResetEndsCallOverIPv6 = ConformanceScenario(
        "Over IPv6, a reset injected on the path (nft reject with tcp reset) ends a call with unavailable (reset) in under a second",
        checklist: ["E3", "E6", "A13"], timeLimit: .seconds(45), run: injectedReset(.ipv6))

    /// 67. Scenario 33 over IPv6: IPv6 default routes only, the monitor follows them.
    public static let networkSwitchEndsCallsOverIPv6 = ConformanceScenario(
        "Over IPv6 only, moving the default route from a wlan0 link to a wwan0 link (the old link down): the netlink monitor reports wifi then cellular, open calls end with unavailable (connectivity changed) within 200 ms of the report, and a new call connects over the wwan0 link, from its address",
        checklist: ["J1", "J3", "A13"], timeLimit: .seconds(45), run: networkSwitch(.ipv6))

    /// 68. A link-local address with its scope: listen and connect on `fe80::…%link`,
    /// every address keeps its scope, and bytes echo.
    public static let linkLocalAddressKeepsScope = ConformanceScenario(
        "A server listens on a link-local IPv6 address with its scope (fe80::2%link), a client connects to fe80::2 scoped to its own link, both ends report scoped addresses, bytes echo, and the address without a scope fails with invalid argument",
        checklist: ["H1", "A1", "A13"], timeLimit: .seconds(60)
    ) { context in
        guard let clientBackend = context.clientTransportBackend, let serverBackend = context.serverTransportBackend else {
            try context.skip("the runner did not say which backends to make transports of")
        }
        guard clientBackend.network == "tcp" && serverBackend.network == "tcp" else {
            try context.skip("\(context.pair) has no TCP sockets to put in network namespaces")
        }
        if let reason = FaultNetwork.unavailableReason { try context.skip("\(reason) (network namespaces and veth links)") }
        let network: FaultNetwork
        do {
            network = try FaultNetwork.make(.direct, family: .ipv6)
        } catch {
            try context.fail("could not make the IPv6 network: \(error)")
        }
        defer { network.remove() }
        let path = network.paths[0]
        // Interface names in scopes are looked up in the namespace of the thread that
        // reads them: the scenario's own steps run on a thread in each namespace.
        guard let clientThread = try await network.run(in: network.clientNamespace, { NamespaceExecutor() }),
              let serverThread = try await network.run(in: network.serverNamespace, { NamespaceExecutor() })
        else {
            try context.fail("could not start a thread in the namespaces")
        }
        defer {
            clientThread.stop()
            serverThread.stop()
        }
        var configuration = context.configuration
        configuration.eventLoopCount = 1
        var transports: [any Transport] = []
        do {
            let server = try await network.makeTransport(serverBackend, in: network.serverNamespace, configuration: configuration)
            transports.append(server)
            let client = try await network.makeTransport(clientBackend, in: network.clientNamespace, configuration: configuration)
            transports.append(client)

            let scoped = Endpoint(host: "\(FaultNetwork.Path.peerLinkLocal)%\(path.peer)", port: 0)
            // (The kit's steps run their bodies in tasks of their own, which do not inherit
            // an executor preference: each body sets it.)
            let (listener, listenAddress) = try await context.step("listen on \(scoped)") {
                try await withTaskExecutorPreference(serverThread) {
                    let listener = try await server.listen(on: scoped)
                    return (listener, listener.localAddress)
                }
            }
            defer { listener.close() }
            try context.expectEqual(listenAddress.host, scoped.host, "the host of a listener on \(scoped)")
            let port = listenAddress.port
            let target = Endpoint(host: "\(FaultNetwork.Path.peerLinkLocal)%\(path.link)", port: port)
            let (connection, clientLocal, clientRemote) = try await context.step("connect to \(target)") {
                try await withTaskExecutorPreference(clientThread) {
                    let connection = try await client.connect(to: target)
                    return (connection, connection.localAddress, connection.remoteAddress)
                }
            }
            let accepted = try await context.accept(from: listener)
            let (serverLocal, serverRemote) = try await context.step("reading the accepted connection's addresses") {
                await withTaskExecutorPreference(serverThread) { (accepted.localAddress, accepted.remoteAddress) }
            }
            context.log("client \(clientLocal) → \(clientRemote); server \(serverLocal) ← \(serverRemote)")
            try context.expectEqual(clientRemote, target, "the client's remoteAddress (the scope kept)")
            try context.expectEqual(clientLocal.host, "\(FaultNetwork.Path.clientLinkLocal)%\(path.link)", "the client's local host (its link-local address, scoped)")
            try context.expectEqual(serverLocal, Endpoint(host: scoped.host, port: port), "the accepted connection's localAddress")
            try context.expectEqual(serverRemote, Endpoint(host: "\(FaultNetwork.Path.clientLinkLocal)%\(path.peer)", port: clientLocal.port), "the accepted connection's remoteAddress (the client, scoped to the server's link)")

            let clientEnd = AsyncConnection(connection)
            let serverEnd = AsyncConnection(accepted)
            let ping = ConformancePattern.bytes(count: 64 * 1024, seed: 680)
            try await context.step("the client's write over the link-local address") { try await clientEnd.write(ping) }
            try context.expectBytes(try await context.read(exactly: ping.count, from: serverEnd), ping, "what the server read over the link-local address")
            try await context.step("the server's write") { try await serverEnd.write(ping) }
            try context.expectBytes(try await context.read(exactly: ping.count, from: clientEnd), ping, "what the client read back")
            clientEnd.close()
            serverEnd.close()

            // Without its scope a link-local address names no link: a clear error.
            let unscoped = Endpoint(host: FaultNetwork.Path.peerLinkLocal, port: port)
            try await context.expectError(code: .invalidArgument, reason: .invalidAddress, "connect to \(unscoped), no scope", within: 5) {
                try await withTaskExecutorPreference(clientThread) { try await client.connect(to: unscoped) }
            }
        } catch {
            for transport in transports { _ = try? await context.within(seconds: 10, "shutting down a transport in a namespace") { await transport.shutdownNow() } }
            throw error
        }
        for transport in transports { _ = try? await context.within(seconds: 10, "shutting down a transport in a namespace") { await transport.shutdownNow() } }
    }
}
