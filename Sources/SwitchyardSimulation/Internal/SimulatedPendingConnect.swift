import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A connect whose SYN vanished (the path to its target is black-holed when it starts):
/// it stays pending, as a connect on a real network does while its SYNs go unanswered,
/// until its timeout (`deadlineExceeded`/`connect timeout`, in virtual time), its task's
/// cancellation (`cancelled`/`task cancelled`) or its transport's shutdown
/// (`cancelled`/`shutdown`), whichever comes first. The simulation does not resend
/// SYNs: a black hole lifted meanwhile does not complete it.
///
/// Safety of `@unchecked Sendable`: `continuation` is touched only on `loop`.
final class SimulatedPendingConnect: PendingConnect, TransportResource, @unchecked Sendable {
    private let loop: SimulatedEventLoop
    private let endpoint: Endpoint
    private let timeout: Duration
    private let network: SimulatedNetwork
    private let lifecycle: TransportLifecycle<SimulatedEventLoop>
    private var continuation: CheckedContinuation<any Connection, any Error>?
    private let cancelRequested = Atomic<Bool>(false)

    init(
        loop: SimulatedEventLoop, endpoint: Endpoint, timeout: Duration, network: SimulatedNetwork,
        lifecycle: TransportLifecycle<SimulatedEventLoop>
    ) {
        self.loop = loop
        self.endpoint = endpoint
        self.timeout = timeout
        self.network = network
        self.lifecycle = lifecycle
    }

    func start(_ continuation: CheckedContinuation<any Connection, any Error>) {
        if !loop.submit({ self.begin(continuation) }) {
            continuation.resume(throwing: TransportError.transportShutdown())
        }
    }

    func cancel() {
        cancelRequested.store(true, ordering: .releasing)
        _ = loop.submit { self.finish(self.cancelled) }
    }

    func submitToLoop(_ work: @escaping @Sendable () -> Void) -> Bool {
        loop.submit(work)
    }

    func terminate(with error: TransportError) {
        finish(error)
    }

    private func begin(_ continuation: CheckedContinuation<any Connection, any Error>) {
        self.continuation = continuation
        if cancelRequested.load(ordering: .acquiring) { return finish(cancelled) }
        guard lifecycle.insert(self) else { return finish(.transportShutdown()) }
        let timedOut = TransportError(
            code: .deadlineExceeded, reason: .connectTimeout,
            message: "connecting to \(endpoint) took longer than \(timeout): its SYN vanished (\(network))")
        loop.schedule(at: network.clock.now + timeout) { [weak self] in self?.finish(timedOut) }
    }

    private var cancelled: TransportError {
        TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(endpoint) was cancelled")
    }

    /// Ends the connect with `error`, once.
    private func finish(_ error: TransportError) {
        guard let continuation else { return }
        self.continuation = nil
        lifecycle.remove(self)
        network.clock.record("connect to \(endpoint) ended: \(error.code) (\(error.reason))")
        continuation.resume(throwing: error)
    }
}
