import Switchyard
import SwitchyardCalls
import SwitchyardReachability
import SwitchyardTestSupport
import Testing

/// Bad input where it enters the core: hosts, IP literals, zones, ports, Unix paths,
/// reachability URLs, frames and call status trailers. Each is an error that names the
/// value at fault (docs/ERRORS.md, "Bad input"), never a trap.
@Suite("Bad input: endpoints, URLs and frames")
struct BadInputTests {
    /// Expects `body` to throw `invalidArgument`/`invalid address` whose message holds
    /// every one of `words`.
    func expectInvalidAddress(
        _ words: [String], sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(TransportError) -> Void
    ) {
        expectTransportError(.invalidArgument, .invalidAddress, mentioning: words, sourceLocation: sourceLocation, body)
    }

    @Test("A port out of range is refused naming it, by validate(port:), checked(host:port:) and parsing", arguments: [
        70000, 65536, -1, Int.max, Int.min,
    ])
    func portOutOfRange(port: Int) {
        expectInvalidAddress(["invalid port \"\(port)\" (0...65535)"]) { () throws(TransportError) in try Endpoint.validate(port: port) }
        expectInvalidAddress(["invalid port \"\(port)\""]) { () throws(TransportError) in _ = try Endpoint.checked(host: "127.0.0.1", port: port) }
        expectInvalidAddress(["host:\(port)", "invalid port \"\(port)\""]) { () throws(TransportError) in _ = try Endpoint(parsing: "host:\(port)") }
    }

    @Test("A port that is not a number is refused naming the text", arguments: ["http", "8o", "+80", " 80", "0x50", "123456"])
    func portNotANumber(text: String) {
        expectInvalidAddress(["invalid port \"\(text)\""]) { () throws(TransportError) in _ = try Endpoint(parsing: "host:\(text)") }
    }

    @Test("A missing port says so")
    func portMissing() {
        expectInvalidAddress(["'host:'", "the port after ':' is missing"]) { () throws(TransportError) in _ = try Endpoint(parsing: "host:") }
        expectInvalidAddress(["missing ':port'"]) { () throws(TransportError) in _ = try Endpoint(parsing: "host") }
    }

    @Test("Valid input passes checked(host:port:) unchanged, brackets removed as init(host:port:) does")
    func checkedAcceptsValid() throws {
        #expect(try Endpoint.checked(host: "127.0.0.1", port: 0) == Endpoint(host: "127.0.0.1", port: 0))
        #expect(try Endpoint.checked(host: "[::1]", port: 65535) == Endpoint(host: "::1", port: 65535))
        #expect(try Endpoint.checked(host: "fe80::1%eth0", port: 1).host == "fe80::1%eth0")
        #expect(try Endpoint.checked(host: "my-host_1.example", port: 80).hostKind == .name)
        try Endpoint.validate(host: "[::1]")
    }

    @Test("A malformed IPv4 literal is named as one, with what is wrong", arguments: [
        ("1.2.3.256", "\"256\" is over 255"), ("256.1.1.1", "\"256\" is over 255"), ("1.2.3", "3 parts"),
        ("1.2.3.4.5", "5 parts"), ("01.2.3.4", "leading zero"), ("1..2.3", "empty part"), ("10.0.0.1234", "over 255"),
    ])
    func malformedIPv4(host: String, why: String) {
        expectInvalidAddress(["invalid IPv4 literal \"\(host)\"", why]) { () throws(TransportError) in try Endpoint.validate(host: host) }
        expectInvalidAddress(["invalid IPv4 literal \"\(host)\""]) { () throws(TransportError) in _ = try Endpoint(parsing: "\(host):80") }
    }

