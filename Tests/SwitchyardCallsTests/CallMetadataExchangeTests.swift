import Switchyard
import SwitchyardCalls
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
        try metadata.addString("en-GB", forKey: "Lang")
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
        // gRPC's wire adds the client's user-agent to what the server sees.
        var custom = received
        custom.removeAll(forKey: "user-agent")
        #expect(custom == metadata && received[stringValues: "lang"] == ["en-GB"], "\(received)")
        #expect(received[stringValues: "user-agent"].first?.hasPrefix("switchyard/") == true, "\(received)")
        callServer.close()
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

    @Test("Metadata or a method gRPC's wire cannot carry fails startCall before any connect, with invalid metadata")
    func unsendableMetadata() async throws {
        let (client, _) = try Self.transports()
        // Nobody listens on port 1: a connect would fail `refused`, not `invalid metadata`.
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 1), transport: client)
        var nonASCII = CallMetadata()
        try nonASCII.addString("ü", forKey: "lang")
        var reserved = CallMetadata()
        try reserved.addString("text/plain", forKey: "content-type")
        for (method, metadata) in [("/svc/M", nonASCII), ("/svc/M", reserved), ("a b", CallMetadata()), ("/svc/Ü", CallMetadata())] {
            do {
                _ = try await channel.startCall(method: method, metadata: metadata, handler: Recorder())
                Issue.record("startCall accepted \(method) with \(metadata)")
            } catch let error as TransportError {
                #expect(error.code == .invalidArgument && error.reason == .invalidMetadata, "\(error)")
            }
        }
        await client.shutdownNow()
    }
}
