package import Switchyard

/// Messages from a call's DATA payloads: takes the payloads in whatever pieces they
/// arrive (DATA frame boundaries have nothing to do with message boundaries) and gives
/// back whole messages, decompressed.
///
/// Bounded: a message whose prefix announces more than ``maximumMessageSize`` bytes
/// fails as soon as its prefix is read, without waiting for (or keeping) the rest, and
/// a compressed one fails as soon as it inflates past the maximum. (What is buffered
/// before ``next()`` runs is bounded by the stream's HTTP/2 window.) Each error ends the call (the
/// deframer gives nothing after it):
/// - a length over the maximum, or a compressed message inflating past it:
///   `resourceExhausted`, reason `frame too large` (gRPC's code for a message too large);
/// - the compressed flag set on a call without a `grpc-encoding` other than `identity`:
///   `internal`, reason `protocol violation` (`doc/compression.md`);
/// - a flag byte other than 0 or 1, a compressed message that does not decompress:
///   `internal`, reason `protocol violation`;
/// - the stream ending inside a message (``finish()``): `internal`, reason
///   `truncated frame`.
package struct GRPCMessageDeframer {
    /// The largest message accepted, after decompression.
    package let maximumMessageSize: Int
    /// The call's inbound decompressor; nil when its encoding is `identity`.
    private let decompressor: GRPCGzipDecompressor?
    /// Bytes received and not yet returned, from `readIndex`.
    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var failure: TransportError?

    /// A deframer for messages of at most `maximumMessageSize` bytes, decompressing
    /// with `decompressor` (nil: the call's `grpc-encoding` is `identity` or absent).
    package init(maximumMessageSize: Int, decompressor: GRPCGzipDecompressor? = nil) {
        precondition(maximumMessageSize >= 0, "GRPCMessageDeframer(maximumMessageSize:) was given \(maximumMessageSize): a size is 0 or more (a programming error)")
        self.maximumMessageSize = maximumMessageSize
        self.decompressor = decompressor
    }

    /// Bytes received and not yet returned as messages.
    package var bufferedBytes: Int { buffer.count - readIndex }

    /// Adds a DATA payload. After an error they are dropped: the call is dead.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, !bytes.isEmpty else { return }
        if readIndex > 0, readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex >= 64 * 1024, readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Adds a DATA payload.
    package mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next whole message, or nil until more bytes come.
    /// - Throws: the errors listed on the type; the same error again on every later call.
    package mutating func next() throws(TransportError) -> [UInt8]? {
        if let failure { throw failure }
        guard buffer.count - readIndex >= GRPCMessageFramer.prefixSize else { return nil }
        let flag = buffer[readIndex]
        let length =
            Int(buffer[readIndex + 1]) << 24 | Int(buffer[readIndex + 2]) << 16 | Int(buffer[readIndex + 3]) << 8
            | Int(buffer[readIndex + 4])
        if flag > 1 { try fail(.internal, .protocolViolation, "a message's compressed flag is \(flag); it is 0 or 1") }
        if flag == 1, decompressor == nil {
            try fail(
                .internal, .protocolViolation,
                "a message has the compressed flag set, but the call's grpc-encoding is identity (or absent)")
        }
        if length > maximumMessageSize {
            try fail(
                .resourceExhausted, .frameTooLarge,
                "a message of \(length) bytes is over the maximum message size of \(maximumMessageSize) bytes")
        }
        let start = readIndex + GRPCMessageFramer.prefixSize
        guard buffer.count - start >= length else { return nil }
        readIndex = start + length
        if flag == 1, let decompressor {
            let maximum = maximumMessageSize
            let result = buffer.withUnsafeBytes { all in
                Result { () throws(TransportError) in
                    try decompressor.decompress(UnsafeRawBufferPointer(rebasing: all[start..<(start + length)]), maximumSize: maximum)
                }
            }
            if case .failure(let error) = result { failure = error }
            return try result.get()
        }
        return Array(buffer[start..<(start + length)])
    }

    /// Checks that the stream ended between messages (call it at the end of the stream,
    /// after ``next()`` has returned every message).
    /// - Throws: `internal`, reason `truncated frame`: bytes of an unfinished message
    ///   are left. Or the error that ended the call.
    package func finish() throws(TransportError) {
        if let failure { throw failure }
        if bufferedBytes > 0 {
            throw TransportError(
                code: .internal, reason: .truncatedFrame,
                message: "the stream ended inside a message (\(bufferedBytes) bytes of it arrived)")
        }
    }

    private mutating func fail(_ code: TransportError.Code, _ reason: TransportError.Reason, _ message: String) throws(TransportError) -> Never {
        let error = TransportError(code: code, reason: reason, message: message)
        failure = error
        buffer = []
        readIndex = 0
        throw error
    }
}
