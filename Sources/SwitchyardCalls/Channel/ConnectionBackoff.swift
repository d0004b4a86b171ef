public import Switchyard

/// How a channel spaces its attempts to connect after a failure: gRPC's connection
/// backoff (grpc/grpc doc/connection-backoff.md), with its defaults.
///
/// The first attempt is made at once and may take ``minimumConnectTimeout`` (or until
/// its backoff deadline, if that is later). After a failure the next attempt starts when
/// the previous attempt's backoff has passed; each backoff is the one before times
/// ``multiplier``, capped at ``maximum``, then moved by a uniform random share of up to
/// ``jitter`` either way. A connection that comes up resets the sequence.
///
/// The random share comes from ``jitterSource``, so a test (or a simulated network)
/// fixes it from a seed.
public struct ConnectionBackoff: Sendable {
    /// The backoff after the first failure. Default 1 s.
    public var initial: Duration
    /// The growth from one backoff to the next. Default 1.6.
    public var multiplier: Double
    /// The random share a backoff moves by, either way, as a fraction of it (0.2: ±20 %).
    /// Default 0.2.
    public var jitter: Double
    /// The longest backoff, before jitter. Default 120 s.
    public var maximum: Duration
    /// The least time an attempt to connect is given. Default 20 s.
    public var minimumConnectTimeout: Duration
    /// A number drawn uniformly from the range it is given. Default: the channel's
    /// transport's clock (`TransportClock/random(in:)`: the system's generator, or a
    /// simulated network's seeded one); read alone, the system's generator.
    public var jitterSource: @Sendable (ClosedRange<Double>) -> Double {
        get { ownJitterSource ?? { Double.random(in: $0) } }
        set { ownJitterSource = newValue }
    }
    /// The source given to the backoff, if any.
    private var ownJitterSource: (@Sendable (ClosedRange<Double>) -> Double)?

    public init(
        initial: Duration = .seconds(1), multiplier: Double = 1.6, jitter: Double = 0.2, maximum: Duration = .seconds(120),
        minimumConnectTimeout: Duration = .seconds(20),
        jitterSource: (@Sendable (ClosedRange<Double>) -> Double)? = nil
    ) {
        self.initial = initial
        self.multiplier = multiplier
        self.jitter = jitter
        self.maximum = maximum
        self.minimumConnectTimeout = minimumConnectTimeout
        self.ownJitterSource = jitterSource
    }

    /// The backoff whose jitter comes from `clock` unless it has a source of its own.
    package func drawingJitter(from clock: any TransportClock) -> ConnectionBackoff {
        guard ownJitterSource == nil else { return self }
        var backoff = self
        backoff.ownJitterSource = { clock.random(in: $0) }
        return backoff
    }

    /// Checks the values.
    /// - Throws: `invalidArgument`, reason `invalid option`: an `initial`, `maximum` or
    ///   `minimumConnectTimeout` that is not positive, a `maximum` below `initial`, a
    ///   `multiplier` below 1, a `jitter` outside 0...1 (or any of them not finite).
    public func validate() throws(TransportError) {
        func invalid(_ what: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidOption, message: "invalid connection backoff: \(what)")
        }
        guard initial > .zero else { throw invalid("initial \(initial) is not positive") }
        guard maximum >= initial else { throw invalid("maximum \(maximum) is below initial \(initial)") }
        guard minimumConnectTimeout > .zero else { throw invalid("minimumConnectTimeout \(minimumConnectTimeout) is not positive") }
        guard multiplier.isFinite, multiplier >= 1 else { throw invalid("multiplier \(multiplier) is below 1") }
        guard jitter.isFinite, (0...1).contains(jitter) else { throw invalid("jitter \(jitter) is outside 0...1") }
    }

    /// The attempts of one run of connecting, from the first.
    package func attempts() -> Attempts { Attempts(backoff: self) }

    /// The sequence of attempts: what each may take and when the next may start.
    package struct Attempts: Sendable {
        let backoff: ConnectionBackoff
        /// The current backoff, before jitter; nil before the first attempt.
        private var current: Duration?

        init(backoff: ConnectionBackoff) { self.backoff = backoff }

        /// One attempt: how long it may take to connect, and how long after its start
        /// the next attempt may start if it fails.
        package struct Attempt: Sendable, Hashable {
            package var connectTimeout: Duration
            package var nextAttemptAfter: Duration
        }

        /// The next attempt, starting now.
        package mutating func next() -> Attempt {
            let delay: Duration
            if let current {
                let grown = min(current * backoff.multiplier, backoff.maximum)
                self.current = grown
                let spread = backoff.jitter
                let share = spread > 0 ? backoff.jitterSource(-spread...spread) : 0
                delay = max(.zero, grown + grown * share)
            } else {
                // The first attempt's deadline is the initial backoff, unjittered (the
                // document's ConnectWithBackoff).
                current = backoff.initial
                delay = backoff.initial
            }
            return Attempt(connectTimeout: max(delay, backoff.minimumConnectTimeout), nextAttemptAfter: delay)
        }
    }
}

/// Equality and hashing compare the numbers and ignore ``ConnectionBackoff/jitterSource``
/// (a closure has no meaningful equality, and the source changes no rule, only the draws).
extension ConnectionBackoff: Hashable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.initial == rhs.initial && lhs.multiplier == rhs.multiplier && lhs.jitter == rhs.jitter
            && lhs.maximum == rhs.maximum && lhs.minimumConnectTimeout == rhs.minimumConnectTimeout
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(initial)
        hasher.combine(multiplier)
        hasher.combine(jitter)
        hasher.combine(maximum)
        hasher.combine(minimumConnectTimeout)
    }
}
