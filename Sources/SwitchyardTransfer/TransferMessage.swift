public import Switchyard

/// One message of the transfer protocol: each is one message of a `Call` (so the call's
/// 5-byte frame carries its length), and its first byte is its kind.
///
/// ## The protocol (version 3)
///
/// The sender opens a call (flow control on at both ends) and speaks first:
///
/// 1. sender → `offer`: which transfer (its id), the whole source's size, its window
///    (the most bytes it keeps sent and not acknowledged), and its leaf digest
///    (``TransferLeafDigest``). No digest of the source: the sender hashes it as it sends
///    it (``TransferChunkDigest``), not before.
/// 2. receiver → `resume`: the offset it has durably written for that id (0 if the id is
///    new; the size if the file is complete already, and the sender goes on to `end`),
///    and the transfer digest of the bytes below it. The sender checks that digest
///    against its own source's first bytes and ends the call with `failedPrecondition`,
///    reason `source changed`, if they differ (never spliced). A call still open for that
///    id (left over from a broken connection the receiver has not noticed yet) is ended
///    first. What the receiver kept with another leaf digest it starts over (offset 0).
///    Or the receiver ends the call with an error status and no `resume`:
///    `failedPrecondition`, reason `source changed` (the id is known with another size),
///    `invalidArgument` (a malformed id), `unimplemented` (another protocol version, or a
///    leaf digest it does not know).
/// 3. sender → `chunk`s: offset, digest (the SHA-256 of the chunk's leaf digests) and
///    bytes, the first at the `resume` offset, each following the last with no gap or
///    overlap, each starting at a multiple of ``TransferChunkDigest/leafSize``. The
///    receiver hashes each chunk (off the event loop) before it stores it; a chunk whose
///    bytes do not match its digest is not stored, and the receiver ends the call with
///    `unavailable`, reason `integrity mismatch`: the sender resumes from the durable
///    offset, so the chunk is sent again (at most one window is). After
///    ``TransferOptions/maximumAttempts`` such ends in a row with no acknowledgement in
///    between, the sender gives up with `aborted`, reason `integrity mismatch`.
/// 4. receiver → `ack`s: the offset up to which the bytes (and their leaf digests) are
///    durable (written and fsynced), cumulative. A sync starts whenever the bytes
///    written since the last one started reach the smaller of its own ack interval and
///    half the sender's window, and runs while the receiver goes on receiving; its `ack`
///    follows when it is done (`TransferAcknowledger`). The sender keeps
///    at most one window of bytes sent and not acknowledged (at least one chunk), and
///    sends chunks of at most half a window (but at least one leaf), so it never waits
///    for an `ack` that the receiver is not going to send.
/// 5. sender → `end`, once every byte was sent, with the transfer digest of the whole
///    source.
/// 6. receiver: syncs, compares the transfer digest of the leaf digests it stored (it
///    reads no byte back) with the sender's, and answers `done` (size and digest) then
///    ends the call with status OK; or ends it with `aborted`, reason
///    `integrity mismatch` (it then discards the partial file).
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
/// Digests are 32 bytes (``TransferChunkDigest``).
///
/// | kind | name | fields after the kind |
/// |---|---|---|
/// | 1 | `offer` | version (1 byte, 3), leaf digest (1: 1 SHA-256, 2 XXH3-128), size (8), window (4), id length (2), id (UTF-8) |
/// | 2 | `resume` | offset (8), digest of the bytes below it (32) |
/// | 3 | `chunk` | offset (8), digest (32), bytes (the rest of the message) |
/// | 4 | `ack` | durable offset (8) |
/// | 5 | `end` | digest of the whole source (32) |
/// | 6 | `done` | size (8), digest (32) |
///
/// A message that is too short, of an unknown kind, or out of turn ends the call with
/// `internal`, reason `protocol violation`.
public enum TransferMessage: Sendable, Hashable {
    case offer(version: UInt8, id: String, size: UInt64, window: UInt32, leafDigest: TransferLeafDigest)
    case resume(offset: UInt64, sha256: [UInt8])
    case chunk(offset: UInt64, sha256: [UInt8], bytes: [UInt8])
    case ack(offset: UInt64)
    case end(sha256: [UInt8])
    case done(size: UInt64, sha256: [UInt8])

    /// The protocol version this module speaks.
    public static let version: UInt8 = 3
    /// The longest id, in UTF-8 bytes.
    public static let maximumIDLength = 255

