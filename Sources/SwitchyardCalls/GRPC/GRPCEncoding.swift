/// A message encoding (gRPC's "Content-Coding", the value of `grpc-encoding` and an
/// item of `grpc-accept-encoding`) that Switchyard speaks: `identity` (none) and
/// `gzip` (RFC 1952, through the system zlib). Names are compared as gRPC writes them,
/// lower-case.
package struct GRPCEncoding: Sendable, Hashable, CustomStringConvertible {
    /// The name on the wire.
    package let name: String

    private init(_ name: String) { self.name = name }

    /// No compression: the compressed flag is never set.
    package static let identity = GRPCEncoding("identity")
    /// gzip.
    package static let gzip = GRPCEncoding("gzip")

    /// Every encoding Switchyard speaks, in its order of preference.
    package static let supported: [GRPCEncoding] = [.gzip, .identity]

    /// The supported encoding named `name`, or nil (an encoding this end cannot read).
    package init?(name: some Collection<UInt8>) {
        guard let encoding = Self.supported.first(where: { $0.name.utf8.elementsEqual(name) }) else { return nil }
        self = encoding
    }

    package var description: String { name }

    /// A `grpc-accept-encoding` value listing `encodings`: names joined with `,`.
    package static func acceptEncodingValue(_ encodings: [GRPCEncoding]) -> [UInt8] {
        Array(encodings.map(\.name).joined(separator: ",").utf8)
    }

    /// The names a peer's `grpc-accept-encoding` fields list, in order: each value
    /// split at `,`, spaces trimmed, empty items left out.
    package static func names(inAcceptEncoding values: [[UInt8]]) -> [[UInt8]] {
        values.flatMap { value in
            value.split(separator: 0x2C).compactMap { item -> [UInt8]? in
                let trimmed = Array(item.drop { $0 == 0x20 }.reversed().drop { $0 == 0x20 }.reversed())
                return trimmed.isEmpty ? nil : trimmed
            }
        }
    }
}
