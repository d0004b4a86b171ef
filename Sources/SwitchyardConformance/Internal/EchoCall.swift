import Switchyard

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
        try await self.step(step, seconds: 20) {
            try await channel.withCall { call -> EchoCallResult in
                let local = call.call.connection.localAddress
                try await call.write(message)
                try await call.finishSending()
                var replies: [[UInt8]] = []
                for try await reply in call.messages { replies.append(reply) }
                return EchoCallResult(local: local, replies: replies, status: await call.status())
            }
        }
    }
}
