/// Receives one call's events, on the call's event loop, one at a time, never inside a
/// call the application made.
///
/// The shape of the flow-control proposal: `didReceive` for each message (only as
/// asked for, with flow control on), `didWriteData` after each sent message is in the
/// kernel (flow control on only), `didClose` once with the final status.
///
/// CallMetadata needs no callback: a server's handler is made once the client's headers
/// arrived (``Call/method`` and ``Call/metadata`` are set by then); a client has the
/// server's ``Call/responseMetadata`` before its first `didReceive` and
/// ``Call/trailingMetadata`` before `didClose`.
public protocol CallHandler: AnyObject, Sendable {
    /// A message arrived.
    func call(_ call: Call, didReceive message: [UInt8])
    /// The peer will send no more messages (on the server: the client finished sending).
    /// The client learns the same from ``call(_:didCloseWith:)``.
    func callDidReceiveEnd(_ call: Call)
    /// A message sent with ``Call/send(_:)`` is in the kernel (flow control on only).
    /// Reported once per message, in send order.
    func callDidWriteData(_ call: Call)
    /// The call ended: with the server's status (client), with the status it sent
    /// (server), or with the error that broke it (`unavailable` when the connection
    /// broke; `cancelled` after ``Call/cancel()``; a protocol error after a bad frame).
    func call(_ call: Call, didCloseWith status: CallStatus)
}

extension CallHandler {
    public func callDidReceiveEnd(_ call: Call) {}
    public func callDidWriteData(_ call: Call) {}
}