    /// The message's bytes.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .offer(let version, let id, let size, let window, let leafDigest):
            let idBytes = Array(id.utf8)
            out.reserveCapacity(17 + idBytes.count)
            out.append(1)
            out.append(version)
            out.append(leafDigest.rawValue)
            Self.append(size, to: &out)
            for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: window >> UInt32(shift))) }
            out.append(UInt8(truncatingIfNeeded: idBytes.count >> 8))
            out.append(UInt8(truncatingIfNeeded: idBytes.count))
            out += idBytes
        case .resume(let offset, let sha256):
            out.append(2)
            Self.append(offset, to: &out)
            out += sha256
        case .chunk(let offset, let sha256, let bytes):
            out.reserveCapacity(41 + bytes.count)
            out.append(3)
            Self.append(offset, to: &out)
            out += sha256
            out += bytes
        case .ack(let offset):
            out.append(4)
            Self.append(offset, to: &out)
        case .end(let sha256):
            out.append(5)
            out += sha256
        case .done(let size, let sha256):
            out.append(6)
            Self.append(size, to: &out)
            out += sha256
        }
        return out
    }

    /// The bytes before a `chunk` message's payload.
    public static let chunkHeaderSize = 41

    /// A `chunk` message's offset, digest and bytes without copying the bytes; nil for
    /// another kind.
    /// - Throws: `internal`, reason `protocol violation`, for a chunk too short.
    public static func chunk(in message: [UInt8]) throws(TransportError) -> (offset: UInt64, sha256: ArraySlice<UInt8>, bytes: ArraySlice<UInt8>)? {
        guard message.first == 3 else { return nil }
        guard message.count >= chunkHeaderSize else {
            throw TransportError(code: .internal, reason: .protocolViolation, message: "malformed transfer message: a chunk of \(message.count) bytes")
        }
        return (readUInt64(message, at: 1), message[9..<chunkHeaderSize], message[chunkHeaderSize...])
    }

    /// Decodes a message. An `offer` of another version decodes with only its version
    /// (empty id, size and window 0, leaf digest SHA-256), so a receiver can refuse it by
    /// version.
    /// - Throws: `internal`, reason `protocol violation`, for a short message, an
    ///   unknown kind, or an id that is not UTF-8; `unimplemented`, reason
    ///   `protocol violation`, for an offer of an unknown leaf digest.
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
            try need(2)
            guard message[1] == Self.version else {
                self = .offer(version: message[1], id: "", size: 0, window: 0, leafDigest: .sha256)
                return
            }
            try need(17)
            guard let leafDigest = TransferLeafDigest(rawValue: message[2]) else {
                throw TransportError(code: .unimplemented, reason: .protocolViolation, message: "transfer offer with leaf digest \(message[2]), which this receiver does not know")
            }
            let window = message[11..<15].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let idLength = Int(message[15]) << 8 | Int(message[16])
            try need(17 + idLength)
            guard let id = String(validating: message[17..<(17 + idLength)], as: UTF8.self) else { throw bad("the id is not UTF-8") }
            self = .offer(version: message[1], id: id, size: Self.readUInt64(message, at: 3), window: window, leafDigest: leafDigest)
        case 2:
            try need(41)
            self = .resume(offset: Self.readUInt64(message, at: 1), sha256: Array(message[9..<41]))
        case 3:
            try need(Self.chunkHeaderSize)
            self = .chunk(offset: Self.readUInt64(message, at: 1), sha256: Array(message[9..<41]), bytes: Array(message[41...]))
        case 4:
            try need(9)
            self = .ack(offset: Self.readUInt64(message, at: 1))
        case 5:
            try need(33)
            self = .end(sha256: Array(message[1..<33]))
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
    /// A transfer's id is known to the receiver with another size, or bytes it holds are
    /// not the sender's source's (their digest differs), or the sender's source changed
    /// since its resume state was saved: resuming would splice two different sources.
    public static let sourceChanged = TransportError.Reason("source changed")
    /// A received chunk's bytes do not match its digest (`unavailable`: the sender sends
    /// it again), or the received file's transfer digest is not the sender's
    /// (`aborted`).
    public static let integrityMismatch = TransportError.Reason("integrity mismatch")
    /// The sender gave up reconnecting (its tries or its reconnect timeout ran out).
    public static let resumeImpossible = TransportError.Reason("resume impossible")
}
