public import Switchyard

/// Messages on a byte stream: a 5-byte prefix (a flags byte, then the payload length as
/// a 32-bit big-endian integer), then the payload.
///
/// **Not a wire format any more.** Calls go over gRPC's wire (HTTP/2; see
/// `CallStreamConnection`). These frames remain the call engine's own language between
/// ``Call`` and its stream, for one reason: a message frame is byte for byte gRPC's
/// length-prefixed message, so messages pass between the engine and HTTP/2's DATA
/// without a copy or a re-encoding, and the engine's flow control, bounds and contracts,
/// tested for years of this project on a byte stream, run unchanged. The headers,
/// trailers and status frames are translated to and from HTTP/2 HEADERS at that seam.
/// The description of the byte-stream protocol below is what the engine speaks to its
/// stream.
///
/// The flags byte says what the frame carries. Any other value is a protocol error.
///
/// | flags | kind | payload | sent by |
/// |---|---|---|---|
/// | `0x00` | ``Kind/message`` | a user message | both ends |
/// | `0x01` | ``Kind/status`` | the ``CallStatus`` that ends the call | the server, last |
/// | `0x02` | ``Kind/headers`` | a method name and ``CallMetadata`` | the client, first; the server, before its first message (optional) |
/// | `0x03` | ``Kind/trailers`` | the server's trailing ``CallMetadata`` | the server, right before its status (optional) |
///
/// The metadata payloads are laid out in CallMetadata+Frame.swift: a headers payload is the
/// method name's length (2 bytes, big-endian) and its UTF-8 bytes, then the pairs; a
/// trailers payload is the pairs; each pair is the key's length (1 byte), the key
/// (ASCII), the value's length (4 bytes, big-endian) and the value. The server's headers
/// carry an empty method name.
///
/// A call on the wire, client to server: `headers`, then `message`s, then the end of
/// the stream (a half-close). Server to client: `headers` (optional), `message`s,
/// `trailers` (optional), `status`, then the end of the stream. A client whose call has
/// no method and no metadata still sends its (7-byte) headers frame, so the server makes
/// the call's handler at once. A server takes a stream whose first frame is a message
/// (or that ends first) as a call with no method and empty metadata: peers from before
/// the metadata frames, and raw test clients, keep working. Headers out of place (a
/// second one, or after a message), trailers from a client or not followed by the
/// status, are protocol violations.
///
/// CallMetadata frames are bounded by their own maximum (``CallConfiguration/maximumMetadataSize``,
/// 16 KiB by default), messages and status by ``CallConfiguration/maximumMessageSize``.
public enum Frame {
    /// The size of the prefix.
    public static let headerSize = 5
    /// The default largest payload a decoder accepts: 4 MiB.
    public static let defaultMaximumMessageSize = 4 * 1024 * 1024
    /// The default largest headers or trailers payload a decoder accepts: 16 KiB (what
    /// gRPC servers commonly allow for a header list).
    public static let defaultMaximumMetadataSize = 16 * 1024

    /// What a frame carries (its flags byte).
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt8
        private init(_ rawValue: UInt8) { self.rawValue = rawValue }
        /// A user message.
        public static let message = Kind(0x00)
        /// The status that ends a call (sent once, by the server).
        public static let status = Kind(0x01)
        /// A call's opening metadata: the client's method name and request metadata (its
        /// first frame), or the server's response metadata (before its first message).
        public static let headers = Kind(0x02)
        /// The server's trailing metadata (right before its status).
        public static let trailers = Kind(0x03)
        /// The known kind for a flags byte, or nil.
        public init?(flags: UInt8) {
            guard flags <= 0x03 else { return nil }
            self.init(flags)
        }
        /// Whether the frame carries metadata (bounded by the maximum metadata size).
        public var isMetadata: Bool { rawValue >= 0x02 }
        public var description: String {
            switch rawValue {
            case 0x00: "message"
            case 0x01: "status"
            case 0x02: "headers"
            case 0x03: "trailers"
            default: "flags \(rawValue)"
            }
        }
    }

    /// Runs `body` with the prefix of a frame of `kind` carrying `count` payload bytes.
    static func withHeader<R>(_ kind: Kind, count: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        // Programmer misuse only: the program sends its own messages; one over 4 GiB is
        // over any peer's maximum message size, and received frames never come here.
        precondition(count <= Int(UInt32.max), "a frame payload is at most 4 GiB; this one has \(count) bytes (a programming error)")
        let header = (
            kind.rawValue, UInt8(truncatingIfNeeded: count >> 24), UInt8(truncatingIfNeeded: count >> 16),
            UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count))
        return withUnsafeBytes(of: header, body)
    }

    /// The frame for `payload`: prefix and payload in one array (one allocation, one
    /// copy), ready for one write.
    public static func encode(_ kind: Kind, payload: some Collection<UInt8>) -> [UInt8] {
        let count = payload.count
        // Programmer misuse only, as in withHeader.
        precondition(count <= Int(UInt32.max), "a frame payload is at most 4 GiB; this one has \(count) bytes (a programming error)")
        var frame = [UInt8]()
        frame.reserveCapacity(headerSize + count)
        frame.append(kind.rawValue)
        frame.append(UInt8(truncatingIfNeeded: count >> 24))
        frame.append(UInt8(truncatingIfNeeded: count >> 16))
        frame.append(UInt8(truncatingIfNeeded: count >> 8))
        frame.append(UInt8(truncatingIfNeeded: count))
        frame.append(contentsOf: payload)
        return frame
    }
}

