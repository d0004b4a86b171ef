import Switchyard
import SwitchyardMemory
import Synchronization
import Testing

/// Call metadata over the in-memory backend: the async faces on both ends, a client
/// from before the headers frame, and a server that breaks the frame order (the kit's
/// scenario 64 covers the rest on every backend pair).
@Suite("Call metadata", .serialized, .timeLimit(.minutes(1)))
struct CallMetadataTests {
    /// Records a client call's messages, metadata at the first message, and status.
    final class Recorder: CallHandler {
        struct State {
            var messages: [[UInt8]] = []
            var responseAtFirstMessage: CallMetadata?
            var status: CallStatus?
            var trailingAtClose: CallMetadata?
        }
        let state = Mutex(State())
        func call(_ call: Call, didReceive message: [UInt8]) {
            let response = call.responseMetadata
            state.withLock { state in
                if state.messages.isEmpty { state.responseAtFirstMessage = response }
                state.messages.append(message)
            }
        }
        func call(_ call: Call, didCloseWith status: CallStatus) {
            let trailing = call.trailingMetadata
            state.withLock {
                $0.status = status
                $0.trailingAtClose = trailing
            }
        }
        func waitForStatus() async throws -> CallStatus {
            for _ in 0..<2000 {
                if let status = state.withLock({ $0.status }) { return status }
                try await Task.sleep(for: .milliseconds(1))
            }
            throw TransportError(code: .deadlineExceeded, reason: .timedOut, message: "no status within 2 s")
        }
    }

    static func transports() throws -> (client: MemoryTransport, server: MemoryTransport) {
        (try MemoryTransport(configuration: .init(eventLoopCount: 1)), try MemoryTransport(configuration: .init(eventLoopCount: 1)))
    }

    @Test("The async faces: the server's serve sees the method and metadata, the client gets response metadata before the first message and trailing metadata with the status")
    func asyncFaces() async throws {
        let (client, server) = try Self.transports()
        let seen = Mutex<(String, CallMetadata)?>(nil)
        var response = CallMetadata()
        try response.addString("yes", forKey: "served")
        let sent = response
        let callServer = try await CallServer.start(transport: server, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            seen.withLock { $0 = (call.method, call.metadata) }
            try await call.sendResponseMetadata(sent)
            var count = 0
            for try await message in call.messages {
                try await call.write(message)
                count += 1
            }
            var trailing = CallMetadata()
            try trailing.addString("\(count)", forKey: "count")
            call.setTrailingMetadata(trailing)
            return .ok
        }
        var metadata = CallMetadata()
        try metadata.addString("ü", forKey: "Lang")
        try metadata.addBinary([1, 2], forKey: "k-bin")
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: callServer.localAddress.port), transport: client)
        let (atFirst, trailing, status) = try await channel.withCall(method: "/svc/Echo", metadata: metadata) { call in
            try await call.write([1])
            try await call.write([2])
            try await call.finishSending()
            var atFirst: CallMetadata?
            for try await _ in call.messages where atFirst == nil { atFirst = call.responseMetadata }
            let status = await call.status()
            return (atFirst, call.trailingMetadata, status)
        }
        #expect(status.isOK, "\(status)")
        #expect(atFirst == response)
        #expect(trailing[stringValues: "count"] == ["2"])
        let (method, received) = try #require(seen.withLock { $0 })
        #expect(method == "/svc/Echo")
        #expect(received == metadata && received[stringValues: "lang"] == ["ü"])
        callServer.close()
        await client.shutdownNow()
        await server.shutdownNow()
    }

    @Test("A client that sends messages without a headers frame is served with no method and empty metadata")
    func clientWithoutHeaders() async throws {
        let (client, server) = try Self.transports()
        let seen = Mutex<(String, CallMetadata)?>(nil)
        let callServer = try await CallServer.start(transport: server, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            seen.withLock { $0 = (call.method, call.metadata) }
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        let raw = AsyncConnection(try await client.connect(to: Endpoint(host: "127.0.0.1", port: callServer.localAddress.port)))
        try await raw.write(Frame.encode(.message, payload: [9, 9]))
        try await raw.shutdownOutput()
        let reply = try await raw.readToEnd()
        #expect(reply == Frame.encode(.message, payload: [9, 9]) + Frame.encode(.status, payload: CallStatus.ok.encoded))
        let (method, metadata) = try #require(seen.withLock { $0 })
        #expect(method == "" && metadata.isEmpty)
        raw.close()
        callServer.close()
        await client.shutdownNow()
        await server.shutdownNow()
    }

    @Test("A server that breaks the frame order, or sends metadata over the client's limit, ends the client's call with the protocol error", arguments: [
        ("headers after a message", Frame.encode(.message, payload: [1]) + Frame.encode(.headers, payload: [0, 0]), TransportError.Reason.protocolViolation),
        ("a message after trailers", Frame.encode(.trailers, payload: []) + Frame.encode(.message, payload: [1]), .protocolViolation),
        ("two trailers", Frame.encode(.trailers, payload: []) + Frame.encode(.trailers, payload: []), .protocolViolation),
        ("malformed trailers", Frame.encode(.trailers, payload: [1, 0x6b, 0, 0, 0, 3]), .protocolViolation),
        ("headers over 64 bytes", Frame.encode(.headers, payload: [UInt8](repeating: 0, count: 65)), .metadataTooLarge),
    ] as [(String, [UInt8], TransportError.Reason)])
    func badServer(name: String, bytes: [UInt8], reason: TransportError.Reason) async throws {
        let (client, server) = try Self.transports()
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: listener.localAddress.port), transport: client)
        var options = CallConfiguration()
        options.maximumMetadataSize = 64
        let recorder = Recorder()
        _ = try await channel.startCall(method: "/m", options: options, handler: recorder)
        var accepted = listener.connections.makeAsyncIterator()
        let peer = AsyncConnection(try #require(await accepted.next()))
        #expect(try await peer.read(exactly: 9) == Frame.encode(.headers, payload: [0, 2] + Array("/m".utf8)))
        try await peer.write(bytes)
        let status = try await recorder.waitForStatus()
        #expect(status.error?.reason == reason, "\(name): \(status)")
        #expect(status.error?.code == (reason == .metadataTooLarge ? .resourceExhausted : .internal), "\(name): \(status)")
        peer.close()
        listener.close()
        await client.shutdownNow()
        await server.shutdownNow()
    }

    @Test("A method name with a control character or over 65,535 bytes fails startCall before any connect")
    func badMethod() async throws {
        let (client, _) = try Self.transports()
        // Nobody listens on port 1: a connect would fail `refused`, not `invalid metadata`.
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 1), transport: client)
        for method in ["/a\nb", String(repeating: "m", count: 65_536)] {
            do {
                _ = try await channel.startCall(method: method, handler: Recorder())
                Issue.record("startCall accepted a bad method")
            } catch let error as TransportError {
                #expect(error.code == .invalidArgument && error.reason == .invalidMetadata, "\(error)")
                #expect(error.message.contains("method name"), "\(error)")
            }
        }
        await client.shutdownNow()
    }
}
