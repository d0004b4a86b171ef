#define _GNU_SOURCE
#include <pthread.h>
#include <sys/socket.h>
#include "CSwitchyardPosix.h"

int csy_pthread_setname(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int csy_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    return accept4(fd, address, length, flags);
}
