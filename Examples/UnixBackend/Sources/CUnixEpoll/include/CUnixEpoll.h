// The Linux headers the unix backend needs and Glibc's Swift module leaves out: epoll and
// eventfd (the loop's wake-up).
#ifndef C_UNIX_EPOLL_H
#define C_UNIX_EPOLL_H

#include <sys/epoll.h>
#include <sys/eventfd.h>

#endif
