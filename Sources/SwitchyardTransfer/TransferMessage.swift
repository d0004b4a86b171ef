public import Switchyard

/// One message of the transfer protocol: each is one message of a `Call` (so the call's
/// 5-byte frame carries its length), and its first byte is its kind.
///
/// ## The protocol (version 1)
///
/// The sender opens a call (flow control on at both ends) and speaks first:
///
/// 1. sender → `offer`: which transfer (its id), the whole source's size and SHA-256,
///    and its window (the most bytes it keeps sent and not acknowledged).
/// 2. receiver → `resume`: the offset it has durably written for that id (0 if the id is
///    new; the size if the file is complete already, and the sender goes on to `end`).
///    A call still open for that id (left over from a broken connection the receiver
///    has not noticed yet) is ended first. Or the receiver ends the call with
///    an error status and no `resume`: `failedPrecondition`, reason `source changed`
///    (the id is known with another size or hash: never spliced),
///    `invalidArgument` (a malformed id), `unimplemented` (another protocol version).
/// 3. sender → `chunk`s: offset and bytes, the first at the `resume` offset, each
///    following the last with no gap or overlap.
/// 4. receiver → `ack`s: the offset up to which the bytes are durable (written and
///    fsynced), cumulative. A sync starts whenever the bytes written since the last one
///    started reach the smaller of its own ack interval and half the sender's window, and
///    runs while the receiver goes on receiving; its `ack` follows when it is done
///    (`TransferAcknowledger`). The sender keeps
///    at most one window of bytes sent and not acknowledged (at least one chunk), and
///    sends chunks of at most half a window, so it never waits for an `ack` that the
///    receiver is not going to send.
/// 5. sender → `end`, once every byte was sent.
/// 6. receiver: syncs, checks the SHA-256 of the whole file and answers `done` (size
///    and SHA-256, the ones it checked) then ends the call with status OK; or ends it with
///    `aborted`, reason `integrity mismatch` (it then discards the partial file).
///    The call ends with the receiver's status; the sender closes its end then.
///
/// A broken call (`unavailable`) leaves the receiver's durable offset where the last
/// sync put it; the sender opens a new call and starts again at step 1, and the
/// receiver's `resume` says from where. A byte already acknowledged is never sent again
/// (unless the receiver lost it and answers an earlier offset).
///
/// ## Wire format
///
/// Integers are unsigned, big-endian. Every message starts with its kind (1 byte).
///
/// | kind | name | fields after the kind |
/// |---|---|---|
/// | 1 | `offer` | version (1 byte, 1), size (8), SHA-256 (32), window (4), id length (2), id (UTF-8) |
/// | 2 | `resume` | offset (8) |
/// | 3 | `chunk` | offset (8), bytes (the rest of the message) |
/// | 4 | `ack` | durable offset (8) |
/// | 5 | `end` | nothing |
/// | 6 | `done` | size (8), SHA-256 (32) |
///
/// A message that is too short, of an unknown kind, or out of turn ends the call with
/// `internal`, reason `protocol violation`.
public enum TransferMessage: Sendable, Hashable {
    case offer(version: UInt8, id: String, size: UInt64, sha256: [UInt8], window: UInt32)
    case resume(offset: UInt64)
    case chunk(offset: UInt64, bytes: [UInt8])
    case ack(offset: UInt64)
    case end
    case done(size: UInt64, sha256: [UInt8])

    /// The protocol version this module speaks.
    public static let version: UInt8 = 1
    /// The longest id, in UTF-8 bytes.
    public static let maximumIDLength = 255

