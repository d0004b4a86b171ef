// libFuzzer target for the endpoint parser: `Endpoint(parsing:)`, `Endpoint.validate`,
// and the IP literal parsers and formatters of `IPAddress`
// (Sources/Switchyard/Endpoint.swift), which read every address a user, an option or an
// environment value gives, and which `SystemSocketAddress(literal:)` turns into a sockaddr.
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with Endpoint.swift and the
// core's TransportError.swift into one instrumented binary,
// `swiftc -sanitize=fuzzer,address`. Any broken invariant below is a `fatalError`, which
// libFuzzer reports as a crash and saves as an artifact. The harness (not the core) uses
// Glibc: its `inet_pton` and `inet_ntop` are the reference the literal parsers are held to.
//
// Input layout:
//   byte 0: what the text is wrapped in before `Endpoint(parsing:)` (low 2 bits: as is,
//           `[text]:port`, `text:port`, `unix:text`; the port from the high 6 bits);
//   rest:   the text (decoded as UTF-8, invalid bytes replaced), and, for the formatters,
//           the first 4 and 16 bytes as an address.
//
// Checked:
// - `IPAddress.parseIPv4` accepts exactly what `inet_pton(AF_INET)` accepts (dotted
//   quad, decimal, no leading zeros), with the same bytes;
// - `IPAddress.parseIPv6` accepts exactly what `inet_pton(AF_INET6)` accepts, with the
//   same bytes (a zone after `%`, which inet_pton does not know, is split off first and
//   must not be empty);
// - the formatters: `parseIPv4(formatIPv4(b)) == b`, `parseIPv6(formatIPv6(b)) == b`,
//   and formatIPv6 writes what `inet_ntop` writes, except for the IPv4-compatible
//   `::a.b.c.d` form that inet_ntop still uses (RFC 5952 section 5 keeps only the
//   IPv4-mapped one);
// - `Endpoint(parsing:)` never traps; a failure is `invalidArgument`/`invalid address`
//   and its message names the text (or the part of it that is wrong); an endpoint it returns validates, has a port in
//   0...65535 written in decimal digits only in the text, a host kind that agrees with
//   the literal parsers, and survives a round trip through its `description`;
// - `validate(host:)` accepts only IP literals and names of at most 253 bytes made of
//   labels of 1...63 letters, digits, `-` and `_`; `validate(path:)` only paths of
//   1...107 bytes without a NUL.

import Glibc

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("Endpoint parser invariant broken: \(message())") }
}

private func quoted(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars.prefix(200) {
        out += scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7f ? String(scalar) : "\\u{\(String(scalar.value, radix: 16))}"
    }
    return out + "\""
}

/// `inet_pton`'s reading of `text`: the address bytes, or nil.
private func pton(_ family: CInt, _ text: String, count: Int) -> [UInt8]? {
    // inet_pton reads a C string: a text with a NUL in it is not an address.
    guard !text.utf8.contains(0) else { return nil }
    var bytes = [UInt8](repeating: 0, count: count)
    let result = bytes.withUnsafeMutableBytes { inet_pton(family, text, $0.baseAddress) }
    return result == 1 ? bytes : nil
}

