import SwitchyardCalls
import Testing

@Suite("gRPC grpc-timeout")
struct GRPCTimeoutTests {
    @Test(
        "A duration is sent in the coarsest unit that holds it exactly in 8 digits",
        arguments: [
            (Duration.seconds(1), "1S"),
            (.milliseconds(100), "100m"),
            (.nanoseconds(99_999_999), "99999999n"),
            (.nanoseconds(1), "1n"),
            (.microseconds(1500), "1500u"),
            (.seconds(60), "1M"),
            (.seconds(3600), "1H"),
            (.seconds(90), "90S"),
            (.milliseconds(99_999_999), "99999999m"),
            (.seconds(99_999_999), "99999999S"),
            (.seconds(100_000_020), "1666667M"),  // 9 digits in seconds, exact in minutes
        ])
    func exact(duration: Duration, expected: String) {
        #expect(GRPCTimeout(rounding: duration).description == expected)
    }

    @Test("A duration no unit holds exactly in 8 digits is rounded up in the finest unit that holds it")
    func roundedUp() {
        // 100,000,001 ns needs 9 digits in n: 100,000.001 us rounds up to 100001u.
        #expect(GRPCTimeout(rounding: .nanoseconds(100_000_001)).description == "100001u")
        // 1 s and 1 ns: 1,000,000.001 us rounds up to 1000001u.
        #expect(GRPCTimeout(rounding: .seconds(1) + .nanoseconds(1)).description == "1000001u")
        // 100,000,001 s needs 9 digits in S: 1,666,666.68 M rounds up to 1666667M.
        #expect(GRPCTimeout(rounding: .seconds(100_000_001)).description == "1666667M")
        // A part of a nanosecond rounds up to the nanosecond.
        #expect(GRPCTimeout(rounding: .nanoseconds(1) / 3).description == "1n")
        // Never earlier than asked.
        for duration in [Duration.nanoseconds(123_456_789_123), .seconds(7_777_777_777), .milliseconds(1_234_567_891)] {
            #expect(GRPCTimeout(rounding: duration).duration >= duration)
        }
    }

    @Test("Zero, negative and huge durations")
    func edges() {
        #expect(GRPCTimeout(rounding: .zero).description == "1n")
        #expect(GRPCTimeout(rounding: .seconds(-5)).description == "1n")
        #expect(GRPCTimeout(rounding: .seconds(Int64.max)).description == "99999999H")
        #expect(GRPCTimeout(rounding: .seconds(99_999_999 * 3600)).description == "99999999H")
    }

    @Test(
        "Values of 1 to 8 digits and a unit letter parse",
        arguments: [
            ("1S", Duration.seconds(1)), ("100m", .milliseconds(100)), ("99999999n", .nanoseconds(99_999_999)),
            ("2H", .seconds(7200)), ("3M", .seconds(180)), ("7u", .microseconds(7)), ("00000001S", .seconds(1)),
            ("0n", .zero), ("99999999H", .seconds(99_999_999) * 3600),
        ])
    func parses(text: String, expected: Duration) throws {
        let timeout = try #require(GRPCTimeout(parsing: Array(text.utf8)))
        #expect(timeout.duration == expected)
        #expect(GRPCTimeout(parsing: timeout.encoded) == timeout)
    }

    @Test(
        "Anything else does not parse",
        arguments: ["", "S", "1", "123456789S", "1s", "1h", "-1S", "+1S", " 1S", "1S ", "1.5S", "1SS", "0x1S", "１S"])
    func malformed(text: String) {
        #expect(GRPCTimeout(parsing: Array(text.utf8)) == nil)
    }

    @Test("What is sent parses back to at least the duration")
    func roundTrip() throws {
        for nanoseconds in [Int64(1), 999, 1_000, 123_456_789, 99_999_999_999, 1_234_567_890_123, 86_400_000_000_000] {
            let duration = Duration.nanoseconds(nanoseconds)
            let sent = GRPCTimeout(rounding: duration)
            let parsed = try #require(GRPCTimeout(parsing: sent.encoded))
            #expect(parsed.duration >= duration)
            #expect(sent.encoded.count <= 9)
        }
    }
}
