// The leaf digests' code, apart from the type (which the message fuzzer compiles
// without the hashing libraries: `scripts/fuzz transfer-message`).
import CSwitchyardXXHash
import Crypto

extension TransferLeafDigest {
    /// Appends the digest of `leaf` (``byteCount`` bytes) to `out`.
    func append(digestOf leaf: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        switch self {
        case .sha256:
            out += SHA256.hash(data: leaf)
        case .xxh3:
            let start = out.count
            out += repeatElement(0, count: Self.byteCount)
            out.withUnsafeMutableBufferPointer { buffer in
                csy_xxh3_128(leaf.baseAddress, leaf.count, buffer.baseAddress! + start)
            }
        }
    }
}
