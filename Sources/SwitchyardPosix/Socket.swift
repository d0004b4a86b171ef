/// The one owner of a socket (or any) descriptor.
///
/// `~Copyable`, so a descriptor has exactly one owner; ``close()`` consumes the owner, so
/// it cannot be closed twice or used after close. Dropping an owner without closing it
/// is a bug: debug builds stop there (a leaked descriptor is caught where it leaks),
/// release builds close the descriptor. Take ownership as soon as the system call that
/// made the descriptor returns, and reach the number only through ``descriptor``.
public struct Socket: ~Copyable {
    /// The descriptor; valid until ``close()``. Do not close it another way.
    public let descriptor: CInt

    /// Owns `descriptor` from now on: only ``close()`` closes it.
    public init(takingOwnershipOf descriptor: CInt) {
        self.descriptor = descriptor
    }

    /// Closes the descriptor. Errors from close are not actionable (on Linux the
    /// descriptor is gone either way) and are dropped.
    public consuming func close() {
        let descriptor = self.descriptor
        discard self
        try? Posix.close(descriptor)
    }

    deinit {
        assertionFailure("socket descriptor \(descriptor) was leaked: its owner was dropped without close()")
        try? Posix.close(descriptor)
    }
}
