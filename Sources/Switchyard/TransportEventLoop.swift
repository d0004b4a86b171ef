/// A thread that runs a backend's I/O and the work handed to it, one item at a time.
///
/// Each connection belongs to one loop; its handler runs there. Work enters a loop from
/// other threads through ``execute(_:)`` (an eventfd or `uv_async` wake-up).
///
/// A loop is also a `TaskExecutor`: async code can run on it
/// (`withTaskExecutorPreference(loop)`, `Task(executorPreference: loop)`), so awaiting an
/// event that the loop itself produces resumes on the loop, with no hop to the global
/// pool. SwitchyardCalls' `CallChannel.withCall` and `CallServer` run the async face so.
public protocol TransportEventLoop: AnyObject, Sendable, TaskExecutor {
    /// Whether the calling thread is this loop's thread.
    var inEventLoop: Bool { get }
    /// Runs `work` on the loop, after the work already queued. Never runs it inline,
    /// even when called on the loop. Work handed to a loop that has stopped is dropped.
    func execute(_ work: @escaping @Sendable () -> Void)

    /// The clock of the code that runs on the loop (``TransportClock``): by default the
    /// system's; a simulated network's loops have its virtual clock.
    var clock: any TransportClock { get }
}

extension TransportEventLoop {
    /// Runs a task's job on the loop.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
