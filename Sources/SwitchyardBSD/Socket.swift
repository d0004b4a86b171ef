import SwitchyardBackendKit

/// The one owner of a socket descriptor.
///
/// `~Copyable`, so a descriptor has exactly one owner; ``close()`` consumes the owner, so
/// it cannot be closed twice or used after close. Dropping an owner without closing it
/// is a bug: debug builds stop there, release builds close the descriptor.
struct Socket: ~Copyable {
    let descriptor: CInt

    init(takingOwnershipOf descriptor: CInt) {
        self.descriptor = descriptor
    }

    /// Closes the descriptor. Errors from close are not actionable (the descriptor is
    /// gone either way on Linux) and are dropped.
    consuming func close() {
        let descriptor = self.descriptor
        discard self
        try? Posix.close(descriptor)
    }

    deinit {
        assertionFailure("socket descriptor \(descriptor) was leaked: its owner was dropped without close()")
        try? Posix.close(descriptor)
    }
}
