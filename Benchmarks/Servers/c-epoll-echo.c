// The limit for this machine: a minimal single-threaded C epoll echo server.
// Level-triggered, one 64 KiB read buffer, writes straight back; when the kernel does
// not take everything, the unsent tail is kept and reads pause until it drains.
// Usage: c-epoll-echo PORT [--threads N]   (prints "listening on PORT" when ready)
// --threads N (default 1): N such loops in N threads, each with its own listening socket
// on the same port (SO_REUSEPORT: the kernel spreads new connections over the N sockets
// by a hash of their addresses) and its own epoll set and read buffer; nothing is shared
// between them but the descriptor-indexed connection table, where each thread touches
// only its own descriptors. Build with -pthread.
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
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

static void *serve(void *arg) {
    int lfd = (int)(long)arg, one = 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    char *buf = malloc(65536);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= (int)(sizeof conns / sizeof conns[0])) { close(c); continue; }
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
            ssize_t r = recv(fd, buf, 65536, 0);
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
    return NULL;
}

static int listen_on(int port, int reuseport) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport) setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) { perror("listen"); exit(1); }
    return lfd;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int port = argc > 1 ? atoi(argv[1]) : 7100;
    int threads = 1;
    if (argc > 3 && !strcmp(argv[2], "--threads")) threads = atoi(argv[3]);
    if (threads < 1 || threads > 64) { fprintf(stderr, "c-epoll-echo: --threads 1 to 64\n"); return 2; }
    int lfds[64];
    lfds[0] = listen_on(port, threads > 1);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    getsockname(lfds[0], (struct sockaddr *)&a, &al);
    for (int t = 1; t < threads; t++) lfds[t] = listen_on(ntohs(a.sin_port), 1);
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (int t = 1; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, serve, (void *)(long)lfds[t])) { perror("pthread_create"); return 1; }
    }
    serve((void *)(long)lfds[0]);
    return 0;
}
