import Synchronization

/// Runs `body` in its own task and returns its result, or returns `onTimeout()`'s error
/// once `limit` passes, whichever comes first.
///
/// Unlike a task group, this never waits for `body` to finish: a body stuck on a
/// continuation that ignores cancellation is cancelled and abandoned, so the caller
/// cannot hang. (The kit then shuts the transports down, which ends what is stuck.)
func raceAgainstDeadline<T: Sendable>(
    _ limit: Duration,
    onTimeout: @escaping @Sendable () -> any Error,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let gate = ResumeOnce<T>()
    let work = Task { try await body() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            gate.install(continuation)
            let timer = Task {
                try? await Task.sleep(for: limit)
                if Task.isCancelled { return }
                if gate.resume(with: .failure(onTimeout())) { work.cancel() }
            }
            Task {
                let result = await work.result
                timer.cancel()
                gate.resume(with: result)
            }
        }
    } onCancel: {
        work.cancel()
    }
}

/// A continuation that is resumed by whichever party comes first.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func install(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation.withLock { $0 = continuation }
    }

    /// Resumes the continuation if no one has; returns whether this call did.
    @discardableResult
    func resume(with result: Result<T, any Error>) -> Bool {
        let taken = continuation.withLock { current in
            let taken = current
            current = nil
            return taken
        }
        taken?.resume(with: result)
        return taken != nil
    }
}
