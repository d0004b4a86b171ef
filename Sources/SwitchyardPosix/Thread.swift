import Glibc

/// Runs `work` on a new detached thread. Returns false if the thread could not start.
package func runOnNewThread(name: String, _ work: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }
    let box = Unmanaged.passRetained(Box(work))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    var handle = pthread_t()
    let status = pthread_create(&handle, &attributes, { raw in
        Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().work()
        return nil
    }, box.toOpaque())
    if status != 0 {
        box.release()
        return false
    }
    return true
}
