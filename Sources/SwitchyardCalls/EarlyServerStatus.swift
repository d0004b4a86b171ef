import Switchyard

// A server's status that arrives while its client still sends, the rule:
//
// - A server may end a call before its client finished sending (it answered early, or
//   failed the call): its trailers, then RST_STREAM NO_ERROR while the client's half is
//   still open (RFC 9113 §8.1, gRPC's PROTOCOL-HTTP2), which tells the client to stop.
//   The reset fails the client's writes that were still queued, and it usually comes in
//   the same read as the trailers, before the call has read them.
// - The status is how the call ends, not the reset that followed it:
//   - a write the reset cut short fails with the status's error (`failedPrecondition`,
//     reason `call ended`, when the status is OK) and does not end the call: the call
//     goes on to read what the server sent, then the status;
//   - a cancel once the status is in ends the call with that status: the server's answer
//     is final (as in grpc core, where the first final status wins).
// - A half-close cut short by a reset after an OK status completes without an error (it
//   did its work: the server answered).

extension Call {
    /// Client: the server's status and trailing metadata once they arrived over HTTP/2,
    /// read by the call or not; nil before (and on a server).
    var receivedServerStatus: (status: CallStatus, trailing: CallMetadata)? {
        (stream as? CallStreamConnection)?.receivedStatus
    }

    /// What a write cut short after the server's status arrived reports: the status's
    /// error, or `callEnded` for an OK status; nil while no status arrived.
    var earlyStatusFailure: TransportError? {
        guard let received = receivedServerStatus else { return nil }
        return received.status.error
            ?? TransportError(code: .failedPrecondition, reason: .callEnded, message: "the server ended the call (OK) before this was sent")
    }
}
