import SwitchyardBackendKit

/// The one owner of a socket descriptor: `~Copyable`, closed by a consuming ``close()``,
/// so a descriptor is closed once and never used after. An owner dropped without
/// ``close()`` is a leak: debug builds stop there, release builds close it.
struct UnixSocket: ~Copyable {
    let descriptor: CInt

    init(owning descriptor: CInt) {
        self.descriptor = descriptor
    }

    /// Closes the descriptor. On Linux it is gone even when close reports an error, so
    /// there is nothing to act on.
    consuming func close() {
        let descriptor = self.descriptor
        discard self
        try? Posix.close(descriptor)
    }

    deinit {
        assertionFailure("unix socket descriptor \(descriptor) leaked: its owner was dropped without close()")
        try? Posix.close(descriptor)
    }
}
