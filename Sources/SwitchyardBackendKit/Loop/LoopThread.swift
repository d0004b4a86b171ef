import CSwitchyardPosix
import Glibc
public import Switchyard

/// A loop's thread: named (for `top -H`, `perf`), joinable.
public struct LoopThread: Sendable {
    private let handle: pthread_t

    /// Starts a thread running `body`.
    /// - Throws: a `TransportError` when the thread cannot start.
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(TransportError) {
        handle = try startThread(name: name, body)
    }

    /// Waits for the thread to end. Call once, from another thread.
    public func join() {
        pthread_join(handle, nil)
    }
}

private func startThread(name: String, _ body: @escaping @Sendable () -> Void) throws(TransportError) -> pthread_t {
    let box = Unmanaged.passRetained(ThreadStart(name: name, body: body))
    var handle = pthread_t()
    let status = pthread_create(&handle, nil, { raw in
        let start = Unmanaged<ThreadStart>.fromOpaque(raw!).takeRetainedValue()
        _ = csy_pthread_setname(String(start.name.prefix(15)))
        start.body()
        return nil
    }, box.toOpaque())
    if status != 0 {
        box.release()
        throw ErrnoTable.error(errno: status, message: "starting the event loop thread \(name)")
    }
    return handle
}

/// The calling thread's identity, as a loop compares it with its own.
@inline(__always)
public func currentThreadID() -> UInt { UInt(pthread_self()) }

private final class ThreadStart {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}
