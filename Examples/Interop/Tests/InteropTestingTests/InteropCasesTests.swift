import Foundation
import InteropTesting
import Switchyard
import SwitchyardCalls
import Testing

/// The 14 cases of the client against the test service, both on Switchyard's calls, in
/// one process over loopback: every backend, plaintext and TLS (scripts/make-test-certs'
/// files), and no socket left open. scripts/interop-matrix runs the same through the
/// tools, and against grpcio.
@Suite("The interop cases against the test service", .serialized)
struct InteropCasesTests {
    enum Security: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case plaintext, tls
        var testDescription: String { rawValue }
    }

    @Test("Every case passes", arguments: ["bsd", "libuv"], Security.allCases)
    func everyCasePasses(backend: String, security: Security) async throws {
        let certificates = security == .tls ? try Certificates.shared.directory() : nil
        let before = try Self.openSockets()
        let server = try await InteropTransport.make(
            backend: backend, server: certificates.map { InteropTransport.serverTLS(directory: $0) })
        let client = try await InteropTransport.make(
            backend: backend, client: certificates.map { InteropTransport.clientTLS(directory: $0, serverName: "foo.test.google.fr") })
        let service = TestService()
        let callServer = try await CallServer.start(transport: server, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            try await service.serve(call)
        }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: callServer.localAddress.port), transport: client)
        var failures: [String] = []
        for testCase in InteropTestCase.allCases {
            do {
                try await testCase.run(on: channel)
            } catch {
                failures.append("\(testCase.rawValue): \(error)")
            }
        }
        channel.close()
        callServer.close()
        await callServer.serve()
        await client.shutdown(gracePeriod: .seconds(2))
        await server.shutdownNow()
        #expect(failures == [])
        // No socket of this case is left open. A descriptor is released on its loop after
        // the close that shut it, so the count may take a moment (bounded) to come down;
        // and one of the case before may have still been open when `before` was counted,
        // so fewer than `before` is no leak.
        var open = try Self.openSockets()
        let until = ContinuousClock.now + .seconds(2)
        while open > before, ContinuousClock.now < until {
            try await Task.sleep(for: .milliseconds(10))
            open = try Self.openSockets()
        }
        #expect(open <= before, "\(open) sockets open after the cases, \(before) before")
    }

    /// Against a server that answers every call with OK and nothing else, the cases fail,
    /// each saying what it missed: the checks check.
    @Test("The cases fail against a server that answers nothing")
    func casesFailAgainstAnEmptyServer() async throws {
        let transport = try await InteropTransport.make(backend: "bsd")
        let callServer = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { _ in .ok }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: callServer.localAddress.port), transport: transport)
        // empty_stream and cancel_after_begin pass against it, as against any server that
        // ends a call OK; timeout_on_sleeping_server races the answer against 1 ms.
        let expectedToFail = InteropTestCase.allCases.filter { ![.emptyStream, .cancelAfterBegin, .timeoutOnSleepingServer].contains($0) }
        var passed: [String] = []
        for testCase in expectedToFail {
            do {
                try await testCase.run(on: channel)
                passed.append(testCase.rawValue)
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
        channel.close()
        callServer.close()
        await callServer.serve()
        await transport.shutdown(gracePeriod: .seconds(2))
        #expect(passed == [])
    }

    /// The process's open sockets. Sockets only: the first transport of the process also
    /// starts Dispatch's own descriptors (an epoll, an eventfd, a timerfd), which stay.
    static func openSockets() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count { name in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"))?.hasPrefix("socket:") == true
        }
    }
}

/// The interop certificates, made once per test run by scripts/make-test-certs into a
/// temporary folder.
final class Certificates: Sendable {
    static let shared = Certificates()

    private let made: Result<String, any Error>

    private init() {
        made = Result {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("interop-certs-\(getpid())").path
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../scripts/make-test-certs").standardized.path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: script)
            process.arguments = [directory]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(script) exited \(process.terminationStatus)"])
            }
            return directory
        }
    }

    func directory() throws -> String { try made.get() }

    deinit {
        if case .success(let directory) = made { try? FileManager.default.removeItem(atPath: directory) }
    }
}
