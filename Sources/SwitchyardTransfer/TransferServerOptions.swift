import Switchyard

/// Settings of a ``TransferServer``.
public struct TransferServerOptions: Sendable {
    /// Bytes written between two syncs and acknowledgements, at most (default 1 MiB); a
    /// sender whose half window is smaller gets its acknowledgements more often.
    public var ackInterval: Int
    /// The largest chunk accepted, in bytes (default 1 MiB); a larger message ends the
    /// call with `resourceExhausted`, reason `frame too large`.
    public var maximumChunkSize: Int

    public init(ackInterval: Int = 1 << 20, maximumChunkSize: Int = 1 << 20) {
        precondition(
            ackInterval > 0 && maximumChunkSize > 0,
            "TransferServerOptions: ackInterval \(ackInterval) and maximumChunkSize \(maximumChunkSize) must be > 0 (a programming error)")
        self.ackInterval = ackInterval
        self.maximumChunkSize = maximumChunkSize
    }

    /// The calls' options: flow control on, messages up to a chunk plus its header.
    var callOptions: CallConfiguration {
        CallConfiguration(enableFlowControl: true, maximumMessageSize: maximumChunkSize + 64)
    }
}
