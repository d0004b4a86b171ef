/// What one measured load did: messages echoed, the time it took, and for unary calls
/// each call's latency.
public struct LoadResult: Sendable {
    /// Calls completed (unary) or messages echoed back (stream).
    public var messages = 0
    /// Payload bytes echoed back.
    public var bytes = 0
    /// From the first call's start to the last one's end, in seconds.
    public var seconds = 0.0
    /// Each unary call's latency in nanoseconds (empty for streams).
    public var latenciesNanoseconds: [Int64] = []

    /// The result as one line of JSON: `messages_per_s` (also as `calls_per_s` for
    /// unary), `mib_per_s` of echoed payload, and `p50_us` / `p99_us` (nearest rank; null
    /// for streams).
    public func json(method: String, concurrency: Int, messageSize: Int) -> String {
        let rate = self.seconds > 0 ? Double(self.messages) / self.seconds : 0
        let mib = self.seconds > 0 ? Double(self.bytes) / self.seconds / 1_048_576 : 0
        let sorted = self.latenciesNanoseconds.sorted()
        var fields: [(String, String)] = [
            ("method", "\"\(method)\""),
            ("concurrency", "\(concurrency)"),
            ("message_size", "\(messageSize)"),
            ("seconds", Self.number(self.seconds, places: 3)),
            ("messages", "\(self.messages)"),
            ("messages_per_s", Self.number(rate, places: 1)),
            ("mib_per_s", Self.number(mib, places: 2)),
        ]
        if method == "unary" {
            fields.append(("calls_per_s", Self.number(rate, places: 1)))
        }
        fields.append(("p50_us", Self.percentile(sorted, 0.50)))
        fields.append(("p99_us", Self.percentile(sorted, 0.99)))
        return "{" + fields.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
    }

    /// The nearest-rank percentile `q` of `sorted` nanoseconds, in microseconds, or `null`.
    private static func percentile(_ sorted: [Int64], _ q: Double) -> String {
        guard !sorted.isEmpty else { return "null" }
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        let index = min(max(rank - 1, 0), sorted.count - 1)
        return number(Double(sorted[index]) / 1000, places: 1)
    }

    private static func number(_ value: Double, places: Int) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return "\((value * scale).rounded() / scale)"
    }
}
