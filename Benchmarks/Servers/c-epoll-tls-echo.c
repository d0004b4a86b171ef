// The TLS limit for this machine: c-epoll-echo.c with OpenSSL on the socket.
// Single-threaded, level-triggered epoll, non-blocking sockets, OpenSSL 3 reading and
// writing the socket itself (SSL_set_fd: no copies through memory BIOs), read-ahead on
// (one recv takes every record the kernel has), partial writes on (SSL_write returns per
// record, so a full kernel buffer keeps only the unsent tail). Each readiness event: read
// records into one 64 KiB buffer until OpenSSL has nothing more buffered, write the
// plaintext straight back; when the kernel does not take it all the tail is kept and
// reads pause until it drains. TLS 1.2 and 1.3, OpenSSL's default ciphers and groups, no
// session tickets and no session cache (as Switchyard's TLS server: every handshake full).
// Usage: c-epoll-tls-echo CERT.pem KEY.pem PORT   (prints "listening on PORT" when ready)
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct { int fd; SSL *ssl; int established; unsigned events; char *pending; size_t off, len; } conn_t;

static conn_t *conns[65536];
static int ep;
static char buf[65536];

static void set_events(conn_t *c, unsigned events) {
    if (c->events == events) return;
    struct epoll_event ev = { .events = events, .data.fd = c->fd };
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

static void drop(conn_t *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    SSL_free(c->ssl);
    close(c->fd);
    conns[c->fd] = NULL;
    free(c->pending);
    free(c);
}

// After an SSL call returned r <= 0: wait for what OpenSSL wants (returns 0), or the
// connection is over (returns -1: closed, close_notify or error).
static int wait_for(conn_t *c, int r) {
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ: set_events(c, EPOLLIN); return 0;
    case SSL_ERROR_WANT_WRITE: set_events(c, EPOLLOUT); return 0;
    default: ERR_clear_error(); return -1;
    }
}

// Writes the kept tail: 1 when it is all out, 0 when the kernel is full, -1 on error.
static int flush_pending(conn_t *c) {
    while (c->len > 0) {
        int w = SSL_write(c->ssl, c->pending + c->off, (int)c->len);
        if (w <= 0) return wait_for(c, w);
        c->off += (size_t)w;
        c->len -= (size_t)w;
    }
    return 1;
}

// Writes buf[0..n): 1 when it is all out, 0 when the tail is kept, -1 on error. The tail
// is copied and SSL_write is retried from the copy (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
static int write_buf(conn_t *c, size_t n) {
    size_t off = 0;
    while (off < n) {
        int w = SSL_write(c->ssl, buf + off, (int)(n - off));
        if (w <= 0) {
            if (wait_for(c, w) < 0) return -1;
            c->pending = realloc(c->pending, n - off);
            memcpy(c->pending, buf + off, n - off);
            c->off = 0;
            c->len = n - off;
            return 0;
        }
        off += (size_t)w;
    }
    return 1;
}

static void service(conn_t *c) {
    if (!c->established) {
        int r = SSL_accept(c->ssl);
        if (r <= 0) { if (wait_for(c, r) < 0) drop(c); return; }
        c->established = 1;
    }
    if (c->len) {
        int w = flush_pending(c);
        if (w < 0) { drop(c); return; }
        if (w == 0) return;
    }
    for (;;) {
        size_t n = 0;
        while (n < sizeof buf) {
            int r = SSL_read(c->ssl, buf + n, (int)(sizeof buf - n));
            if (r <= 0) {
                if (wait_for(c, r) < 0) { drop(c); return; }
                break;
            }
            n += (size_t)r;
            if (!SSL_has_pending(c->ssl)) break;
        }
        if (n == 0) return;
        int w = write_buf(c, n);
        if (w < 0) { drop(c); return; }
        if (w == 0) return;
        if (!SSL_has_pending(c->ssl)) { set_events(c, EPOLLIN); return; }
    }
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 4) { fprintf(stderr, "usage: c-epoll-tls-echo CERT.pem KEY.pem PORT\n"); return 2; }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[1]) != 1 || SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);

    int port = atoi(argv[3]);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) { perror("listen"); return 1; }
    socklen_t al = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &al);
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int cfd;
                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *c = calloc(1, sizeof *c);
                    c->fd = cfd;
                    c->ssl = SSL_new(ctx);
                    SSL_set_fd(c->ssl, cfd);
                    c->events = EPOLLIN;
                    conns[cfd] = c;
                    struct epoll_event ce = { .events = EPOLLIN, .data.fd = cfd };
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ce);
                }
                continue;
            }
            conn_t *c = conns[fd];
            if (c) service(c);
        }
    }
}
