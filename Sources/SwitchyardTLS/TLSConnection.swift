public import Switchyard

/// TLS over any `Connection`, itself a `Connection`: what is written is encrypted and
/// written to the wrapped connection, what the wrapped connection reads is decrypted and
/// handed to the handler. OpenSSL works on memory buffers only (it decrypts from the bytes
/// the wrapped connection lends and encrypts into one buffer this connection reuses); the
/// wrapped connection, of any backend, does all the I/O, on its own loop, which is this
/// connection's loop. The `Connection` front (the hop to the loop, the refusals, the
/// handler, the read demand, the write queue, half-close, close and the one end) is the
/// toolkit's, the one every backend shares (`StreamConnection`); TLS supplies its I/O.
///
/// ## Handshake first
///
/// A `TLSConnection` exists for its user only after its handshake: ``client(wrapping:context:serverName:)``
/// and ``server(wrapping:context:)`` return once the handshake succeeded and throw its
/// failure otherwise (``TLSTransport`` does this on connect and on accept). So the
/// `Connection` contract holds from the first call, a write never waits for a
/// handshake, and a certificate failure is an error of the connect, not of some later
/// read. (With TLS 1.3 a client finishes its handshake before the server has checked
/// the client's certificate: a server that refuses it is heard on the client's first
/// read, as a `certificate` error.)
///
/// ## Contract (beyond `Connection`'s)
///
/// - **Reads on demand.** The wrapped connection is read only while the user reads
///   (``startReading()``) and no decrypted byte is waiting: when OpenSSL needs more
///   ciphertext. After ``stopReading()`` nothing more is read from the wrapped
///   connection, so what this layer holds for a user who does not read is at most one
///   read of the wrapped connection plus the record OpenSSL is in
///   (``bufferedInboundBytes``), and TCP pushes the peer back as it would without TLS.
/// - **Writes** are encrypted and written to the wrapped connection at once when it holds
///   none of this connection's records; a write completes when the wrapped connection's
///   write of its records completes: when the encrypted bytes are in the kernel. While
///   it holds some, later writes wait here unencrypted and go when those complete, up to
///   64 KiB at a time, packed into records as one write of them all would be.
///   ``pendingWriteBytes`` counts the written bytes whose records are not yet in the
///   kernel.
/// - **End of stream** is the peer's `close_notify`: `ConnectionHandler/connectionDidReadEnd()`
///   runs after the last byte before it. A peer whose TCP stream ends without
///   `close_notify` ends the connection with `unavailable`, reason
///   `TransportError/Reason/truncated` instead (once the bytes before were delivered):
///   the data may have been cut, and the user must be able to tell.
/// - **shutdownOutput** sends `close_notify` once the writes before it went, then shuts
///   the wrapped connection's output down; reading goes on (TLS 1.3 half-close; TLS 1.2
///   peers may close at once).
/// - **close** sends `close_notify` (best effort: it goes to the wrapped connection's
///   queue, which the close then releases) and closes the wrapped connection; the end
///   reports nil, whatever the wrapped connection saw. Writes still waiting here fail
///   (`cancelled`/`closed`); with records still queued there, the `close_notify` goes
///   after them (records cannot be skipped: each one's sequence number is in the next
///   one's integrity check), so the peer reads `truncated`: it did not get everything.
///   **reset** resets the wrapped connection without `close_notify`.
/// - **Errors** of TLS (a record that is not TLS, an alert, a refused certificate) end the
///   connection with the error ``TLSErrorTable`` gives; OpenSSL's alert is sent to the
///   peer first. The wrapped connection's own errors pass through unchanged.
/// - **After the loops stopped**, a call from another thread is answered on the caller's
///   thread, as `Connection` says, when the wrapped connection's loop is the toolkit's
///   (bsd, libuv, memory, simulation, TLS over them). Over any other `TransportEventLoop` (a backend loaded
///   from a library, for one), which cannot say it has stopped, such a call is dropped;
///   the connection had ended by then.
public final class TLSConnection: Connection {
    /// The connection the records travel on.
    public let wrapped: any Connection
    /// The wrapped connection's backend name with `+tls`, for example `"bsd+tls"`.
    public var backendName: String { stream.backendName }
    public var eventLoop: any TransportEventLoop { wrapped.eventLoop }
    public var localAddress: Endpoint { wrapped.localAddress }
    public var remoteAddress: Endpoint { wrapped.remoteAddress }
    /// The application protocol ALPN settled on, or nil.
    public let negotiatedProtocol: String?
    /// The TLS version the handshake settled on.
    public let negotiatedVersion: TLSConfiguration.Version
    /// Whether the peer presented a certificate (for a server: a client certificate, which
    /// verified when ``TLSConfiguration/clientAuthentication`` asked for one).
    public let peerPresentedCertificate: Bool
    /// Where the work is done.
    let stream: TLSStream

