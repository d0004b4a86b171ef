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
}
