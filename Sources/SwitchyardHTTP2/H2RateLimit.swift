/// A rate a peer may not exceed: at most `events` within any `interval`, counted as a
/// token bucket that holds `events` tokens and refills one every `interval / events`. A
/// burst of `events` is allowed at once; a steady rate above `events / interval` is not.
package struct H2RateLimit: Sendable, Hashable, CustomStringConvertible {
    /// The burst allowed, and the number of events `interval` refills.
    package var events: Int
    package var interval: Duration

    package init(_ events: Int, per interval: Duration) {
        self.events = events
        self.interval = interval
    }

    package var description: String { "\(events) per \(interval)" }
}
