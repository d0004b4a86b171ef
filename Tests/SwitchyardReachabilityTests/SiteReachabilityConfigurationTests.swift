import Switchyard
@testable import SwitchyardReachability
import Testing

@Suite("Site reachability: URL and configuration")
struct SiteReachabilityConfigurationTests {
    @Test("http URLs parse into host, port, target and authority", arguments: [
        ("http://example.com", "example.com", 80, "/", "example.com"),
        ("HTTP://Example.com:8080/generate_204", "Example.com", 8080, "/generate_204", "Example.com:8080"),
        ("http://10.0.0.1/a/b?c=d#frag", "10.0.0.1", 80, "/a/b?c=d", "10.0.0.1"),
        ("http://[::1]:8081?q", "::1", 8081, "/?q", "[::1]:8081"),
        ("http://[fe80::1]/", "fe80::1", 80, "/", "[fe80::1]"),
        ("https://example.com/generate_204", "example.com", 443, "/generate_204", "example.com"),
        ("HTTPS://[::1]:8443", "::1", 8443, "/", "[::1]:8443"),
    ])
    func parses(text: String, host: String, port: Int, target: String, authority: String) throws {
        let url = try ReachabilityURL(parsing: text)
        #expect(url.host == host)
        #expect(url.port == port)
        #expect(url.target == target)
        #expect(url.authority == authority)
        #expect(url.endpoint == Endpoint(host: host, port: port))
    }

    @Test("Bad URLs are invalidArgument, saying why", arguments: [
        ("https://", "host is missing"),
        ("HTTPS://user@example.com/", "user information"),
        ("ftp://example.com/", "http://"),
        ("example.com", "http://"),
        ("http://", "host is missing"),
        ("http:///path", "host is missing"),
        ("http://user@example.com/", "user information"),
        ("http://example.com:0/", "port"),
        ("http://example.com:65536/", "port"),
        ("http://example.com:/", "port"),
        ("http://example.com:80a/", "port"),
        ("http://exa mple.com/", "not a reachability URL"),
        ("http://example.com/a b", "space"),
        ("http://[::1/", "]"),
        ("http://[example]/", "IPv6"),
        ("http://::1/", "host"),
    ])
    func rejects(text: String, mentions: String) {
        do {
            _ = try ReachabilityURL(parsing: text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.reason == .invalidAddress)
            #expect(error.message.contains(mentions), "\(error.message)")
        }
    }

