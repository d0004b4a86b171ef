import Switchyard
import Synchronization
import Testing

@testable import SwitchyardCalls

@Suite struct ConnectionBackoffTests {
    /// The sequence of connection-backoff.md with its defaults and no jitter: 1 s, then
    /// times 1.6 up to 120 s; every attempt may take 20 s to connect.
    @Test("gRPC's defaults, without jitter: 1, 1.6, 2.56, ... capped at 120 s")
    func defaultsWithoutJitter() {
        var attempts = ConnectionBackoff(jitter: 0).attempts()
        var delays: [Double] = []
        for _ in 0..<14 {
            let attempt = attempts.next()
            #expect(attempt.connectTimeout == .seconds(20) || attempt.nextAttemptAfter > .seconds(20))
            #expect(attempt.connectTimeout >= attempt.nextAttemptAfter)
            delays.append(attempt.nextAttemptAfter.seconds)
        }
        let expected = [1, 1.6, 2.56, 4.096, 6.5536, 10.48576, 16.777216, 26.8435456, 42.94967296, 68.719476736, 109.9511627776, 120, 120, 120]
        for (delay, want) in zip(delays, expected) {
            #expect(abs(delay - want) < 1e-6, "backoff \(delay) s, expected \(want) s")
        }
        // Past 20 s of backoff, an attempt may take as long as its backoff.
        var long = ConnectionBackoff(jitter: 0).attempts()
        for _ in 0..<8 { _ = long.next() }
        let attempt = long.next()
        #expect(attempt.connectTimeout == attempt.nextAttemptAfter)
    }

    @Test("jitter moves each backoff after the first by the drawn share, within ±jitter")
    func jitterFromTheSource() {
        let drawn = Mutex<[ClosedRange<Double>]>([])
        let shares = Mutex<[Double]>([0.2, -0.2, 0.1])
        let backoff = ConnectionBackoff(jitterSource: { range in
            drawn.withLock { $0.append(range) }
            return shares.withLock { $0.removeFirst() }
        })
        var attempts = backoff.attempts()
        #expect(attempts.next().nextAttemptAfter == .seconds(1), "the first deadline is not jittered")
        #expect(abs(attempts.next().nextAttemptAfter.seconds - 1.6 * 1.2) < 1e-9)
        #expect(abs(attempts.next().nextAttemptAfter.seconds - 2.56 * 0.8) < 1e-9)
        #expect(abs(attempts.next().nextAttemptAfter.seconds - 4.096 * 1.1) < 1e-9)
        #expect(drawn.withLock { $0 } == [-0.2...0.2, -0.2...0.2, -0.2...0.2])
    }

    @Test("the same seed gives the same delays")
    func seededSourceRepeats() {
        func delays(seed: UInt64) -> [Duration] {
            let generator = Mutex(SplitMix(seed: seed))
            var attempts = ConnectionBackoff(jitterSource: { range in generator.withLock { Double.random(in: range, using: &$0) } }).attempts()
            return (0..<10).map { _ in attempts.next().nextAttemptAfter }
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
    }

    @Test("values out of range are refused as invalid options")
    func validation() throws {
        try ConnectionBackoff().validate()
        for bad in [
            ConnectionBackoff(initial: .zero), ConnectionBackoff(multiplier: 0.5), ConnectionBackoff(jitter: 1.5),
            ConnectionBackoff(initial: .seconds(10), maximum: .seconds(5)), ConnectionBackoff(minimumConnectTimeout: .zero),
            ConnectionBackoff(multiplier: .nan),
        ] {
            #expect(throws: TransportError.self) { try bad.validate() }
            do { try bad.validate() } catch { #expect(error.reason == .invalidOption) }
        }
    }
}

/// A small seeded generator (SplitMix64), so a test's random draws repeat.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
