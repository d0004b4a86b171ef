import Switchyard
import SwitchyardMemory
import Synchronization
import Testing

@testable import SwitchyardCalls

/// Keepalive and a server's connection management over the in-memory backend: a
/// client's pings find a server that stopped answering, a server strikes out a client
/// that pings too often (and the channel backs off), and a server's maximum idle time
/// and age send GOAWAY.
@Suite("Keepalive and connection management", .serialized, .timeLimit(.minutes(1)))
struct ConnectionKeepaliveTests {
    @Test("a channel's keepalive ends a quiet call unavailable (stalled) when the server answers no PING, and the next call connects again")
    func pingTimeoutEndsCalls() async throws {
        let (client, server) = try transports()
        // A "server" that accepts and then reads nothing and sends nothing: a dead peer
        // the client's writes cannot tell from a quiet one.
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let accepted = Mutex<[any Connection]>([])
        listener.acceptConnections { connection in accepted.withLock { $0.append(connection) } }
        let keepalive = Keepalive(time: .milliseconds(100), timeout: .milliseconds(100))
        let channel = CallChannel(target: listener.localAddress, transport: client, configuration: ChannelConfiguration(keepalive: keepalive))

        let started = ContinuousClock.now
        let status = try await within(.seconds(5)) { try await channel.withCall { call in await call.status() } }
        let elapsed = ContinuousClock.now - started
        #expect(status.error?.code == .unavailable)
        #expect(status.error?.reason == .stalled)
        #expect(status.error?.message.contains("keepalive") == true, "\(status)")
        #expect(elapsed >= .milliseconds(200), "ended after \(elapsed): before time + timeout")
        #expect(elapsed < .seconds(2), "ended after \(elapsed)")

        // The dead connection was forgotten: the next call makes a new one.
        _ = try await within(.seconds(5)) { try await channel.withCall { call in await call.status() } }
        #expect(accepted.withLock { $0.count } == 2)
        channel.close()
        listener.close()
        for connection in accepted.withLock({ $0 }) { connection.close() }
        await client.shutdownNow()
        await server.shutdownNow()
    }