    /// The connection of `stream`, whose handshake settled on `handshake`.
    init(_ stream: TLSStream, _ handshake: TLSStream.Handshake) {
        self.stream = stream
        wrapped = stream.wrapped
        negotiatedProtocol = handshake.applicationProtocol
        negotiatedVersion = handshake.version
        peerPresentedCertificate = handshake.peerPresentedCertificate
    }

    /// Runs the client handshake over `wrapped` (connected, not yet reading, no handler
    /// set) and returns the connection once it succeeded.
    /// - Parameters:
    ///   - wrapped: the connection to run TLS over; the TLS connection owns it from here.
    ///   - context: a client context (``TLSContext``).
    ///   - serverName: the name sent as SNI and verified; nil takes
    ///     ``TLSConfiguration/serverName``, then the wrapped connection's remote host.
    /// - Throws: a handshake failure as ``TLSErrorTable`` maps it (the wrapped connection
    ///   is closed then); `cancelled`/`task cancelled` if the task is cancelled.
    public static func client(
        wrapping wrapped: any Connection, context: TLSContext, serverName: String? = nil
    ) async throws(TransportError) -> TLSConnection {
        guard context.configuration.role == .client else {
            wrapped.close()
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "a server TLS context used for a client handshake")
        }
        let name = serverName ?? context.configuration.serverName ?? wrapped.remoteAddress.host
        return try await handshake(wrapped, context: context, serverName: name)
    }

    /// Runs the server handshake over `wrapped` (accepted, not yet reading, no handler
    /// set) and returns the connection once it succeeded.
    /// - Throws: as ``client(wrapping:context:serverName:)``.
    public static func server(wrapping wrapped: any Connection, context: TLSContext) async throws(TransportError) -> TLSConnection {
        guard context.configuration.role == .server else {
            wrapped.close()
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "a client TLS context used for a server handshake")
        }
        return try await handshake(wrapped, context: context, serverName: nil)
    }

    private static func handshake(
        _ wrapped: any Connection, context: TLSContext, serverName: String?
    ) async throws(TransportError) -> TLSConnection {
        let session: OpenSSLSession
        do {
            session = try OpenSSLSession(context: context, serverName: serverName)
        } catch {
            wrapped.close()
            throw error
        }
        let stream = TLSStream(wrapping: wrapped, session: session)
        return TLSConnection(stream, try await stream.handshake(timeout: context.configuration.handshakeTimeout))
    }

    /// Bytes from the peer this layer holds and has not delivered: ciphertext read from
    /// the wrapped connection and not yet decrypted, and the decrypted rest of the
    /// current record. Exact on the loop; elsewhere a snapshot. Bounded while the user
    /// does not read: see the contract.
    public var bufferedInboundBytes: Int { stream.bufferedInboundBytes }

    // MARK: Connection

    public func setHandler(_ handler: any ConnectionHandler) { stream.setHandler(handler) }
    public func startReading() { stream.startReading() }
    public func stopReading() { stream.stopReading() }
    public func write(_ bytes: [UInt8], completion: WriteCompletion?) { stream.write(bytes, completion: completion) }
    public func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        stream.write(borrowing: bytes, completion: completion)
    }
    public func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        stream.writeNowOrQueue(bytes, completion: completion)
    }
    public func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        stream.writeNowOrQueue(header: header, payload: payload, completion: completion)
    }
    public var pendingWriteBytes: Int { stream.pendingWriteBytes }
    public func shutdownOutput(completion: WriteCompletion?) { stream.shutdownOutput(completion: completion) }
    public func close() { stream.close() }
    public func reset() { stream.reset() }

    // MARK: For TLSTransport

    func observeEnd(_ observer: @escaping @Sendable () -> Void) { stream.observeEnd(observer) }
    func closeForShutdown() async { await stream.closeForShutdown() }
}