private func ntop6(_ bytes: [UInt8]) -> String {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    let result = bytes.withUnsafeBytes { inet_ntop(AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
    check(result != nil, "inet_ntop failed")
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func checkLiterals(_ text: String) {
    let v4 = IPAddress.parseIPv4(text)
    let reference4 = pton(AF_INET, text, count: 4)
    check(v4 == reference4, "parseIPv4(\(quoted(text))) = \(String(describing: v4)), inet_pton says \(String(describing: reference4))")

    let v6 = IPAddress.parseIPv6(text)
    var address = text
    var zone: String?
    if let percent = text.firstIndex(of: "%") {
        address = String(text[..<percent])
        zone = String(text[text.index(after: percent)...])
    }
    let reference6 = zone == "" ? nil : pton(AF_INET6, address, count: 16)
    check(v6?.bytes == reference6,
          "parseIPv6(\(quoted(text))) = \(String(describing: v6?.bytes)), inet_pton says \(String(describing: reference6))")
    if let v6 { check(v6.zone == zone, "parseIPv6(\(quoted(text))) zone \(String(describing: v6.zone)), expected \(String(describing: zone))") }
}

private func checkFormatters(_ bytes: [UInt8]) {
    let four = Array(bytes.prefix(4))
    if four.count == 4 {
        let text = IPAddress.formatIPv4(four)
        check(IPAddress.parseIPv4(text) == four, "formatIPv4(\(four)) = \(text) does not parse back")
    }
    let sixteen = Array(bytes.prefix(16))
    if sixteen.count == 16 {
        let text = IPAddress.formatIPv6(sixteen)
        let parsed = IPAddress.parseIPv6(text)
        check(parsed?.bytes == sixteen && parsed?.zone == nil, "formatIPv6(\(sixteen)) = \(text) parses back as \(String(describing: parsed))")
        check(text == text.lowercased() && text.utf8.count <= 45, "formatIPv6 wrote \(text)")
        let compatible = sixteen[0..<12].allSatisfy { $0 == 0 } && !(sixteen[12] == 0 && sixteen[13] == 0)
        if !compatible {
            let reference = ntop6(sixteen)
            check(text == reference, "formatIPv6(\(sixteen)) = \(text), inet_ntop writes \(reference)")
        }
    }
}

/// Whether `haystack` holds `needle` (as bytes).
private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    if needle.isEmpty { return true }
    guard haystack.count >= needle.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
        return true
    }
    return false
}

private func isLabelByte(_ byte: UInt8) -> Bool {
    (0x30...0x39).contains(byte) || (0x61...0x7a).contains(byte | 0x20) || byte == 0x2d || byte == 0x5f
}

private func checkValidators(_ text: String) {
    do {
        try Endpoint.validate(host: text)
        // validate(host:) takes an IPv6 literal in brackets too ("[::1]"), nothing else in them.
        let bracketed = text.hasPrefix("[") && text.hasSuffix("]") && text.count >= 2
        let inner = bracketed ? String(text.dropFirst().dropLast()) : text
        check(!bracketed || IPAddress.parseIPv6(inner) != nil, "validate(host:) accepted \(quoted(text)) in brackets")
        let literal = IPAddress.parseIPv4(text) != nil || IPAddress.parseIPv6(inner) != nil
        if !literal {
            check(text.utf8.count <= 253, "validate(host:) accepted \(text.utf8.count) bytes")
            for label in text.utf8.split(separator: 0x2e, omittingEmptySubsequences: false) {
                check((1...63).contains(label.count) && label.allSatisfy(isLabelByte),
                      "validate(host:) accepted \(quoted(text)), label of \(label.count) bytes")
            }
        }
    } catch {
        check(error.code == .invalidArgument && error.reason == .invalidAddress, "validate(host:) threw \(error)")
    }
    do {
        try Endpoint.validate(path: text)
        check(!text.isEmpty && text != "@" && !text.utf8.contains(0) && text.utf8.count <= Endpoint.maximumPathLength,
              "validate(path:) accepted \(quoted(text))")
    } catch {
        check(error.code == .invalidArgument && error.reason == .invalidAddress, "validate(path:) threw \(error)")
    }
}

private func checkEndpoint(_ text: String) {
    let endpoint: Endpoint
    do {
        endpoint = try Endpoint(parsing: text)
    } catch {
        check(error.code == .invalidArgument && error.reason == .invalidAddress, "Endpoint(parsing: \(quoted(text))) threw \(error)")
        // It names the text, or the part of it that is wrong (the first 'quoted' part).
        // (Compared as UTF-8: a combining mark after a quote makes one Character of both.)
        let message = Array(error.message.utf8)
        let quotedPart = message.split(separator: 0x27, maxSplits: 2, omittingEmptySubsequences: false)
        check(contains(message, Array(text.utf8)) || (quotedPart.count == 3 && contains(Array(text.utf8), Array(quotedPart[1]))),
              "the error for \(quoted(text)) does not name it: \(quoted(error.message))")
        return
    }
    if let path = endpoint.path {
        check(text == "unix:" + path && endpoint.host.isEmpty && endpoint.port == 0, "path endpoint \(endpoint) from \(quoted(text))")
        check(endpoint.hostKind == .path, "path endpoint of kind \(endpoint.hostKind)")
        do { try Endpoint.validate(path: path) } catch { fatalError("parsed path \(quoted(path)) does not validate: \(error)") }
    } else {
        check((0...65535).contains(endpoint.port), "port \(endpoint.port)")
        // The port is the text's last part, decimal digits only (no sign, no space).
        let portText = text.utf8.split(separator: 0x3a, omittingEmptySubsequences: false).last ?? []
        check(!portText.isEmpty && portText.allSatisfy { (0x30...0x39).contains($0) },
              "Endpoint(parsing: \(quoted(text))) took port \(endpoint.port) from \(quoted(String(decoding: portText, as: UTF8.self)))")
        do { try Endpoint.validate(host: endpoint.host) } catch { fatalError("parsed host \(quoted(endpoint.host)) does not validate: \(error)") }
        let kind: Endpoint.HostKind =
            IPAddress.parseIPv4(endpoint.host) != nil ? .ipv4 : IPAddress.parseIPv6(endpoint.host) != nil ? .ipv6 : .name
        check(endpoint.hostKind == kind, "\(endpoint) is of kind \(endpoint.hostKind), expected \(kind)")
        check(kind == .ipv6 || !endpoint.host.contains(":"), "host \(quoted(endpoint.host)) holds a ':' but is no IPv6 literal")
    }
    // Written out and parsed again, the same endpoint.
    do {
        let again = try Endpoint(parsing: endpoint.description)
        check(again == endpoint, "round trip: \(quoted(text)) -> \(endpoint) -> \(again)")
    } catch {
        fatalError("\(quoted(text)) parsed as \(quoted(endpoint.description)), which does not parse: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let rest = Array(input[1...])
    let text = String(decoding: rest, as: UTF8.self)
    let port = Int(input[0] >> 2) * 1041  // 0...65583: also past 65535

    checkLiterals(text)
    checkFormatters(rest)
    checkValidators(text)
    checkEndpoint(text)
    switch input[0] & 3 {
    case 1: checkEndpoint("[\(text)]:\(port)")
    case 2: checkEndpoint("\(text):\(port)")
    case 3: checkEndpoint("unix:\(text)")
    default: break
    }
    return 0
}