extension TransportError.Reason {
    /// A frame announced a payload over the maximum message size.
    public static let frameTooLarge = TransportError.Reason("frame too large")
    /// The stream ended inside a frame.
    public static let truncatedFrame = TransportError.Reason("truncated frame")
    /// A frame's flags byte is not a known kind.
    public static let unknownFrameFlags = TransportError.Reason("unknown frame flags")
}

/// Decodes frames from bytes as they arrive, holding at most one partial frame plus
/// what the last read brought.
///
/// A frame whose payload does not arrive in one append is assembled in place: once its
/// prefix has been checked and the first payload bytes are in, the payload array is
/// made, and what later appends bring goes straight into it, so each payload byte is
/// copied once (not into a buffer, then out of it). The array is reserved for the bytes
/// in hand plus `assemblyReserveAhead` (never more than the frame's length) and
/// doubles, up to the length, as more arrive: a prefix announcing 4 MiB followed by one
/// byte costs 64 KiB, not 4 MiB, so memory follows the bytes a peer actually sent.
///
/// Errors (each ends the stream; the connection must be closed):
/// - a length over ``maximumMessageSize``: `resourceExhausted`, reason `frame too large`,
///   raised as soon as the prefix arrives (the payload is never buffered); for a headers
///   or trailers frame, a length over ``maximumMetadataSize``: `resourceExhausted`,
///   reason `metadata too large`, the same way;
/// - an unknown flags byte: `internal`, reason `unknown frame flags`;
/// - end of stream inside a frame (``finish()``): `internal`, reason `truncated frame`.
public struct FrameDecoder: Sendable {
    /// The largest payload accepted.
    public let maximumMessageSize: Int
    /// The largest payload of a headers or trailers frame accepted.
    public let maximumMetadataSize: Int
    /// How far beyond the bytes in hand a payload being assembled is reserved (one read's
    /// worth: a 64 KiB message split over two reads is still one allocation).
    static let assemblyReserveAhead = 64 * 1024
    /// Received bytes not yet returned, from `readIndex`. While a payload is being
    /// assembled and still short, this is empty: every byte goes into ``payload``.
    private var buffer: [UInt8] = []
    private var readIndex = 0
    /// The payload being assembled, reserved at ``payloadLength`` (the frame's length,
    /// checked against the maximum first). Whole when `payload.count == payloadLength`:
    /// the frame then waits ahead of ``buffer``.
    private var payload: [UInt8] = []
    /// The payload last handed over from assembly, kept to assemble the next one in: once
    /// the receiver has let go of it, its pages are reused in place instead of a fresh
    /// array faulting in new ones (a 256 KiB message cost 64 page faults, a fifth of a
    /// transfer receiver's time). Dropped when the next assembly cannot use it, so the
    /// decoder never holds more than one payload's memory. A receiver that mutates a
    /// message in place before the next one starts pays one copy (the array is shared).
    private var recycled: [UInt8] = []
    /// The length of the payload being assembled; 0 when none is (a frame only starts
    /// assembling with payload bytes in and some missing, so its length is at least 2);
    /// -1 after a decoding error, so that ``pending`` tests one field for both.
    private var payloadLength = 0
    private var payloadKind = Frame.Kind.message
    /// The frame bytes held in ``payload`` (prefix included): kept so that
    /// ``bufferedBytes``, read on every message, is one load more than the buffer's.
    private var assembledBytes = 0
    /// The error that killed the stream, boxed: the decoder is copied and checked on
    /// every message, and a bare `TransportError?` (four strings) makes each copy and
    /// each check go through its value witnesses.
    private var failure: Failure?

