import Synchronization

/// The measurements of one run, shared by every copy of its ``ConformanceContext``.
final class MeasurementLog: Sendable {
    private let entries = Mutex<[ConformanceMeasurement]>([])

    init() {}

    func append(_ measurement: ConformanceMeasurement) {
        entries.withLock { $0.append(measurement) }
    }

    var all: [ConformanceMeasurement] { entries.withLock { $0 } }
}