    /// The message's bytes.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .offer(let version, let id, let size, let sha256, let window):
            let idBytes = Array(id.utf8)
            out.reserveCapacity(48 + idBytes.count)
            out.append(1)
            out.append(version)
            Self.append(size, to: &out)
            out += sha256
            for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: window >> UInt32(shift))) }
            out.append(UInt8(truncatingIfNeeded: idBytes.count >> 8))
            out.append(UInt8(truncatingIfNeeded: idBytes.count))
            out += idBytes
        case .resume(let offset):
            out.append(2)
            Self.append(offset, to: &out)
        case .chunk(let offset, let bytes):
            return Self.chunk(offset: offset, bytes: bytes[...])
        case .ack(let offset):
            out.append(4)
            Self.append(offset, to: &out)
        case .end:
            out.append(5)
        case .done(let size, let sha256):
            out.append(6)
            Self.append(size, to: &out)
            out += sha256
        }
        return out
    }

    /// A `chunk` message's bytes, built straight from a slice (one copy).
    public static func chunk(offset: UInt64, bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(9 + bytes.count)
        out.append(3)
        append(offset, to: &out)
        out += bytes
        return out
    }

    /// A `chunk` message of up to `count` bytes whose bytes `fill` writes straight into
    /// it (returning how many it wrote).
    public static func chunk(offset: UInt64, count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: 9 + count) { buffer, initialized in
            buffer[0] = 3
            for index in 0..<8 { buffer[1 + index] = UInt8(truncatingIfNeeded: offset >> UInt64(56 - 8 * index)) }
            initialized = 9
            let filled = try fill(UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[9..<(9 + count)])))
            initialized = 9 + min(max(filled, 0), count)
        }
    }

    /// A `chunk` message's offset and bytes without copying them; nil for another kind.
    /// - Throws: `internal`, reason `protocol violation`, for a chunk too short.
    public static func chunk(in message: [UInt8]) throws(TransportError) -> (offset: UInt64, bytes: ArraySlice<UInt8>)? {
        guard message.first == 3 else { return nil }
        guard message.count >= 9 else {
            throw TransportError(code: .internal, reason: .protocolViolation, message: "malformed transfer message: a chunk of \(message.count) bytes")
        }
        return (readUInt64(message, at: 1), message[9...])
    }

    /// Decodes a message.
    /// - Throws: `internal`, reason `protocol violation`, for a short message, an
    ///   unknown kind, or an id that is not UTF-8.
    public init(decoding message: [UInt8]) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .internal, reason: .protocolViolation, message: "malformed transfer message: \(why)")
        }
        guard let kind = message.first else { throw bad("empty") }
        func need(_ count: Int) throws(TransportError) {
            guard message.count >= count else { throw bad("kind \(kind) needs \(count) bytes, got \(message.count)") }
        }
        switch kind {
        case 1:
            try need(48)
            let window = message[42..<46].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let idLength = Int(message[46]) << 8 | Int(message[47])
            try need(48 + idLength)
            guard let id = String(validating: message[48..<(48 + idLength)], as: UTF8.self) else { throw bad("the id is not UTF-8") }
            self = .offer(
                version: message[1], id: id, size: Self.readUInt64(message, at: 2), sha256: Array(message[10..<42]),
                window: window)
        case 2:
            try need(9)
            self = .resume(offset: Self.readUInt64(message, at: 1))
        case 3:
            try need(9)
            self = .chunk(offset: Self.readUInt64(message, at: 1), bytes: Array(message[9...]))
        case 4:
            try need(9)
            self = .ack(offset: Self.readUInt64(message, at: 1))
        case 5:
            self = .end
        case 6:
            try need(41)
            self = .done(size: Self.readUInt64(message, at: 1), sha256: Array(message[9..<41]))
        default:
            throw bad("unknown kind \(kind)")
        }
    }

    private static func append(_ value: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    private static func readUInt64(_ bytes: [UInt8], at index: Int) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes[index..<(index + 8)] { value = value << 8 | UInt64(byte) }
        return value
    }
}

extension TransportError.Reason {
    /// A transfer's id is known to the receiver with another size or SHA-256, or the
    /// sender's source changed since its resume state was saved: resuming would splice
    /// two different sources.
    public static let sourceChanged = TransportError.Reason("source changed")
    /// The received file's SHA-256 is not the one the sender offered.
    public static let integrityMismatch = TransportError.Reason("integrity mismatch")
    /// The sender gave up reconnecting (its tries or its reconnect timeout ran out).
    public static let resumeImpossible = TransportError.Reason("resume impossible")
}
