/// Why a call of ``H2ConnectionStateMachine`` that sends on a stream failed. Nothing was
/// queued and no state changed when it is thrown.
package struct H2StreamError: Error, Sendable, Hashable, CustomStringConvertible {
    package var code: Code
    /// What was wrong, naming the values, for people.
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code): \(message)" }

    /// The cause: a struct over a private enum, so causes can be added without breaking a
    /// `switch`.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: UInt8, Sendable, Hashable {
            case unknownStream, streamEnded, streamLimitReached, streamIDsExhausted, goingAway
            case headerListTooLarge, connectionClosed, notAllowed
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// No such stream: never opened, or already closed or reset.
        package static let unknownStream = Code(.unknownStream)
        /// This side already ended the stream (END_STREAM sent or queued).
        package static let streamEnded = Code(.streamEnded)
        /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS is reached: wait for a stream to close
        /// or for ``H2Event/remoteSettingsChanged(_:)``.
        package static let streamLimitReached = Code(.streamLimitReached)
        /// Every client stream identifier (below 2^31) is used: a new connection is needed.
        package static let streamIDsExhausted = Code(.streamIDsExhausted)
        /// A GOAWAY was sent or received: no new stream on this connection.
        package static let goingAway = Code(.goingAway)
        /// The header list is larger than the peer's SETTINGS_MAX_HEADER_LIST_SIZE.
        package static let headerListTooLarge = Code(.headerListTooLarge)
        /// The connection ended (``H2ConnectionStateMachine/abort(_:message:)`` or a
        /// connection error).
        package static let connectionClosed = Code(.connectionClosed)
        /// Not allowed in this role or at this point: a server opening a stream, data before
        /// a response's headers, trailers without END_STREAM.
        package static let notAllowed = Code(.notAllowed)

        package var description: String {
            switch value {
            case .unknownStream: "unknown stream"
            case .streamEnded: "stream ended"
            case .streamLimitReached: "stream limit reached"
            case .streamIDsExhausted: "stream ids exhausted"
            case .goingAway: "going away"
            case .headerListTooLarge: "header list too large"
            case .connectionClosed: "connection closed"
            case .notAllowed: "not allowed"
            }
        }
    }
}
