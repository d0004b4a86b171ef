import Glibc

/// The buffer a TLS connection decrypts into, one per thread: every connection on a loop
/// shares its loop thread's. Safe because a connection decrypts only on its loop and hands
/// the bytes to its handler borrowed. A pump inside another's (TLS over a TLS connection:
/// the outer connection decrypts from the bytes the inner one lends, which are in this
/// buffer) gets a buffer of its own for that call. One per connection would cost 64 KiB
/// for each of tens of thousands of mostly idle connections.
enum ReadBuffer {
    /// Four TLS records' largest plaintext: a connection decrypts what it holds into it,
    /// record after record, and hands it over in one callback (as a plain connection
    /// hands over one read), so a user who writes what it reads writes once per 64 KiB,
    /// not once per record.
    static let size = 64 * 1024

    /// A thread's buffer and whether a pump is using it.
    private struct Slot {
        var buffer: UnsafeMutableRawPointer
        var busy: Bool
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { slot in
            guard let slot = slot?.assumingMemoryBound(to: Slot.self) else { return }
            free(slot.pointee.buffer)
            slot.deinitialize(count: 1)
            slot.deallocate()
        }
        precondition(status == 0, "pthread_key_create failed (\(status)): out of thread-specific keys")
        return key
    }()

    /// Runs `body` with this thread's buffer (made on first use, freed when the thread
    /// exits), or with a buffer of its own if this thread's is in use further up the stack.
    static func withBuffer<R>(_ body: (UnsafeMutableRawBufferPointer) -> R) -> R {
        let slot: UnsafeMutablePointer<Slot>
        if let existing = pthread_getspecific(key) {
            slot = existing.assumingMemoryBound(to: Slot.self)
        } else {
            guard let buffer = malloc(size) else { fatalError("out of memory for a \(size)-byte TLS read buffer") }
            slot = UnsafeMutablePointer<Slot>.allocate(capacity: 1)
            slot.initialize(to: Slot(buffer: buffer, busy: false))
            pthread_setspecific(key, slot)
        }
        if slot.pointee.busy {
            let own = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
            defer { own.deallocate() }
            return body(own)
        }
        slot.pointee.busy = true
        defer { slot.pointee.busy = false }
        return body(UnsafeMutableRawBufferPointer(start: slot.pointee.buffer, count: size))
    }
}
