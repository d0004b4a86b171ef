import SwitchyardHPACK

/// One stream that is open or half-closed (RFC 9113 section 5.1); idle and closed streams
/// have no state. "Half-closed (local)" is `localEnded`, "half-closed (remote)" is
/// `remoteEnded`; when both are true the stream is closed and its state removed.
struct H2StreamState: Sendable {
    let id: H2StreamID
    /// END_STREAM was committed to the outbound frames.
    var localEnded = false
    /// END_STREAM was accepted from the upper layer (it may still wait behind queued data):
    /// nothing more may be sent.
    var localEndQueued = false
    /// END_STREAM was received.
    var remoteEnded = false
    /// Headers this side sent: a client's request at open; a server's response headers.
    var headersSent: Bool
    /// A client received the final (non-1xx) response headers.
    var finalHeadersReceived = false
    /// A client's request was HEAD: the response's content-length says nothing of its body.
    var isHeadRequest = false

    /// What the peer lets this side send (may go below zero after a SETTINGS change).
    var sendWindow: Int
    /// What this side lets the peer send.
    var receiveWindow: Int
    /// Bytes the upper layer consumed and not yet granted back with a WINDOW_UPDATE.
    var pendingGrant = 0
    /// Flow-controlled bytes received and not yet reported consumed.
    var unconsumed = 0

    /// The content-length the peer announced, checked against the DATA received.
    var expectedContentLength: Int?
    var receivedDataLength = 0

    /// Data accepted by sendData and not yet in outbound frames; `queueHead` is the first
    /// chunk not fully sent.
    var queue: [H2QueuedChunk] = []
    var queueHead = 0
    var queuedBytes = 0
    /// Trailers that wait behind the queued data (they carry END_STREAM).
    var queuedTrailers: [HPACKField]?
    /// The stream is in the connection's list of streams with something to send.
    var isSendReady = false

    init(id: H2StreamID, sendWindow: Int, receiveWindow: Int, headersSent: Bool) {
        self.id = id
        self.sendWindow = sendWindow
        self.receiveWindow = receiveWindow
        self.headersSent = headersSent
    }

    /// Something waits to be sent: data, trailers, or an END_STREAM not yet committed.
    var hasPendingOutput: Bool { queueHead < queue.count || queuedTrailers != nil || (localEndQueued && !localEnded) }

    /// The peer initiated the stream.
    func isRemote(for role: H2Role) -> Bool { id.isClientInitiated == (role == .server) }
}

/// The data of one sendData call, with how much of it is already in frames.
struct H2QueuedChunk: Sendable {
    var bytes: [UInt8]
    var sent = 0
    var token: H2WriteToken?
    var remaining: Int { bytes.count - sent }
}
