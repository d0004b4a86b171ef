import Switchyard
import SwitchyardCalls
import SwitchyardBackends
import SwitchyardMemory
import SwitchyardNetlink
import Testing

/// The Swift blocks of the core's DocC articles (Sources/Switchyard/Switchyard.docc),
/// compiled and run: the code between each pair of doc-block markers is a block of an
/// article (``DocumentationBlockTests`` holds them to each other), with what the block
/// leaves implicit set up before it and what it promises checked after it.
@Suite("The core's articles' examples", .serialized)
struct ArticleExampleTests {
    @Test("Choosing a backend: by name, and an unknown name is refused naming the registered ones", .timeLimit(.minutes(1)))
    func choosingByName() async throws {
        // doc-block begin
        print(Backends.registry.names)                 // ["bsd", "libuv", "memory", "simulation"]
        let transport = try Backends.makeTransport(named: "libuv", configuration: TransportConfiguration(eventLoopCount: 2))
        do {
            _ = try Backends.makeTransport(named: "carrier-pigeon")
        } catch let error as TransportError {
            print(error.code, error.reason)            // invalidArgument unknown backend
            print(error.message)                       // names the registered backends
        }
        // doc-block end
        #expect(transport.name == "libuv")
        #expect(Backends.registry.names == ["bsd", "libuv", "memory", "simulation"])
        await transport.shutdown(gracePeriod: .seconds(1))
        #expect(throws: TransportError.self) { try Backends.makeTransport(named: "carrier-pigeon") }
        do {
            _ = try Backends.makeTransport(named: "carrier-pigeon")
        } catch let error as TransportError {
            #expect(error.code == .invalidArgument && error.reason == .unknownBackend)
            #expect(error.message.contains("bsd") && error.message.contains("libuv") && error.message.contains("memory"), "\(error.message)")
        }
    }

    @Test("Connectivity and stalls: a channel follows the netlink monitor, over a transport with a stall timeout", .timeLimit(.minutes(1)))
    func channelFollowsTheMonitor() async throws {
        let serverTransport = try Backends.makeTransport(named: "bsd")
        let server = try await CallServer.start(transport: serverTransport, on: Endpoint(host: "127.0.0.1", port: 0)) { _ in .ok }
        // doc-block begin
        let monitor = try NetlinkConnectivityMonitor()     // rtnetlink: the default route's interface
        print(monitor.current)                              // for example: wired (eth0)
        let transport = try Backends.makeTransport(configuration: TransportConfiguration(stallTimeout: .seconds(10)))
        let channel = CallChannel(target: server.localAddress, transport: transport, monitor: monitor)
        // doc-block end
        #expect(channel.monitor === monitor)
        #expect(channel.target == server.localAddress)
        channel.close()
        monitor.close()
        server.close()
        await transport.shutdown(gracePeriod: .seconds(1))
        await serverTransport.shutdown(gracePeriod: .seconds(1))
    }

    @Test("Errors: a refused connect is unavailable, refused, with the native error", .timeLimit(.minutes(1)), arguments: ["bsd", "libuv"])
    func refusedConnect(backend: String) async throws {
        let transport = try Backends.makeTransport(named: backend)
        let closed = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let closedPort = closed.localAddress.port
        closed.close()
        // doc-block begin
        var failure: TransportError?
        do {
            _ = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: closedPort))
        } catch let error as TransportError where error.code == .unavailable {
            failure = error                        // the peer or the path is gone: try again later
        }
        print(failure?.reason.name ?? "connected") // refused: nothing listens there, and it fails at once
        print(failure?.native?.name ?? "")         // ECONNREFUSED on bsd, UV_ECONNREFUSED on libuv
        // doc-block end
        await transport.shutdown(gracePeriod: .seconds(1))
        #expect(failure?.reason == .refused)
        #expect(failure?.native?.name == (backend == "bsd" ? "ECONNREFUSED" : "UV_ECONNREFUSED"))
    }

    @Test("Testing under network changes: a reported switch ends the call, the next call connects afresh", .timeLimit(.minutes(1)))
    func manualMonitor() async throws {
        // doc-block begin
        let transport = try MemoryTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            for try await message in call.messages { try await call.write(message) }   // echo
            return .ok
        }
        let monitor = ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi, interface: "wlan0"))
        let channel = CallChannel(target: server.localAddress, transport: transport, monitor: monitor)

        let status = try await channel.withCall { call in
            try await call.write(Array("hello".utf8))
            for try await _ in call.messages { break }                 // the echo came back: the call is up
            monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0"))   // Wi-Fi to cellular
            return await call.status()
        }
        print(status)        // unavailable (connectivity changed): ...

        let next = try await channel.withCall { call in             // the next call connects afresh
            try await call.finishSending()
            return await call.status()
        }
        print(next)          // ok
        // doc-block end
        #expect(status.error?.code == .unavailable)
        #expect(status.error?.reason == .connectivityChanged)
        #expect(next == .ok)
        channel.close()
        server.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }
}