    private final class Failure: Sendable {
        let error: TransportError
        init(_ error: TransportError) { self.error = error }
    }

    public init(maximumMessageSize: Int = Frame.defaultMaximumMessageSize, maximumMetadataSize: Int = Frame.defaultMaximumMetadataSize) {
        precondition(
            maximumMessageSize >= 0,
            "FrameDecoder(maximumMessageSize:) was given \(maximumMessageSize): a size is 0 or more (a programming error; check a configured CallConfiguration.maximumMessageSize first)")
        precondition(
            maximumMetadataSize >= 0,
            "FrameDecoder(maximumMetadataSize:) was given \(maximumMetadataSize): a size is 0 or more (a programming error; check a configured CallConfiguration.maximumMetadataSize first)")
        self.maximumMessageSize = maximumMessageSize
        self.maximumMetadataSize = maximumMetadataSize
    }

    /// The largest payload accepted in a frame of `kind`.
    @inline(__always)
    func maximumSize(of kind: Frame.Kind) -> Int {
        kind.isMetadata ? maximumMetadataSize : maximumMessageSize
    }

    /// Bytes received and not yet returned as frames.
    public var bufferedBytes: Int {
        @inline(__always) get { buffer.count - readIndex + assembledBytes }
    }

    /// Whether nothing is buffered (cheaper than `bufferedBytes == 0`).
    var isEmpty: Bool {
        @inline(__always) get { payloadLength == 0 && buffer.count == readIndex }
    }

