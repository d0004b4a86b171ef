/// gRPC's Length-Prefixed-Message (PROTOCOL-HTTP2): a compressed flag (one byte, 0 or
/// 1), the message's length (4 bytes, big-endian), then the message, the bytes of a
/// call's DATA frames.
package enum GRPCMessageFramer {
    /// The prefix's size.
    package static let prefixSize = 5

    /// Runs `body` with the prefix of a message of `count` bytes: for a write that
    /// gathers the prefix and the caller's own message bytes, copying neither.
    package static func withPrefix<R>(count: Int, compressed: Bool, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        // Programmer misuse only: received messages never come here, and one over 4 GiB
        // is over any peer's maximum message size.
        precondition(count >= 0 && count <= Int(UInt32.max), "a gRPC message is at most 4 GiB; this one has \(count) bytes (a programming error)")
        let prefix = (
            UInt8(compressed ? 1 : 0), UInt8(truncatingIfNeeded: count >> 24), UInt8(truncatingIfNeeded: count >> 16),
            UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count))
        return try withUnsafeBytes(of: prefix, body)
    }

    /// `message` framed, uncompressed: prefix and message in one array (one allocation,
    /// one copy of the message).
    package static func frame(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: prefixSize + message.count) { buffer, count in
            let output = UnsafeMutableRawBufferPointer(buffer)
            withPrefix(count: message.count, compressed: false) { output.copyMemory(from: $0) }
            if !message.isEmpty {
                UnsafeMutableRawBufferPointer(rebasing: output[prefixSize...]).copyMemory(from: message)
            }
            count = prefixSize + message.count
        }
    }

    /// `message` framed, uncompressed.
    package static func frame(_ message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { frame($0) }
    }

    /// `message` gzip-compressed and framed with the compressed flag: the compressor
    /// writes straight after the prefix in one array, so the message is read once and
    /// nothing is copied after compression.
    package static func frame(_ message: UnsafeRawBufferPointer, compressingWith compressor: GRPCGzipCompressor) -> [UInt8] {
        let bound = prefixSize + compressor.bound(message.count)
        return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            let output = UnsafeMutableRawBufferPointer(buffer)
            let written = compressor.compress(message, into: UnsafeMutableRawBufferPointer(rebasing: output[prefixSize...]))
            withPrefix(count: written, compressed: true) { output.copyMemory(from: $0) }
            count = prefixSize + written
        }
    }

    /// `message` gzip-compressed and framed.
    package static func frame(_ message: [UInt8], compressingWith compressor: GRPCGzipCompressor) -> [UInt8] {
        message.withUnsafeBytes { frame($0, compressingWith: compressor) }
    }
}
