import Switchyard

/// The head of an HTTP/1.x response: its status line and header fields.
struct HTTPResponseHead: Sendable, Hashable {
    /// The minor version of `HTTP/1.x`.
    var minorVersion: Int
    /// The status code, 100...599.
    var status: Int
    /// The reason phrase, possibly empty.
    var reasonPhrase: String
    /// The header fields in the order they came, names as sent.
    var headers: [(name: String, value: String)]

    /// The value of the first field named `name` (compared without regard to case).
    func value(of name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    static func == (lhs: HTTPResponseHead, rhs: HTTPResponseHead) -> Bool {
        lhs.minorVersion == rhs.minorVersion && lhs.status == rhs.status && lhs.reasonPhrase == rhs.reasonPhrase
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(minorVersion)
        for header in headers {
            hasher.combine(header.name)
            hasher.combine(header.value)
        }
    }
}

/// Reads the head of an HTTP/1.x response (the answer to a `HEAD` request) from bytes as
/// they arrive: the status line and the header fields, up to the blank line.
///
/// ## Contract
///
/// - Feed bytes with ``append(_:)`` in the order they came, and call ``finish()`` at the
///   end of the stream. Each returns ``Outcome/needMore`` until the head is complete
///   (``Outcome/complete(_:)``) or cannot be (``Outcome/failed(_:)``); after that, the
///   same outcome is returned again and further bytes are ignored (a `HEAD` response has
///   no body; the bytes after the blank line are not looked at).
/// - **Bounded.** At most ``maximumHeadSize`` bytes are read into a head, interim `1xx`
///   responses included, and at most ``maximumHeaderCount`` fields: a longer head fails
///   as soon as the bound is crossed, so an endless answer costs bounded memory and
///   ends. Memory held is at most one line (itself within the bound) and the fields read.
/// - **Strict where it matters.** Lines end with CRLF (a bare LF is accepted, as RFC 9112
///   section 2.2 allows a recipient to); a CR elsewhere, a NUL or another control byte,
///   a status line that is not `HTTP/1.<digit> <3 digits>[ <reason>]`, a status outside
///   100...599, a field without a colon, with an empty or non-token name, with
///   white space before the colon, or an obsolete line folding (a line starting with
///   space or tab) all fail. Bytes 0x80...0xFF in a reason or a value are kept (decoded
///   as UTF-8, invalid sequences replaced).
/// - **Interim responses.** A `1xx` head other than `101` is skipped, and the next head
///   is read (RFC 9110 section 15.2).
/// - Never traps, whatever the input (fuzzed: `Fuzz/HTTPHeadResponseParserFuzzer.swift`).
struct HTTPHeadResponseParser: Sendable {
    /// The default bound on a head's size in bytes.
    static let defaultMaximumHeadSize = 16 * 1024
    /// The default bound on the number of header fields.
    static let defaultMaximumHeaderCount = 100

    /// Why a head could not be read.
    struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        var message: String
        /// The stream ended before the head did (``finish()``); otherwise the bytes were
        /// not a head, or crossed a bound.
        var endedEarly = false
        var description: String { message }
    }

    /// Where the parser is.
    enum Outcome: Sendable, Hashable {
        /// The head is not complete yet.
        case needMore
        /// The head is complete.
        case complete(HTTPResponseHead)
        /// The bytes are not a head, or exceed a bound, or ended before the head did.
        case failed(Failure)
    }

    let maximumHeadSize: Int
    let maximumHeaderCount: Int

    private var line: [UInt8] = []
    /// Bytes taken into heads so far, interim ones included.
    private var consumed = 0
    private var status: (minor: Int, code: Int, reason: String)?
    private var headers: [(name: String, value: String)] = []
    private var outcome: Outcome = .needMore

    init(maximumHeadSize: Int = defaultMaximumHeadSize, maximumHeaderCount: Int = defaultMaximumHeaderCount) {
        self.maximumHeadSize = max(1, maximumHeadSize)
        self.maximumHeaderCount = max(0, maximumHeaderCount)
    }

