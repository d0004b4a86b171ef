/// A stream identifier (RFC 9113 section 5.1.1): 31 bits; 0 is the connection itself.
/// Streams a client opens are odd, streams a server opens (pushes, which gRPC never
/// uses) are even.
package struct H2StreamID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The identifier, below 2^31.
    package let rawValue: UInt32

    /// The connection: frames that are about the connection as a whole (SETTINGS, PING,
    /// GOAWAY, a connection-level WINDOW_UPDATE).
    package static let connection = H2StreamID(0)
    /// The largest identifier a stream may have.
    package static let maximum = H2StreamID(0x7fff_ffff)

    /// An identifier; the reserved high bit, if set, is dropped (section 4.1: "MUST be
    /// ignored when receiving").
    package init(_ rawValue: UInt32) { self.rawValue = rawValue & 0x7fff_ffff }

    package var isConnection: Bool { rawValue == 0 }
    /// Odd: a stream the client opened.
    package var isClientInitiated: Bool { rawValue & 1 == 1 }

    package static func < (lhs: H2StreamID, rhs: H2StreamID) -> Bool { lhs.rawValue < rhs.rawValue }
    package var description: String { "stream \(rawValue)" }
}
