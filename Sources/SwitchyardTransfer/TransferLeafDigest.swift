/// How each 64 KiB leaf of a transfer is hashed (``TransferChunkDigest``): the sender
/// names it in its `offer`, the receiver stores it with its record and a sender's resume
/// state keeps it.
///
/// Every leaf digest takes 32 bytes, whatever the algorithm: XXH3-128's 16 bytes are
/// followed by 16 zero bytes. So the digests stored beside a file, and the chunk and
/// transfer digests made of them (SHA-256 of the leaf digests, for either), have one
/// layout.
///
/// XXH3-128 (the default) catches what the leaf digest is for: a chunk damaged on its
/// way or in storage, a torn write, a source that changed between two sends. It costs
/// about a tenth of SHA-256's CPU (0.06 s against 0.54 s per GiB on one core of the
/// machine `Benchmarks/leaf-digests` last ran on), and a transfer is hashed at both ends.
/// It is no defence against someone who crafts bytes to collide: where the storage or
/// the sender's source may be tampered with, choose ``sha256``. TLS protects the bytes
/// on the wire either way.
public enum TransferLeafDigest: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// SHA-256 of each leaf (the only leaf digest of protocol version 2).
    case sha256 = 1
    /// XXH3-128 (seed 0, canonical big-endian form, as `xxh128sum` prints it) of each
    /// leaf, then 16 zero bytes.
    case xxh3 = 2

    /// Bytes per leaf digest, for any algorithm.
    public static let byteCount = 32

    /// The leaf digest of a send that names none, and of every API that takes one:
    /// ``xxh3``.
    public static let standard = TransferLeafDigest.xxh3

    /// Its name in resume states, records and the tools' flags: `sha256` or `xxh3-128`.
    public var description: String {
        switch self {
        case .sha256: "sha256"
        case .xxh3: "xxh3-128"
        }
    }

    /// The algorithm named `name` (``description``), or nil.
    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = found
    }
}
