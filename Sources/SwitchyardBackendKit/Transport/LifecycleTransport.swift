public import Switchyard

/// The shutdown half of a ``TransportLifecycle``, without its loop type, so that a
/// public transport whose loops are its own internal type can hand it over.
public protocol TransportShutdownSequence: Sendable {
    /// See ``TransportLifecycle/shutdown(gracePeriod:)``.
    func shutdown(gracePeriod: Duration) async
    /// See ``TransportLifecycle/shutdownNow()``.
    func shutdownNow() async
}

extension TransportLifecycle: TransportShutdownSequence {}

/// A `Transport` whose graceful and forced shutdowns are its ``TransportLifecycle``'s,
/// written once here. A backend's transport conforms, names its lifecycle as
/// ``shutdownSequence``, and keeps only `deinit { lifecycle.shutdownFromDeinit() }`.
public protocol LifecycleTransport: Transport {
    /// The transport's lifecycle, which `Transport.shutdown(gracePeriod:)` and
    /// `Transport.shutdownNow()` run. Call those, not this.
    var shutdownSequence: any TransportShutdownSequence { get }
}

extension LifecycleTransport {
    public func shutdown(gracePeriod: Duration) async {
        await shutdownSequence.shutdown(gracePeriod: gracePeriod)
    }

    public func shutdownNow() async {
        await shutdownSequence.shutdownNow()
    }
}
