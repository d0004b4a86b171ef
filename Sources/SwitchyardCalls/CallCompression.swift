/// A compression algorithm for a call's messages on gRPC's wire (gRPC's
/// `doc/compression.md`): ``none`` or ``gzip`` (RFC 1952, through the system zlib).
///
/// A client compresses its requests with ``CallConfiguration/requestCompression`` and
/// says which algorithms it accepts for responses with
/// ``CallConfiguration/acceptedResponseCompression``; a server compresses responses
/// with the first of ``CallServerConfiguration/responseCompression`` that the client
/// listed in its `grpc-accept-encoding`. Either side reads gzip messages whatever it
/// configured. Each message is compressed on its own; one that would not get smaller
/// (a short message: gzip adds at least 18 bytes) is sent as it is, with the
/// compressed flag 0, which gRPC allows message by message.
public struct CallCompression: Sendable, Hashable, CustomStringConvertible {
    package let encoding: GRPCEncoding

    private init(_ encoding: GRPCEncoding) { self.encoding = encoding }

    /// No compression (gRPC's `identity`).
    public static let none = CallCompression(.identity)
    /// gzip (gRPC's `gzip`).
    public static let gzip = CallCompression(.gzip)

    /// The algorithm's name on gRPC's wire (`identity`, `gzip`).
    public var name: String { encoding.name }

    public var description: String { encoding.name }
}
