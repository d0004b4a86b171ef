import Switchyard
import Testing

@testable import SwitchyardCalls

@Suite struct ServerConnectionLifetimeTests {
    let start = ContinuousClock.now

    func lifetime(idle: Duration? = nil, age: Duration? = nil, grace: Duration? = nil) -> ServerConnectionLifetime {
        ServerConnectionLifetime(maximumIdle: idle, maximumAge: age, grace: grace, pingTimeout: .seconds(10), opened: start)
    }

    @Test("no maximum idle or age: nothing to watch")
    func inactive() {
        var off = lifetime()
        #expect(!off.isActive)
        #expect(check(&off, at: start + .seconds(86_400), idleSince: start) == .wait(until: nil))
    }

    @Test("idle for the maximum since the last call ended: GOAWAY; the drain is nudged after the ping timeout")
    func idle() {
        var watch = lifetime(idle: .seconds(60))
        #expect(check(&watch, at: start, idleSince: start) == .wait(until: start + .seconds(60)))
        #expect(check(&watch, at: start + .seconds(60), idleSince: start + .seconds(30)) == .wait(until: start + .seconds(90)))
        #expect(check(&watch, at: start + .seconds(90), idleSince: start + .seconds(30)) == .goAway(.idle, until: start + .seconds(100)))
        #expect(check(&watch, at: start + .seconds(100), idleSince: start + .seconds(30)) == .finishGoAway(until: nil))
        #expect(check(&watch, at: start + .seconds(200), idleSince: start + .seconds(30)) == .wait(until: nil))
    }

    @Test("a call open when the timer fires: looked at again one idle period later, which the idle deadline cannot precede")
    func busy() {
        var watch = lifetime(idle: .seconds(60))
        #expect(check(&watch, at: start + .seconds(60), idleSince: nil) == .wait(until: start + .seconds(120)))
        // The call ended at 61 s: its idle deadline (121 s) is after the next look.
        #expect(check(&watch, at: start + .seconds(120), idleSince: start + .seconds(61)) == .wait(until: start + .seconds(121)))
        #expect(check(&watch, at: start + .seconds(121), idleSince: start + .seconds(61)) == .goAway(.idle, until: start + .seconds(131)))
    }

    @Test("at the maximum age: GOAWAY even while calls are open; past the grace: close")
    func age() {
        var watch = lifetime(age: .seconds(600), grace: .seconds(5))
        #expect(check(&watch, at: start + .seconds(1), idleSince: nil) == .wait(until: start + .seconds(600)))
        #expect(check(&watch, at: start + .seconds(600), idleSince: nil) == .goAway(.age, until: start + .seconds(605)))
        #expect(check(&watch, at: start + .seconds(605), idleSince: nil) == .close)
        #expect(check(&watch, at: start + .seconds(700), idleSince: nil) == .wait(until: nil))
    }

    @Test("with a long grace the unanswered GOAWAY PING is nudged first, then the close")
    func graceAfterNudge() {
        var watch = lifetime(age: .seconds(10), grace: .seconds(60))
        #expect(check(&watch, at: start + .seconds(10), idleSince: nil) == .goAway(.age, until: start + .seconds(20)))
        #expect(check(&watch, at: start + .seconds(20), idleSince: nil) == .finishGoAway(until: start + .seconds(70)))
        #expect(check(&watch, at: start + .seconds(70), idleSince: nil) == .close)
    }

    @Test("the earlier of the idle and age deadlines is the next look")
    func earliest() {
        var watch = lifetime(idle: .seconds(60), age: .seconds(30))
        #expect(check(&watch, at: start, idleSince: start) == .wait(until: start + .seconds(30)))
        #expect(check(&watch, at: start + .seconds(30), idleSince: start) == .goAway(.age, until: start + .seconds(40)))
    }

    @Test("a configuration out of range is an invalid option")
    func validation() throws {
        try CallServerConfiguration(keepalive: Keepalive(time: .seconds(1)), maximumConnectionIdle: .seconds(1)).validate()
        #expect(throws: TransportError.self) { try CallServerConfiguration(maximumConnectionIdle: .zero).validate() }
        #expect(throws: TransportError.self) { try CallServerConfiguration(maximumConnectionAge: .seconds(-1)).validate() }
        #expect(throws: TransportError.self) { try CallServerConfiguration(maximumConnectionAgeGrace: .zero).validate() }
        #expect(throws: TransportError.self) {
            try CallServerConfiguration(keepaliveEnforcement: KeepaliveEnforcement(maximumPingStrikes: -1)).validate()
        }
        #expect(throws: TransportError.self) { try CallServerConfiguration(keepalive: Keepalive(time: .zero)).validate() }
    }
}

@Suite struct ChannelKeepaliveTests {
    @Test("too_many_pings doubles the time new connections use, once per connection that heard it")
    func doubling() {
        let channel = ChannelKeepalive(Keepalive(time: .seconds(10)))
        channel.peerSaidTooManyPings(toConnectionPingingEvery: .seconds(10))
        #expect(channel.keepalive.time == .seconds(20))
        // A second connection that still pinged every 10 s does not undo or repeat it.
        channel.peerSaidTooManyPings(toConnectionPingingEvery: .seconds(10))
        #expect(channel.keepalive.time == .seconds(20))
        channel.peerSaidTooManyPings(toConnectionPingingEvery: .seconds(20))
        #expect(channel.keepalive.time == .seconds(40))
    }
}

private func check(_ lifetime: inout ServerConnectionLifetime, at now: ContinuousClock.Instant, idleSince: ContinuousClock.Instant?) -> ServerConnectionLifetime.Action {
    lifetime.check(now: now, idleSince: idleSince)
}
