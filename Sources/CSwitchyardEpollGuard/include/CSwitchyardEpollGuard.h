// The epoll guard: a definition of `epoll_ctl` in the process that keeps libuv from
// aborting on a reclaimed descriptor. See epoll_guard.c for the whole story.
#ifndef CSWITCHYARD_EPOLL_GUARD_H
#define CSWITCHYARD_EPOLL_GUARD_H

/// Called (on the thread that called epoll_ctl, inside libuv's poll) after a failure was
/// recorded for a guarded epoll descriptor: wake the loop so that it takes the record.
typedef void (*csy_epoll_guard_wake)(void *context);

/// Guards `epfd` (a libuv loop's epoll descriptor, `uv_backend_fd`): from now on an
/// `epoll_ctl` ADD or MOD on it that fails with ENOENT, EPERM or EBADF reports success,
/// and the descriptor and errno are kept for `csy_epoll_guard_take`, then `wake(context)`
/// runs. Returns the slot that guards it (for the calls below), or -1 when every slot is
/// taken (the loop then runs unguarded).
int csy_epoll_guard_register(int epfd, csy_epoll_guard_wake wake, void *context);

/// Stops guarding the epoll descriptor of `slot` (before the loop closes it). Call on
/// the loop's thread.
void csy_epoll_guard_unregister(int slot);

/// Moves up to `capacity` recorded failures of `slot`'s epoll descriptor into `fds` and
/// `errnos`; returns how many, or -1 if some were lost (more than the record holds: the
/// record is cleared, check every descriptor). Call on the loop's thread (the only one that calls epoll_ctl
/// on it). With nothing recorded it returns 0 at once.
int csy_epoll_guard_take(int slot, int *fds, int *errnos, int capacity);

/// Whether this process's `epoll_ctl` is the guard's (1) or libc's (0): a library
/// loaded at run time cannot interpose a symbol libuv already bound to libc's.
int csy_epoll_guard_is_active(void);

#endif
