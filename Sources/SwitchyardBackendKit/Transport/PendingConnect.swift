import Switchyard

/// A connect in progress, awaited by the task that asked for it: started with a
/// continuation that it resumes once (connected, or the error), and cancelled when that
/// task is (it then resumes with `cancelled`/`task cancelled` and closes what it opened).
public protocol PendingConnect: Sendable {
    associatedtype Connected: Sendable
    /// Starts the connect; `continuation` is resumed exactly once.
    func start(_ continuation: CheckedContinuation<Connected, any Error>)
    /// The awaiting task was cancelled: abandon the connect. May run before `start` and
    /// from any thread.
    func cancel()
}

extension PendingConnect {
    /// Starts the connect and waits for it, cancelling it with the calling task.
    public func connected() async throws -> Connected {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in start(continuation) }
        } onCancel: {
            cancel()
        }
    }
}
