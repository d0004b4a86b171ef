import Glibc

/// The buffer a TLS connection decrypts into, one per thread: every connection on a loop
/// shares its loop thread's. Safe because a connection decrypts only on its loop, hands
/// the bytes to its handler borrowed, and no handler callback runs inside another's
/// pump (callbacks are never re-entrant). One per connection would cost 16 KiB for each
/// of tens of thousands of mostly idle connections.
enum ReadBuffer {
    /// A TLS record's largest plaintext.
    static let size = 16 * 1024

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { buffer in free(buffer) }
        precondition(status == 0, "pthread_key_create failed (\(status)): out of thread-specific keys")
        return key
    }()

    /// This thread's buffer, made on first use, freed when the thread exits.
    static func forCurrentThread() -> UnsafeMutableRawBufferPointer {
        if let existing = pthread_getspecific(key) {
            return UnsafeMutableRawBufferPointer(start: existing, count: size)
        }
        guard let buffer = malloc(size) else { fatalError("out of memory for a \(size)-byte TLS read buffer") }
        pthread_setspecific(key, buffer)
        return UnsafeMutableRawBufferPointer(start: buffer, count: size)
    }
}