    @Test("A malformed IPv6 literal or scope is named as one, with what is wrong", arguments: [
        ("fe80::1%", "the zone after '%' is empty"), ("1::2::3", "'::' appears more than once"),
        ("12345::1", "\"12345\" is not 1 to 4 hex digits"), ("g::1", "\"g\" is not 1 to 4 hex digits"),
        ("1:2:3:4:5:6:7:8:9", "9 groups"), ("1:2:3", "3 groups"), ("::1.2.3.256", "IPv4 tail \"1.2.3.256\""),
        ("1.2.3.4::", "an IPv4 tail comes last"), ("%eth0", "no address before the zone"), (":::", "empty group"),
    ])
    func malformedIPv6(host: String, why: String) {
        expectInvalidAddress(["invalid IPv6 literal \"\(host)\"", why]) { () throws(TransportError) in try Endpoint.validate(host: host) }
        expectInvalidAddress(["invalid IPv6 literal \"\(host)\""]) { () throws(TransportError) in _ = try Endpoint(parsing: "[\(host)]:80") }
    }

    @Test("Brackets hold an IPv6 literal only: a name or an IPv4 literal in them is named", arguments: [
        "[example.com]", "[127.0.0.1]", "[String10]",
    ])
    func bracketsHoldIPv6Only(host: String) {
        expectInvalidAddress(["invalid host \"\(host)\"", "brackets hold an IPv6 literal only"]) { () throws(TransportError) in try Endpoint.validate(host: host) }
    }

    @Test("An IPv6 zone that cannot be an interface name is named", arguments: [
        "fe80::1%eth0/1", "fe80::1%a b", "fe80::1%eth\u{0}0", "fe80::1%" + String(repeating: "i", count: 16),
    ])
    func malformedZone(host: String) {
        expectInvalidAddress(["invalid IPv6 zone", "an interface name is 1 to 15 bytes"]) { () throws(TransportError) in try Endpoint.validate(host: host) }
    }

    @Test("A malformed host name is named, with the character or label at fault", arguments: [
        ("bad host", "a space (U+0020)"), ("bad!", "'!' (U+0021)"), ("tab\there", "a control character (U+0009)"),
        ("a..b", "empty label"), ("trailing.", "empty label"), ("bücher.de", "'ü' (U+00FC)"),
        (String(repeating: "x", count: 64) + ".com", "64 bytes long; a label is at most 63"),
    ])
    func malformedName(host: String, why: String) {
        expectInvalidAddress(["invalid host name \"\(host)\"", why]) { () throws(TransportError) in try Endpoint.validate(host: host) }
    }

    @Test("An empty host, or one over 253 bytes, says so")
    func emptyOrLongHost() {
        expectInvalidAddress(["the host is empty"]) { () throws(TransportError) in try Endpoint.validate(host: "") }
        expectInvalidAddress(["the host is empty"]) { () throws(TransportError) in try Endpoint.validate(host: "[]") }
        let long = Array(repeating: "abcdefghi", count: 26).joined(separator: ".")
        expectInvalidAddress(["invalid host name", "\(long.utf8.count) bytes long", "at most 253"]) { () throws(TransportError) in
            try Endpoint.validate(host: long)
        }
    }

    @Test("A Unix path too long, empty or holding a NUL is named with its length or fault")
    func badUnixPath() {
        let long = "/" + String(repeating: "p", count: Endpoint.maximumPathLength)
        expectInvalidAddress(["unix:\(long)", "\(long.utf8.count) bytes long", "at most \(Endpoint.maximumPathLength)"]) { () throws(TransportError) in
            try Endpoint.validate(path: long)
        }
        expectInvalidAddress(["the path is empty"]) { () throws(TransportError) in try Endpoint.validate(path: "@") }
        expectInvalidAddress(["NUL byte"]) { () throws(TransportError) in _ = try Endpoint(parsing: "unix:/a\u{0}b") }
    }

