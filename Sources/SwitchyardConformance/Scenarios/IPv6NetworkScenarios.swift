import Glibc
import Switchyard

// IPv6 on real links (KitChecklist.md A13 beyond loopback, H1): the fault scenarios 30 to
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
        guard clientBackend.travelsOverTCP && serverBackend.travelsOverTCP else {
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

            // A scope names an interface by name or by number (RFC 4007). Names are looked
            // up in the namespace of the thread that parses the address: the kit's steps run
            // on a thread in the right namespace, but a loaded backend parses on tasks of
            // its own, outside it, and finds no such interface; it then gets the number.
            // Either way the scope must be kept, and reported by name or by number.
            let peer = path.peer, link = path.link
            let peerIndex = try await network.run(in: network.serverNamespace) { Int(if_nametoindex(peer)) }
            let linkIndex = try await network.run(in: network.clientNamespace) { Int(if_nametoindex(link)) }
            @Sendable func scoped(_ address: String, _ name: String, _ index: Int) -> Set<String> { ["\(address)%\(name)", "\(address)%\(index)"] }
            @Sendable func notFound(_ error: any Error) -> Bool {
                guard let error = error as? TransportError else { return false }
                return error.code == .invalidArgument && error.message.contains("no interface")
            }
            // (The kit's steps run their bodies in tasks of their own, which do not inherit
            // an executor preference: each body sets it.)
            var byNumber = false
            let serverHost = FaultNetwork.Path.peerLinkLocal
            let (listener, listenAddress) = try await context.step("listen on [\(serverHost)%\(peer)]") {
                try await withTaskExecutorPreference(serverThread) {
                    let listener: any Listener
                    do {
                        listener = try await server.listen(on: Endpoint(host: "\(serverHost)%\(peer)", port: 0))
                    } catch where notFound(error) {
                        listener = try await server.listen(on: Endpoint(host: "\(serverHost)%\(peerIndex)", port: 0))
                    }
                    return (listener, listener.localAddress)
                }
            }
            defer { listener.close() }
            try context.expect(scoped(serverHost, peer, peerIndex).contains(listenAddress.host), "the listener on [\(serverHost)%\(peer)] reports \(listenAddress); expected its scope kept")
            let port = listenAddress.port
            let target = Endpoint(host: "\(serverHost)%\(link)", port: port)
            let (connection, clientLocal, clientRemote, numeric) = try await context.step("connect to \(target)") {
                try await withTaskExecutorPreference(clientThread) {
                    let connection: any Connection
                    var numeric = false
                    do {
                        connection = try await client.connect(to: target)
                    } catch where notFound(error) {
                        numeric = true
                        connection = try await client.connect(to: Endpoint(host: "\(serverHost)%\(linkIndex)", port: port))
                    }
                    return (connection, connection.localAddress, connection.remoteAddress, numeric)
                }
            }
            byNumber = byNumber || numeric || listenAddress.host.hasSuffix("%\(peerIndex)")
            if byNumber { context.log("interface names did not resolve where the backend parsed the scope: scopes given by number") }
            let accepted = try await context.accept(from: listener)
            let (serverLocal, serverRemote) = try await context.step("reading the accepted connection's addresses") {
                await withTaskExecutorPreference(serverThread) { (accepted.localAddress, accepted.remoteAddress) }
            }
            context.log("client \(clientLocal) → \(clientRemote); server \(serverLocal) ← \(serverRemote)")
            let clientHost = FaultNetwork.Path.clientLinkLocal
            try context.expect(scoped(serverHost, link, linkIndex).contains(clientRemote.host) && clientRemote.port == port, "the client's remoteAddress is \(clientRemote); expected [\(serverHost)%\(link)]:\(port), the scope kept")
            try context.expect(scoped(clientHost, link, linkIndex).contains(clientLocal.host), "the client's localAddress is \(clientLocal); expected its link-local address scoped to \(link)")
            try context.expect(scoped(serverHost, peer, peerIndex).contains(serverLocal.host) && serverLocal.port == port, "the accepted connection's localAddress is \(serverLocal); expected [\(serverHost)%\(peer)]:\(port)")
            try context.expect(scoped(clientHost, peer, peerIndex).contains(serverRemote.host) && serverRemote.port == clientLocal.port, "the accepted connection's remoteAddress is \(serverRemote); expected the client, [\(clientHost)%\(peer)]:\(clientLocal.port)")

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
