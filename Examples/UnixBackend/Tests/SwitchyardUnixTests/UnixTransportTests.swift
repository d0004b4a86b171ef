import Glibc
import Switchyard
import SwitchyardUnix
import Testing

/// The unix backend's own rules, beyond the kit: socket files, stale sockets, the
/// abstract namespace, the errors of connect and listen.
@Suite("Unix backend", .serialized)
struct UnixTransportTests {
    @Test("A listener makes its socket file and removes it when it closes")
    func socketFileLifetime() async throws {
        try await withTransport { transport in
            let endpoint = UnixTransport.temporaryEndpoint()
            let path = try #require(endpoint.path)
            let listener = try await transport.listen(on: endpoint)
            #expect(listener.localAddress == endpoint)
            #expect(fileKind(path) == S_IFSOCK)
            listener.close()
            #expect(fileKind(path) == nil)
        }
    }

    @Test("A stale socket file nobody listens on is replaced; a live socket or another file is address in use")
    func existingFiles() async throws {
        try await withTransport { transport in
            // Stale: bound by a socket that closed without removing its file.
            let stale = UnixTransport.temporaryEndpoint()
            try leaveStaleSocket(at: try #require(stale.path))
            #expect(fileKind(stale.path!) == S_IFSOCK)
            let refused = try await connectError(transport, to: stale)
            #expect(refused.code == .unavailable && refused.reason == .refused)
            let replacing = try await transport.listen(on: stale)
            let client = try await transport.connect(to: stale)
            client.close()
            replacing.close()

            // Live: another listener is there.
            let live = UnixTransport.temporaryEndpoint()
            let first = try await transport.listen(on: live)
            let inUse = try await listenError(transport, on: live)
            #expect(inUse.code == .unavailable && inUse.reason == .addressInUse)
            #expect(fileKind(live.path!) == S_IFSOCK)
            first.close()

            // Not a socket: a regular file stays as it is.
            let regular = UnixTransport.temporaryEndpoint()
            let fd = open(regular.path!, O_CREAT | O_WRONLY, 0o600)
            #expect(fd >= 0)
            close(fd)
            defer { unlink(regular.path!) }
            let notSocket = try await listenError(transport, on: regular)
            #expect(notSocket.code == .unavailable && notSocket.reason == .addressInUse)
            #expect(fileKind(regular.path!) == S_IFREG)
            let fileRefused = try await connectError(transport, to: regular)
            #expect(fileRefused.code == .unavailable && fileRefused.reason == .refused)
        }
    }

    @Test("Connecting where nothing is fails at once with unavailable (refused)")
    func refusedAtOnce() async throws {
        try await withTransport { transport in
            let started = ContinuousClock.now
            let error = try await connectError(transport, to: UnixTransport.temporaryEndpoint())
            #expect(error.code == .unavailable && error.reason == .refused)
            #expect(error.native?.name == "ENOENT")
            #expect(ContinuousClock.now - started < .milliseconds(100))
        }
    }

    @Test("A host and port, a path too long, or a missing folder is invalidArgument (invalid address)")
    func invalidEndpoints() async throws {
        try await withTransport { transport in
            let tcp = Endpoint(host: "127.0.0.1", port: 80)
            for error in [try await connectError(transport, to: tcp), try await listenError(transport, on: tcp)] {
                #expect(error.code == .invalidArgument && error.reason == .invalidAddress)
                #expect(error.message.contains("127.0.0.1:80"))
            }
            let long = Endpoint(unixPath: "/tmp/" + String(repeating: "x", count: Endpoint.maximumPathLength))
            let tooLong = try await listenError(transport, on: long)
            #expect(tooLong.code == .invalidArgument && tooLong.reason == .invalidAddress)
            let missing = Endpoint(unixPath: "/tmp/switchyard-no-such-folder-\(getpid())/app.sock")
            let noFolder = try await listenError(transport, on: missing)
            #expect(noFolder.code == .invalidArgument && noFolder.reason == .invalidAddress)
        }
    }

    @Test("Every client socket has a name of its own, which the accepted side sees as its peer")
    func clientNames() async throws {
        try await withTransport { transport in
            let listener = try await transport.listen(on: UnixTransport.temporaryEndpoint())
            defer { listener.close() }
            var pairs: [(client: any Connection, server: any Connection)] = []
            var iterator = listener.connections.makeAsyncIterator()
            for _ in 0..<3 {
                let client = try await transport.connect(to: listener.localAddress)
                let server = try #require(await iterator.next())
                pairs.append((client, server))
            }
            for (client, server) in pairs {
                #expect(client.localAddress.path?.hasPrefix("@") == true, "\(client.localAddress)")
                #expect(client.remoteAddress == listener.localAddress)
                #expect(server.localAddress == listener.localAddress)
                #expect(server.remoteAddress == client.localAddress)
            }
            #expect(Set(pairs.map(\.client.localAddress)).count == 3)
            for (client, server) in pairs {
                client.close()
                server.close()
            }
        }
    }

    @Test("The abstract namespace: @name listens and echoes with no file")
    func abstractNamespace() async throws {
        try await withTransport { transport in
            let endpoint = Endpoint(unixPath: "@switchyard-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            let listener = try await transport.listen(on: endpoint)
            #expect(listener.localAddress == endpoint)
            let client = AsyncConnection(try await transport.connect(to: endpoint))
            var iterator = listener.connections.makeAsyncIterator()
            let server = AsyncConnection(try #require(await iterator.next()))
            try await client.write(Array("ping".utf8))
            #expect(try await server.read(exactly: 4) == Array("ping".utf8))
            let inUse = try await listenError(transport, on: endpoint)
            #expect(inUse.reason == .addressInUse)
            listener.close()
            let gone = try await connectError(transport, to: endpoint)
            #expect(gone.reason == .refused)
            client.close()
            server.close()
        }
    }

    @Test("A reset that leaves data unread reaches the peer as unavailable (reset); otherwise as end of stream")
    func resetSemantics() async throws {
        try await withTransport { transport in
            let listener = try await transport.listen(on: UnixTransport.temporaryEndpoint())
            defer { listener.close() }
            var iterator = listener.connections.makeAsyncIterator()
            for leaveUnread in [true, false] {
                let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
                let server = try #require(await iterator.next())
                if leaveUnread { try await client.write([1, 2, 3]) }
                server.reset()
                if leaveUnread {
                    await #expect {
                        _ = try await client.read()
                    } throws: { error in
                        (error as? TransportError)?.reason == .reset
                    }
                } else {
                    #expect(try await client.read() == nil)
                    // The next write finds the peer gone: unavailable (reset), no SIGPIPE.
                    await #expect {
                        try await client.write([4])
                    } throws: { error in
                        (error as? TransportError)?.reason == .reset
                    }
                }
                client.close()
            }
        }
    }
}

private func withTransport(_ body: (UnixTransport) async throws -> Void) async throws {
    let transport = try UnixTransport(configuration: TransportConfiguration(eventLoopCount: 2))
    do {
        try await body(transport)
    } catch {
        await transport.shutdownNow()
        throw error
    }
    await transport.shutdownNow()
}

private func connectError(_ transport: UnixTransport, to endpoint: Endpoint) async throws -> TransportError {
    do {
        let connection = try await transport.connect(to: endpoint)
        connection.close()
    } catch let error as TransportError {
        return error
    }
    throw TestFailure("a connect to \(endpoint) succeeded")
}

private func listenError(_ transport: UnixTransport, on endpoint: Endpoint) async throws -> TransportError {
    do {
        let listener = try await transport.listen(on: endpoint)
        listener.close()
    } catch let error as TransportError {
        return error
    }
    throw TestFailure("a listen on \(endpoint) succeeded")
}

private struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The file type bits at `path` (`S_IFSOCK`, `S_IFREG`, ...), or nil when nothing is there.
private func fileKind(_ path: String) -> mode_t? {
    var status = stat()
    guard lstat(path, &status) == 0 else { return nil }
    return status.st_mode & S_IFMT
}

/// Binds a socket at `path`, listens, and closes it without removing the file: what a
/// process that died leaves behind.
private func leaveStaleSocket(at path: String) throws {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0, listen(fd, 1) == 0 else { throw TestFailure("bind/listen \(path): errno \(errno)") }
}