    /// Adds received bytes. After a decoding error they are dropped: the stream is dead.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if failure != nil { return }
        if payloadLength != 0 {
            let taken = appendPayload(bytes)
            if taken == bytes.count { return }
            // The payload is whole: the rest waits behind it.
            appendToBuffer(UnsafeRawBufferPointer(rebasing: bytes[taken...]))
            return
        }
        // Nothing buffered but at most a prefix: a frame that starts here and does not
        // end here is assembled straight from `bytes`.
        if buffer.count - readIndex <= Frame.headerSize, startPayload(from: bytes) { return }
        // Otherwise the buffer holds a whole (or invalid) frame at its front, which
        // ``takePayload()`` or ``next()`` deals with first.
        appendToBuffer(bytes)
    }

    /// Adds to the payload being assembled as many of `bytes` as it still lacks, and
    /// returns how many that was: 0 when no payload is being assembled or it is whole.
    @inline(__always)
    mutating func appendPayload(_ bytes: UnsafeRawBufferPointer) -> Int {
        let missing = payloadLength - payload.count
        guard missing > 0 else { return 0 }
        let count = min(missing, bytes.count)
        reservePayload(adding: count)
        payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<count]))
        assembledBytes += count
        return count
    }

    /// The capacity of the payload being assembled (for tests of the reservation).
    var assemblyCapacity: Int { payload.capacity }

    /// Makes room in ``payload`` for `count` more bytes: at first the bytes in hand plus
    /// `assemblyReserveAhead`, then doubling; never beyond ``payloadLength``.
    @inline(__always)
    private mutating func reservePayload(adding count: Int) {
        let needed = payload.count + count
        guard needed > payload.capacity else { return }
        if payload.capacity == 0 && recycled.capacity > 0 {
            // Reuse the last payload's array if it fits this frame without going beyond
            // what the growth below could reach (the frame's length and a read ahead).
            // In place when the receiver let go of it; else a fresh array of that size.
            if recycled.capacity >= needed && recycled.capacity <= payloadLength + Self.assemblyReserveAhead {
                swap(&payload, &recycled)
                payload.removeAll(keepingCapacity: true)
                return
            }
            recycled = []
        }
        let wanted = payload.capacity == 0 ? needed + Self.assemblyReserveAhead : max(needed, payload.capacity * 2)
        payload.reserveCapacity(min(payloadLength, wanted))
    }

    private mutating func appendToBuffer(_ bytes: UnsafeRawBufferPointer) {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
            readIndex = 0
        } else if readIndex >= 64 * 1024 && readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Empties the buffer (keeping a read's worth of capacity).
    private mutating func clearBuffer() {
        buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
        readIndex = 0
    }

    /// The kind and payload length of a valid frame that starts with the prefix bytes
    /// `byte(0...4)` and is not whole in `available` bytes, or nil. The maximum is checked
    /// here, before anything is reserved: an oversized or unknown prefix is left in the
    /// buffer for ``next()`` to reject, as before.
    @inline(__always)
    private func partialFrame(available: Int, _ byte: (Int) -> UInt8) -> (kind: Frame.Kind, length: Int)? {
        guard available > Frame.headerSize, let kind = Frame.Kind(flags: byte(0)) else { return nil }
        let length = Int(byte(1)) << 24 | Int(byte(2)) << 16 | Int(byte(3)) << 8 | Int(byte(4))
        guard length <= maximumSize(of: kind), available < Frame.headerSize + length else { return nil }
        return (kind, length)
    }

    /// Starts assembling a payload when the few buffered bytes (at most a prefix) and
    /// `bytes` begin a valid frame with some, not all, of its payload: reserves the
    /// frame's length and copies the payload bytes from `bytes` (the only copy).
    private mutating func startPayload(from bytes: UnsafeRawBufferPointer) -> Bool {
        let held = buffer.count - readIndex
        let frame: (kind: Frame.Kind, length: Int)?
        if held == 0 {
            frame = partialFrame(available: bytes.count) { bytes[$0] }
        } else {
            frame = buffer.withUnsafeBytes { buffered in
                let start = readIndex
                return partialFrame(available: held + bytes.count) { $0 < held ? buffered[start + $0] : bytes[$0 - held] }
            }
        }
        guard let frame else { return false }
        payloadLength = frame.length
        payloadKind = frame.kind
        let first = UnsafeRawBufferPointer(rebasing: bytes[(Frame.headerSize - held)...])
        reservePayload(adding: first.count)
        payload.append(contentsOf: first)
        assembledBytes = Frame.headerSize + payload.count
        if held > 0 { clearBuffer() }
        return true
    }

    /// After a frame was taken: if the buffer now starts with a valid frame that has
    /// some, not all, of its payload, moves that payload into an array reserved at the
    /// frame's length, so what arrives next is appended to it directly.
    private mutating func startPayloadFromBuffer() {
        let held = buffer.count - readIndex
        let start = readIndex
        let frame = buffer.withUnsafeBytes { buffered in
            partialFrame(available: held) { buffered[start + $0] }
        }
        guard let frame else { return }
        payloadLength = frame.length
        payloadKind = frame.kind
        do {
            let tail = buffer[(start + Frame.headerSize)...]
            reservePayload(adding: tail.count)
            payload.append(contentsOf: tail)
        }
        assembledBytes = Frame.headerSize + payload.count
        clearBuffer()
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// What waits at the front of the buffer (see ``pending``).
    enum Pending: Equatable {
        /// No whole frame yet (or nothing at all).
        case none
        /// A whole message frame: ``takePayload()`` returns it.
        case message
        /// A whole status frame: ``takePayload()`` returns it.
        case status
        /// A whole headers frame: ``takePayload()`` returns it.
        case headers
        /// A whole trailers frame: ``takePayload()`` returns it.
        case trailers
        /// A bad prefix (unknown flags, too large) or an earlier error: ``next()`` throws.
        case invalid
    }

    /// What ``next()`` would return, found from the prefix alone (no copy, no decoding).
    var pending: Pending {
        @inline(__always) get {
            if payloadLength != 0 {
                if payloadLength < 0 { return .invalid }  // failed
                return payload.count < payloadLength ? .none : Self.pending(payloadKind)
            }
            guard buffer.count - readIndex >= Frame.headerSize else { return .none }
            return buffer.withUnsafeBytes { buffer in
                Self.pending(
                    in: UnsafeRawBufferPointer(rebasing: buffer[readIndex...]), maximumMessageSize: maximumMessageSize,
                    maximumMetadataSize: maximumMetadataSize)
            }
        }
    }

    /// The whole frame of a known `kind`, as ``pending`` reports it.
    @inline(__always)
    private static func pending(_ kind: Frame.Kind) -> Pending {
        switch kind.rawValue {
        case 0x00: .message
        case 0x01: .status
        case 0x02: .headers
        default: .trailers
        }
    }

    /// What waits at the front of `bytes`, read as the start of a frame. A message or
    /// status frame is checked against `maximumMessageSize` exactly as before the
    /// metadata frames; `maximumMetadataSize` is read only for a headers or trailers frame.
    @inline(__always)
    static func pending(
        in bytes: UnsafeRawBufferPointer, maximumMessageSize: Int, maximumMetadataSize: Int = Frame.defaultMaximumMetadataSize
    ) -> Pending {
        guard bytes.count >= Frame.headerSize else { return .none }
        let kind: Pending
        let maximum: Int
        switch bytes[0] {
        case 0x00: kind = .message; maximum = maximumMessageSize
        case 0x01: kind = .status; maximum = maximumMessageSize
        case 0x02: kind = .headers; maximum = maximumMetadataSize
        case 0x03: kind = .trailers; maximum = maximumMetadataSize
        default: return .invalid
        }
        let length = payloadLength(in: bytes)
        if length > maximum { return .invalid }
        return bytes.count >= Frame.headerSize + length ? kind : .none
    }

    /// The payload length a frame prefix at the front of `bytes` announces.
    @inline(__always)
    static func payloadLength(in bytes: UnsafeRawBufferPointer) -> Int {
        Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])
    }

    /// The payload of the whole frame at the front of `bytes`, and the frame's size.
    static func payload(in bytes: UnsafeRawBufferPointer) -> (payload: [UInt8], frameSize: Int) {
        let length = payloadLength(in: bytes)
        // Internal invariant: called only after `pending` found a whole frame here.
        precondition(Frame.headerSize + length <= bytes.count, "no whole frame (a bug in FrameDecoder)")
        return (Array(UnsafeRawBufferPointer(rebasing: bytes[Frame.headerSize..<(Frame.headerSize + length)])), Frame.headerSize + length)
    }

    /// Removes the whole, valid frame ``pending`` reported (any kind but `.invalid`) and
    /// returns its payload: the one copy a received message costs.
    mutating func takePayload() -> [UInt8] {
        if payloadLength != 0 {
            // Internal invariant: called only after `pending` found the payload whole.
            precondition(payload.count == payloadLength, "no whole frame (a bug in FrameDecoder)")
            var whole: [UInt8] = []
            swap(&whole, &payload)
            recycled = whole
            payloadLength = 0
            assembledBytes = 0
            if readIndex < buffer.count { startPayloadFromBuffer() }
            return whole
        }
        let (payload, size) = buffer.withUnsafeBytes { buffer in
            Self.payload(in: UnsafeRawBufferPointer(rebasing: buffer[readIndex...]))
        }
        readIndex += size
        if readIndex < buffer.count { startPayloadFromBuffer() }
        return payload
    }

    /// The next whole frame, or nil until more bytes arrive.
    public mutating func next() throws(TransportError) -> (kind: Frame.Kind, payload: [UInt8])? {
        if let failure { throw failure.error }
        if payloadLength != 0 {
            guard payload.count == payloadLength else { return nil }
            let kind = payloadKind
            return (kind, takePayload())
        }
        let available = buffer.count - readIndex
        guard available >= Frame.headerSize else { return nil }
        let flags = buffer[readIndex]
        guard let kind = Frame.Kind(flags: flags) else {
            return try fail(TransportError(
                code: .internal, reason: .unknownFrameFlags,
                message: "a frame has flags 0x\(String(flags, radix: 16)), which is no known frame kind"))
        }
        var length = 0
        for i in 1...4 { length = length << 8 | Int(buffer[readIndex + i]) }
        if kind.isMetadata {
            guard length <= maximumMetadataSize else {
                return try fail(TransportError(
                    code: .resourceExhausted, reason: .metadataTooLarge,
                    message: "a \(kind) frame announces \(length) bytes; the maximum metadata size is \(maximumMetadataSize)"))
            }
        } else {
            guard length <= maximumMessageSize else {
                return try fail(TransportError(
                    code: .resourceExhausted, reason: .frameTooLarge,
                    message: "a frame announces \(length) bytes; the maximum message size is \(maximumMessageSize)"))
            }
        }
        guard available >= Frame.headerSize + length else { return nil }
        return (kind, takePayload())
    }

    /// Whether a whole frame is buffered (so ``next()`` returns one or throws).
    public var hasFrame: Bool { pending != .none }

    /// The kind of the next frame, once its flags byte has arrived (nil before, and for
    /// an unknown flags byte).
    public var nextKind: Frame.Kind? {
        if payloadLength > 0 { return payloadKind }
        return readIndex < buffer.count ? Frame.Kind(flags: buffer[readIndex]) : nil
    }

    /// Call at end of stream: throws `truncated frame` if a frame was cut off.
    public func finish() throws(TransportError) {
        if let failure { throw failure.error }
        let available = bufferedBytes
        if available > 0 {
            throw TransportError(
                code: .internal, reason: .truncatedFrame,
                message: "the stream ended inside a frame (\(available) bytes of an unfinished frame)")
        }
    }

    private mutating func fail(_ error: TransportError) throws(TransportError) -> (kind: Frame.Kind, payload: [UInt8])? {
        failure = Failure(error)
        buffer = []
        readIndex = 0
        payload = []
        recycled = []
        payloadLength = -1
        assembledBytes = 0
        throw error
    }
}
