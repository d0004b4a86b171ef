// The limit for this machine: a minimal single-threaded C epoll echo server.
// Level-triggered, one 64 KiB read buffer, writes straight back; when the kernel does
// not take everything, the unsent tail is kept and reads pause until it drains.
// Usage: c-epoll-echo PORT   (prints "listening on PORT" when ready)
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct { int fd; char *pending; size_t len; } conn_t;

static conn_t *conns[65536];

static void set_events(int ep, int fd, unsigned events) {
    struct epoll_event ev = { .events = events, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

static void drop(int ep, conn_t *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    conns[c->fd] = NULL;
    free(c->pending);
    free(c);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int port = argc > 1 ? atoi(argv[1]) : 7100;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) { perror("listen"); return 1; }
    socklen_t al = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &al);
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static char buf[65536];
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *cn = calloc(1, sizeof *cn);
                    cn->fd = c;
                    conns[c] = cn;
                    struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            conn_t *c = conns[fd];
            if (!c) continue;
            if (c->len) {
                ssize_t w = send(fd, c->pending, c->len, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN) { drop(ep, c); continue; }
                if (w > 0) { memmove(c->pending, c->pending + w, c->len - w); c->len -= w; }
                if (c->len == 0) set_events(ep, fd, EPOLLIN);
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN)) { drop(ep, c); continue; }
            if (r < 0) continue;
            ssize_t w = send(fd, buf, r, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN) { drop(ep, c); continue; }
            if (w < 0) w = 0;
            if (w < r) {
                c->pending = realloc(c->pending, r - w);
                memcpy(c->pending, buf + w, r - w);
                c->len = r - w;
                set_events(ep, fd, EPOLLOUT);
            }
        }
    }
}