    @Test("A reachability URL with a bad port or host names it", arguments: [
        ("http://example.com:70000/", "invalid port \"70000\" (1...65535)"),
        ("http://example.com:0/", "invalid port \"0\" (1...65535)"),
        ("http://example.com:http/", "invalid port \"http\""),
        ("http://example.com:/", "the port after ':' is missing"),
        ("http://1.2.3.256/", "invalid IPv4 literal \"1.2.3.256\""),
        ("http://bad_host!/", "invalid host name \"bad_host!\""),
        ("http://[fe80::1%]/", "'fe80::1%' is not an IPv6 literal"),
    ])
    func badReachabilityURL(url: String, why: String) {
        expectInvalidAddress(["'\(url)'", why]) { () throws(TransportError) in _ = try ReachabilityURL(parsing: url) }
    }

    @Test("Malformed frames name the flags byte or the announced length")
    func malformedFrames() {
        var flags = FrameDecoder(maximumMessageSize: 16)
        flags.append([0x7f, 0, 0, 0, 1, 0])
        #expect(throws: TransportError.self) { try flags.next() }
        do {
            _ = try flags.next()
        } catch {
            #expect(error.reason == .unknownFrameFlags && error.message.contains("0x7f"), "\(error)")
        }
        var large = FrameDecoder(maximumMessageSize: 16)
        large.append([0x00, 0, 0, 0x01, 0x00])
        do {
            _ = try large.next()
            Issue.record("a frame of 256 bytes over a maximum of 16 was accepted")
        } catch {
            #expect(error.reason == .frameTooLarge && error.message.contains("256") && error.message.contains("16"), "\(error)")
        }
        var truncated = FrameDecoder()
        truncated.append([0x00, 0, 0, 0, 9, 1, 2])
        #expect(throws: Never.self) { _ = try truncated.next() }
        do {
            try truncated.finish()
            Issue.record("a cut-off frame was accepted at end of stream")
        } catch {
            #expect(error.reason == .truncatedFrame && error.message.contains("7 bytes"), "\(error)")
        }
    }

    @Test("A malformed status trailer is a protocol violation saying what is wrong", arguments: [
        ([UInt8](), "0 bytes; a status has at least 2"), ([0x05], "1 byte; a status has at least 2"),
        ([0xff, 0x00], "unknown code 255"), ([0x05, 0x09, 0x61], "the reason's length 9 runs past the frame's 3 bytes"),
    ])
    func malformedStatus(payload: [UInt8], why: String) {
        do {
            _ = try CallStatus(decoding: payload)
            Issue.record("\(payload) decoded as a status")
        } catch {
            #expect(error.reason == .protocolViolation, "\(error)")
            #expect(error.message == "malformed status frame: \(why)", "\(error)")
        }
    }
}

extension BadInputTests {
    /// A transport whose every operation fails: the checks must come before it is used.
    final class RefusingTransport: Transport {
        var name: String { "refusing" }
        func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection { throw TransportError.transportShutdown() }
        func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener { throw TransportError.transportShutdown() }
        func shutdown(gracePeriod: Duration) async {}
        func shutdownNow() async {}
    }

