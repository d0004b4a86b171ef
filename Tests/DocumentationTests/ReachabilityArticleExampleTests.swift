import Switchyard
import SwitchyardBackends
import SwitchyardReachability
import Testing

/// The Swift block of the core's article on reachability (`Reachability*.md` in
/// Sources/Switchyard/Switchyard.docc), compiled and run: the code between the doc-block
/// markers is the article's block (``DocumentationBlockTests`` holds them to each other),
/// with what the block leaves implicit set up before it and what it promises checked
/// after it.
@Suite("The reachability article's example", .serialized)
struct ReachabilityArticleExampleTests {
    @Test("Reachability of a site: a probe of a local site reports checking, then reachable", .timeLimit(.minutes(1)))
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
}
