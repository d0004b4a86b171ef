import SwitchyardHPACK

/// What a header block is checked as.
enum H2HeaderBlockKind: Sendable {
    /// A request's headers: `:method`, `:scheme`, `:path` (non-empty), optionally
    /// `:authority`; CONNECT has `:method` and `:authority` only.
    case request
    /// A response's headers, informational or final: exactly `:status`, three digits.
    case response
    /// Trailers: no pseudo-header field at all.
    case trailers
}

/// What the checks learned from a valid header block.
struct H2CheckedHeaders: Sendable {
    /// The content-length field's value, if present.
    var contentLength: Int?
    /// A response's status code.
    var status: Int?
    /// A request whose method is HEAD.
    var isHeadRequest = false
}

/// A malformed message (RFC 9113 section 8.1.1): a stream error PROTOCOL_ERROR.
struct H2MalformedHeaders: Error, Sendable {
    var message: String
}

/// The field rules of RFC 9113 sections 8.2 and 8.3 that HPACK does not check:
/// - names have no uppercase letter, no octet at or below 0x20, none at or above 0x7f, and
///   a colon only as a pseudo-header's first octet (8.2.1);
/// - values have no NUL, CR or LF, and no leading or trailing space or tab (8.2.1);
/// - no connection-specific field: connection, keep-alive, proxy-connection,
///   transfer-encoding, upgrade; `te` only as "trailers" (8.2.2);
/// - pseudo-header fields come first, each at most once, only those defined for the
///   message kind (8.3); trailers have none;
/// - content-length, when present, is digits, the same in every field that carries it.
///
/// - Throws: ``H2MalformedHeaders`` naming the first rule broken.
func h2CheckHeaders(_ fields: [HPACKField], as kind: H2HeaderBlockKind) throws(H2MalformedHeaders) -> H2CheckedHeaders {
    var checked = H2CheckedHeaders()
    var seenRegular = false
    var method: [UInt8]?
    var scheme = false
    var path = false
    var authority = false
    var status = false
    for field in fields {
        let name = field.name
        try h2CheckName(name)
        try h2CheckValue(field.value, of: name)
        if name.first == UInt8(ascii: ":") {
            guard !seenRegular else { throw H2MalformedHeaders(message: "pseudo-header \(text(name)) after a regular field") }
            func once(_ flag: inout Bool) throws(H2MalformedHeaders) {
                guard !flag else { throw H2MalformedHeaders(message: "pseudo-header \(text(name)) twice") }
                flag = true
            }
            switch (kind, name) {
            case (.request, H2FieldName.method):
                guard method == nil else { throw H2MalformedHeaders(message: "pseudo-header :method twice") }
                method = field.value
            case (.request, H2FieldName.scheme): try once(&scheme)
            case (.request, H2FieldName.authority): try once(&authority)
            case (.request, H2FieldName.path):
                try once(&path)
                guard !field.value.isEmpty else { throw H2MalformedHeaders(message: "an empty :path") }
            case (.response, H2FieldName.status):
                try once(&status)
                guard field.value.count == 3, let code = h2Decimal(field.value) else {
                    throw H2MalformedHeaders(message: ":status \(text(field.value)) is not three digits")
                }
                checked.status = code
            default:
                throw H2MalformedHeaders(message: "pseudo-header \(text(name)) is not allowed in \(kind)")
            }
            continue
        }
        seenRegular = true
        switch name {
        case H2FieldName.connection, H2FieldName.keepAlive, H2FieldName.proxyConnection, H2FieldName.transferEncoding,
            H2FieldName.upgrade:
            throw H2MalformedHeaders(message: "connection-specific field \(text(name))")
        case H2FieldName.te:
            guard field.value == H2FieldName.trailersValue else {
                throw H2MalformedHeaders(message: "te: \(text(field.value)) (only \"trailers\" is allowed)")
            }
        case H2FieldName.contentLength:
            guard let length = h2Decimal(field.value) else {
                throw H2MalformedHeaders(message: "content-length \(text(field.value)) is not a number")
            }
            guard checked.contentLength == nil || checked.contentLength == length else {
                throw H2MalformedHeaders(message: "two different content-length values")
            }
            checked.contentLength = length
        default:
            break
        }
    }
    switch kind {
    case .request:
        guard let method else { throw H2MalformedHeaders(message: "a request without :method") }
        if method == H2FieldName.connectMethod {
            guard authority, !scheme, !path else {
                throw H2MalformedHeaders(message: "a CONNECT request needs :authority and no :scheme or :path")
            }
        } else {
            guard scheme else { throw H2MalformedHeaders(message: "a request without :scheme") }
            guard path else { throw H2MalformedHeaders(message: "a request without :path") }
        }
        checked.isHeadRequest = method == H2FieldName.headMethod
    case .response:
        guard status else { throw H2MalformedHeaders(message: "a response without :status") }
    case .trailers:
        break
    }
    return checked
}

private func h2CheckName(_ name: [UInt8]) throws(H2MalformedHeaders) {
    guard !name.isEmpty else { throw H2MalformedHeaders(message: "an empty field name") }
    for (index, octet) in name.enumerated() {
        let bad =
            octet <= 0x20 || octet >= 0x7f || (octet >= UInt8(ascii: "A") && octet <= UInt8(ascii: "Z"))
            || (octet == UInt8(ascii: ":") && index > 0)
        guard !bad else { throw H2MalformedHeaders(message: "field name \(text(name)) has octet 0x\(String(octet, radix: 16))") }
    }
}

private func h2CheckValue(_ value: [UInt8], of name: [UInt8]) throws(H2MalformedHeaders) {
    for octet in value where octet == 0 || octet == 0x0a || octet == 0x0d {
        throw H2MalformedHeaders(message: "the value of \(text(name)) has octet 0x\(String(octet, radix: 16))")
    }
    if let first = value.first, let last = value.last,
        first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09
    {
        throw H2MalformedHeaders(message: "the value of \(text(name)) begins or ends with whitespace")
    }
}

/// A non-negative decimal of at most 18 digits (no sign, no spaces), or nil.
private func h2Decimal(_ octets: [UInt8]) -> Int? {
    guard !octets.isEmpty, octets.count <= 18 else { return nil }
    var value = 0
    for octet in octets {
        guard octet >= UInt8(ascii: "0"), octet <= UInt8(ascii: "9") else { return nil }
        value = value * 10 + Int(octet - UInt8(ascii: "0"))
    }
    return value
}

/// Octets for a message: as UTF-8 where they are, else replaced.
private func text(_ octets: [UInt8]) -> String { String(decoding: octets.prefix(64), as: UTF8.self) }

/// The names and values the checks compare, as octets.
private enum H2FieldName {
    static let method = Array(":method".utf8)
    static let scheme = Array(":scheme".utf8)
    static let authority = Array(":authority".utf8)
    static let path = Array(":path".utf8)
    static let status = Array(":status".utf8)
    static let connection = Array("connection".utf8)
    static let keepAlive = Array("keep-alive".utf8)
    static let proxyConnection = Array("proxy-connection".utf8)
    static let transferEncoding = Array("transfer-encoding".utf8)
    static let upgrade = Array("upgrade".utf8)
    static let te = Array("te".utf8)
    static let trailersValue = Array("trailers".utf8)
    static let contentLength = Array("content-length".utf8)
    static let connectMethod = Array("CONNECT".utf8)
    static let headMethod = Array("HEAD".utf8)
}