    @Test("a server strikes out a client that pings every 100 ms with no call open (GOAWAY too_many_pings), and the channel doubles its keepalive time")
    func tooManyPings() async throws {
        let (client, transport) = try transports()
        let server = try await echoServer(on: transport)
        let keepalive = Keepalive(time: .milliseconds(100), timeout: .seconds(1), permitWithoutCalls: true)
        let channel = CallChannel(target: server.localAddress, transport: client, configuration: ChannelConfiguration(keepalive: keepalive))
        #expect(try await echo(on: channel).isOK)
        #expect(server.connections.count == 1)

        // Pings 2 and 3 are strikes, ping 4 closes: about 400 ms (each ping 100 ms after
        // the previous one's ACK, not a timeout later).
        let since = ContinuousClock.now
        try await waitUntil(.seconds(5), "the channel's keepalive time doubled") { channel.slot.keepalive?.keepalive.time == .milliseconds(200) }
        let elapsed = ContinuousClock.now - since
        #expect(elapsed >= .milliseconds(300), "struck out after \(elapsed)")
        #expect(elapsed < .milliseconds(900), "struck out after \(elapsed): the pings were not 100 ms apart")
        try await waitUntil(.seconds(5), "the server closed the connection") { server.connections.count == 0 }

        // The next call connects again and works.
        #expect(try await echo(on: channel).isOK)
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("a call open on a connection struck out for too many pings ends unavailable, saying so")
    func struckOutCallHearsWhy() async throws {
        let (client, transport) = try transports()
        let server = try await echoServer(on: transport)
        let keepalive = Keepalive(time: .milliseconds(100), timeout: .seconds(1))
        let channel = CallChannel(target: server.localAddress, transport: client, configuration: ChannelConfiguration(keepalive: keepalive))
        // An idle call: the server sends nothing, so every ping after the first strikes.
        let ended = try await within(.seconds(5)) { try await channel.withCall { call in await call.status() } }
        #expect(ended.error?.code == .unavailable, "\(ended)")
        #expect(ended.error?.message.contains("too_many_pings") == true, "\(ended)")
        #expect(channel.slot.keepalive?.keepalive.time == .milliseconds(200))
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("pings at a rate the server permits keep the connection, without calls too")
    func permittedPings() async throws {
        let (client, transport) = try transports()
        let enforcement = KeepaliveEnforcement(minimumPingInterval: .milliseconds(50), permitWithoutCalls: true)
        let server = try await echoServer(on: transport, CallServerConfiguration(keepaliveEnforcement: enforcement))
        let keepalive = Keepalive(time: .milliseconds(100), timeout: .seconds(1), permitWithoutCalls: true)
        let channel = CallChannel(target: server.localAddress, transport: client, configuration: ChannelConfiguration(keepalive: keepalive))
        #expect(try await echo(on: channel).isOK)
        try await Task.sleep(for: .milliseconds(800))
        #expect(server.connections.count == 1)
        #expect(channel.slot.keepalive?.keepalive.time == .milliseconds(100))
        #expect(try await echo(on: channel).isOK)
        #expect(server.connections.count == 1)
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("a server's own keepalive closes a client's connection whose PING goes unanswered, and keeps one that answers")
    func serverKeepalive() async throws {
        let (client, transport) = try transports()
        let keepalive = Keepalive(time: .milliseconds(100), timeout: .milliseconds(100), permitWithoutCalls: true)
        let server = try await echoServer(on: transport, CallServerConfiguration(keepalive: keepalive))
        // A client that sends HTTP/2's preface and an empty SETTINGS, then nothing: it
        // reads what the server sends and answers none of it.
        let raw = AsyncConnection(try await client.connect(to: server.localAddress))
        try await raw.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0])
        let since = ContinuousClock.now
        try await waitUntil(.seconds(1), "the server has the raw connection") { server.connections.count == 1 }
        try await waitUntil(.seconds(5), "the server closed the silent client's connection") { server.connections.count == 0 }
        let elapsed = ContinuousClock.now - since
        #expect(elapsed >= .milliseconds(150), "closed after \(elapsed), before time + timeout")
        raw.close()

        // A channel answers the pings: its connection stays, idle, and serves a call later.
        let channel = CallChannel(target: server.localAddress, transport: client)
        #expect(try await echo(on: channel).isOK)
        try await Task.sleep(for: .milliseconds(600))
        #expect(server.connections.count == 1)
        #expect(try await echo(on: channel).isOK)
        #expect(server.connections.count == 1)
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("a server with a maximum idle time sends GOAWAY that long after the last call ended, and the channel's next call connects again")
    func maximumIdle() async throws {
        let (client, transport) = try transports()
        let server = try await echoServer(on: transport, CallServerConfiguration(maximumConnectionIdle: .milliseconds(200)))
        let channel = CallChannel(target: server.localAddress, transport: client)
        #expect(try await echo(on: channel).isOK)
        let ended = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(100))
        #expect(server.connections.count == 1, "closed before the maximum idle time")
        try await waitUntil(.seconds(3), "the idle connection closed") { server.connections.count == 0 }
        #expect(ContinuousClock.now - ended >= .milliseconds(200))
        #expect(try await echo(on: channel).isOK)
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("a server with a maximum age sends GOAWAY under an open call, which goes on through the grace and then ends unavailable; new calls take a new connection")
    func maximumAge() async throws {
        let (client, transport) = try transports()
        let server = try await echoServer(
            on: transport, CallServerConfiguration(maximumConnectionAge: .milliseconds(300), maximumConnectionAgeGrace: .milliseconds(500)))
        let channel = CallChannel(target: server.localAddress, transport: client)
        let started = ContinuousClock.now
        let held = Task {
            try await channel.withCall { call in
                try await call.write([1])
                _ = try await call.next()
                return await call.status()
            }
        }
        // After the GOAWAY (270 to 330 ms), a new call goes to a new connection.
        try await Task.sleep(for: .milliseconds(450))
        #expect(try await echo(on: channel).isOK)
        let status = try await within(.seconds(5)) { try await held.value }
        let elapsed = ContinuousClock.now - started
        #expect(status.error?.code == .unavailable, "\(status)")
        #expect(elapsed >= .milliseconds(700), "the held call ended after \(elapsed), before age and grace")
        #expect(elapsed < .seconds(3), "the held call ended after \(elapsed)")
        channel.close()
        server.closeNow()
        await client.shutdownNow()
        await transport.shutdownNow()
    }
}

private func transports() throws -> (MemoryTransport, MemoryTransport) {
    (try MemoryTransport(configuration: .init(eventLoopCount: 1)), try MemoryTransport(configuration: .init(eventLoopCount: 1)))
}

private func echoServer(on transport: MemoryTransport, _ configuration: CallServerConfiguration = CallServerConfiguration()) async throws -> CallServer {
    try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0), configuration: configuration) { call in
        for try await message in call.messages { try await call.write(message) }
        return .ok
    }
}

/// One echo on `channel`, its status.
private func echo(on channel: CallChannel) async throws -> CallStatus {
    try await within(.seconds(5)) {
        try await channel.withCall { call in
            try await call.write([1, 2, 3])
            _ = try await call.next()
            try await call.finishSending()
            while try await call.next() != nil {}
            return await call.status()
        }
    }
}

private struct TimedOut: Error, CustomStringConvertible {
    var description: String
}

/// `body`'s value, or `TimedOut` after `limit` (and `body` is cancelled).
private func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TimedOut(description: "no result within \(limit)") }
        return value
    }
}

private func waitUntil(_ limit: Duration, _ what: String, _ condition: () -> Bool) async throws {
    let until = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < until else { throw TimedOut(description: "\(what): not within \(limit)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}
