// libFuzzer target for `HTTPHeadResponseParser`, the reader of a reachability probe's
// response head (Sources/Switchyard/Reachability/HTTPHeadResponseParser.swift).
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with the parser's source into
// one instrumented binary, `swiftc -sanitize=fuzzer,address`. Any broken invariant below
// is a `fatalError`, which libFuzzer reports as a crash and saves as an artifact.
//
// Input layout:
//   byte 0: the parser's maximumHeadSize: low 3 bits choose a base from `maximumSizes`,
//           the high 5 bits (0...31) are added to it.
//   byte 1: the split pattern: low 2 bits choose how the stream is cut into appends
//           (all at once, byte by byte, 0...8 bytes, 1...300 bytes), the high 6 bits
//           seed the generator.
//   rest:   the bytes the server sent.
//
// Checked: no trap, whatever the bytes; the outcome does not depend on how the stream is
// cut into appends; the bound holds (never more than maximumHeadSize bytes consumed, and
// a longer stream without a complete head fails); once complete or failed, the outcome
// never changes; a complete head has a status in 100...599, at most the maximum number
// of fields, no control byte or CR/LF in any name, value or reason; and it survives a
// round trip (written out again and parsed, it is the same head).

private let maximumSizes = [1, 12, 64, 256, 1024, 4096, 16 * 1024, 16 * 1024]

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("HTTPHeadResponseParser invariant broken: \(message())") }
}

/// A small deterministic generator (xorshift32), seeded from the input.
private struct Generator {
    var state: UInt32
    init(seed: UInt32) { state = seed == 0 ? 0x9E37_79B9 : seed }
    mutating func next() -> UInt32 {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return state
    }
}

/// Feeds `stream` to a parser in chunks chosen by `mode`, then finishes it.
private func parse(_ stream: ArraySlice<UInt8>, maximum: Int, mode: UInt8, seed: UInt32) -> HTTPHeadResponseParser.Outcome {
    var parser = HTTPHeadResponseParser(maximumHeadSize: maximum, maximumHeaderCount: 16)
    var generator = Generator(seed: seed)
    var index = stream.startIndex
    var outcome = HTTPHeadResponseParser.Outcome.needMore
    var terminal: HTTPHeadResponseParser.Outcome?
    while index < stream.endIndex {
        let size: Int
        switch mode {
        case 0: size = stream.count
        case 1: size = 1
        case 2: size = Int(generator.next() % 9)  // empty appends too
        default: size = 1 + Int(generator.next() % 300)
        }
        let end = min(stream.endIndex, index + size)
        outcome = parser.append(stream[index..<end])
        check(parser.bytesConsumed <= maximum, "consumed \(parser.bytesConsumed) > maximum \(maximum)")
        if let terminal {
            check(outcome == terminal, "the outcome changed after it was final")
        } else if outcome != .needMore {
            terminal = outcome
        }
        index = end
    }
    let final = parser.finish()
    if let terminal { check(final == terminal, "finish() changed a final outcome") }
    check(final != .needMore, "finish() left the outcome open")
    check(parser.finish() == final, "a second finish() changed the outcome")
    return final
}

private func validText(_ text: String) -> Bool {
    !text.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 || $0 == 0x7F || ($0 < 0x20 && $0 != 0x09) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let maximum = maximumSizes[Int(bytes[0] & 7)] + Int(bytes[0] >> 3)
    let mode = bytes[1] & 3
    let seed = UInt32(bytes[1] >> 2) &+ 1
    let stream = bytes[2...]

    let whole = parse(stream, maximum: maximum, mode: 0, seed: seed)
    let chunked = parse(stream, maximum: maximum, mode: mode, seed: seed)
    check(whole == chunked, "the outcome depends on how the stream is cut (mode \(mode)): \(whole) vs \(chunked)")

    switch whole {
    case .needMore:
        check(false, "needMore after finish()")
    case .failed(let failure):
        check(!failure.message.isEmpty, "a failure without a message")
    case .complete(let head):
        check((100...599).contains(head.status), "status \(head.status)")
        check(head.status == 101 || !(100...199).contains(head.status), "an interim status \(head.status) was returned")
        check(head.headers.count <= 16, "\(head.headers.count) fields")
        check((0...9).contains(head.minorVersion), "minor version \(head.minorVersion)")
        check(validText(head.reasonPhrase), "a control byte in the reason")
        for field in head.headers {
            check(!field.name.isEmpty && validText(field.name) && !field.name.contains(":") && !field.name.contains(" "), "field name '\(field.name)'")
            check(validText(field.value), "a control byte in a value")
            check(field.value.first != " " && field.value.last != " ", "untrimmed value '\(field.value)'")
        }
        // Written out again, it parses to the same head.
        var text = "HTTP/1.\(head.minorVersion) \(head.status)"
        if !head.reasonPhrase.isEmpty { text += " \(head.reasonPhrase)" }
        text += "\r\n"
        for field in head.headers { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        var again = HTTPHeadResponseParser(maximumHeadSize: 1 << 20, maximumHeaderCount: 16)
        let reparsed = again.append(Array(text.utf8))
        check(reparsed == .complete(head), "the round trip changed the head: \(reparsed) vs \(head)")
    }
    return 0
}
