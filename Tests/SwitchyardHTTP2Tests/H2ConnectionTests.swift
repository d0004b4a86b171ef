import Switchyard
import SwitchyardBSD
import SwitchyardHPACK
import SwitchyardMemory
import Synchronization
import Testing

@testable import SwitchyardHTTP2

/// The driver over real connections: Switchyard's client against its server on the
/// in-memory and bsd backends.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct H2ConnectionTests {
    @Test("50 concurrent streams of 200 KiB each echo intact over one connection (windows of 64 KiB move as the reader consumes)")
    func concurrentEchoOverMemory() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let server = try await H2EchoServer(transport: transport)
        defer { server.close() }
        let client = try await H2TestClient(transport: transport, port: server.port)
        defer { client.close() }
        let bodies = (0..<50).map { index in (0..<(200 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) } }
        try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (index, body) in bodies.enumerated() {
                group.addTask { (index, try await client.request(body: body)) }
            }
            for try await (index, echoed) in group {
                #expect(echoed.count == bodies[index].count, "stream \(index): \(echoed.count) bytes back")
                #expect(echoed == bodies[index], "stream \(index) came back changed")
            }
        }
        #expect(server.accepted.load(ordering: .relaxed) == 1, "every stream went over one connection")
    }

    @Test("over bsd: a body larger than both windows, then a graceful GOAWAY closes the connection once the stream ended")
    func gracefulDrainOverBSD() async throws {
        let transport = try BSDTransport(configuration: .init(eventLoopCount: 1))
        let server = try await H2EchoServer(transport: transport)
        defer { server.close() }
        let client = try await H2TestClient(transport: transport, port: server.port)
        let body = [UInt8](repeating: 7, count: 3 << 20)
        let echoed = try await client.request(body: body)
        #expect(echoed == body)
        server.drain()
        let closed = try await client.closed()
        #expect(closed == nil || closed?.code == .unavailable, "the client saw \(String(describing: closed))")
        #expect(client.goAways.withLock { $0 }.contains { $0 == .noError }, "the server said GOAWAY NO_ERROR")
    }

    @Test("data still waiting for window when its stream is reset completes with cancelled, and the connection goes on")
    func resetFailsUnwrittenData() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let server = try await H2EchoServer(transport: transport)
        defer { server.close() }
        let client = try await H2TestClient(transport: transport, port: server.port)
        defer { client.close() }
        let driver = client.driver
        let outcome = Mutex<TransportError??>(nil)
        let id: H2StreamID = try await withCheckedThrowingContinuation { continuation in
            driver.eventLoop.execute {
                do {
                    // Never reads the echo: the server stops echoing once this side's window
                    // is full, so it stops consuming, and most of the 1 MiB waits here.
                    let id = try driver.openStream(
                        headers: [HPACKField(":method", "POST"), HPACKField(":scheme", "http"), HPACKField(":path", "/echo")],
                        endStream: false, delegate: SilentStream())
                    try driver.sendData(id, [UInt8](repeating: 1, count: 1 << 20), endStream: false) { error in
                        outcome.withLock { $0 = .some(error) }
                    }
                    continuation.resume(returning: id)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(outcome.withLock { $0 } == nil, "1 MiB went out through windows of 64 KiB that nobody opened")
        driver.eventLoop.execute { driver.resetStream(id, code: .cancel) }
        try await Task.sleep(for: .milliseconds(200))
        let error = outcome.withLock { $0 } ?? nil
        #expect(error?.code == .cancelled, "the completion said \(String(describing: error))")
        #expect(try await client.request(body: [1, 2, 3]) == [1, 2, 3], "the connection went on")
    }
}

/// A client for the tests: one connection, requests whose whole response body it returns.
final class H2TestClient: H2ConnectionDelegate, @unchecked Sendable {
    let driver: H2Connection
    let goAways = Mutex<[H2ErrorCode]>([])
    private let closure = Mutex<(done: Bool, error: TransportError?, waiter: CheckedContinuation<TransportError?, Never>?)>((false, nil, nil))

    init(transport: any Transport, port: Int, host: String = "127.0.0.1", configuration: H2Configuration = H2Configuration()) async throws {
        let connection = try await transport.connect(to: Endpoint(host: host, port: port))
        driver = H2Connection(connection: connection, role: .client, configuration: configuration)
        let driver = self.driver
        connection.eventLoop.execute { driver.start(delegate: self) }
    }

    /// POSTs `body` and returns the response body.
    func request(body: [UInt8]) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { continuation in
            let driver = self.driver
            driver.eventLoop.execute {
                let stream = ResponseCollector(driver: driver, continuation: continuation)
                do {
                    let headers = [
                        HPACKField(":method", "POST"), HPACKField(":scheme", "http"), HPACKField(":path", "/echo"),
                        HPACKField(":authority", "localhost"),
                    ]
                    let id = try driver.openStream(headers: headers, endStream: false, delegate: stream)
                    try driver.sendData(id, body, endStream: true, completion: nil)
                } catch {
                    stream.finish(.failure(error))
                }
            }
        }
    }

    func closed() async throws -> TransportError? {
        await withCheckedContinuation { continuation in
            let ready: TransportError?? = closure.withLock { state in
                if state.done { return .some(state.error) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func close() {
        let driver = self.driver
        driver.eventLoop.execute { driver.close(with: TransportError(code: .cancelled, reason: .closed, message: "test over")) }
    }

    func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool) {}
    func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8]) {
        goAways.withLock { $0.append(code) }
    }
    func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64) {}
    func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64) {}
    func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings) {}
    func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?) {
        let waiter = closure.withLock { state in
            state.done = true
            state.error = error
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: error)
    }

    /// Loop-confined.
    private final class ResponseCollector: H2StreamDelegate, @unchecked Sendable {
        let driver: H2Connection
        var continuation: CheckedContinuation<[UInt8], any Error>?
        var body: [UInt8] = []
        init(driver: H2Connection, continuation: CheckedContinuation<[UInt8], any Error>) {
            self.driver = driver
            self.continuation = continuation
        }
        func finish(_ result: Result<[UInt8], any Error>) {
            continuation?.resume(with: result)
            continuation = nil
        }
        func h2Stream(_ stream: H2StreamID, didReceiveHeaders fields: [HPACKField], endStream: Bool) {
            if endStream { finish(.success(body)) }
        }
        func h2Stream(_ stream: H2StreamID, didReceiveData bytes: [UInt8], endStream: Bool, flowControlledLength: Int) {
            body += bytes
            driver.consumed(stream, bytes: flowControlledLength)
            if endStream { finish(.success(body)) }
        }
        func h2StreamWindowOpened(_ stream: H2StreamID) {}
        func h2Stream(_ stream: H2StreamID, didEndWith ending: H2StreamEnding) {
            switch ending {
            case .closed: finish(.success(body))
            case .reset(let code, _): finish(.failure(TransportError(code: .unavailable, reason: .reset, message: "stream reset \(code)")))
            case .connectionEnded(let error): finish(.failure(error))
            }
        }
    }
}

/// A stream delegate that reads nothing. Loop-confined.
final class SilentStream: H2StreamDelegate, @unchecked Sendable {
    func h2Stream(_ stream: H2StreamID, didReceiveHeaders fields: [HPACKField], endStream: Bool) {}
    func h2Stream(_ stream: H2StreamID, didReceiveData bytes: [UInt8], endStream: Bool, flowControlledLength: Int) {}
    func h2StreamWindowOpened(_ stream: H2StreamID) {}
    func h2Stream(_ stream: H2StreamID, didEndWith ending: H2StreamEnding) {}
}
