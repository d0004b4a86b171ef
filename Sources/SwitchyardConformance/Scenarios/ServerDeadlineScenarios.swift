import Switchyard
import SwitchyardCalls
import SwitchyardHPACK

extension ConformanceScenario {
    /// 85. The server enforces a request's `grpc-timeout` (gRPC's PROTOCOL-HTTP2), whether
    /// or not its client does: past it, the server's handler hears its call end
    /// `deadlineExceeded` and the client receives grpc-status 4.
    public static let serverEnforcesRequestDeadline = ConformanceScenario(
        "A request with grpc-timeout to a handler that never answers: past the deadline the server ends the call, its handler hears deadlineExceeded, and a raw client that keeps no deadline of its own receives grpc-status 4 in trailers (then RST_STREAM NO_ERROR while its half is open); a Switchyard client with a timeout ends deadlineExceeded",
        checklist: ["F7"], timeLimit: .seconds(60)
    ) { context in
        // A server whose calls answer nothing, ever.
        let serverCalls = Collected<CallRecorder>()
        let server = try await context.startCallServer { _ in
            let recorder = CallRecorder()
            serverCalls.append(recorder)
            return recorder
        }
        defer { server.close() }
        let method = "/kit.Deadline/Never"

        // Raw HTTP/2 clients keep no deadline: only the server can end these calls. One
        // keeps its half open, one ends it with its headers.
        let raw = RawHTTP2Peer(try await context.connect(to: context.target(of: server.localAddress)), client: true)
        defer { raw.close() }
        try await context.step("the raw client's preface and SETTINGS") { try await raw.send(raw.opening()) }
        for (stream, halfOpen) in [(UInt32(1), true), (UInt32(3), false)] {
            let index = serverCalls.count
            let request = raw.headers(stream, RawHTTP2Peer.request(path: method, [HPACKField("grpc-timeout", "200m")]), endStream: !halfOpen)
            let sent = KitClock.now
            try await context.step("a request with grpc-timeout 200m on stream \(stream)") { try await raw.send(request) }
            let reply = try await context.step("the end of stream \(stream), past its deadline", seconds: 10) { try await raw.readToEnd(of: stream) }
            let elapsed = KitClock.now - sent
            let last = reply.headerBlocks.count - 1
            try context.expect(
                last >= 0 && reply.headerBlocks[last].endStream && reply.value("grpc-status", inBlock: last) == "4",
                "stream \(stream) (client half \(halfOpen ? "open" : "closed")): expected trailers with grpc-status 4 (DEADLINE_EXCEEDED); \(reply.summary)")
            try context.expect(
                elapsed >= .milliseconds(190) && elapsed < .seconds(5),
                "stream \(stream): the status came \(milliseconds(elapsed)) after the request; expected it at its 200 ms deadline (within 5 s)")
            if halfOpen {
                try await context.step("RST_STREAM after the trailers on stream \(stream)") {
                    try await raw.readUntil("RST_STREAM on stream \(stream)") { raw.streams[stream]?.reset != nil }
                }
                try context.expect(raw.streams[stream]?.reset == .noError, "stream \(stream): expected RST_STREAM NO_ERROR after the trailers; \(raw.streams[stream]?.summary ?? "")")
            }
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the call's handler for stream \(stream)") { serverCalls.count > index }
            let status = try await context.status(of: serverCalls[index], "the server's call on stream \(stream)", quiet: quietLimit)
            try context.expectStatus(status, code: .deadlineExceeded, reason: .timedOut, "the server's call past its grpc-timeout (stream \(stream))")
            try context.expectWellBehaved(serverCalls[index], "the server's call on stream \(stream)")
            context.record("grpc-status 4 after grpc-timeout 200m, client half \(halfOpen ? "open" : "closed")", elapsed)
            context.log("stream \(stream): \(reply.summary), \(milliseconds(elapsed)) after the request")
        }

        // A Switchyard client with the same timeout: its own deadline and the server's pass
        // together. The client ends deadlineExceeded either way; the server's call ends
        // deadlineExceeded by its own timer, or cancelled by the client's reset if that
        // came first (the client's deadline counts from before the request was sent).
        let channel = context.channel(to: server)
        defer { channel.close() }
        let index = serverCalls.count
        let client = CallRecorder()
        let call = try await context.startCall(on: channel, options: CallConfiguration(timeout: .milliseconds(200)), handler: client)
        call.send(ConformancePattern.bytes(count: 10, seed: 85))
        let clientStatus = try await context.status(of: client, "the Switchyard client's call with a 200 ms timeout", seconds: 10)
        try context.expectStatus(clientStatus, code: .deadlineExceeded, reason: .timedOut, "the Switchyard client's call past its timeout")
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the Switchyard client's call") { serverCalls.count > index }
        let serverStatus = try await context.status(of: serverCalls[index], "the server's call from the Switchyard client", quiet: quietLimit)
        let code = serverStatus.error?.code
        try context.expect(
            code == .deadlineExceeded || code == .cancelled,
            "the server's call from a client with a timeout: expected deadlineExceeded or cancelled, received \(serverStatus)")
        try context.expectWellBehaved(client, "the Switchyard client's call")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server has no open call left (\(server.openCalls))") { server.openCalls == 0 }
        context.log("the Switchyard client's call ended \(clientStatus), the server's \(serverStatus)")
    }
}
