/// How a simulated link carries bytes between two hosts: a one-way latency, and a
/// random extra delay (jitter) drawn for each segment from the network's seed.
///
/// A connection's bytes still arrive in order, as TCP delivers them: a segment that
/// draws a shorter delay than the one before it waits for it. Jitter reorders what
/// travels on different connections (which of two clients' bytes a server reads
/// first), and the seed decides how.
///
/// ```swift
/// network.setLink(between: "10.0.0.1", and: "10.0.0.2", SimulatedLink(latency: .milliseconds(20), jitter: .milliseconds(5)))
/// ```
public struct SimulatedLink: Sendable, Hashable {
    /// The one-way delay of every segment.
    public var latency: Duration
    /// The most a segment is delayed beyond `latency`, uniformly at random (zero: none).
    public var jitter: Duration

    /// A link with `latency` one way and up to `jitter` more per segment.
    public init(latency: Duration = .zero, jitter: Duration = .zero) {
        self.latency = latency
        self.jitter = jitter
    }
}
