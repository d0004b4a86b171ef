import Glibc
public import Switchyard
import Synchronization
import SwitchyardPosix

/// Drives a `Lifecycle` from the job-control signals on Linux: `SIGTSTP` suspends,
/// `SIGCONT` resumes.
///
/// ## Contract
///
/// - **`SIGTSTP`** (`kill -TSTP PID`, or Ctrl-Z at a terminal) runs
///   `Lifecycle.suspend()`: listeners close, background work gets the grace period,
///   connections follow their policies (see `Lifecycle`). The process itself keeps
///   running, suspended, unless `stopAfterSuspend` is set: then once the suspend has
///   completed it stops itself with `SIGSTOP` (what a shell's job control expects of
///   Ctrl-Z), and the `SIGCONT` that continues it resumes it. (Without this driver,
///   `SIGTSTP`'s default action stops the process at once, with its listeners open and
///   their backlogs filling.) If a `SIGCONT` arrives while the suspend is still under
///   way, the process does not stop.
/// - **`SIGCONT`** (`kill -CONT PID`, or `fg`/`bg`) runs `Lifecycle.resume()` (after a
///   suspend still under way); a resume error (a listener that could not reopen) goes to
///   `onResumeFailure`. A `SIGCONT` while active changes nothing.
/// - Signals are handled in the order they arrive, each after the last one's suspend or
///   resume finished. The handlers are async-signal-safe (`ProcessSignals`). The
///   kernel discards a `SIGTSTP` still pending when a `SIGCONT` is generated, so a
///   `SIGTSTP` sent immediately before a `SIGCONT` may never arrive; one that arrived is
///   always followed by its suspend.
/// - ``cancel()`` stops driving the lifecycle and puts the signals' previous actions
///   back (their defaults: `SIGTSTP` stops the process, `SIGCONT` continues it).
public final class LifecycleSignals: Sendable {
    private let observation: SignalObservation
    private let continuation: AsyncStream<CInt>.Continuation

    /// Starts driving `lifecycle` from `SIGTSTP` and `SIGCONT`.
    /// - Parameters:
    ///   - lifecycle: the lifecycle to suspend and resume.
    ///   - stopAfterSuspend: stop the process (`SIGSTOP`) once each suspend completed.
    ///   - onResumeFailure: called with the error of a resume that could not reopen a
    ///     listener.
    /// - Throws: what `ProcessSignals/observe(_:_:)` throws.
    public init(
        driving lifecycle: Lifecycle, stopAfterSuspend: Bool = false,
        onResumeFailure: @escaping @Sendable (any Error) -> Void = { _ in }
    ) throws(TransportError) {
        let (stream, continuation) = AsyncStream<CInt>.makeStream()
        // How many SIGCONTs arrived: a suspend stops the process only if none came
        // since its SIGTSTP.
        let counter = Counter()
        observation = try ProcessSignals.observe([SIGTSTP, SIGCONT]) { signal in
            if signal == SIGCONT { counter.add() }
            continuation.yield(signal)
        }
        Task {
            for await signal in stream {
                if signal == SIGTSTP {
                    let before = counter.value
                    await lifecycle.suspend()
                    if stopAfterSuspend, counter.value == before { Posix.stopProcess() }
                } else if signal == SIGCONT {
                    do {
                        try await lifecycle.resume()
                    } catch {
                        onResumeFailure(error)
                    }
                }
            }
        }
        self.continuation = continuation
    }

    /// Stops driving the lifecycle and restores the signals' previous actions. Idempotent.
    public func cancel() {
        observation.cancel()
        continuation.finish()
    }

    deinit {
        cancel()
    }
}

/// A count shared between the signal thread and the driver task.
private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .sequentiallyConsistent) }
    var value: Int { count.load(ordering: .sequentiallyConsistent) }
}
