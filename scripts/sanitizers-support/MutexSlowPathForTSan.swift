// Linked into every image of the ThreadSanitizer build only (scripts/sanitizers): makes
// the contended path of Synchronization's Mutex visible to TSan. Never part of a normal
// build.
//
// Why: on Linux, `Mutex.withLock` takes the lock with an inlined compare-exchange (which
// TSan sees, as the code is compiled into our instrumented modules) and, when that fails,
// calls `_MutexHandle._lockSlow` in libswiftSynchronization.so, which is not
// instrumented: it spins with its own atomics, then asks the kernel (FUTEX_LOCK_PI).
// TSan sees no acquire there, so every lock handed over under contention looks
// unsynchronized, and TSan reports the next critical section as racing with the last
// one: hundreds of false reports, each with both accesses inside `withLock` on the same
// Mutex.
//
// This definition of the same symbol takes precedence over the library's for every call
// from the images it is linked into. It takes the lock the same way as the library's
// fast path: a compare-exchange of 0 for the caller's thread id, with acquiring order,
// here in instrumented code, so TSan sees the acquire that pairs with the inlined
// unlock's release; it yields between tries instead of sleeping in the kernel, so it
// never sets FUTEX_WAITERS and every unlock stays on the inlined (instrumented) fast path.
// Mutual exclusion is the same: the lock word is 0 or the owner's id.
import Glibc
import Synchronization

/// The layout of `Synchronization._MutexHandle` on Linux: one `Atomic<UInt32>` (0, or the
/// owner's thread id, possibly with FUTEX_WAITERS).
struct TSanVisibleMutexHandle: ~Copyable {
    let storage: Atomic<UInt32>
}

extension TSanVisibleMutexHandle {
    /// Replaces `_MutexHandle._lockSlow(_:)`: the same symbol, the same calling
    /// convention (a borrowed address-only self).
    @_silgen_name("$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF")
    borrowing func lockSlow(_ selfId: UInt32) {
        while true {
            if storage.load(ordering: .relaxed) == 0,
               storage.compareExchange(expected: 0, desired: selfId, successOrdering: .acquiring, failureOrdering: .relaxed).exchanged {
                return
            }
            sched_yield()
        }
    }
}