    @Test("A call's maximum message size out of range is refused by name before any connect or listen", arguments: [-1, Int.min, Int(UInt32.max) + 1])
    func callOptionsOutOfRange(size: Int) async {
        let options = CallConfiguration(maximumMessageSize: size)
        func check(_ what: String, _ error: any Error) {
            let error = error as? TransportError
            #expect(error?.code == .invalidArgument && error?.reason == .invalidOption, "\(what): \(String(describing: error))")
            #expect(error?.message.contains("invalid maximumMessageSize \(size)") == true, "\(what): \(String(describing: error))")
        }
        do {
            try options.validate()
            Issue.record("validate accepted \(size)")
        } catch { check("validate", error) }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 1), transport: RefusingTransport())
        do {
            _ = try await channel.withCall(options: options) { _ in }
            Issue.record("a call started with \(size)")
        } catch { check("withCall", error) }
        do {
            _ = try await CallServer.start(transport: RefusingTransport(), on: Endpoint(host: "127.0.0.1", port: 0), options: options) { _ in .ok }
            Issue.record("a call server started with \(size)")
        } catch { check("CallServer.start", error) }
        #expect(throws: Never.self) { try CallConfiguration(maximumMessageSize: 0).validate() }
    }

    @Test("A call timeout that is not positive is refused by name before any connect", arguments: [Duration.zero, .milliseconds(-5)])
    func callTimeoutNotPositive(timeout: Duration) async {
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: 1), transport: RefusingTransport())
        do {
            _ = try await channel.withCall(options: CallConfiguration(timeout: timeout)) { _ in }
            Issue.record("a call started with timeout \(timeout)")
        } catch {
            let error = error as? TransportError
            #expect(error?.code == .invalidArgument && error?.reason == .invalidOption, "\(String(describing: error))")
            #expect(error?.message.contains("invalid call timeout \(timeout)") == true, "\(String(describing: error))")
        }
        #expect(throws: Never.self) { try CallConfiguration(timeout: .nanoseconds(1)).validate() }
    }

    @Test("Transport settings out of range are named by TransportConfiguration.validate()")
    func configurationOutOfRange() {
        for (configuration, words) in [
            (TransportConfiguration(eventLoopCount: 0), "invalid event loop count 0 (1...1024"),
            (TransportConfiguration(eventLoopCount: 1025), "invalid event loop count 1025"),
            (TransportConfiguration(reservedDescriptors: -5), "invalid reservedDescriptors -5"),
            (TransportConfiguration(stallTimeout: .zero), "invalid stall timeout 0.0 seconds"),
        ] {
            do {
                try configuration.validate()
                Issue.record("\(configuration) was accepted")
            } catch {
                #expect(error.code == .invalidArgument && error.reason == .invalidOption && error.message.contains(words), "\(error)")
            }
        }
        #expect(throws: Never.self) { try TransportConfiguration().validate() }
        #expect(throws: Never.self) { try TransportConfiguration(eventLoopCount: 1024, stallTimeout: .seconds(1), reservedDescriptors: 0).validate() }
    }
}

extension BadInputTests {
    @Test("A group with a sign is not hex digits, though UInt16(_:radix:) would read it", arguments: ["::+1", "-0::1", "1:+2:3:4:5:6:7:8"])
    func signedGroup(host: String) {
        #expect(IPAddress.parseIPv6(host) == nil)
        expectInvalidAddress(["invalid IPv6 literal \"\(host)\"", "not 1 to 4 hex digits"]) { () throws(TransportError) in try Endpoint.validate(host: host) }
    }

    /// Every parser entry, fed 20,000 strings built from the characters that matter to it
    /// (a fixed seed, so a failure repeats): none traps, and every refusal is
    /// invalidArgument / invalid address naming the text.
    @Test("The endpoint and URL parsers refuse any text by name and never trap")
    func noTrapOnAnyText() {
        var state: UInt64 = 0x5EED_0F_BAD_1
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let alphabet = Array("0123456789abcdefABCDEF:.%[]@/-_+ unix:http://\u{0}é")
        for _ in 0..<20_000 {
            let length = Int(next() % 24)
            let text = String((0..<length).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
            do {
                _ = try Endpoint(parsing: text)
            } catch {
                #expect(error.code == .invalidArgument && error.reason == .invalidAddress, "\(text.debugDescription): \(error)")
                #expect(error.message.contains(text), "\(text.debugDescription): \(error.message)")
            }
            do {
                try Endpoint.validate(host: text)
            } catch {
                #expect(error.code == .invalidArgument && error.reason == .invalidAddress, "\(text.debugDescription): \(error)")
            }
            do {
                _ = try ReachabilityURL(parsing: "http://" + text)
            } catch {
                #expect(error.message.contains("http://" + text), "\(text.debugDescription): \(error.message)")
            }
        }
    }
}
