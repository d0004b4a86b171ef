// The `chunk` builders digest the bytes they carry (through `TransferChunkDigest`); the rest of the message's code needs no hashing and is fuzzed
// on its own (`scripts/fuzz transfer-message`).
extension TransferMessage {
    /// A `chunk` message's bytes, built straight from a slice (one copy) that starts at a
    /// leaf boundary; its digest is computed from `bytes`, with leaf digest `algorithm`.
    public static func chunk(offset: UInt64, bytes: ArraySlice<UInt8>, using algorithm: TransferLeafDigest = .standard) -> [UInt8] {
        chunk(offset: offset, count: bytes.count, using: algorithm) { buffer in
            bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
            return bytes.count
        }.message
    }

    /// A `chunk` message of up to `count` bytes whose bytes `fill` writes straight into
    /// it (returning how many it wrote); its digest is computed from those bytes (the
    /// chunk must start at a leaf boundary), with leaf digest `algorithm`. Returns the
    /// message and the chunk's leaf digests.
    public static func chunk(
        offset: UInt64, count: Int, using algorithm: TransferLeafDigest = .standard, fill: (UnsafeMutableRawBufferPointer) throws -> Int
    ) rethrows -> (message: [UInt8], leafDigests: [UInt8]) {
        var leaves: [UInt8] = []
        let message = try [UInt8](unsafeUninitializedCapacity: chunkHeaderSize + count) { buffer, initialized in
            buffer[0] = 3
            for index in 0..<8 { buffer[1 + index] = UInt8(truncatingIfNeeded: offset >> UInt64(56 - 8 * index)) }
            let payload = UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[chunkHeaderSize..<(chunkHeaderSize + count)]))
            let filled = min(max(try fill(payload), 0), count)
            leaves = TransferChunkDigest.leafDigests(of: UnsafeRawBufferPointer(rebasing: payload[0..<filled]), using: algorithm)
            let digest = TransferChunkDigest.digest(ofLeafDigests: leaves[...])
            for index in 0..<TransferDigest.byteCount { buffer[9 + index] = digest[index] }
            initialized = chunkHeaderSize + filled
        }
        return (message, leaves)
    }
}
