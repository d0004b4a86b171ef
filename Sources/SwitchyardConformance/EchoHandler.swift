public import Switchyard
import Synchronization

/// A raw echo server for one connection: it writes back every byte it reads.
///
/// The pattern is the one a callback-face server should follow:
/// - each chunk is written back with `Connection.write(borrowing:completion:)` from
///   inside the read callback, so the backend can hand it to the kernel without a copy;
/// - when the kernel does not take everything (`Connection.pendingWriteBytes` > 0), it
///   stops reading, so a client that writes faster than it reads is pushed back by TCP
///   instead of growing this server's memory;
/// - ``connectionDidDrainWrites()`` resumes reading;
/// - at end of stream it shuts its own output down once the echo is flushed, then
///   closes (with ``closesAfterEndOfStream``).
///
/// Start it with ``start()``. Every callback runs on the connection's loop, one at a
/// time, so the mutable state below needs no lock; it is `@unchecked Sendable` for that
/// reason. `onClose` and `closeError` may be read from any thread.
public final class EchoHandler: ConnectionHandler, @unchecked Sendable {
    /// The connection; dropped when it closes, which breaks the cycle
    /// connection → handler → connection. Touched only on the loop.
    private var connection: (any Connection)?
    /// Whether this handler has asked for data. Touched only on the loop.
    private var reading = false
    /// Whether the peer ended its stream. Touched only on the loop.
    private var endOfStream = false

    /// Whether to shut the output down and close after the peer's end of stream.
    public let closesAfterEndOfStream: Bool

    private let outcome = Mutex<(closed: Bool, error: TransportError?, echoed: Int)>((false, nil, 0))
    private let closeHandler: (@Sendable (TransportError?) -> Void)?

    /// - Parameters:
    ///   - connection: an accepted (or connected) connection that is not reading yet.
    ///   - closesAfterEndOfStream: shut down and close once the peer ends its stream.
    ///   - onClose: runs once, on the loop, when the connection ends.
    public init(
        _ connection: any Connection, closesAfterEndOfStream: Bool = true,
        onClose: (@Sendable (TransportError?) -> Void)? = nil
    ) {
        self.connection = connection
        self.closesAfterEndOfStream = closesAfterEndOfStream
        self.closeHandler = onClose
    }

    /// Installs the handler and starts reading. Call once.
    public func start() {
        guard let connection else { return }
        // Set before any callback can run: callbacks start once setHandler and
        // startReading reach the loop, in call order.
        reading = true
        connection.setHandler(self)
        connection.startReading()
    }

    /// Whether the connection ended, its terminal error (`nil` for a local close or a
    /// clean end), and how many bytes were echoed.
    public var state: (closed: Bool, error: TransportError?, echoed: Int) { outcome.withLock { $0 } }

    public func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        guard let connection else { return }
        outcome.withLock { $0.echoed += bytes.count }
        connection.write(borrowing: bytes, completion: nil)
        if reading && connection.pendingWriteBytes > 0 {
            reading = false
            connection.stopReading()
        }
    }

    public func connectionDidDrainWrites() {
        guard let connection, !reading, !endOfStream else { return }
        reading = true
        connection.startReading()
    }

    public func connectionDidReadEnd() {
        endOfStream = true
        guard closesAfterEndOfStream, let connection else { return }
        // The FIN goes after the queued echo; the close after the FIN.
        connection.shutdownOutput { _ in connection.close() }
    }

    public func connectionDidClose(error: TransportError?) {
        connection = nil
        outcome.withLock { $0.closed = true; $0.error = error }
        closeHandler?(error)
    }
}
