import Synchronization
import Switchyard

/// A client transport that records when each `connect` was asked for, and forwards
/// everything to the transport it wraps (which stays the one the kit shuts down).
final class ConnectRecordingTransport: Transport {
    let inner: any Transport
    private let starts = Mutex<[ContinuousClock.Instant]>([])

    init(_ inner: any Transport) { self.inner = inner }

    /// When each connect was asked for, first first.
    var connectStarts: [ContinuousClock.Instant] { starts.withLock { $0 } }

    var name: String { inner.name }
    var clock: any TransportClock { inner.clock }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        starts.withLock { $0.append(inner.clock.now) }
        return try await inner.connect(to: endpoint, options: options)
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try await inner.listen(on: endpoint, options: options)
    }

    func shutdown(gracePeriod: Duration) async { await inner.shutdown(gracePeriod: gracePeriod) }

    func shutdownNow() async { await inner.shutdownNow() }
}