    /// Bytes read into heads so far (interim heads included).
    var bytesConsumed: Int { consumed }

    /// Takes the next bytes of the stream.
    mutating func append(_ bytes: some Sequence<UInt8>) -> Outcome {
        guard case .needMore = outcome else { return outcome }
        for byte in bytes {
            if consumed == maximumHeadSize {
                return fail("the response head is longer than \(maximumHeadSize) bytes")
            }
            consumed += 1
            if byte == 0x0A {  // LF ends a line; a CR before it is dropped
                if line.last == 0x0D { line.removeLast() }
                let result = takeLine()
                line.removeAll(keepingCapacity: true)
                if case .needMore = result { continue }
                outcome = result
                return result
            }
            line.append(byte)
        }
        return outcome
    }

    /// Marks the end of the stream: a head that is not complete now never will be.
    mutating func finish() -> Outcome {
        guard case .needMore = outcome else { return outcome }
        if consumed == 0 {
            return fail("the server closed the connection without answering", endedEarly: true)
        }
        return fail("the connection ended after \(consumed) bytes, before the response head was complete", endedEarly: true)
    }

    private mutating func fail(_ message: String, endedEarly: Bool = false) -> Outcome {
        outcome = .failed(Failure(message: message, endedEarly: endedEarly))
        line = []
        return outcome
    }

    /// Handles one complete line (without its line ending).
    private mutating func takeLine() -> Outcome {
        if let bad = line.firstIndex(where: { $0 == 0x0D || $0 == 0x7F || ($0 < 0x20 && $0 != 0x09) }) {
            return fail("the response head holds control byte 0x\(String(line[bad], radix: 16)) in a line")
        }
        guard let status else {
            guard let parsed = Self.parseStatusLine(line) else {
                return fail("not an HTTP/1.x status line: '\(Self.printable(line))'")
            }
            self.status = parsed
            return .needMore
        }
        if line.isEmpty {
            if (100...199).contains(status.code) && status.code != 101 {
                // An interim response: the final one follows.
                self.status = nil
                headers = []
                return .needMore
            }
            return .complete(HTTPResponseHead(
                minorVersion: status.minor, status: status.code, reasonPhrase: status.reason, headers: headers))
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            return fail("obsolete line folding in the response head")
        }
        guard let colon = line.firstIndex(of: 0x3A) else {
            return fail("a header line without a colon: '\(Self.printable(line))'")
        }
        let name = line[..<colon]
        guard !name.isEmpty, name.allSatisfy(Self.isTokenByte) else {
            return fail("a header field with an invalid name: '\(Self.printable(name))'")
        }
        guard headers.count < maximumHeaderCount else {
            return fail("more than \(maximumHeaderCount) header fields")
        }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        headers.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        return .needMore
    }

    /// `HTTP/1.<digit> <3 digits>[ <reason>]`, or nil.
    private static func parseStatusLine(_ line: [UInt8]) -> (minor: Int, code: Int, reason: String)? {
        let prefix: [UInt8] = Array("HTTP/1.".utf8)
        guard line.count >= 12, line.starts(with: prefix) else { return nil }
        let minor = line[7]
        guard isDigit(minor), line[8] == 0x20 else { return nil }
        let digits = line[9..<12]
        guard digits.allSatisfy(isDigit) else { return nil }
        let code = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard (100...599).contains(code) else { return nil }
        var reason: ArraySlice<UInt8> = []
        if line.count > 12 {
            guard line[12] == 0x20 else { return nil }
            reason = line[13...]
        }
        return (Int(minor - 0x30), code, String(decoding: reason, as: UTF8.self))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// The first 80 bytes of `bytes` for a message, other bytes than printable ASCII as `?`.
    private static func printable(_ bytes: some Collection<UInt8>) -> String {
        let shown = bytes.prefix(80).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }
        return String(decoding: shown, as: UTF8.self) + (bytes.count > 80 ? "..." : "")
    }
}
