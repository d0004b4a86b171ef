#define _GNU_SOURCE
#include <pthread.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "CSwitchyardPosix.h"

int csy_pthread_setname(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int csy_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}

int csy_reserve_descriptors(int count) {
    if (count <= 0) return 0;
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && (rlim_t)count > limit.rlim_cur)
        count = (int)limit.rlim_cur;
    if (count <= 0) return 0;
    int probe = eventfd(0, EFD_CLOEXEC);
    if (probe < 0) return -1;
    int high = fcntl(probe, F_DUPFD_CLOEXEC, count - 1);
    int saved = errno;
    close(probe);
    if (high < 0) {
        errno = saved;
        return -1;
    }
    close(high);
    return count;
}
