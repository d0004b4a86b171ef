/// A bound, listening socket (or its in-memory equivalent) that accepts connections.
///
/// ## Contract
/// - ``localAddress`` is readable at once; listening on port 0 gives the port the system
///   chose.
/// - ``connections`` yields each accepted connection once, in accept order. Iterate it
///   from one task. Accepted connections are not read until their handler calls
///   ``Connection/startReading()``.
/// - ``close()`` stops accepting at once (new connects are refused), ends the
///   sequence, and closes connections that were accepted but not yet taken from it.
///   Connections already taken stay open. Close is idempotent.
/// - If the transport shuts down, the listener closes as if ``close()`` had been called.
public protocol Listener: AnyObject, Sendable {
    /// The registered name of the backend.
    var backendName: String { get }
    /// The address the listener is bound to.
    var localAddress: Endpoint { get }
    /// The accepted connections.
    var connections: AcceptedConnections { get }
    /// Stops accepting; see the contract above.
    func close()
    /// Hands each accepted connection to `handler` instead of to ``connections``: on the
    /// connection's own event loop, as soon as it is accepted, with no hop through a
    /// task, so `handler` can set the connection's handler and start reading at once.
    /// Call it once, right after listening; connections accepted before the call are
    /// handed over too, in order. The default implementation routes ``connections``
    /// (``AcceptedConnections/route(to:)``), which backends feed on each connection's loop.
    func acceptConnections(_ handler: @escaping @Sendable (any Connection) -> Void)
}

extension Listener {
    public func acceptConnections(_ handler: @escaping @Sendable (any Connection) -> Void) {
        connections.route(to: handler)
    }
}
