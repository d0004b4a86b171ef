import Switchyard
public import SwitchyardCalls

/// An app's client of its notes service: each note is one call on the channel, and the
/// server's reply (it echoes the note) acknowledges it.
///
/// What it does about the network is what an app must: a call that the network took away
/// (it ended `unavailable`: the connectivity changed, the path stalled, the connection
/// broke) is made again, on the channel's next connection, which the channel makes
/// afresh over the path of the moment, up to ``attempts`` times in all. A call refused
/// because the app is suspended (`unavailable`, reason `suspended`: the channel is
/// registered with the app's `Lifecycle`) is not made again: the app sends the note
/// after it resumed. Any other error is the caller's.
public struct NoteSync: Sendable {
    /// The channel to the notes service.
    public let channel: CallChannel
    /// How many calls a note may take, the first included.
    public let attempts: Int
    /// How long one call may take.
    public let timeout: Duration

    public init(channel: CallChannel, attempts: Int = 3, timeout: Duration = .seconds(10)) {
        self.channel = channel
        self.attempts = attempts
        self.timeout = timeout
    }

    /// Sends `note` and returns the server's acknowledgement, with how many calls it took.
    /// - Throws: the last call's `TransportError` when every attempt failed, or the first
    ///   error that is not `unavailable`, or `unavailable`/`suspended`.
    public func send(_ note: String) async throws -> (acknowledgement: String, calls: Int) {
        var attempt = 1
        while true {
            do {
                let reply = try await channel.withCall(options: CallConfiguration(timeout: timeout)) { call in
                    try await call.write(Array(note.utf8))
                    try await call.finishSending()
                    var replies = call.messages.makeAsyncIterator()
                    return try await replies.next()
                }
                guard let reply else {
                    throw TransportError(code: .unavailable, reason: .closed, message: "the server ended the call without acknowledging '\(note)'")
                }
                return (String(decoding: reply, as: UTF8.self), attempt)
            } catch let error as TransportError where error.code == .unavailable && error.reason != .suspended && attempt < attempts {
                attempt += 1
            }
        }
    }
}
