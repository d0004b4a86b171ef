import Switchyard
import SwitchyardUV
import Testing

extension UVTransportTests {
    /// Stalls, detected natively: with a stall timeout, keepalive and TCP_USER_TIMEOUT make
    /// the kernel fail a black-holed connection, and the error arrives through libuv's
    /// callbacks, mapped to unavailable (stalled). Runs in network namespaces of its own
    /// (root, ip and nft needed; skipped otherwise). Nested in the serialized suite: it
    /// opens descriptors, which the leak test there counts.
    @Suite(
        "in network namespaces",
        .enabled(if: TestNetwork.available, "needs root, ip and nft (apt-get install nftables) for network namespaces"))
    struct InNetworkNamespaces {
        /// A connected pair across the namespaces, with a round trip done; the client
        /// transport has a 3 s stall timeout.
        private func withBlackHoledPair(
            _ body: (AsyncConnection, any Connection) async throws -> Void
        ) async throws {
            let network = try #require(TestNetwork.make(), "could not make the network namespaces")
            defer { network.remove() }
            let server = try await network.inNamespace(network.server) {
                try UVTransport(configuration: .init(eventLoopCount: 1))
            }
            let client = try await network.inNamespace(network.client) {
                try UVTransport(configuration: .init(eventLoopCount: 1, stallTimeout: .seconds(3)))
            }
            do {
                let listener = try await server.listen(on: Endpoint(host: network.serverAddress, port: 0))
                let connection = AsyncConnection(try await client.connect(to: listener.localAddress))
                var accepted = listener.connections.makeAsyncIterator()
                let peer = try #require(await accepted.next())
                let peerEvents = RecordingHandler(on: peer)
                peer.startReading()
                try await connection.write([1, 2, 3])
                #expect(await eventually { peerEvents.snapshot.bytes.count == 3 })
                #expect(network.blackHole(port: listener.localAddress.port), "nft could not drop the port")
                try await body(connection, peer)
                connection.close()
            } catch {
                await client.shutdownNow()
                await server.shutdownNow()
                throw error
            }
            await client.shutdownNow()
            await server.shutdownNow()
            #expect(client.loopCloseResults == [0])
            #expect(server.loopCloseResults == [0])
        }

        @Test("A black-holed idle reader fails with unavailable (stalled) from UV_ETIMEDOUT, about the stall timeout after")
        func idleReader() async throws {
            try await withBlackHoledPair { connection, _ in
                let started = ContinuousClock.now
                let error = await transportError { _ = try await connection.read() }
                let elapsed = ContinuousClock.now - started
                print("idle reader: \(String(describing: error)) after \(elapsed)")
                #expect(error?.code == .unavailable)
                #expect(error?.reason == .stalled)
                #expect(error?.native?.name == "UV_ETIMEDOUT")
                #expect(elapsed > .seconds(2) && elapsed < .seconds(8), "failed after \(elapsed); the stall timeout is 3 s")
            }
        }

        @Test("A black-holed writer with data in flight fails with unavailable (stalled) from UV_ETIMEDOUT")
        func writerInFlight() async throws {
            try await withBlackHoledPair { connection, _ in
                let started = ContinuousClock.now
                // More than the socket buffers hold, so the write stays in flight.
                let error = await transportError { try await connection.write(pattern(count: 16 << 20, seed: 3)) }
                let elapsed = ContinuousClock.now - started
                print("writer: \(String(describing: error)) after \(elapsed)")
                #expect(error?.code == .unavailable)
                #expect(error?.reason == .stalled)
                #expect(error?.native?.name == "UV_ETIMEDOUT")
                #expect(elapsed > .seconds(2) && elapsed < .seconds(8), "failed after \(elapsed); the stall timeout is 3 s")
            }
        }
    }
}