    @Test("The request is one HEAD with Host, User-Agent and Connection: close")
    func request() throws {
        let configuration = try SiteReachabilityConfiguration(url: "http://[::1]:8081/gen_204?x=1", userAgent: "t/1")
        #expect(String(decoding: configuration.request, as: UTF8.self)
            == "HEAD /gen_204?x=1 HTTP/1.1\r\nHost: [::1]:8081\r\nUser-Agent: t/1\r\nAccept: */*\r\nConnection: close\r\n\r\n")
    }

    @Test("The answer's rule: expected is reachable; other 2xx, 3xx and 511 are portal; the rest unexpected status")
    func rule() throws {
        let all = try SiteReachabilityConfiguration(url: "http://h/")
        let latency = Duration.milliseconds(3)
        for status in [200, 204, 299] { #expect(all.state(status: status, location: nil, latency: latency) == .reachable(latency: latency)) }
        #expect(all.state(status: 302, location: "http://p/", latency: latency) == .portal(status: 302, location: "http://p/"))
        #expect(all.state(status: 301, location: nil, latency: latency) == .portal(status: 301, location: nil))
        #expect(all.state(status: 511, location: nil, latency: latency) == .portal(status: 511, location: nil))
        for status in [101, 400, 403, 404, 500, 503] {
            guard case .unreachable(let failure) = all.state(status: status, location: nil, latency: latency) else {
                Issue.record("\(status) is not unreachable")
                continue
            }
            #expect(failure.reason == .unexpectedStatus)
            #expect(failure.status == status)
        }
        let only204 = try SiteReachabilityConfiguration(url: "http://h/", expectedStatuses: [204])
        #expect(only204.state(status: 200, location: nil, latency: latency) == .portal(status: 200, location: nil))
        let redirectExpected = try SiteReachabilityConfiguration(url: "http://h/", expectedStatuses: [301])
        #expect(redirectExpected.state(status: 301, location: nil, latency: latency) == .reachable(latency: latency))
    }

    @Test("The backoff grows by its factor up to its maximum")
    func backoff() {
        let backoff = SiteReachabilityConfiguration.Backoff(initial: .milliseconds(100), factor: 2, maximum: .milliseconds(700))
        #expect((0..<6).map { backoff.delay(attempt: $0) } == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(700), .milliseconds(700), .milliseconds(700)])
        let flat = SiteReachabilityConfiguration.Backoff(initial: .seconds(1), factor: 1, maximum: .seconds(1))
        #expect(flat.delay(attempt: 1_000_000) == .seconds(1))
        #expect(backoff.delay(attempt: .max) == .milliseconds(700))
    }

    @Test("Settings out of range are invalidArgument/invalid option")
    func validation() throws {
        let url = try ReachabilityURL(parsing: "http://h/")
        let bad: [SiteReachabilityConfiguration] = [
            SiteReachabilityConfiguration(url: url, timeout: .zero),
            SiteReachabilityConfiguration(url: url, expectedStatuses: []),
            SiteReachabilityConfiguration(url: url, expectedStatuses: [200, 700]),
            SiteReachabilityConfiguration(url: url, backoff: .init(initial: .zero)),
            SiteReachabilityConfiguration(url: url, backoff: .init(factor: 0.5)),
            SiteReachabilityConfiguration(url: url, backoff: .init(factor: .infinity)),
            SiteReachabilityConfiguration(url: url, backoff: .init(initial: .seconds(2), maximum: .seconds(1))),
            SiteReachabilityConfiguration(url: url, userAgent: "a\r\nInjected: yes"),
        ]
        for configuration in bad {
            #expect(throws: TransportError.self) { try configuration.validate() }
            do { try configuration.validate() } catch {
                #expect(error.code == .invalidArgument)
                #expect(error.reason == .invalidOption)
            }
        }
        try SiteReachabilityConfiguration(url: url).validate()
    }

    @Test("States print as the words tools use")
    func descriptions() {
        #expect(ReachabilityState.none.description == "none")
        #expect(ReachabilityState.checking.description == "checking")
        #expect(ReachabilityState.reachable(latency: .microseconds(3_214)).description == "reachable (3.214 ms)")
        #expect(ReachabilityState.reachable(latency: .microseconds(12_005)).description == "reachable (12.005 ms)")
        #expect(ReachabilityState.unreachable(.init(reason: .timeout, message: "m")).description == "unreachable (timeout)")
        #expect(ReachabilityState.unreachable(.init(reason: .unexpectedStatus, message: "m", status: 503)).description == "unreachable (unexpected status 503)")
        #expect(ReachabilityState.portal(status: 302, location: "http://p/").description == "portal (302, location http://p/)")
        #expect(ReachabilityState.portal(status: 511, location: nil).description == "portal (511)")
    }

    @Test("Transport errors map to failure reasons")
    func mapping() {
        func reason(_ code: TransportError.Code, _ reason: TransportError.Reason) -> ReachabilityFailure.Reason {
            ReachabilityFailure(mapping: TransportError(code: code, reason: reason, message: "m")).reason
        }
        #expect(reason(.unavailable, .refused) == .refused)
        #expect(reason(.unavailable, .reset) == .reset)
        #expect(reason(.unavailable, .nameResolution) == .nameResolution)
        #expect(reason(.unavailable, .unreachable) == .noRoute)
        #expect(reason(.deadlineExceeded, .connectTimeout) == .timeout)
        #expect(reason(.unavailable, .timedOut) == .timeout)
        #expect(reason(.unavailable, .stalled) == .timeout)
        #expect(reason(.unavailable, .closed) == .closed)
        #expect(reason(.resourceExhausted, .resourceLimit) == .connectionFailed)
    }
}
