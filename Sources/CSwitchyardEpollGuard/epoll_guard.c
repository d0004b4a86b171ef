// The epoll guard.
//
// libuv 1.44 (src/unix/epoll.c, uv__io_poll) applies every pending change of a watcher's
// interest with epoll_ctl (ADD when it was not watched, else MOD) and calls abort() when
// that fails with anything but EEXIST. A descriptor reclaimed underneath a connection
// (dup2 over it, or closed and its number reused) makes it fail: the old socket's
// registration vanished with the socket, so MOD gives ENOENT; /dev/null and regular
// files cannot be polled, so ADD and MOD give EPERM; a closed number gives EBADF. The
// whole process then dies inside uv_run. libuv offers no hook there, and checking the
// descriptor before every interest change would cost a system call per change and still
// race the dup2.
//
// So the process defines epoll_ctl itself. libuv's call goes through its PLT, and the
// dynamic linker binds it to the first definition in the global scope: the
// executable's, because the static linker exports a definition from an executable when
// a shared library in the link (libuv) refers to it (GNU ld, gold and lld alike; Swift
// links with gold here, and `nm -D` shows `T epoll_ctl` in echo-server, echo-client,
// switchyard-conformance and the test binary, whose tests check it with
// csy_epoll_guard_is_active). This one makes the system call
// (syscall(2), not libc's wrapper, which it replaces) and, only when that failed, only
// for the epoll descriptors of Switchyard's libuv loops (registered here), only for ADD
// and MOD, and only with ENOENT, EPERM or EBADF, records the descriptor, reports
// success to libuv, and wakes the loop, which then ends the connection on that
// descriptor `reclaimed` (libuv believes it watches the descriptor; closing the handle
// deletes the registration, whose failure libuv ignores, and closes the number). Every
// other call, and every success, is exactly the system call: no lock, no lookup.
//
// Where it does not hold: when SwitchyardUV is linked into a shared library loaded at
// run time (dlopen, RTLD_LOCAL, as backend libraries are), that library's epoll_ctl does
// not interpose libuv's call: the global scope (the executable, libc) answers first. If
// the host executable links SwitchyardUV too, libuv's call reaches the host's guard,
// which does not know the library's loops and passes the failure on. Either way libuv
// aborts as before; csy_epoll_guard_is_active tells, and the libuv backend then checks
// the descriptor before each change of interest instead (which narrows the window, and
// does not close it).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "CSwitchyardEpollGuard.h"

enum { slot_count = 64, record_capacity = 64 };

struct guarded_loop {
    _Atomic int epfd;               // -1 when free
    csy_epoll_guard_wake wake;
    void *context;
    // Written and read only on the loop's thread (the only caller of epoll_ctl on epfd).
    int count;
    int lost;
    int fds[record_capacity];
    int errnos[record_capacity];
};

static struct guarded_loop loops[slot_count];
static atomic_flag initialized_flag = ATOMIC_FLAG_INIT;
static _Atomic int initialized;

static void initialize(void) {
    if (atomic_load_explicit(&initialized, memory_order_acquire)) return;
    if (!atomic_flag_test_and_set(&initialized_flag)) {
        for (int i = 0; i < slot_count; i++) atomic_store(&loops[i].epfd, -1);
        atomic_store_explicit(&initialized, 1, memory_order_release);
    }
    while (!atomic_load_explicit(&initialized, memory_order_acquire)) {}
}

static struct guarded_loop *find(int epfd) {
    if (!atomic_load_explicit(&initialized, memory_order_acquire)) return 0;
    for (int i = 0; i < slot_count; i++) {
        if (atomic_load_explicit(&loops[i].epfd, memory_order_acquire) == epfd) return &loops[i];
    }
    return 0;
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
    long result = syscall(SYS_epoll_ctl, epfd, op, fd, event);
    if (result == 0) return 0;
    int code = errno;
    if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && (code == ENOENT || code == EPERM || code == EBADF)) {
        struct guarded_loop *loop = find(epfd);
        if (loop) {
            if (loop->count < record_capacity) {
                loop->fds[loop->count] = fd;
                loop->errnos[loop->count] = code;
                loop->count++;
            } else {
                loop->lost = 1;
            }
            loop->wake(loop->context);
            return 0;
        }
    }
    errno = code;
    return -1;
}

int csy_epoll_guard_register(int epfd, csy_epoll_guard_wake wake, void *context) {
    initialize();
    for (int i = 0; i < slot_count; i++) {
        int expected = -1;
        if (atomic_load(&loops[i].epfd) != -1) continue;
        // Claim the slot with a placeholder, fill it, then publish the descriptor.
        if (!atomic_compare_exchange_strong(&loops[i].epfd, &expected, -2)) continue;
        loops[i].wake = wake;
        loops[i].context = context;
        loops[i].count = 0;
        loops[i].lost = 0;
        atomic_store_explicit(&loops[i].epfd, epfd, memory_order_release);
        return i;
    }
    return -1;
}

void csy_epoll_guard_unregister(int slot) {
    if (slot < 0 || slot >= slot_count) return;
    atomic_store_explicit(&loops[slot].epfd, -1, memory_order_release);
}

int csy_epoll_guard_take(int slot, int *fds, int *errnos, int capacity) {
    if (slot < 0 || slot >= slot_count) return 0;
    struct guarded_loop *loop = &loops[slot];
    if (loop->count == 0 && !loop->lost) return 0;
    if (loop->lost) {
        // The caller checks every descriptor: the record is moot.
        loop->count = 0;
        loop->lost = 0;
        return -1;
    }
    int taken = loop->count < capacity ? loop->count : capacity;
    for (int i = 0; i < taken; i++) {
        fds[i] = loop->fds[i];
        errnos[i] = loop->errnos[i];
    }
    for (int i = taken; i < loop->count; i++) {
        loop->fds[i - taken] = loop->fds[i];
        loop->errnos[i - taken] = loop->errnos[i];
    }
    loop->count -= taken;
    return taken;
}

int csy_epoll_guard_is_active(void) {
    // The definition the dynamic linker binds libuv's call to is the global scope's
    // first: ours only if it is the one RTLD_DEFAULT finds.
    return dlsym(RTLD_DEFAULT, "epoll_ctl") == (void *)&epoll_ctl;
}
