/// A token bucket over the caller's clock: ``take(now:)`` is false once the peer went
/// beyond its ``H2RateLimit``.
struct H2RateLimiter: Sendable {
    let capacity: Int
    /// The time one token takes to come back.
    let refill: Duration
    private var tokens: Int
    /// When the bucket was last refilled; nil before the first event.
    private var refilledAt: ContinuousClock.Instant?

    init(_ limit: H2RateLimit) {
        capacity = max(0, limit.events)
        refill = limit.interval / max(1, limit.events)
        tokens = capacity
    }

    /// Counts one event at `now`; false when the bucket is empty (the rate is exceeded).
    mutating func take(now: ContinuousClock.Instant) -> Bool {
        if let refilledAt, now > refilledAt, refill > .zero {
            let gained = Int(min(Double(capacity), (now - refilledAt) / refill))
            if gained > 0 {
                tokens = min(capacity, tokens + gained)
                self.refilledAt = tokens == capacity ? now : refilledAt + refill * gained
            }
        } else if refilledAt == nil {
            refilledAt = now
        }
        guard tokens > 0 else { return false }
        tokens -= 1
        return true
    }
}
