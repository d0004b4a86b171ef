import Switchyard
import SwitchyardCalls

/// What one echo call gave: the connection's local address, the messages echoed, and
/// the call's status.
struct EchoCallResult: Sendable {
    let local: Endpoint
    let replies: [[UInt8]]
    let status: CallStatus
}

extension ConformanceContext {
    /// Runs one call on `channel` that sends `message`, finishes sending and reads every
    /// echo until the call ends: how scenarios check that a channel works again (after a
    /// reset, a resume, ...) over a new connection.
    func echoCall(on channel: CallChannel, _ message: [UInt8], step: String) async throws -> EchoCallResult {
        let progress = WaitProgress("no call started yet")
        do {
            return try await within(seconds: 20, step, progress: progress) {
                try await channel.withCall { call -> EchoCallResult in
                    let local = call.call.connection.localAddress
                    progress.advance("the call started from \(local), nothing sent yet")
                    try await call.write(message)
                    try await call.finishSending()
                    progress.advance("the call sent its \(message.count)-byte message and its end, no reply yet")
                    var replies: [[UInt8]] = []
                    for try await reply in call.messages {
                        replies.append(reply)
                        progress.advance("the call had \(replies.count) replies, no status yet")
                    }
                    return EchoCallResult(local: local, replies: replies, status: await call.status())
                }
            }
        } catch let error as TransportError {
            throw failure("\(step) failed: \(error)")
        }
    }
}
