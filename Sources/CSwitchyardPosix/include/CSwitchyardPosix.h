// The Linux headers Glibc's Swift module does not bring in, and small static-inline
// wrappers (prefixed `csy_`) for what Swift cannot call directly.
#ifndef C_SWITCHYARD_POSIX_H
#define C_SWITCHYARD_POSIX_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <errno.h>

/// accept4(2), which glibc declares only under _GNU_SOURCE.
int csy_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// Names the calling thread (at most 15 characters are kept).
int csy_pthread_setname(const char *name);

#endif
