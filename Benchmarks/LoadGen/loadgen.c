// Load generator for the echo benchmarks. Every echoed byte is checked.
//   loadgen [--framed] pingpong PORT CONNS SIZE SECONDS   round trips/s, p50, p99 (us)
//   loadgen [--framed] stream   PORT SIZE SECONDS         MiB/s echoed, one connection
//   loadgen [--framed] burst    PORT CONNS ROUNDS         total ms: connect CONNS connections,
//                                                         ROUNDS round trips of 64 B on each, close
//   loadgen [--framed] idle     PORT CONNS                open CONNS connections, one 1-byte round
//                                                         trip on each, print "ready ...", then hold
//                                                         them until standard input ends
// Prints one line of key=value pairs (idle: "ready conns=N connect_ms=T" when all are up,
// then "closed" after standard input ends). Exit 1 on any mismatch or error.
//
// --framed speaks echo-server's framed mode: every message goes out as a frame (a flags
// byte 0x00, then the payload length as 32-bit big-endian, then the payload) and a
// framed echo server sends each message back as the same frame, so the echoed byte
// stream equals the sent one in both modes and is checked the same way. SIZE is then the
// payload size; throughput counts frame bytes (5 more per message).
//
// What is sent is a periodic pattern (period not a multiple of any write size, so lost,
// repeated or reordered bytes show up), checked with memcmp; generating and checking
// costs little, which matters because the load generator shares a core with the server.
//
// Connections are made from 127.0.0.1..127.0.0.SOURCES (env LOADGEN_SOURCES, default 8)
// in turn, with IP_BIND_ADDRESS_NO_PORT, so 10,000+ connections to one port do not run
// out of ephemeral ports (the kernel picks the port per 4-tuple at connect time).
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void die(const char *m) { fprintf(stderr, "loadgen: %s (%s)\n", m, strerror(errno)); exit(1); }
static uint8_t pattern(uint64_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

// The outgoing byte stream of every connection is ring[(offset + shift) % period]. The
// ring holds one period plus the largest write, so any write or check is one slice.
static int framed = 0;
static size_t msg_size = 64;  // payload bytes per message
static size_t unit = 1;       // bytes per message on the wire (framed: 5 + payload)
static size_t period = 0;
static uint8_t *ring = NULL;

static void make_ring(size_t size, size_t max_write) {
    msg_size = size;
    if (framed) {
        // Seven frames (prime) with different payloads: the stream repeats every 7 frames.
        unit = 5 + size;
        period = 7 * unit;
    } else {
        unit = 1;
        period = 65521;  // prime: not a multiple of any write or read size
    }
    if (max_write < 65536) max_write = 65536;  // the largest read checked at once
    size_t total = period + max_write + unit;
    ring = malloc(total);
    if (!ring) die("malloc");
    for (size_t o = 0; o < total; o++) {
        size_t p = o % period;
        if (framed) {
            size_t frame = p / unit, pos = p % unit;
            if (pos == 0) ring[o] = 0x00;
            else if (pos < 5) ring[o] = (uint8_t)(size >> (8 * (4 - pos)));
            else ring[o] = pattern(frame * 131 + pos);
        } else {
            ring[o] = pattern(p);
        }
    }
}

static size_t shift_for(int i) { return framed ? (size_t)(i % 7) * unit : ((size_t)i * 131) % period; }
static const uint8_t *stream_at(uint64_t offset, size_t shift) { return ring + (offset + shift) % period; }

static int nsources(void) {
    const char *s = getenv("LOADGEN_SOURCES");
    int n = s ? atoi(s) : 8;
    return n < 1 ? 1 : n > 250 ? 250 : n;
}

static int dial(int port, int index) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) die("socket");
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = 0,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)(index % nsources())) };
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&src, sizeof src)) die("bind source address");
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("send");
        p += w; n -= (size_t)w;
    }
}

static void check(const uint8_t *got, size_t n, uint64_t offset, size_t shift) {
    if (memcmp(got, stream_at(offset, shift), n) != 0) {
        for (size_t k = 0; k < n; k++)
            if (got[k] != stream_at(offset + k, shift)[0]) {
                fprintf(stderr, "loadgen: byte mismatch at offset %llu\n", (unsigned long long)(offset + k));
                break;
            }
        exit(1);
    }
}

typedef struct { int fd; uint64_t sent, got, rounds; double start; size_t shift; } conn_t;

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

