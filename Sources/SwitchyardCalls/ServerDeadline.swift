import Switchyard

// A server call's deadline (gRPC's PROTOCOL-HTTP2, "Timeout"), the rule:
//
// - A request whose headers carry `grpc-timeout` has a deadline that long after its
//   headers arrived; one without has none, and costs nothing: no timer, no check per
//   message.
// - When the deadline passes before the call ended, the server ends the call: the status
//   `deadlineExceeded` goes to the client in trailers (trailers-only if no response
//   headers went out), then RST_STREAM NO_ERROR if the client's half is still open (an
//   early response, as after any status), as grpc core's server does (chttp2's
//   close_from_api). A call whose data still waits for the client's window, or whose own
//   status is already on its way, is reset with CANCEL instead: the status could not pass
//   the data. (grpc-go's server only resets with CANCEL, sending no status; a client
//   that keeps no deadline of its own then never learns why.)
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
    convenience init?(server timeout: GRPCTimeout?, clock: any TransportClock) {
        guard let timeout else { return nil }
        self.init(timeout: timeout.duration, clock: clock)
    }
}

extension Call {
    /// Server: the instant the call's deadline passes, from the request's `grpc-timeout`;
    /// nil for none (and on a client).
    package var requestDeadline: ContinuousClock.Instant? {
        (stream as? CallStreamConnection)?.deadline?.instant
    }
}
