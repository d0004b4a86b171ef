// What one echo-client run measured: round-trip latencies in HdrHistograms, the count of
// round trips done, and the errors seen, shared by the connections, the progress line
// and the final report.

import Histogram
import Switchyard
import Synchronization

/// Round-trip latencies and counts of one run, recorded by every connection at once.
///
/// Latencies go into HdrHistograms (nanoseconds, three significant digits, so any
/// percentile is within 0.1% of the exact one) of a fixed range: 1 ns to 1 hour (longer
/// round trips are recorded as 1 hour). The range is fixed so that recording never
/// allocates: each histogram's counts are allocated once, here. Connections record into
/// one of a few shards (connection number modulo the shard count), each behind its own
/// lock, so that 10,000 connections do not need 10,000 histograms (about 256 KiB each);
/// ``merged()`` adds the shards up for the report.
final class RunStatistics: Sendable {
    /// The longest latency recorded as itself: 1 hour, in nanoseconds.
    static let highestLatency: UInt64 = 3_600 * 1_000_000_000

    private let shards: [Shard]
    private let completed = Atomic<Int>(0)
    private let failures = Mutex<[String: Int]>([:])

    /// One histogram behind a lock.
    private final class Shard: Sendable {
        let histogram = Mutex(RunStatistics.makeHistogram())
    }

    /// - Parameter concurrency: the connections that record; at most 8 shards are made.
    init(concurrency: Int) {
        shards = (0..<max(1, min(concurrency, 8))).map { _ in Shard() }
    }

    static func makeHistogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: highestLatency, numberOfSignificantValueDigits: .three)
    }

    /// Records one round trip of `connection`. Does not allocate.
    func record(connection: Int, latency: Duration) {
        let (seconds, attoseconds) = latency.components
        let nanoseconds = seconds < 0 ? 0 : min(UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000), Self.highestLatency)
        shards[connection % shards.count].histogram.withLock { _ = $0.record(nanoseconds) }
        completed.add(1, ordering: .relaxed)
    }

    /// Round trips done so far, over all connections.
    var messages: Int { completed.load(ordering: .relaxed) }

    /// Counts one error under `code` (a ``TransportError/Code`` name, or `badEcho`).
    func countError(_ code: String) {
        failures.withLock { $0[code, default: 0] += 1 }
    }

    /// The errors counted so far, by code.
    var errors: [String: Int] { failures.withLock { $0 } }

    /// Errors counted so far, in all.
    var errorCount: Int { failures.withLock { $0.values.reduce(0, +) } }

    /// All the shards' latencies in one histogram.
    func merged() -> Histogram<UInt64> {
        var total = Self.makeHistogram()
        for shard in shards {
            shard.histogram.withLock { total.add($0) }
        }
        return total
    }
}

/// The latency figures a report gives, in nanoseconds.
struct LatencySummary {
    var p50: UInt64
    var p90: UInt64
    var p99: UInt64
    var p999: UInt64
    var max: UInt64

    init(_ histogram: Histogram<UInt64>) {
        guard histogram.totalCount > 0 else {
            (p50, p90, p99, p999, max) = (0, 0, 0, 0, 0)
            return
        }
        p50 = histogram.valueAtPercentile(50)
        p90 = histogram.valueAtPercentile(90)
        p99 = histogram.valueAtPercentile(99)
        p999 = histogram.valueAtPercentile(99.9)
        // The largest value recorded (not its bucket's upper end), so max >= p99.9 holds.
        max = histogram.maxRecorded
    }
}
