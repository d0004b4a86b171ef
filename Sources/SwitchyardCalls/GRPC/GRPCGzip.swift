package import Switchyard
internal import CSwitchyardZlib

/// gzip for one call's messages (gRPC's `grpc-encoding: gzip`), on the system zlib.
///
/// Each message is a gzip stream of its own (the spec: "compression contexts are NOT
/// maintained over message boundaries"); the zlib stream is reset, not rebuilt, between
/// messages, so a call pays for zlib's state once. One instance belongs to one call and
/// is used from one thread at a time (not `Sendable`).
package final class GRPCGzipCompressor {
    /// zlib's state; pinned (zlib keeps a pointer back to it).
    private let stream: UnsafeMutablePointer<z_stream>

    /// A compressor at zlib's default level.
    package init() {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // windowBits 15 + 16: the gzip wrapper. Fails only without memory.
        let result = switchyard_deflate_init2(stream, Z_DEFAULT_COMPRESSION, 15 + 16, 8)
        precondition(result == Z_OK, "zlib's deflateInit2 failed (\(result)): out of memory")
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// The most bytes ``compress(_:into:)`` writes for `count` input bytes.
    package func bound(_ count: Int) -> Int {
        // After a finished stream zlib counts the gzip wrapper as written already (its
        // `wrap` is negated) and bounds 12 bytes short: reset first.
        deflateReset(stream)
        return Int(deflateBound(stream, uLong(count)))
    }

    /// Compresses `message` into `output` (at least ``bound(_:)`` bytes); returns the
    /// bytes written.
    package func compress(_ message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int {
        deflateReset(stream)
        stream.pointee.next_in = UnsafeMutablePointer(mutating: message.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(message.count)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        let result = deflate(stream, Z_FINISH)
        // With deflateBound's room, one Z_FINISH always ends the stream.
        precondition(result == Z_STREAM_END, "zlib's deflate did not finish within deflateBound (\(result))")
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        return output.count - Int(stream.pointee.avail_out)
    }

    /// `message` compressed, as a new array.
    package func compress(_ message: [UInt8]) -> [UInt8] {
        let bound = bound(message.count)
        return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            count = message.withUnsafeBytes { compress($0, into: UnsafeMutableRawBufferPointer(buffer)) }
        }
    }
}

/// gunzip for one call's messages, bounded: a message that inflates past the maximum
/// message size fails as soon as it passes it, without inflating further (a gzip bomb
/// costs at most the maximum). Each message is one gzip stream. Not `Sendable`, as
/// ``GRPCGzipCompressor``.
package final class GRPCGzipDecompressor {
    private let stream: UnsafeMutablePointer<z_stream>

    package init() {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // windowBits 15 + 16: a gzip wrapper only (not zlib's, not raw deflate).
        let result = switchyard_inflate_init2(stream, 15 + 16)
        precondition(result == Z_OK, "zlib's inflateInit2 failed (\(result)): out of memory")
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// The message `compressed` holds.
    /// - Throws: `resourceExhausted`, reason `frame too large`: it inflates past
    ///   `maximumSize` bytes. `internal`, reason `protocol violation`: it is not one
    ///   whole gzip stream (corrupt, truncated, or followed by more bytes).
    package func decompress(_ compressed: UnsafeRawBufferPointer, maximumSize: Int) throws(TransportError) -> [UInt8] {
        inflateReset(stream)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: compressed.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(compressed.count)
        // One byte over the maximum is room enough to see it passed.
        let cap = maximumSize + 1
        var output: [UInt8] = []
        var capacity = min(cap, max(4096, compressed.count * 4))
        var produced = 0
        while true {
            if produced == capacity {
                capacity = min(cap, capacity * 2)
            }
            if output.count < capacity { output.append(contentsOf: repeatElement(0, count: capacity - output.count)) }
            let result = output.withUnsafeMutableBytes { buffer -> Int32 in
                stream.pointee.next_out = buffer.baseAddress.map { ($0 + produced).assumingMemoryBound(to: Bytef.self) }
                stream.pointee.avail_out = uInt(capacity - produced)
                let result = inflate(stream, Z_NO_FLUSH)
                produced = capacity - Int(stream.pointee.avail_out)
                return result
            }
            if produced > maximumSize {
                throw TransportError(
                    code: .resourceExhausted, reason: .frameTooLarge,
                    message: "a gzip message inflates past the maximum message size of \(maximumSize) bytes")
            }
            switch result {
            case Z_STREAM_END:
                guard stream.pointee.avail_in == 0 else {
                    throw Self.corrupt("\(stream.pointee.avail_in) bytes follow the end of its gzip stream")
                }
                output.removeLast(output.count - produced)
                return output
            case Z_OK:
                continue
            case Z_BUF_ERROR where stream.pointee.avail_out > 0:
                throw Self.corrupt("its gzip stream is truncated")
            case Z_BUF_ERROR:
                continue
            default:
                let detail = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(result)"
                throw Self.corrupt("its gzip stream is corrupt (\(detail))")
            }
        }
    }

    /// The message `compressed` holds (see ``decompress(_:maximumSize:)``).
    package func decompress(_ compressed: [UInt8], maximumSize: Int) throws(TransportError) -> [UInt8] {
        try compressed.withUnsafeBytes { buffer in
            Result { () throws(TransportError) in try decompress(buffer, maximumSize: maximumSize) }
        }.get()
    }

    private static func corrupt(_ why: String) -> TransportError {
        TransportError(code: .internal, reason: .protocolViolation, message: "a compressed message cannot be decompressed: \(why)")
    }
}
