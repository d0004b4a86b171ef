import Foundation
import Switchyard
import SwitchyardBSD
import SwitchyardTLS
import Testing

/// Against peers Switchyard did not write: the openssl tool's s_client and s_server, on
/// loopback.
@Suite("TLS interop with openssl s_client and s_server", .serialized, .timeLimit(.minutes(1)))
struct TLSInteropTests {
    /// Reads `pipe` until `text` appeared (or 10 s passed); returns all that was read.
    func readUntil(_ pipe: Pipe, contains text: String) async throws -> String {
        let handle = pipe.fileHandleForReading
        let collected = Task.detached { () -> String in
            var output = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
                if String(decoding: output, as: UTF8.self).contains(text) { break }
            }
            return String(decoding: output, as: UTF8.self)
        }
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask { await collected.value }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first ?? "(timed out)"
        }
    }

    @Test("openssl s_client, verifying against the test CA, talks to a Switchyard TLS echo server")
    func sClient() async throws {
        try await withTLS(.bsd) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = [
                "s_client", "-connect", "127.0.0.1:\(listener.localAddress.port)", "-servername", "localhost",
                "-verify_hostname", "localhost", "-CAfile", TestCertificates.path("ca.pem"), "-verify_return_error",
                "-quiet", "-no_ign_eof",
            ]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            defer {
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
            }
            let line = "hello from s_client \(UInt32.random(in: 0...UInt32.max))\n"
            input.fileHandleForWriting.write(Data(line.utf8))
            let echoed = try await readUntil(output, contains: line)
            #expect(echoed.contains(line), "s_client printed: \(echoed)")
            try input.fileHandleForWriting.close()
            process.waitUntilExit()  // s_client ends at the end of its input (-no_ign_eof)
            listener.close()
        }
    }

    @Test("A Switchyard TLS client talks to openssl s_server (-rev), verifying its certificate and name")
    func sServer() async throws {
        // A free port: listen on port 0, note it, let it go.
        let probe = try BSDTransport(configuration: .init(eventLoopCount: 1))
        let probeListener = try await probe.listen(on: loopback)
        let port = probeListener.localAddress.port
        probeListener.close()
        await probe.shutdownNow()

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "s_server", "-accept", "127.0.0.1:\(port)", "-cert", TestCertificates.path("server.pem"),
            "-key", TestCertificates.path("server.key"), "-rev", "-naccept", "1",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = Pipe()
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        _ = try await readUntil(output, contains: "ACCEPT")

        try await withTLS(.libuv, server: nil) { tls in
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: port)))
            try await client.write(Array("switchyard\n".utf8))
            var reply = [UInt8]()
            while !reply.contains(UInt8(ascii: "\n")), let chunk = try await client.read() { reply += chunk }
            #expect(String(decoding: reply, as: UTF8.self).hasPrefix("drayhctiws"))
            client.close()
        }
    }
}
