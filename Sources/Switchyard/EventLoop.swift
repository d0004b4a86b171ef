/// A thread that runs a backend's I/O and the work handed to it, one item at a time.
///
/// Each connection belongs to one loop; its handler runs there. Work enters a loop from
/// other threads through ``execute(_:)`` (an eventfd or `uv_async` wake-up).
public protocol EventLoop: AnyObject, Sendable {
    /// Whether the calling thread is this loop's thread.
    var inEventLoop: Bool { get }
    /// Runs `work` on the loop, after the work already queued. Never runs it inline,
    /// even when called on the loop. Work handed to a loop that has stopped is dropped.
    func execute(_ work: @escaping @Sendable () -> Void)
}
