/// Where to connect or listen: a host and a TCP port, or the path of a Unix-domain socket.
///
/// The host is an IPv4 literal (`127.0.0.1`), an IPv6 literal (`::1`, optionally with a
/// zone, `fe80::1%eth0`) or a host name (`localhost`). Literals are recognised here,
/// without libc, so a backend never sends a literal to the resolver; names are resolved
/// by the backend, off its event loops.
///
/// A path endpoint (``init(unixPath:)``, written `unix:/run/app.sock`) names a socket in
/// the file system; a path that starts with `@` names one in Linux's abstract namespace
/// (no file; `@name`, as `ss` shows it). Only a backend of a Unix-domain network
/// connects or listens there; the TCP and in-memory backends refuse a path endpoint with
/// `invalidArgument`, reason `invalid address`. A path endpoint's ``host`` is empty and
/// its ``port`` 0.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// The host as given: a literal or a name. IPv6 literals are stored without brackets.
    /// Empty for a path endpoint.
    public var host: String
    /// The TCP port, 0...65535. 0 when listening asks the system for a free port, and for
    /// a path endpoint.
    public var port: Int
    /// The Unix-domain socket path of a path endpoint (``init(unixPath:)``), nil for a
    /// host and port. Empty for an unnamed socket (a peer that did not bind a name).
    public var path: String?

    /// The longest path a Unix-domain socket address holds, in UTF-8 bytes (Linux's
    /// `sun_path` is 108 bytes, one of them for the terminating NUL, or the leading NUL
    /// of an abstract name).
    public static let maximumPathLength = 107

    /// What kind of host an endpoint names.
    public struct HostKind: Sendable, Hashable, CustomStringConvertible {
        private enum Value: Sendable, Hashable { case ipv4, ipv6, name, path }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        public static let ipv4 = HostKind(.ipv4)
        public static let ipv6 = HostKind(.ipv6)
        public static let name = HostKind(.name)
        /// A Unix-domain socket path (a path endpoint has no host).
        public static let path = HostKind(.path)
        public var description: String {
            switch value {
            case .ipv4: "IPv4"
            case .ipv6: "IPv6"
            case .name: "name"
            case .path: "path"
            }
        }
    }

    /// The ports an endpoint holds.
    public static let portRange = 0...65535

    /// Makes an endpoint. Brackets around an IPv6 literal are removed.
    /// - Precondition: `port` is in 0...65535. A port out of range here is the program's
    ///   own mistake, never its input's: check values from users, files or the network
    ///   with ``checked(host:port:)``, ``validate(port:)`` or ``init(parsing:)``, which
    ///   throw instead.
    public init(host: String, port: Int) {
        precondition(
            Endpoint.portRange.contains(port),
            "Endpoint(host:port:) was given port \(port), outside 0...65535: a programming error (check input with Endpoint.checked(host:port:) or Endpoint.validate(port:))")
        var host = host
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        self.host = host
        self.port = port
        self.path = nil
    }

    /// Makes the endpoint of a Unix-domain socket at `path` (a file system path, or
    /// `@name` in the abstract namespace). Not checked here: ``validate(path:)`` says
    /// whether it fits a socket address, and a backend checks it before use.
    public init(unixPath path: String) {
        self.host = ""
        self.port = 0
        self.path = path
    }

    /// Parses `host:port`, `[v6]:port` (an IPv6 literal in brackets), or `unix:PATH`
    /// (a Unix-domain socket path; `unix:@name` for the abstract namespace).
    /// - Throws: ``TransportError`` with code `invalidArgument` and reason
    ///   `invalid address` when the text is not an endpoint, or the path is empty, holds
    ///   a NUL byte or is longer than ``maximumPathLength`` bytes.
    public init(parsing text: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidAddress, message: "'\(text)' is not an endpoint: \(why)")
        }
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst("unix:".count))
            try Endpoint.validate(path: path)
            self.init(unixPath: path)
            return
        }
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("missing ']'") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw bad("missing ':port' after ']'") }
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw bad("missing ':port'") }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { throw bad("an IPv6 literal needs brackets: [addr]:port") }
        }
        if portPart.isEmpty { throw bad("the port after ':' is missing") }
        let port: Int
        do {
            port = try Endpoint.port(parsing: portPart)
            try Endpoint.validate(host: String(hostPart))
        } catch {
            throw bad(error.message)
        }
        self.init(host: String(hostPart), port: port)
    }

    /// Makes an endpoint from values that came from outside the program (a flag, a
    /// configuration file, a message): the host is checked as ``validate(host:)`` does
    /// and the port as ``validate(port:)`` does. Brackets around an IPv6 literal are
    /// removed, as ``init(host:port:)`` does.
    /// - Throws: `invalidArgument`, reason `invalid address`, naming the value at fault:
    ///   `invalid port "70000" (0...65535)`, `invalid IPv4 literal "1.2.3.256" ...`.
    public static func checked(host: String, port: Int) throws(TransportError) -> Endpoint {
        try validate(port: port)
        try validate(host: host)
        return Endpoint(host: host, port: port)
    }

    /// Checks that `port` is a TCP port, 0...65535.
    /// - Throws: `invalidArgument`, reason `invalid address`: `invalid port "70000" (0...65535)`.
    public static func validate(port: Int) throws(TransportError) {
        guard portRange.contains(port) else { throw invalidPort("\(port)") }
    }

    /// A port written in decimal digits, 0...65535.
    /// - Throws: `invalidArgument`, reason `invalid address`, naming the text.
    static func port(parsing text: Substring) throws(TransportError) -> Int {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let port = Int(text), portRange.contains(port)
        else { throw invalidPort(String(text)) }
        return port
    }

    private static func invalidPort(_ text: String) -> TransportError {
        TransportError(
            code: .invalidArgument, reason: .invalidAddress,
            message: "invalid port \"\(text)\" (\(portRange.lowerBound)...\(portRange.upperBound))")
    }

    /// Checks that a host is a literal or a syntactically valid host name: an IPv4
    /// literal (`a.b.c.d`), an IPv6 literal (brackets allowed; a zone after `%`), or a name
    /// of dot-separated labels of letters, digits, `-` and `_`, at most 63 bytes each and
    /// 253 in all, whose last label is not all digits (that is a malformed IPv4 literal,
    /// never a name, as RFC 3696 section 2 says of top-level domains).
    /// - Throws: `invalidArgument`, reason `invalid address`, naming the host and what is
    ///   wrong with it: `invalid IPv4 literal "1.2.3.256": ...`, `invalid IPv6 literal
    ///   "fe80::1%": the zone after '%' is empty`, `invalid host name "bad host": ...`.
    public static func validate(host: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidAddress, message: why)
        }
        var host = Substring(host)
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2
        if bracketed { host = host.dropFirst().dropLast() }
        if host.isEmpty { throw bad("the host is empty") }
        if let (_, zone) = IPAddress.parseIPv6(host) {
            // A zone is an interface's name (Linux: 1 to 15 bytes, no '/', no blank) or index.
            if let zone, zone.utf8.count > 15 || zone.utf8.contains(where: { $0 <= 0x20 || $0 == 0x2f || $0 == 0x7f }) {
                throw bad("invalid IPv6 zone \"\(zone)\" in \"\(host)\": an interface name is 1 to 15 bytes without '/', spaces or control characters")
            }
            return
        }
        if bracketed {
            throw bad("invalid host \"[\(host)]\": brackets hold an IPv6 literal only")
        }
        if IPAddress.parseIPv4(host) != nil { return }
        if host.contains(":") || host.contains("%") {
            throw bad("invalid IPv6 literal \"\(host)\": \(IPAddress.ipv6Problem(host))")
        }
        if host.utf8.count > 253 {
            throw bad("invalid host name \"\(host.prefix(40))...\": it is \(host.utf8.count) bytes long; a host name is at most 253")
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        if let last = labels.last, !last.isEmpty, last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            throw bad("invalid IPv4 literal \"\(host)\": \(IPAddress.ipv4Problem(host))")
        }
        for label in labels {
            if label.isEmpty {
                throw bad("invalid host name \"\(host)\": it has an empty label (a dot at an end, or two in a row)")
            }
            if label.utf8.count > 63 {
                throw bad("invalid host name \"\(host)\": the label \"\(label.prefix(20))...\" is \(label.utf8.count) bytes long; a label is at most 63")
            }
            if let wrong = label.unicodeScalars.first(where: { !Endpoint.isHostNameScalar($0) }) {
                throw bad("invalid host name \"\(host)\": it holds \(wrong.shownInMessage); a host name holds letters, digits, '-', '_' and dots")
            }
        }
    }

    private static func isHostNameScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x30...0x39, 0x41...0x5a, 0x61...0x7a, 0x2d, 0x5f: true
        default: false
        }
    }


    /// Checks that `path` fits a Unix-domain socket address: not empty, no NUL byte, at
    /// most ``maximumPathLength`` UTF-8 bytes.
    /// - Throws: `invalidArgument`, reason `invalid address`, naming the path.
    public static func validate(path: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidAddress, message: "'unix:\(path)' is not a Unix-domain socket address: \(why)")
        }
        if path.isEmpty || path == "@" { throw bad("the path is empty") }
        if path.utf8.contains(0) { throw bad("the path holds a NUL byte") }
        if path.utf8.count > maximumPathLength {
            throw bad("the path is \(path.utf8.count) bytes long; a socket address holds at most \(maximumPathLength)")
        }
    }

    /// Whether the host is an IPv4 literal, an IPv6 literal or a name; ``HostKind/path``
    /// for a path endpoint.
    public var hostKind: HostKind {
        if path != nil { return .path }
        if IPAddress.parseIPv4(host) != nil { return .ipv4 }
        if IPAddress.parseIPv6(host) != nil { return .ipv6 }
        return .name
    }

    /// `host:port`, with brackets around an IPv6 literal (and around the host name
    /// `unix`, whose `unix:port` would parse as a path); `unix:PATH` for a path endpoint
    /// (`unix:` alone for an unnamed socket). ``init(parsing:)`` reads it back as the
    /// same endpoint.
    public var description: String {
        if let path { return "unix:\(path)" }
        return host.contains(":") || host == "unix" ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// Pure-Swift parsing of IP literals, so the core can classify endpoints without libc.
public enum IPAddress {
    /// The four bytes of a dotted-quad IPv4 literal (`a.b.c.d`, decimal, no leading zeros
    /// beyond a single `0`), or nil.
    public static func parseIPv4(_ text: some StringProtocol) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4)
        for part in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part.utf8.count <= 3, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            if part.utf8.count > 1 && part.utf8.first == 0x30 { return nil }
            guard let value = UInt8(part) else { return nil }
            bytes.append(value)
        }
        return bytes.count == 4 ? bytes : nil
    }

    /// The sixteen bytes of an IPv6 literal and its zone (the part after `%`), or nil.
    /// Accepts `::` compression and an embedded IPv4 tail (`::ffff:1.2.3.4`).
    public static func parseIPv6(_ text: some StringProtocol) -> (bytes: [UInt8], zone: String?)? {
        var address = Substring(text)
        var zone: String?
        if let percent = address.firstIndex(of: "%") {
            let text = String(address[address.index(after: percent)...])
            if text.isEmpty { return nil }
            zone = text
            address = address[..<percent]
        }
        guard address.contains(":") else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        let pieces = address.components(separatedByDoubleColon: ())
        guard pieces.count <= 2 else { return nil }
        sawGap = pieces.count == 2
        func groups(_ part: Substring, allowIPv4Tail: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            var result: [UInt16] = []
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, field) in fields.enumerated() {
                if allowIPv4Tail, index == fields.count - 1, field.contains(".") {
                    guard let v4 = parseIPv4(field) else { return nil }
                    result.append(UInt16(v4[0]) << 8 | UInt16(v4[1]))
                    result.append(UInt16(v4[2]) << 8 | UInt16(v4[3]))
                    continue
                }
                // Hex digits only: UInt16(_:radix:) alone would take "+1" and "-0".
                guard !field.isEmpty, field.utf8.count <= 4, field.utf8.allSatisfy(isHexDigit),
                      let value = UInt16(field, radix: 16) else { return nil }
                result.append(value)
            }
            return result
        }
        if sawGap {
            guard let h = groups(pieces[0], allowIPv4Tail: false), let t = groups(pieces[1], allowIPv4Tail: true) else { return nil }
            head = h
            tail = t
            guard head.count + tail.count <= 7 else { return nil }
        } else {
            guard let all = groups(pieces[0], allowIPv4Tail: true), all.count == 8 else { return nil }
            head = all
        }
        let words = head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for word in words {
            bytes.append(UInt8(word >> 8))
            bytes.append(UInt8(word & 0xff))
        }
        return (bytes, zone)
    }

    /// What is wrong with `text` as an IPv4 literal (for an error message; call it only
    /// when ``parseIPv4(_:)`` returned nil).
    public static func ipv4Problem(_ text: some StringProtocol) -> String {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        for part in parts {
            if part.isEmpty { return "it has an empty part; an IPv4 literal is four decimal numbers 0...255 (a.b.c.d)" }
            if !part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return "the part \"\(part)\" is not a decimal number" }
            if part.utf8.count > 1 && part.utf8.first == 0x30 { return "the part \"\(part)\" has a leading zero (it would read as octal elsewhere)" }
            if part.utf8.count > 3 || Int(part).map({ $0 > 255 }) ?? true { return "the part \"\(part)\" is over 255" }
        }
        return "it has \(parts.count) part\(parts.count == 1 ? "" : "s"); an IPv4 literal is four decimal numbers 0...255 (a.b.c.d)"
    }

    /// What is wrong with `text` as an IPv6 literal (for an error message; call it only
    /// when ``parseIPv6(_:)`` returned nil).
    public static func ipv6Problem(_ text: some StringProtocol) -> String {
        var address = Substring(text)
        if let percent = address.firstIndex(of: "%") {
            if address[address.index(after: percent)...].isEmpty { return "the zone after '%' is empty" }
            address = address[..<percent]
        }
        if address.isEmpty { return "there is no address before the zone" }
        if !address.contains(":") { return "an IPv6 literal has groups separated by ':'" }
        let pieces = address.components(separatedByDoubleColon: ())
        if pieces.count > 2 { return "'::' appears more than once" }
        let perPiece = pieces.map { $0.isEmpty ? [] : $0.split(separator: ":", omittingEmptySubsequences: false) }
        let fields = perPiece.flatMap { $0 }
        for (index, field) in fields.enumerated() {
            if field.isEmpty { return "it has an empty group (a single ':' at an end, or ':::')" }
            if field.contains(".") {
                if index == fields.count - 1, perPiece.last?.isEmpty == false {
                    if parseIPv4(field) == nil { return "the IPv4 tail \"\(field)\" is malformed: \(ipv4Problem(field))" }
                    continue
                }
                return "\"\(field)\" is not a group of 1 to 4 hex digits (an IPv4 tail comes last)"
            }
            if field.utf8.count > 4 || !field.utf8.allSatisfy(isHexDigit) { return "the group \"\(field)\" is not 1 to 4 hex digits" }
        }
        let groups = fields.reduce(0) { $0 + ($1.contains(".") ? 2 : 1) }
        return pieces.count == 2
            ? "it has \(groups) groups besides '::'; at most 7 fit"
            : "it has \(groups) groups; an IPv6 address has 8, or fewer with '::'"
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
    }

    /// Formats four bytes as `a.b.c.d`.
    public static func formatIPv4(_ bytes: some Collection<UInt8>) -> String {
        bytes.map { String($0) }.joined(separator: ".")
    }

    /// Formats sixteen bytes in the RFC 5952 form (lower case, longest zero run as `::`).
    public static func formatIPv6(_ bytes: some Collection<UInt8>) -> String {
        let b = Array(bytes)
        // Programmer misuse only: every caller passes the 16 bytes of a parsed literal or
        // of a sockaddr_in6, never bytes from input.
        precondition(b.count == 16, "IPAddress.formatIPv6 needs 16 bytes, was given \(b.count): a programming error")
        var words: [UInt16] = []
        for i in stride(from: 0, to: 16, by: 2) { words.append(UInt16(b[i]) << 8 | UInt16(b[i + 1])) }
        // IPv4-mapped addresses keep their dotted tail.
        if words[0..<5].allSatisfy({ $0 == 0 }) && words[5] == 0xffff {
            return "::ffff:" + formatIPv4(b[12..<16])
        }
        var bestStart = -1, bestLength = 0, runStart = -1
        for i in 0...8 {
            if i < 8 && words[i] == 0 {
                if runStart < 0 { runStart = i }
            } else if runStart >= 0 {
                if i - runStart > bestLength && i - runStart >= 2 { bestStart = runStart; bestLength = i - runStart }
                runStart = -1
            }
        }
        func hex(_ range: Range<Int>) -> String { words[range].map { String($0, radix: 16) }.joined(separator: ":") }
        if bestStart < 0 { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
    }
}

extension Substring {
    /// Splits at the first `::` (at most two pieces); three pieces means a second `::`.
    fileprivate func components(separatedByDoubleColon: Void) -> [Substring] {
        var pieces: [Substring] = []
        var start = startIndex
        var i = startIndex
        while i < endIndex {
            let next = index(after: i)
            if self[i] == ":", next < endIndex, self[next] == ":" {
                pieces.append(self[start..<i])
                start = index(after: next)
                i = start
                continue
            }
            i = next
        }
        pieces.append(self[start..<endIndex])
        return pieces
    }
}
