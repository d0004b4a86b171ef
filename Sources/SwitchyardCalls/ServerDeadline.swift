import Switchyard

// A server call's deadline (gRPC's PROTOCOL-HTTP2, "Timeout"), the rule:
//
// - A request whose headers carry `grpc-timeout` has a deadline that long after its
//   headers arrived; one without has none, and costs nothing: no timer, no check per
//   message.
// - When the deadline passes before the call ended, the server ends the call: the status
//   `deadlineExceeded` goes to the client in trailers (trailers-only if no response
//   headers went out), as grpc core's server sends it, then RST_STREAM CANCEL if the
//   client's half is still open, as grpc-go's server resets it. A call whose data still
//   waits for the client's window is only reset: the status could not pass the data.
// - The server's handler learns of it the way it learns of a client's cancel: `didClose`
//   at once, with `deadlineExceeded`, reason `timed out` (the async face's task sees the
//   call end with that error).
// - A call that ended first (its status sent, cancelled, its connection broken) keeps its
//   own status.
//
// The timer is the client's (`CallDeadline`, one rule for both sides): one task on the
// connection's loop, armed as the server makes the call and cancelled when it ends.

extension CallDeadline {
    /// The deadline of a request that carried `timeout`, counted from now (its headers
    /// arrived); nil for a request without one.
    convenience init?(server timeout: GRPCTimeout?) {
        guard let timeout else { return nil }
        self.init(timeout: timeout.duration)
    }
}

extension Call {
    /// Server: the instant the call's deadline passes, from the request's `grpc-timeout`;
    /// nil for none (and on a client).
    package var requestDeadline: ContinuousClock.Instant? {
        (stream as? CallStreamConnection)?.deadline?.instant
    }
}
