/// A connected, bidirectional byte stream.
///
/// A connection lives on one event loop (``eventLoop``) for its whole life. Its events
/// reach the ``ConnectionHandler`` set with ``setHandler(_:)``, always on that loop, one
/// at a time, and never from inside a call the user made (no re-entrant callbacks).
///
/// ## Contract
///
/// - **Thread safety.** Every method may be called from any thread. Called on the
///   connection's loop, it acts at once; called elsewhere, it hops to the loop (with a
///   copy of borrowed bytes) and acts there, in call order.
/// - **Call order.** Set the handler, then ``startReading()``. Reads are demand-driven:
///   nothing is read from the network until ``startReading()``, and after
///   ``stopReading()`` the backend stops reading the socket, so the peer is pushed back
///   by TCP once the kernel buffers fill.
/// - **Writes** complete (their completion runs with `nil`) once every byte is in the
///   kernel, in the order they were issued, each exactly once. A write that cannot
///   complete gets the connection's terminal error, or:
///   - after ``close()``: code `cancelled`, reason `closed`;
///   - after ``shutdownOutput(completion:)``: code `failedPrecondition`, reason
///     `output shut down`;
///   - after the transport shut down: code `cancelled`, reason `shutdown`.
/// - **End of stream.** When the peer shuts its output down, the handler's
///   ``ConnectionHandler/connectionDidReadEnd()`` runs once, after every byte the peer
///   sent was delivered. The connection stays open: it can still write (half-close).
/// - **Termination.** A connection ends exactly once, and the handler's
///   ``ConnectionHandler/connectionDidClose(error:)`` runs once: with `nil` after a
///   local ``close()``, or with the one terminal ``TransportError``:
///   - peer reset or broken pipe: `unavailable`, reason `reset`;
///   - the kernel gave up (`ETIMEDOUT`): `unavailable`, reason `timed out`;
///   - no route: `unavailable`, reason `unreachable`;
///   - with a ``TransportConfiguration/stallTimeout``: no progress for that long (the
///     kernel's `ETIMEDOUT`, `EHOSTUNREACH`, `ENETUNREACH` on an established
///     connection, or a backend's own stall monitor): `unavailable`, reason `stalled`;
///   - the descriptor was reclaimed underneath: `unavailable`, reason `reclaimed`;
///   - the transport was shut down: `cancelled`, reason `shutdown`.
///   Pending writes then complete with that same error (or `cancelled`/`closed` after
///   a local close), before `connectionDidClose`.
/// - **Close** is idempotent and releases the descriptor at once.
/// - **Late handlers.** A handler set after the connection already ended hears
///   ``ConnectionHandler/connectionDidClose(error:)`` once, unless an earlier handler did.
/// - **After the transport stopped.** Once its loops have stopped, a call from another
///   thread cannot hop anymore; what it would have reported (a write's completion with
///   the terminal error, a late handler's `connectionDidClose`) then runs on the
///   caller's thread. Nothing is dropped.
public protocol Connection: AnyObject, Sendable {
    /// The registered name of the backend that made this connection.
    var backendName: String { get }
    /// The loop the connection lives on; its handler runs there.
    var eventLoop: any TransportEventLoop { get }
    /// This end's address (port > 0, never the wildcard; for a Unix-domain socket, its
    /// path or name).
    var localAddress: Endpoint { get }
    /// The peer's address.
    var remoteAddress: Endpoint { get }

    /// Sets the handler that receives this connection's events. Set it before
    /// ``startReading()``; setting a new one replaces the old one.
    func setHandler(_ handler: any ConnectionHandler)

    /// Asks for data: the backend reads whenever bytes arrive and hands them to the
    /// handler, until ``stopReading()``.
    func startReading()

    /// Stops reading from the network. Already-read bytes may still be delivered in the
    /// callback that is running now, none after it returns.
    ///
    /// The connection is still watched for errors: a peer's reset (or the kernel giving
    /// up) ends it with ``ConnectionHandler/connectionDidClose(error:)`` (`unavailable`,
    /// reason `reset`, ...) while reads are stopped, or were never started, with no write
    /// pending, and without any read or write from the owner. A peer's plain close (end
    /// of stream) is not reported until reading starts again, after every byte the peer
    /// sent before it.
    func stopReading()

