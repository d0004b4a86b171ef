extension CallConfiguration {
    /// Checks the options before a call or a call server uses them: ``CallChannel/startCall(method:metadata:options:handler:)``,
    /// ``CallChannel/withCall(method:metadata:options:_:)`` and every `CallServer.start` call it first, so a
    /// size from a flag or a file that is out of range fails with its value instead of
    /// trapping in the frame decoder.
    /// - Throws: `invalidArgument`, reason `invalid option`: a negative
    ///   ``maximumMessageSize``, or one over 4 GiB (a frame's length field is 32 bits);
    ///   a ``timeout`` that is not positive; a ``maximumMetadataSize`` below 0 or over 4 GiB.
    public func validate() throws(TransportError) {
        if let timeout, timeout <= .zero {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid call timeout \(timeout) (it must be positive; nil for no deadline)")
        }
        guard (0...Int(UInt32.max)).contains(maximumMessageSize) else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid maximumMessageSize \(maximumMessageSize) (0...\(UInt32.max) bytes: a frame's length is 32 bits)")
        }
        guard (0...Int(UInt32.max)).contains(maximumMetadataSize) else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid maximumMetadataSize \(maximumMetadataSize) (0...\(UInt32.max) bytes: a frame's length is 32 bits)")
        }
    }
}