// CONNS connections, each with one message in flight; a new one goes out as soon as the
// whole echo of the last is back. Runs SECONDS, or max_rounds round trips per connection.
static int pingpong(int port, int n, double seconds, int max_rounds, int quiet) {
    conn_t *c = calloc(n, sizeof *c);
    size_t cap = 1 << 20, count = 0;
    double *lat = malloc(cap * sizeof *lat);
    uint8_t *in = malloc(unit * (framed ? 1 : msg_size) + 16);
    int ep = epoll_create1(0);
    for (int i = 0; i < n; i++) {
        c[i].fd = dial(port, i);
        c[i].shift = shift_for(i);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev);
    }
    size_t len = framed ? unit : msg_size;
    double t0 = now(), end = t0 + seconds;
    for (int i = 0; i < n; i++) {
        c[i].start = now();
        send_all(c[i].fd, stream_at(0, c[i].shift), len);
        c[i].sent += len;
    }
    int active = n;
    struct epoll_event evs[256];
    while (active > 0) {
        int m = epoll_wait(ep, evs, 256, 5000);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) die("timeout waiting for echo");
        for (int e = 0; e < m; e++) {
            conn_t *x = &c[evs[e].data.u32];
            ssize_t r = recv(x->fd, in, x->sent - x->got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) die(r == 0 ? "recv: server closed the connection" : "recv");
            check(in, (size_t)r, x->got, x->shift);
            x->got += (uint64_t)r;
            if (x->got != x->sent) continue;
            double t = now();
            if (count == cap) { cap *= 2; lat = realloc(lat, cap * sizeof *lat); }
            lat[count++] = t - x->start;
            x->rounds++;
            if ((max_rounds && x->rounds >= (uint64_t)max_rounds) || (!max_rounds && t >= end)) { active--; continue; }
            x->start = t;
            send_all(x->fd, stream_at(x->sent, x->shift), len);
            x->sent += len;
        }
    }
    double elapsed = now() - t0;
    qsort(lat, count, sizeof *lat, cmp);
    if (!quiet)
        printf("round_trips=%zu seconds=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f\n", count, elapsed, count / elapsed,
               lat[count / 2] * 1e6, lat[(size_t)(count * 0.99)] * 1e6);
    for (int i = 0; i < n; i++) close(c[i].fd);
    close(ep);
    free(c); free(lat); free(in);
    return 0;
}

// One connection, writing SIZE-byte writes (framed: SIZE-byte messages) and reading the
// echo at the same time, for SECONDS; then it drains the echo of everything sent.
static int stream(int port, double seconds) {
    int fd = dial(port, 0);
    size_t wsize = framed ? unit : msg_size, rsize = 1 << 16;
    uint8_t *in = malloc(rsize);
    uint64_t sent = 0, got = 0;
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    double t0 = now(), end = t0 + seconds;
    int sending = 1;
    while (sending || got < sent) {
        struct epoll_event evs[4];
        int m = epoll_wait(ep, evs, 4, 5000);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) die("timeout");
        if (sending && (evs[0].events & EPOLLOUT)) {
            // Past the deadline, only what completes the last message (framed mode
            // echoes whole messages only).
            size_t n = now() >= end ? (unit - sent % unit) % unit : wsize;
            if (n == 0) {
                sending = 0; ev.events = EPOLLIN; epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            } else {
                ssize_t w = send(fd, stream_at(sent, 0), n, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR) die("send");
                if (w > 0) sent += (uint64_t)w;
            }
        }
        if (evs[0].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            ssize_t r = recv(fd, in, rsize, MSG_DONTWAIT);
            if (r == 0) die("eof");
            if (r < 0 && errno != EAGAIN && errno != EINTR) die("recv");
            if (r > 0) { check(in, (size_t)r, got, 0); got += (uint64_t)r; }
        }
    }
    double elapsed = now() - t0;
    printf("bytes=%llu seconds=%.3f mibps=%.1f\n", (unsigned long long)got, elapsed, got / elapsed / 1048576.0);
    close(fd);
    return 0;
}

// CONNS connections, each does one 1-byte round trip (so the server has accepted it and
// is reading), then they are held open and silent until standard input ends.
static int idle(int port, int n) {
    int *fds = malloc(n * sizeof *fds);
    size_t len = framed ? unit : 1;
    uint8_t in[16];
    double t0 = now();
    for (int base = 0; base < n; base += 256) {
        int top = base + 256 < n ? base + 256 : n;
        for (int i = base; i < top; i++) fds[i] = dial(port, i);
        for (int i = base; i < top; i++) send_all(fds[i], stream_at(0, shift_for(i)), len);
        for (int i = base; i < top; i++) {
            size_t got = 0;
            while (got < len) {
                ssize_t r = recv(fds[i], in + got, len - got, 0);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) die("idle: recv");
                got += (size_t)r;
            }
            check(in, len, 0, shift_for(i));
        }
    }
    printf("ready conns=%d connect_ms=%.1f\n", n, (now() - t0) * 1e3);
    fflush(stdout);
    char b[64];
    while (read(0, b, sizeof b) > 0) {}
    for (int i = 0; i < n; i++) close(fds[i]);
    printf("closed\n");
    return 0;
}

static void usage(void) { fprintf(stderr, "usage: see the header of loadgen.c\n"); exit(2); }

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int a = 1;
    if (argc > 1 && !strcmp(argv[1], "--framed")) { framed = 1; a++; }
    if (argc - a < 2) usage();
    const char *mode = argv[a];
    int port = atoi(argv[a + 1]);
    int rest = argc - a - 2;
    char **v = argv + a + 2;
    if (!strcmp(mode, "pingpong") && rest == 3) {
        make_ring((size_t)atoi(v[1]), 5 + (size_t)atoi(v[1]));
        return pingpong(port, atoi(v[0]), atof(v[2]), 0, 0);
    }
    if (!strcmp(mode, "stream") && rest == 2) {
        make_ring((size_t)atoi(v[0]), 5 + (size_t)atoi(v[0]));
        return stream(port, atof(v[1]));
    }
    if (!strcmp(mode, "burst") && rest == 2) {
        make_ring(64, 64 + 5);
        double t0 = now();
        pingpong(port, atoi(v[0]), 0, atoi(v[1]), 1);
        printf("conns=%d rounds=%d total_ms=%.1f\n", atoi(v[0]), atoi(v[1]), (now() - t0) * 1e3);
        return 0;
    }
    if (!strcmp(mode, "idle") && rest == 1) {
        make_ring(1, 16);
        return idle(port, atoi(v[0]));
    }
    usage();
}
