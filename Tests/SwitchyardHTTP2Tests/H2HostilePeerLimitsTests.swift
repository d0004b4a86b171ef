import SwitchyardHPACK
import Testing

@testable import SwitchyardHTTP2

/// The limits against hostile peers: each attack ends in the configured code, and nothing
/// grows without bound before it does.
@Suite struct H2HostilePeerLimitsTests {
    @Test("rapid reset: streams opened and reset past the rate is ENHANCE_YOUR_CALM; the rate refills with time")
    func rapidReset() {
        var configuration = H2Configuration()
        configuration.streamResetRate = H2RateLimit(10, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        var id: UInt32 = 1
        for _ in 0..<10 {
            peer.send(peer.request(id))
            peer.send(.rstStream(H2StreamID(id), .cancel))
            id += 2
        }
        #expect(peer.connectionError == nil)
        peer.advance(by: .seconds(1))  // one token back
        peer.send(peer.request(id))
        peer.send(.rstStream(H2StreamID(id), .cancel))
        #expect(peer.connectionError == nil)
        id += 2
        peer.send(peer.request(id))
        peer.send(.rstStream(H2StreamID(id), .cancel))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
        #expect(peer.takeFrames().goAway?.code == .enhanceYourCalm)
    }

    @Test("resets the peer provokes by stream errors count as rapid resets too")
    func provokedResets() {
        var configuration = H2Configuration()
        configuration.streamResetRate = H2RateLimit(5, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        for index in 0..<6 {
            let id = H2StreamID(UInt32(1 + 2 * index))
            peer.send(.headers(id, headerBlock: peer.encode([HPACKField(":method", "GET")]), endStream: true, endHeaders: true))
        }
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("streams over SETTINGS_MAX_CONCURRENT_STREAMS are refused, the others go on; too many refusals is ENHANCE_YOUR_CALM")
    func refusedOverLimit() {
        var configuration = H2Configuration()
        configuration.maxConcurrentStreams = 2
        configuration.refusedStreamRate = H2RateLimit(3, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        peer.send(peer.request(1))
        peer.send(peer.request(3))
        peer.send(peer.request(5))
        #expect(peer.takeFrames().resets == [H2StreamID(5): .refusedStream])
        #expect(peer.machine.openStreamCount == 2)
        // DATA the client sent before it saw the refusal is ignored.
        peer.send(.data(H2StreamID(5), payload: [1], endStream: true))
        peer.send(.data(H2StreamID(1), payload: [1], endStream: true))
        #expect(peer.events.last == .data(H2StreamID(1), [1], endStream: true, flowControlledLength: 1))
        peer.send(peer.request(7))
        peer.send(peer.request(9))
        #expect(peer.connectionError == nil)
        peer.send(peer.request(11))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("the client's view: the server's SETTINGS_MAX_CONCURRENT_STREAMS stops openStream until a stream closes")
    func clientStreamLimit() throws {
        var peer = H2ScriptedPeer(.client, peerSettings: [H2Setting(.maxConcurrentStreams, 1)])
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: true)
        #expect(!peer.machine.canOpenStream)
        do {
            _ = try peer.machine.openStream(headers: H2Fields.request, endStream: true)
            Issue.record("opened past the limit")
        } catch {
            #expect(error.code == .streamLimitReached)
        }
        peer.send(.headers(id, headerBlock: peer.encode(H2Fields.response + H2Fields.trailers), endStream: true, endHeaders: true))
        #expect(peer.machine.canOpenStream)
    }

    @Test("CONTINUATION flood: too many frames, or a block past the list size and its slack, before END_HEADERS")
    func continuationFlood() {
        var peer = H2ScriptedPeer(.server)
        peer.send(.headers(H2StreamID(1), headerBlock: [], endStream: true, endHeaders: false))
        for _ in 0..<32 { peer.send(.continuation(H2StreamID(1), headerBlock: [], endHeaders: false)) }
        #expect(peer.connectionError == nil)
        peer.send(.continuation(H2StreamID(1), headerBlock: [], endHeaders: false))
        #expect(peer.connectionError?.code == .enhanceYourCalm)

        var other = H2ScriptedPeer(.server)
        let chunk = [UInt8](repeating: 0x40, count: 16_384)
        other.send(.headers(H2StreamID(1), headerBlock: chunk, endStream: true, endHeaders: false))
        other.send(.continuation(H2StreamID(1), headerBlock: chunk, endHeaders: false))
        #expect(other.connectionError?.code == .enhanceYourCalm)
    }

    @Test("HPACK bomb: a small block that decodes past SETTINGS_MAX_HEADER_LIST_SIZE is ENHANCE_YOUR_CALM")
    func hpackBomb() {
        var peer = H2ScriptedPeer(.server)
        // One 4,000-octet field in the dynamic table, then indexed 100 times: 1 octet each.
        let big = HPACKField("x-bomb", String(repeating: "a", count: 4000))
        var block = peer.encode(H2Fields.request + [big])
        peer.send(.headers(H2StreamID(1), headerBlock: block, endStream: true, endHeaders: true))
        #expect(peer.connectionError == nil)
        // The request's own fields would evict the big one: the bomb is the field alone.
        block = peer.encode([HPACKField](repeating: big, count: 100))
        #expect(block.count < 200)
        peer.send(.headers(H2StreamID(3), headerBlock: block, endStream: true, endHeaders: true))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("PING flood: past the rate is ENHANCE_YOUR_CALM")
    func pingFlood() {
        var configuration = H2Configuration()
        configuration.pingRate = H2RateLimit(20, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        for index in 0..<20 { peer.send(.ping(UInt64(index), ack: false)) }
        #expect(peer.connectionError == nil)
        #expect(peer.takeFrames().count == 20)
        peer.send(.ping(99, ack: false))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("acknowledgements the peer makes us queue while it does not read are bounded")
    func queuedResponsesBound() {
        var configuration = H2Configuration()
        configuration.maxQueuedResponseFrames = 10
        var peer = H2ScriptedPeer(.server, configuration)
        for index in 0..<10 { peer.send(.ping(UInt64(index), ack: false)) }
        #expect(peer.connectionError == nil)
        peer.send(.settings([]))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("SETTINGS flood: past the rate is ENHANCE_YOUR_CALM")
    func settingsFlood() {
        var configuration = H2Configuration()
        configuration.settingsRate = H2RateLimit(5, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        for _ in 0..<4 { peer.send(.settings([])) }  // the first one came at start
        #expect(peer.connectionError == nil)
        peer.send(.settings([]))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("empty DATA frames past the rate are ENHANCE_YOUR_CALM")
    func emptyDataFlood() {
        var configuration = H2Configuration()
        configuration.emptyFrameRate = H2RateLimit(10, per: .seconds(10))
        var peer = H2ScriptedPeer(.server, configuration)
        peer.send(peer.request(1))
        for _ in 0..<10 { peer.send(.data(H2StreamID(1), payload: [], endStream: false)) }
        #expect(peer.connectionError == nil)
        #expect(peer.events.count == 1)  // empty frames tell the upper layer nothing
        peer.send(.data(H2StreamID(1), payload: [], endStream: false))
        #expect(peer.connectionError?.code == .enhanceYourCalm)
    }

    @Test("a token bucket allows its burst, then one event per refill interval")
    func rateLimiter() {
        var limiter = H2RateLimiter(H2RateLimit(2, per: .seconds(2)))
        let start = ContinuousClock.now
        let offsets: [Duration] = [.zero, .zero, .zero, .milliseconds(900), .seconds(1), .seconds(1), .seconds(100), .seconds(100), .seconds(100)]
        let taken = offsets.map { limiter.take(now: start.advanced(by: $0)) }
        #expect(taken == [true, true, false, false, true, false, true, true, false])
    }
}
