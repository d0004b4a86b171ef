import Synchronization
import Switchyard
import SwitchyardHPACK
import SwitchyardHTTP2

/// One client's HTTP/2 connection to a ``CallServer``: each stream the client opens is a
/// call, handed to the server's `makeCall`.
///
/// A request that is not a gRPC call the server can read (a `content-type` that is not
/// gRPC's, a `:method` other than POST, a malformed `grpc-timeout`, an encoding it does
/// not read) is answered at once, before any handler, as gRPC's PROTOCOL-HTTP2 says
/// (``GRPCRequestRejection``), and the connection goes on.
///
/// Safety of `@unchecked Sendable`: the delegate runs on the connection's loop; what
/// other threads touch goes through ``H2Connection``'s hops or the `Mutex`.
final class ServerConnection: H2ConnectionDelegate, @unchecked Sendable {
    let h2: H2Connection
    /// Makes the call for a stream (the server's bookkeeping and handler); on the loop.
    private let makeCall: @Sendable (CallStreamConnection) -> Void
    private let onClose: @Sendable (ServerConnection) -> Void

    init(
        connection: any Connection, configuration: H2Configuration,
        makeCall: @escaping @Sendable (CallStreamConnection) -> Void,
        onClose: @escaping @Sendable (ServerConnection) -> Void
    ) {
        self.h2 = H2Connection(connection: connection, role: .server, configuration: configuration)
        self.makeCall = makeCall
        self.onClose = onClose
    }

    func start() {
        onLoop { self.h2.start(delegate: self) }
    }

    /// GOAWAY: calls open go on, new streams are refused; closes once none is left.
    func beginGracefulShutdown() {
        onLoop { self.h2.beginGracefulShutdown() }
    }

    /// Closes now: every call on it ends with `error`.
    func close(with error: TransportError) {
        onLoop { self.h2.close(with: error) }
    }

    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if h2.eventLoop.inEventLoop { work() } else { h2.eventLoop.execute(work) }
    }

    // MARK: H2ConnectionDelegate

    func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool) {
        let request: GRPCRequestHead
        do {
            request = try GRPCRequestHead(parsing: headers)
        } catch {
            try? connection.sendHeaders(stream, error.response, endStream: true)
            if !endStream { connection.resetStream(stream, code: .noError) }
            return
        }
        let call = CallStreamConnection(
            server: connection, stream: stream, method: CallStreamConnection.method(forPath: request.path),
            metadata: request.metadata, endStream: endStream)
        makeCall(call)
    }

    func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8]) {}

    func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64) {}

    func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64) {}

    func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings) {}

    func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?) {
        onClose(self)
    }
}
