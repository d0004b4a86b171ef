import Switchyard
import SwitchyardBSD
import SwitchyardBackends
import SwitchyardConformance
import SwitchyardUV
import Testing

/// The README's Swift blocks, compiled and run as written: the code between each pair of
/// doc-block markers is a block of README.md (``DocumentationBlockTests`` holds them to
/// each other), with what the block leaves implicit set up before it and what it promises
/// checked after it.
@Suite("The README's examples", .serialized)
struct ReadmeExampleTests {
    @Test("Use it: the first example runs as written and gets its echo", .timeLimit(.minutes(1)))
    func firstExample() async throws {
        // doc-block begin
        let transport = try Backends.makeTransport(named: "bsd")  // nil: SWITCHYARD_BACKEND, else "bsd"
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { connection in    // the server: echo what each peer sends
            Task {
                let peer = AsyncConnection(connection)
                while let bytes = try await peer.read() { try await peer.write(bytes) }
                peer.close()
            }
        }

        let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
        try await client.write(Array("hello".utf8))   // returns once the bytes are in the kernel
        let reply = try await client.read()            // "hello" (nil at end of stream)
        client.close()

        await transport.shutdown(gracePeriod: .seconds(1))
        // doc-block end
        #expect(reply == Array("hello".utf8))
    }

    @Test("Calls: a call server echoes a message over a channel and the call ends OK", .timeLimit(.minutes(1)))
    func callExample() async throws {
        let transport = try Backends.makeTransport(named: "bsd")
        // doc-block begin
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0),
                                                options: CallConfiguration(enableFlowControl: true)) { call in
            for try await message in call.messages { try await call.write(message) }  // echo
            return .ok
        }
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let status = try await channel.withCall(options: CallConfiguration(enableFlowControl: true)) { call in
            try await call.write(Array("ping".utf8))     // returns once the message is in the kernel
            try await call.finishSending()
            for try await reply in call.messages { print(reply) }
            return await call.status()                   // .ok, or the error that ended the call
        }
        // doc-block end
        #expect(status == .ok)
        channel.close()
        server.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    @Test("Reachability: a probe of a local site reports checking, then reachable", .timeLimit(.minutes(1)))
    func reachabilityExample() async throws {
        let transport = try Backends.makeTransport(named: "bsd")
        // doc-block begin
        let site = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        site.acceptConnections { connection in        // a local site: 204 to every request
            Task {
                let peer = AsyncConnection(connection)
                _ = try await peer.read()
                try await peer.write(Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n".utf8))
                peer.close()
            }
        }

        let monitor = ManualConnectivityMonitor(initial: ConnectivityPath(category: .wired))  // or NetlinkConnectivityMonitor()
        let reachability = try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: "http://\(site.localAddress)/generate_204", timeout: .seconds(3)),
            monitor: monitor, transport: transport)
        reachability.start()
        for await state in reachability.updates {
            print(state)                                // checking, then reachable (0.512 ms)
            if case .reachable = state { break }
        }
        await reachability.stop()
        // doc-block end
        if case .reachable = reachability.current {} else {
            Issue.record("the site answered 204, yet the state is \(reachability.current)")
        }
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    @Test("A new backend: the kit runs in-process over the pairs of a backend's network", .timeLimit(.minutes(3)))
    func conformanceExample() async throws {
        let myBackend = UVTransport.backend
        ConformanceKit.prepareProcess()
        // doc-block begin
        let scenarios: [ConformanceScenario] = [.connectAcceptAndClose, .halfClose, .callEchoIntegrity]  // or ConformanceKit.scenarios
        for scenario in scenarios {
            for pair in ConformanceKit.pairs(of: [myBackend, BSDTransport.backend]) {
                try await ConformanceKit.run(scenario, pair: pair)   // throws a ConformanceFailure, or a ConformanceSkip
            }
        }
        // doc-block end
        #expect(ConformanceKit.pairs(of: [myBackend, BSDTransport.backend]).count == 4)
    }
}
