// epoll for the unix backend, in plain C types: Glibc's Swift module does not bring in
// <sys/epoll.h>. Each function returns what the system call returns (-1 with errno set
// on failure), so Swift calls them through the toolkit's `syscall` helper.
#ifndef C_SWITCHYARD_UNIX_H
#define C_SWITCHYARD_UNIX_H

#include <stdint.h>

/// One ready descriptor: the data word it was registered with and the ready events.
struct csu_ready {
    uint64_t data;
    uint32_t events;
};

/// epoll_create1(EPOLL_CLOEXEC).
int csu_epoll_create(void);
/// epoll_ctl(EPOLL_CTL_ADD) with `events` and the data word `data`.
int csu_epoll_add(int epfd, int fd, uint32_t events, uint64_t data);
/// epoll_ctl(EPOLL_CTL_MOD).
int csu_epoll_modify(int epfd, int fd, uint32_t events, uint64_t data);
/// epoll_ctl(EPOLL_CTL_DEL).
int csu_epoll_delete(int epfd, int fd);
/// epoll_wait into `ready` (at most `capacity`, at most 256), `timeout` ms (-1: forever).
int csu_epoll_wait(int epfd, struct csu_ready *ready, int capacity, int timeout);

#endif
