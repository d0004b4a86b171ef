public import Switchyard

/// The URL a ``SiteReachability`` probes: `http://host[:port][/path][?query]` or
/// `https://...`.
///
/// Parsed without Foundation. The scheme is `http` or `https` (any case); an `https` URL
/// is probed over a `SecureTransport` only (``SiteReachability`` refuses it over any
/// other transport). The host is an IPv4 literal, an IPv6 literal in brackets
/// (`http://[::1]:8080/`) or a host name; the port defaults to 80 (`https`: 443); the
/// path to `/`. A fragment (`#...`) is dropped, as a client never sends it.
public struct ReachabilityURL: Sendable, Hashable, CustomStringConvertible {
    /// `"http"` or `"https"`, lowercased.
    public let scheme: String
    /// The host, without brackets for an IPv6 literal; for `https`, also the name the
    /// server's certificate is verified against (and sent as SNI when it is not an IP
    /// literal).
    public let host: String
    /// The TCP port, 1...65535.
    public let port: Int
    /// The request target: the path, and the query if any (`/generate_204`, `/?a=b`).
    public let target: String
    /// The `Host` header's value: the authority as written (`host`, `host:port`, `[::1]:8080`).
    public let authority: String

    /// Parses `text`.
    /// - Throws: `invalidArgument`, reason `invalid address`, saying what is wrong: not
    ///   `http://` or `https://`, user information (`user@`), a malformed host or port,
    ///   or a space or control byte in the path.
    public init(parsing text: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidAddress, message: "'\(text)' is not a reachability URL: \(why)")
        }
        let lowered = text.lowercased()
        let scheme: String
        if lowered.hasPrefix("https://") {
            scheme = "https"
        } else if lowered.hasPrefix("http://") {
            scheme = "http"
        } else {
            throw bad("use http://host[:port]/path or https://host[:port]/path")
        }
        var rest = Substring(text.dropFirst(scheme.count + "://".count))
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...])
        if target.isEmpty { target = "/" } else if target.hasPrefix("?") { target = "/" + target }
        if target.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw bad("the path holds a space or a control character; percent-encode it")
        }
        if authority.contains("@") { throw bad("user information (user@host) is not supported") }
        guard !authority.isEmpty else { throw bad("the host is missing") }

        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw bad("missing ']' after the IPv6 literal") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("unexpected text after ']'") }
                portText = after.dropFirst()
            }
            guard IPAddress.parseIPv6(host) != nil else { throw bad("'\(host)' is not an IPv6 literal") }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                host = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
            do {
                try Endpoint.validate(host: String(host))
            } catch {
                throw bad(error.message)
            }
        }
        var port = scheme == "https" ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(portText), (1...65535).contains(value)
            else { throw bad(portText.isEmpty ? "the port after ':' is missing" : "invalid port \"\(portText)\" (1...65535)") }
            port = value
        }
        self.scheme = scheme
        self.host = String(host)
        self.port = port
        self.target = target
        self.authority = String(authority)
    }

    /// Where the probe connects.
    public var endpoint: Endpoint { Endpoint(host: host, port: port) }

    /// Whether the probe speaks TLS (`https`).
    public var isSecure: Bool { scheme == "https" }

    /// `scheme://authority/target`.
    public var description: String { "\(scheme)://\(authority)\(target)" }
}
