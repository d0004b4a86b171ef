import Switchyard
import Testing

@testable import SwitchyardCalls

@Suite struct KeepaliveTests {
    let start = ContinuousClock.now

    @Test("no keepalive time: no timer, no ping")
    func offByDefault() {
        var pinger = KeepalivePinger(Keepalive(), now: start)
        #expect(verdict(&pinger, now: start + .seconds(3600), openCalls: 1) == .wait(until: nil))
    }

    @Test("a ping after `time` without reads; a read before the timeout keeps the connection")
    func pingThenAck() {
        var pinger = KeepalivePinger(Keepalive(time: .seconds(10), timeout: .seconds(2)), now: start)
        #expect(verdict(&pinger, now: start + .seconds(5), openCalls: 1) == .wait(until: start + .seconds(10)))
        #expect(verdict(&pinger, now: start + .seconds(10), openCalls: 1) == .sendPing(until: start + .seconds(12)))
        #expect(verdict(&pinger, now: start + .seconds(11), openCalls: 1) == .wait(until: start + .seconds(12)))
        pinger.didRead(now: start + .seconds(11))
        #expect(verdict(&pinger, now: start + .seconds(12), openCalls: 1) == .wait(until: start + .seconds(21)))
    }

    @Test("nothing read within the timeout after a ping: the connection is dead")
    func pingTimeout() {
        var pinger = KeepalivePinger(Keepalive(time: .seconds(10), timeout: .seconds(2)), now: start)
        _ = pinger.check(now: start + .seconds(10), openCalls: 1)
        #expect(verdict(&pinger, now: start + .seconds(12), openCalls: 1) == .closeConnection(silentFor: .seconds(12)))
    }

    @Test("reads push the ping back: a busy connection is not pinged")
    func readsPostponePings() {
        var pinger = KeepalivePinger(Keepalive(time: .seconds(10)), now: start)
        pinger.didRead(now: start + .seconds(8))
        #expect(verdict(&pinger, now: start + .seconds(10), openCalls: 1) == .wait(until: start + .seconds(18)))
    }

    @Test("no calls open: no ping unless permitted without calls")
    func withoutCalls() {
        var strict = KeepalivePinger(Keepalive(time: .seconds(10)), now: start)
        #expect(verdict(&strict, now: start + .seconds(10), openCalls: 0) == .wait(until: start + .seconds(20)))
        var permissive = KeepalivePinger(Keepalive(time: .seconds(10), permitWithoutCalls: true), now: start)
        #expect(verdict(&permissive, now: start + .seconds(10), openCalls: 0) == .sendPing(until: start + .seconds(30)))
    }

    @Test("too_many_pings from the server doubles the time")
    func backsOffOnTooManyPings() {
        var pinger = KeepalivePinger(Keepalive(time: .seconds(10)), now: start)
        pinger.peerSaidTooManyPings()
        #expect(verdict(&pinger, now: start + .seconds(10), openCalls: 1) == .wait(until: start + .seconds(20)))
    }

    @Test("keepalive values out of range are invalid options")
    func validation() throws {
        try Keepalive(time: .seconds(1)).validate()
        #expect(throws: TransportError.self) { try Keepalive(time: .zero).validate() }
        #expect(throws: TransportError.self) { try Keepalive(timeout: .seconds(-1)).validate() }
    }
}

@Suite struct PingStrikesTests {
    let start = ContinuousClock.now

    @Test("pings sooner than the minimum interval strike; the third strike (of 2 allowed) closes")
    func strikesOut() {
        var strikes = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(60)))
        #expect(!ping(&strikes, now: start, openCalls: 1))
        #expect(!ping(&strikes, now: start + .seconds(1), openCalls: 1))  // strike 1
        #expect(!ping(&strikes, now: start + .seconds(2), openCalls: 1))  // strike 2
        #expect(ping(&strikes, now: start + .seconds(3), openCalls: 1))  // strike 3: out
    }

    @Test("pings at the permitted interval never strike")
    func politePings() {
        var strikes = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(60)))
        for minute in 0..<20 {
            #expect(!ping(&strikes, now: start + .seconds(60 * minute), openCalls: 1))
        }
    }

    @Test("sending headers or data clears the strikes")
    func dataClears() {
        var strikes = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(60)))
        for second in 0..<3 { _ = strikes.pingReceived(now: start + .seconds(second), openCalls: 1) }
        strikes.didSendHeadersOrData()
        #expect(!ping(&strikes, now: start + .seconds(4), openCalls: 1))
        #expect(!ping(&strikes, now: start + .seconds(5), openCalls: 1))
    }

    @Test("without calls, pings strike unless permitted; with 0 strikes allowed nothing closes")
    func withoutCalls() {
        var strict = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(1)))
        #expect(!ping(&strict, now: start, openCalls: 0))
        #expect(!ping(&strict, now: start + .seconds(10), openCalls: 0))
        #expect(!ping(&strict, now: start + .seconds(20), openCalls: 0))
        #expect(ping(&strict, now: start + .seconds(30), openCalls: 0))
        var permissive = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(1), permitWithoutCalls: true))
        for second in 0..<10 { #expect(!ping(&permissive, now: start + .seconds(10 * second), openCalls: 0)) }
        var unlimited = PingStrikes(KeepaliveEnforcement(minimumPingInterval: .seconds(60), maximumPingStrikes: 0))
        for second in 0..<10 { #expect(!ping(&unlimited, now: start + .seconds(second), openCalls: 1)) }
    }
}

/// `#expect` cannot hold a mutating call: these make it one expression.
private func verdict(_ pinger: inout KeepalivePinger, now: ContinuousClock.Instant, openCalls: Int) -> KeepalivePinger.Action {
    pinger.check(now: now, openCalls: openCalls)
}

private func ping(_ strikes: inout PingStrikes, now: ContinuousClock.Instant, openCalls: Int) -> Bool {
    strikes.pingReceived(now: now, openCalls: openCalls)
}