    /// Writes bytes; `completion` runs on the loop once they are all in the kernel, or
    /// with the error that stopped them. Writes are sent in call order.
    func write(_ bytes: [UInt8], completion: WriteCompletion?)

    /// Writes bytes as ``write(_:completion:)`` does, except when every byte is in the
    /// kernel before this returns (called on the loop, nothing queued, the kernel took
    /// them all): then it returns `true` and `completion` never runs, since the caller
    /// already knows. Otherwise it returns `false` and `completion` runs as it would for
    /// ``write(_:completion:)`` (at the end of the turn at the earliest, with the error
    /// if the write failed). For a caller that reports sent bytes itself at a point where
    /// that is safe: it spares the backend deferring a completion, and that deferral's
    /// allocation, per write. The default implementation calls ``write(_:completion:)``
    /// and returns `false`.
    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool

    /// Writes `header` and then `payload` as one write, as ``writeNowOrQueue(_:completion:)``
    /// does for one array, without joining them first: a backend that gathers hands both
    /// to the kernel in one system call, and keeps `payload` itself (no copy) for what
    /// the kernel does not take. `header` is borrowed: copied if it has to wait. The
    /// default implementation joins them and calls ``writeNowOrQueue(_:completion:)``.
    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool

    /// Writes borrowed bytes. Called on the loop with nothing queued, the backend writes
    /// them at once and copies only what the kernel did not take; off the loop it copies
    /// them all before it hops. The buffer may be reused as soon as this returns.
    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?)

    /// Bytes accepted by ``write(_:completion:)`` that are not yet in the kernel (for
    /// the in-memory backend: not yet in the peer's receive window). Exact on the loop;
    /// elsewhere a snapshot, which may or may not count writes still hopping to the loop.
    var pendingWriteBytes: Int { get }

    /// Shuts the output side down (TCP FIN) once every queued write is in the kernel;
    /// reading goes on. `completion` runs when the FIN is handed to the kernel. A second
    /// call, or a call after close, completes with `failedPrecondition`/`output shut
    /// down` or `cancelled`/`closed`.
    func shutdownOutput(completion: WriteCompletion?)

    /// Closes the connection now. Queued writes complete with `cancelled`/`closed`; the
    /// handler's ``ConnectionHandler/connectionDidClose(error:)`` runs with `nil`.
    func close()

    /// Closes the connection with a TCP reset (linger 0): the peer sees `unavailable`
    /// (reset), not a clean end of stream. Otherwise like ``close()``.
    func reset()
}

extension Connection {
    public func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        write(bytes, completion: completion)
        return false
    }

    public func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        var joined = [UInt8]()
        joined.reserveCapacity(header.count + payload.count)
        joined.append(contentsOf: header)
        joined.append(contentsOf: payload)
        return writeNowOrQueue(joined, completion: completion)
    }
}

/// Runs on the connection's loop when a write completes: `nil` when the bytes are in
/// the kernel, or the error that stopped them.
public typealias WriteCompletion = @Sendable (TransportError?) -> Void

/// Receives a connection's events, always on the connection's event loop, one at a time.
///
/// A handler is driven by exactly one loop, so its state needs no lock; implementations
/// that are classes with mutable state mark themselves `@unchecked Sendable` and say so.
public protocol ConnectionHandler: AnyObject, Sendable {
    /// Bytes arrived. `bytes` is borrowed: valid only during this call. Copy what you keep.
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer)
    /// The peer shut its output down (end of stream). Runs once, after all its data.
    func connectionDidReadEnd()
    /// The write queue became empty after having held bytes the kernel did not take.
    func connectionDidDrainWrites()
    /// The connection ended: `nil` after a local close, or its terminal error.
    func connectionDidClose(error: TransportError?)
}

extension ConnectionHandler {
    public func connectionDidDrainWrites() {}
}
