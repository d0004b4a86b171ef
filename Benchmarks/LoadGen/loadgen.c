// Load generator for the echo benchmarks. Every echoed byte is checked.
//   loadgen pingpong PORT CONNS SIZE SECONDS   round trips/s, p50, p99 (us)
//   loadgen stream   PORT SIZE SECONDS         MiB/s echoed, one connection
//   loadgen burst    PORT CONNS ROUNDS         total ms for CONNS connections x ROUNDS round trips
// Prints one line of key=value pairs. Exit 1 on any mismatch or error.
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void die(const char *m) { fprintf(stderr, "loadgen: %s (%s)\n", m, strerror(errno)); exit(1); }
static uint8_t pattern(uint64_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

typedef struct { int fd; uint64_t sent, got, rounds; double start; char *out; } conn_t;

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

static int pingpong(int port, int n, int size, double seconds, int max_rounds) {
    conn_t *c = calloc(n, sizeof *c);
    size_t cap = 1 << 20, count = 0;
    double *lat = malloc(cap * sizeof *lat);
    char *in = malloc(size);
    int ep = epoll_create1(0);
    for (int i = 0; i < n; i++) {
        c[i].fd = dial(port);
        c[i].out = malloc(size);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev);
    }
    double t0 = now(), end = t0 + seconds;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < size; k++) c[i].out[k] = pattern(c[i].sent + k + i);
        c[i].start = now();
        if (send(c[i].fd, c[i].out, size, 0) != size) die("send");
        c[i].sent += size;
    }
    int active = n;
    struct epoll_event evs[256];
    while (active > 0) {
        int m = epoll_wait(ep, evs, 256, 5000);
        if (m <= 0) die("timeout waiting for echo");
        for (int e = 0; e < m; e++) {
            conn_t *x = &c[evs[e].data.u32];
            ssize_t r = recv(x->fd, in, size - (x->got % size), 0);
            if (r <= 0) die("recv");
            for (ssize_t k = 0; k < r; k++) {
                uint64_t off = x->got + k;
                if ((uint8_t)in[k] != pattern(off + (x - c))) { fprintf(stderr, "loadgen: byte mismatch at %llu\n", (unsigned long long)off); exit(1); }
            }
            x->got += r;
            if (x->got != x->sent) continue;
            double t = now();
            if (count == cap) { cap *= 2; lat = realloc(lat, cap * sizeof *lat); }
            lat[count++] = t - x->start;
            x->rounds++;
            if ((max_rounds && x->rounds >= (uint64_t)max_rounds) || (!max_rounds && t >= end)) { active--; continue; }
            for (int k = 0; k < size; k++) x->out[k] = pattern(x->sent + k + (x - c));
            x->start = t;
            if (send(x->fd, x->out, size, 0) != size) die("send");
            x->sent += size;
        }
    }
    double elapsed = now() - t0;
    qsort(lat, count, sizeof *lat, cmp);
    printf("round_trips=%zu seconds=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f\n", count, elapsed, count / elapsed,
           lat[count / 2] * 1e6, lat[(size_t)(count * 0.99)] * 1e6);
    for (int i = 0; i < n; i++) close(c[i].fd);
    return 0;
}

static int stream(int port, int size, double seconds) {
    int fd = dial(port);
    char *out = malloc(size), *in = malloc(1 << 16);
    uint64_t sent = 0, got = 0;
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.fd = fd };
    int flags = 1; (void)flags;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    double t0 = now(), end = t0 + seconds;
    int sending = 1;
    while (sending || got < sent) {
        struct epoll_event evs[4];
        int m = epoll_wait(ep, evs, 4, 5000);
        if (m <= 0) die("timeout");
        if (sending && (evs[0].events & EPOLLOUT)) {
            for (int k = 0; k < size; k++) out[k] = pattern(sent + k);
            ssize_t w = send(fd, out, size, MSG_DONTWAIT);
            if (w > 0) sent += w;
            if (now() >= end) { sending = 0; ev.events = EPOLLIN; epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev); }
        }
        if (evs[0].events & EPOLLIN) {
            ssize_t r = recv(fd, in, 1 << 16, MSG_DONTWAIT);
            if (r == 0) die("eof");
            if (r > 0) {
                for (ssize_t k = 0; k < r; k++) if ((uint8_t)in[k] != pattern(got + k)) { fprintf(stderr, "loadgen: mismatch\n"); exit(1); }
                got += r;
            }
        }
    }
    double elapsed = now() - t0;
    printf("bytes=%llu seconds=%.3f mibps=%.1f\n", (unsigned long long)got, elapsed, got / elapsed / 1048576.0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: see the header of loadgen.c\n"); return 2; }
    int port = atoi(argv[2]);
    if (!strcmp(argv[1], "pingpong") && argc == 6) return pingpong(port, atoi(argv[3]), atoi(argv[4]), atof(argv[5]), 0);
    if (!strcmp(argv[1], "stream") && argc == 5) return stream(port, atoi(argv[3]), atof(argv[4]));
    if (!strcmp(argv[1], "burst") && argc == 5) {
        double t0 = now();
        pingpong(port, atoi(argv[3]), 64, 0, atoi(argv[4]));
        printf("total_ms=%.1f\n", (now() - t0) * 1e3);
        return 0;
    }
    fprintf(stderr, "usage: see the header of loadgen.c\n");
    return 2;
}
