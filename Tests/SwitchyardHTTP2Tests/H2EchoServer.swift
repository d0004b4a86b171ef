import Switchyard
import SwitchyardHPACK
import Synchronization

@testable import SwitchyardHTTP2

/// An HTTP/2 server for the driver's tests: every request is answered with `:status 200`
/// and its own body, echoed DATA for DATA as it arrives (consumed as it is echoed, so the
/// client's window moves only as fast as the echo goes out), then END_STREAM.
final class H2EchoServer: Sendable {
    let listener: any Listener
    /// Held: a transport that goes away takes its listeners with it.
    let transport: any Transport
    let configuration: H2Configuration
    /// Connections accepted and the reasons they ended, for the tests to read.
    let closes = Mutex<[TransportError?]>([])
    let accepted = Atomic<Int>(0)
    private let drivers = Mutex<[H2Connection]>([])

    init(transport: any Transport, configuration: H2Configuration = H2Configuration()) async throws {
        self.configuration = configuration
        self.transport = transport
        listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { [self] connection in
            accepted.add(1, ordering: .relaxed)
            let driver = H2Connection(connection: connection, role: .server, configuration: configuration)
            drivers.withLock { $0.append(driver) }
            connection.eventLoop.execute {
                driver.start(delegate: ServerDelegate(server: self))
            }
        }
    }

    var port: Int { listener.localAddress.port }

    /// GOAWAY on every connection, gracefully.
    func drain() {
        for driver in drivers.withLock({ $0 }) {
            driver.eventLoop.execute { driver.beginGracefulShutdown() }
        }
    }

    func close() {
        listener.close()
        for driver in drivers.withLock({ $0 }) {
            driver.eventLoop.execute { driver.close(with: TransportError(code: .cancelled, reason: .closed, message: "test over")) }
        }
    }

    /// Loop-confined.
    private final class ServerDelegate: H2ConnectionDelegate, @unchecked Sendable {
        let server: H2EchoServer
        init(server: H2EchoServer) { self.server = server }

        func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool) {
            let echo = EchoStream(connection: connection)
            connection.setDelegate(echo, for: stream)
            try? connection.sendHeaders(stream, [HPACKField(":status", "200")], endStream: endStream)
        }
        func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8]) {}
        func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64) {}
        func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64) {}
        func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings) {}
        func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?) {
            server.closes.withLock { $0.append(error) }
        }
    }

    /// Loop-confined.
    private final class EchoStream: H2StreamDelegate, @unchecked Sendable {
        let connection: H2Connection
        init(connection: H2Connection) { self.connection = connection }

        func h2Stream(_ stream: H2StreamID, didReceiveHeaders fields: [HPACKField], endStream: Bool) {
            if endStream { try? connection.endStream(stream) }
        }
        func h2Stream(_ stream: H2StreamID, didReceiveData bytes: [UInt8], endStream: Bool, flowControlledLength: Int) {
            let connection = self.connection
            // Given back once the echo is in the kernel: the echo's pace sets the client's.
            try? connection.sendData(stream, bytes, endStream: endStream) { _ in
                connection.consumed(stream, bytes: flowControlledLength)
            }
        }
        func h2StreamWindowOpened(_ stream: H2StreamID) {}
        func h2Stream(_ stream: H2StreamID, didEndWith ending: H2StreamEnding) {}
    }
}
