import Switchyard
import SwitchyardUV
import Testing

/// A libuv connection keeps its two socket addresses as the kernel gave them and formats
/// them only when asked (not per connection: formatting allocates): what it reads must
/// be what the other end reads, whether the listener was bound to one address (its own
/// address is then every accepted connection's local one) or to the wildcard (each
/// accepted connection's is read from its socket), and it must still read so once the
/// connection closed (nothing is asked of the socket then).
@Suite("libuv connection addresses", .serialized)
struct UVAddressTests {
    @Test(
        "Accepted and connected connections read each other's addresses, before and after closing",
        arguments: [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::1", "::1"), ("::", "::1")])
    func addressesMatch(listenOn host: String, connectTo target: String) async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Endpoint(host: host, port: 0))
        #expect(listener.localAddress.host == host && listener.localAddress.port > 0)
        var iterator = listener.connections.makeAsyncIterator()
        for _ in 0..<2 {
            let client = try await transport.connect(to: Endpoint(host: target, port: listener.localAddress.port))
            let accepted = try #require(await iterator.next())
            let server = Endpoint(host: target, port: listener.localAddress.port)
            #expect(client.remoteAddress == server)
            #expect(accepted.localAddress == server)
            #expect(client.localAddress.host == target && client.localAddress.port > 0)
            #expect(accepted.remoteAddress == client.localAddress)
            #expect("\(accepted.remoteAddress)" == "\(client.localAddress)")
            let before = (accepted.localAddress, accepted.remoteAddress, client.localAddress, client.remoteAddress)
            accepted.close()
            client.close()
            #expect(accepted.localAddress == before.0 && accepted.remoteAddress == before.1)
            #expect(client.localAddress == before.2 && client.remoteAddress == before.3)
        }
        listener.close()
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }
}
