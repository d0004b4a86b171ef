// libuv for Swift: the system header, plus prefixed static-inline wrappers (`csy_uv_`)
// for what Swift cannot call directly: C's handle "inheritance" casts, and the few
// socket and thread calls the libuv backend makes beside libuv itself (libuv has no API
// for TCP_USER_TIMEOUT, the keepalive interval and count, or a linger-0 close after a
// shutdown).
//
// Every wrapper that can fail returns 0 (or a descriptor) on success and a negative
// errno on failure, which on Linux is exactly libuv's own error convention
// (`UV_EXXX == -EXXX`), so its result maps through the libuv backend's one error table.
// errno is read at once, inside the wrapper. None of these calls can fail with EINTR
// (`close` can, and must not be retried on Linux).
#ifndef CLIBUV_SHIM_H
#define CLIBUV_SHIM_H

#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

// MARK: handle casts (a uv_tcp_t begins with a uv_stream_t, which begins with a uv_handle_t)

static inline uv_handle_t *csy_uv_tcp_handle(uv_tcp_t *tcp) { return (uv_handle_t *)tcp; }
static inline uv_stream_t *csy_uv_tcp_stream(uv_tcp_t *tcp) { return (uv_stream_t *)tcp; }
static inline uv_handle_t *csy_uv_async_handle(uv_async_t *async) { return (uv_handle_t *)async; }
static inline uv_handle_t *csy_uv_timer_handle(uv_timer_t *timer) { return (uv_handle_t *)timer; }
static inline uv_handle_t *csy_uv_poll_handle(uv_poll_t *poll) { return (uv_handle_t *)poll; }
static inline uv_req_t *csy_uv_getaddrinfo_req(uv_getaddrinfo_t *request) { return (uv_req_t *)request; }

/// The descriptor under a TCP handle, or a negative libuv error (UV_EBADF when closed).
static inline int csy_uv_tcp_fileno(const uv_tcp_t *tcp) {
    uv_os_fd_t fd = -1;
    int status = uv_fileno((const uv_handle_t *)tcp, &fd);
    return status < 0 ? status : fd;
}

// MARK: descriptors and socket options libuv does not offer

/// dup(2) with FD_CLOEXEC: a second descriptor for the same socket, or -errno.
static inline int csy_uv_dup_cloexec(int fd) {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return copy < 0 ? -errno : copy;
}

/// close(2); 0 or -errno. Not retried on EINTR: on Linux the descriptor is gone anyway.
static inline int csy_uv_close_fd(int fd) {
    return close(fd) < 0 ? -errno : 0;
}

/// shutdown(fd, SHUT_RD): on a listening socket it stops the kernel accepting at once
/// (new connects are refused), from any thread; 0 or -errno.
static inline int csy_uv_shutdown_read(int fd) {
    return shutdown(fd, SHUT_RD) < 0 ? -errno : 0;
}

/// SO_LINGER {on, 0}: the next close sends a reset; 0 or -errno.
static inline int csy_uv_set_linger_zero(int fd) {
    struct linger value = { 1, 0 };
    return setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, sizeof value) < 0 ? -errno : 0;
}

/// TCP_KEEPINTVL and TCP_KEEPCNT (uv_tcp_keepalive sets SO_KEEPALIVE and TCP_KEEPIDLE,
/// and fixes these two at 1 s and 10); 0 or -errno.
static inline int csy_uv_set_keepalive_probes(int fd, int interval_seconds, int count) {
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_seconds, sizeof interval_seconds) < 0) return -errno;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) < 0) return -errno;
    return 0;
}

/// TCP_USER_TIMEOUT in milliseconds: how long sent data may stay unacknowledged (or
/// keepalive probes unanswered) before the kernel fails the connection with ETIMEDOUT;
/// 0 or -errno.
static inline int csy_uv_set_user_timeout(int fd, unsigned int milliseconds) {
    return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &milliseconds, sizeof milliseconds) < 0 ? -errno : 0;
}

// MARK: the event-loop thread

/// Blocks SIGPIPE in the calling thread. libuv writes with write(2)/writev(2), not with
/// MSG_NOSIGNAL, so a write to a reset connection would raise SIGPIPE and kill the
/// process; blocked on the loop thread (where every write happens), the signal stays
/// pending on that thread, and the write fails with EPIPE instead. 0 or -errno.
static inline int csy_uv_block_sigpipe(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    int status = pthread_sigmask(SIG_BLOCK, &set, NULL);
    return status == 0 ? 0 : -status;
}

/// Takes every SIGPIPE pending on the calling thread (one libuv's own writev raised on a
/// loop thread, where it is blocked), so none is left behind: call after a write failed
/// with UV_EPIPE. Never waits.
static inline void csy_uv_take_pending_sigpipe(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec zero = { 0, 0 };
    while (sigtimedwait(&set, NULL, &zero) == SIGPIPE) {}
}

/// Names the calling thread (at most 15 characters are kept); 0 or -errno. prctl is
/// variadic, which Swift cannot call.
static inline int csy_uv_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL) < 0 ? -errno : 0;
}

#endif
