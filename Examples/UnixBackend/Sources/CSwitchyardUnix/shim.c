#include <sys/epoll.h>
#include "CSwitchyardUnix.h"

int csu_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

static int control(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event = { .events = events, .data = { .u64 = data } };
    return epoll_ctl(epfd, op, fd, &event);
}

int csu_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) {
    return control(epfd, EPOLL_CTL_ADD, fd, events, data);
}

int csu_epoll_modify(int epfd, int fd, uint32_t events, uint64_t data) {
    return control(epfd, EPOLL_CTL_MOD, fd, events, data);
}

int csu_epoll_delete(int epfd, int fd) {
    return control(epfd, EPOLL_CTL_DEL, fd, 0, 0);
}

int csu_epoll_wait(int epfd, struct csu_ready *ready, int capacity, int timeout) {
    struct epoll_event events[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epfd, events, capacity, timeout);
    for (int i = 0; i < count; i++) {
        ready[i].data = events[i].data.u64;
        ready[i].events = events[i].events;
    }
    return count;
}
