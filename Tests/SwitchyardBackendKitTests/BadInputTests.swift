import Switchyard
import SwitchyardBackendKit
import Testing

/// Bad input where it enters the toolkit every backend shares: an endpoint whose port was
/// set out of range after it was made, an IPv6 zone that names no interface, and stall
/// and connect timeouts too long for the kernel's fields. Each is a thrown error naming
/// the value (or a clamp), never a trap.
@Suite("Bad input: the toolkit's address and timeout checks")
struct ToolkitBadInputTests {
    /// `Endpoint.port` is a `var`: a program can set it past what `init(host:port:)` checked.
    static func endpoint(port: Int) -> Endpoint {
        var endpoint = Endpoint(host: "127.0.0.1", port: 80)
        endpoint.port = port
        return endpoint
    }

    @Test("A port set out of range is refused by the checks before a socket address is made", arguments: [70000, -1, Int.max])
    func portSetOutOfRange(port: Int) {
        let endpoint = Self.endpoint(port: port)
        for (what, check) in [
            ("checkHostAndPort", { () throws(TransportError) in try NameResolution.checkHostAndPort(endpoint) }),
            ("SystemSocketAddress(literal:)", { () throws(TransportError) in _ = try SystemSocketAddress(literal: endpoint) }),
        ] as [(String, () throws(TransportError) -> Void)] {
            do {
                try check()
                Issue.record("\(what) accepted port \(port)")
            } catch {
                #expect(error.code == .invalidArgument && error.reason == .invalidAddress, "\(what): \(error)")
                #expect(error.message.contains("invalid port \"\(port)\" (0...65535)"), "\(what): \(error.message)")
            }
        }
    }

    @Test("An IPv6 zone that names no interface is refused naming the zone")
    func unknownZone() {
        do {
            _ = try SystemSocketAddress(literal: Endpoint(host: "fe80::1%nosuchif0", port: 80))
            Issue.record("a zone naming no interface was accepted")
        } catch {
            #expect(error.code == .invalidArgument && error.reason == .invalidAddress, "\(error)")
            #expect(error.message.contains("invalid IPv6 zone \"nosuchif0\""), "\(error.message)")
        }
        // A zone that is an interface index is taken as one.
        #expect((try? SystemSocketAddress(literal: Endpoint(host: "fe80::1%1", port: 80))) != nil)
    }

    @Test("A stall timeout not positive or over the kernel's bound is an invalid option naming it", arguments: [
        Duration.zero, .seconds(-1), .seconds(3 * 86_400 + 1), .seconds(Int64.max),
    ])
    func stallTimeoutOutOfRange(timeout: Duration) {
        do {
            _ = try StallSettings.of(TransportConfiguration(stallTimeout: timeout))
            Issue.record("stall timeout \(timeout) was accepted")
        } catch {
            #expect(error.code == .invalidArgument && error.reason == .invalidOption, "\(error)")
            #expect(error.message.contains("invalid stall timeout \(timeout)"), "\(error.message)")
        }
    }

    @Test("The longest stall timeout gives kernel settings the kernel takes")
    func longestStallTimeout() throws {
        let settings = try #require(try StallSettings.of(TransportConfiguration(stallTimeout: StallSettings.maximumTimeout)))
        #expect(settings.keepaliveInterval <= 32_767)  // MAX_TCP_KEEPINTVL
        #expect(settings.keepaliveCount <= 127)  // MAX_TCP_KEEPCNT
        #expect(settings.userTimeoutMilliseconds <= UInt32(Int32.max))  // TCP_USER_TIMEOUT is an int
        // Made directly with a longer one, the settings clamp rather than trap.
        let clamped = StallSettings(timeout: .seconds(Int64.max))
        #expect(clamped.keepaliveInterval == settings.keepaliveInterval)
        #expect(clamped.userTimeoutMilliseconds == settings.userTimeoutMilliseconds)
    }

    @Test("A timeout of centuries converts to milliseconds by clamping, not overflowing")
    func hugeMilliseconds() {
        #expect(StallSettings.milliseconds(.seconds(Int64.max)) == UInt32.max)
        #expect(StallSettings.milliseconds(.seconds(5_000_000)) == UInt32.max)
        #expect(StallSettings.milliseconds(.milliseconds(1500)) == 1500)
        #expect(StallSettings.milliseconds(.seconds(-3)) == 1)
    }
}
