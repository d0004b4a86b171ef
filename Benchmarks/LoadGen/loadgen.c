// Load generator for the echo benchmarks. Every echoed byte is checked.
//   loadgen pingpong PORT CONNS SIZE SECONDS   round trips/s, p50, p99 (us)
//   loadgen stream   PORT SIZE SECONDS         MiB/s echoed, one connection
//   loadgen burst    PORT CONNS ROUNDS         total ms: connect CONNS connections,
//                                                         ROUNDS round trips of 64 B on each, close
//   loadgen idle     PORT CONNS                open CONNS connections, one 1-byte round
//                                                         trip on each, print "ready ...", then hold
//                                                         them until standard input ends
//   loadgen scale    PORT CONNS                open CONNS connections and send nothing;
//                                                         print "ready ..."; then for each line
//                                                         "go RATE COUNT" on standard input, COUNT
//                                                         round trips of 64 B, round-robin over the
//                                                         connections, RATE a second in all (below);
//                                                         standard input's end closes them
//   loadgen --tls ...                                     the same over TLS (below)
// Prints one line of key=value pairs (idle: "ready conns=N connect_ms=T" when all are up,
// then "closed" after standard input ends). Exit 1 on any mismatch or error.
//
// It speaks raw bytes only. echo-server's framed mode serves gRPC calls over HTTP/2, which
// Benchmarks/grpc and Benchmarks/framed-vs-raw measure with clients that speak it.
//
// What is sent is a periodic pattern (period not a multiple of any write size, so lost,
// repeated or reordered bytes show up), checked with memcmp; generating and checking
// costs little, which matters because the load generator shares a core with the server.
//
// --tls speaks TLS through OpenSSL 3 on every connection: TLS
// 1.3 unless LOADGEN_TLS_VERSION=1.2, OpenSSL's default ciphers and groups, SNI
// "localhost", no certificate verification (the client's CPU is not what is measured, and
// it shares the core with the server), no session cache and no tickets asked for, so every
// handshake is a full one. The handshakes of all of a load's connections run at once (non-
// blocking, one epoll loop) after their TCP connects, and before the first message; a
// burst's total_ms includes them and handshake_ms says how long they took. Connections
// end with close_notify (SSL_shutdown, not waiting for the peer's) and close.
// Every mode prints client_cpu_ms (the load generator's own user + system time), so a run
// can tell whether the load generator, not the server, was the bottleneck.
//
// scale (Benchmarks/scale) holds many connections idle, then drives all of them at a
// modest rate: "go RATE COUNT" sends round trip k on connection k % CONNS, the k-th at
// RATE * (now - start) >= k (at most one in flight per connection: a connection still
// waiting for its echo holds the turn up), and prints round_trips, seconds, rps, p50_us,
// p99_us, client_cpu_ms and late (round trips sent more than 10 ms after their time).
// The connects send nothing, so the server's side has accepted them only when it says
// so (Benchmarks/scale counts its descriptors); connects are blocking, 256 at a time.
//
// Connections are made from 127.0.0.1..127.0.0.SOURCES (env LOADGEN_SOURCES, default 8)
// in turn, with IP_BIND_ADDRESS_NO_PORT, so 10,000+ connections to one port do not run
// out of ephemeral ports (the kernel picks the port per 4-tuple at connect time).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
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
static size_t msg_size = 64;  // bytes per message
static size_t period = 0;
static uint8_t *ring = NULL;

static void make_ring(size_t size, size_t max_write) {
    msg_size = size;
    period = 65521;  // prime: not a multiple of any write or read size
    if (max_write < 65536) max_write = 65536;  // the largest read checked at once
    size_t total = period + max_write + 1;
    ring = malloc(total);
    if (!ring) die("malloc");
    for (size_t o = 0; o < total; o++) {
        ring[o] = pattern(o % period);
    }
}

// TLS (--tls): one SSL per descriptor; xsend/xrecv go through it when there is one.
static int tls = 0;
static SSL_CTX *tls_ctx = NULL;
static SSL *ssl_of[1 << 17];
static double handshake_ms = 0;

static void tls_init(void) {
    tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!tls_ctx) die("SSL_CTX_new");
    const char *v = getenv("LOADGEN_TLS_VERSION");
    int version = v && !strcmp(v, "1.2") ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(tls_ctx, version);
    SSL_CTX_set_max_proto_version(tls_ctx, version);
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(tls_ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(tls_ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(tls_ctx, 1);
}

static double cpu_ms(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static void set_blocking(int fd, int blocking) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
}

// send/recv, through TLS when the descriptor has an SSL. Over TLS, "would block" is
// errno EAGAIN whichever way OpenSSL wants to go next (the descriptor's own blocking mode
// decides; MSG_DONTWAIT is for plain sockets), and a close_notify or a plain EOF reads 0.
static ssize_t xsend(int fd, const void *p, size_t n, int flags) {
    SSL *ssl = ssl_of[fd];
    if (!ssl) return send(fd, p, n, flags);
    int r = SSL_write(ssl, p, (int)n);
    if (r > 0) return r;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) { errno = EAGAIN; return -1; }
    ERR_print_errors_fp(stderr);
    errno = EIO;
    return -1;
}

static ssize_t xrecv(int fd, void *p, size_t n, int flags) {
    SSL *ssl = ssl_of[fd];
    if (!ssl) return recv(fd, p, n, flags);
    int r = SSL_read(ssl, p, (int)n);
    if (r > 0) return r;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) { errno = EAGAIN; return -1; }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) return 0;
    ERR_print_errors_fp(stderr);
    errno = EIO;
    return -1;
}

// Handshakes on every descriptor at once (non-blocking, one epoll loop); the descriptors
// are left blocking or not as asked.
static void handshake_all(const int *fds, int n, int leave_blocking) {
    if (!tls) return;
    double t0 = now();
    int ep = epoll_create1(0), left = 0;
    for (int i = 0; i < n; i++) {
        set_blocking(fds[i], 0);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
        left++;
    }
    int *done = calloc((size_t)n, sizeof *done);
    for (int i = 0; i < n; i++) {  // every ClientHello out first
        int r = SSL_do_handshake(ssl_of[fds[i]]);
        if (r == 1) { done[i] = 1; left--; continue; }
        int e = SSL_get_error(ssl_of[fds[i]], r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) { ERR_print_errors_fp(stderr); die("TLS handshake"); }
        if (e == SSL_ERROR_WANT_WRITE) {
            struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = (uint32_t)i };
            epoll_ctl(ep, EPOLL_CTL_MOD, fds[i], &ev);
        }
    }
    struct epoll_event evs[256];
    while (left > 0) {
        int m = epoll_wait(ep, evs, 256, 10000);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) die("timeout in TLS handshakes");
        for (int k = 0; k < m; k++) {
            int i = (int)evs[k].data.u32;
            if (done[i]) continue;
            SSL *ssl = ssl_of[fds[i]];
            int r = SSL_do_handshake(ssl);
            if (r == 1) {
                done[i] = 1; left--;
                epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
                continue;
            }
            int e = SSL_get_error(ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) { ERR_print_errors_fp(stderr); die("TLS handshake"); }
            struct epoll_event ev = { .events = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT, .data.u32 = (uint32_t)i };
            epoll_ctl(ep, EPOLL_CTL_MOD, fds[i], &ev);
        }
    }
    for (int i = 0; i < n; i++) set_blocking(fds[i], !leave_blocking ? 0 : 1);
    close(ep);
    free(done);
    handshake_ms = (now() - t0) * 1e3;
}

static void hang_up(int fd) {
    SSL *ssl = ssl_of[fd];
    if (ssl) {
        SSL_shutdown(ssl);  // close_notify out; the peer's is not waited for
        SSL_free(ssl);
        ssl_of[fd] = NULL;
    }
    close(fd);
}

static size_t shift_for(int i) { return ((size_t)i * 131) % period; }
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
    if (tls) {
        if (fd >= (int)(sizeof ssl_of / sizeof ssl_of[0])) die("too many descriptors for --tls");
        SSL *ssl = SSL_new(tls_ctx);
        SSL_set_fd(ssl, fd);
        SSL_set_tlsext_host_name(ssl, "localhost");
        SSL_set_connect_state(ssl);
        ssl_of[fd] = ssl;
    }
    return fd;
}

static void send_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = xsend(fd, p, n, MSG_NOSIGNAL);
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
    uint8_t *in = malloc(msg_size + 16);
    int ep = epoll_create1(0);
    int *fds = calloc((size_t)(n > 0 ? n : 1), sizeof *fds);
    if (!fds) die("malloc");
    for (int i = 0; i < n; i++) fds[i] = dial(port, i);
    handshake_all(fds, n, 1);
    for (int i = 0; i < n; i++) {
        c[i].fd = fds[i];
        c[i].shift = shift_for(i);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev);
    }
    free(fds);
    size_t len = msg_size;
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
            ssize_t r = xrecv(x->fd, in, x->sent - x->got, 0);
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
        printf("round_trips=%zu seconds=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f client_cpu_ms=%.1f\n", count, elapsed,
               count / elapsed, lat[count / 2] * 1e6, lat[(size_t)(count * 0.99)] * 1e6, cpu_ms());
    for (int i = 0; i < n; i++) hang_up(c[i].fd);
    close(ep);
    free(c); free(lat); free(in);
    return 0;
}

// One connection, writing SIZE-byte writes and reading the
// echo at the same time, for SECONDS; then it drains the echo of everything sent.
static int stream(int port, double seconds) {
    int fd = dial(port, 0);
    handshake_all(&fd, 1, 0);
    size_t wsize = msg_size, rsize = 1 << 16;
    uint8_t *in = malloc(rsize);
    uint64_t sent = 0, got = 0;
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    double t0 = now(), end = t0 + seconds;
    int sending = 1;
    size_t retry = 0;  // over TLS, a write OpenSSL has begun must be repeated until it is out
    while (sending || got < sent) {
        struct epoll_event evs[4];
        int m = epoll_wait(ep, evs, 4, 5000);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) die("timeout");
        if (sending && (evs[0].events & EPOLLOUT)) {
            size_t n = retry ? retry : now() >= end ? 0 : wsize;
            if (n == 0) {
                sending = 0; ev.events = EPOLLIN; epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            } else {
                ssize_t w = xsend(fd, stream_at(sent, 0), n, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR) die("send");
                retry = w < 0 && tls ? n : 0;
                if (w > 0) sent += (uint64_t)w;
            }
        }
        if (evs[0].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            ssize_t r;
            do {  // over TLS, also what OpenSSL read ahead
                r = xrecv(fd, in, rsize, MSG_DONTWAIT);
                if (r == 0) die("eof");
                if (r < 0 && errno != EAGAIN && errno != EINTR) die("recv");
                if (r > 0) { check(in, (size_t)r, got, 0); got += (uint64_t)r; }
            } while (r > 0 && ssl_of[fd] && SSL_has_pending(ssl_of[fd]));
        }
    }
    double elapsed = now() - t0;
    printf("bytes=%llu seconds=%.3f mibps=%.1f client_cpu_ms=%.1f\n", (unsigned long long)got, elapsed,
           got / elapsed / 1048576.0, cpu_ms());
    hang_up(fd);
    return 0;
}

// The many connections of idle and scale: fds[0..n) dialled 256 at a time (blocking
// connects, then that batch's TLS handshakes, left blocking), so the server's accept queue
// never holds more than one batch; after each batch, `then` (when given) on fds[base..top).
static void dial_in_batches(int port, int *fds, int n, void (*then)(const int *fds, int base, int top)) {
    for (int base = 0; base < n; base += 256) {
        int top = base + 256 < n ? base + 256 : n;
        for (int i = base; i < top; i++) fds[i] = dial(port, i);
        handshake_all(fds + base, top - base, 1);
        if (then) then(fds, base, top);
    }
}

// idle's round trip on each connection of a batch: one byte, echoed and checked.
static void one_round_trip(const int *fds, int base, int top) {
    size_t len = 1;
    uint8_t in[16];
    for (int i = base; i < top; i++) send_all(fds[i], stream_at(0, shift_for(i)), len);
    for (int i = base; i < top; i++) {
        size_t got = 0;
        while (got < len) {
            ssize_t r = xrecv(fds[i], in + got, len - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) die("idle: recv");
            got += (size_t)r;
        }
        check(in, len, 0, shift_for(i));
    }
}

// CONNS connections, each does one 1-byte round trip (so the server has accepted it and
// is reading), then they are held open and silent until standard input ends.
static int idle(int port, int n) {
    int *fds = malloc(n * sizeof *fds);
    double t0 = now();
    dial_in_batches(port, fds, n, one_round_trip);
    printf("ready conns=%d connect_ms=%.1f\n", n, (now() - t0) * 1e3);
    fflush(stdout);
    char b[64];
    while (read(0, b, sizeof b) > 0) {}
    for (int i = 0; i < n; i++) hang_up(fds[i]);
    printf("closed\n");
    return 0;
}

// scale: CONNS connections, nothing sent until "go RATE COUNT" lines come on standard input.
static int scale(int port, int n) {
    conn_t *c = calloc((size_t)(n > 0 ? n : 1), sizeof *c);
    if (!c) die("malloc");
    int ep = epoll_create1(0);
    double t0 = now();
    int *fds = calloc((size_t)(n > 0 ? n : 1), sizeof *fds);
    if (!fds) die("malloc");
    dial_in_batches(port, fds, n, NULL);
    for (int i = 0; i < n; i++) {
        c[i].fd = fds[i];
        c[i].shift = shift_for(i);
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev)) die("epoll_ctl");
    }
    free(fds);
    printf("ready conns=%d connect_ms=%.1f\n", n, (now() - t0) * 1e3);
    fflush(stdout);
    size_t len = msg_size;
    uint8_t *in = malloc(len + 16);
    char line[128];
    FILE *cmd = fdopen(0, "r");
    while (fgets(line, sizeof line, cmd)) {
        double rate = 0;
        long count = 0;
        if (sscanf(line, "go %lf %ld", &rate, &count) != 2 || rate <= 0 || count <= 0 || n <= 0) {
            fprintf(stderr, "loadgen: scale: expected \"go RATE COUNT\", got %s", line);
            exit(2);
        }
        double *lat = malloc((size_t)count * sizeof *lat);
        if (!lat) die("malloc");
        long issued = 0, done = 0, late = 0;
        double start = now();
        struct epoll_event evs[256];
        while (done < count) {
            double t = now();
            // Send every round trip that is due, in turn, while its connection is free.
            while (issued < count && (double)issued <= (t - start) * rate) {
                conn_t *x = &c[issued % n];
                if (x->got != x->sent) break;
                if (t - (start + issued / rate) > 0.010) late++;
                x->start = t;
                send_all(x->fd, stream_at(x->sent, x->shift), len);
                x->sent += len;
                issued++;
            }
            int wait_ms = 0;
            if (issued < count) {
                double next = start + issued / rate - now();
                wait_ms = next > 0 ? (int)(next * 1e3) + 1 : 0;
                if (c[issued % n].got != c[issued % n].sent) wait_ms = 5000;  // its echo wakes us
            } else {
                wait_ms = 5000;
            }
            int m = epoll_wait(ep, evs, 256, wait_ms);
            if (m < 0 && errno == EINTR) continue;
            if (m < 0) die("epoll_wait");
            if (m == 0 && wait_ms == 5000) die("timeout waiting for echo");
            for (int e = 0; e < m; e++) {
                conn_t *x = &c[evs[e].data.u32];
                if (x->got == x->sent) die("scale: data nobody asked for");
                ssize_t r = xrecv(x->fd, in, x->sent - x->got, 0);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) die(r == 0 ? "recv: server closed the connection" : "recv");
                check(in, (size_t)r, x->got, x->shift);
                x->got += (uint64_t)r;
                if (x->got != x->sent) continue;
                lat[done++] = now() - x->start;
                x->rounds++;
            }
        }
        double elapsed = now() - start;
        qsort(lat, (size_t)count, sizeof *lat, cmp);
        long untouched = 0;
        for (int i = 0; i < n; i++) untouched += c[i].rounds == 0;
        printf("round_trips=%ld seconds=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f late=%ld untouched=%ld client_cpu_ms=%.1f\n",
               count, elapsed, count / elapsed, lat[count / 2] * 1e6, lat[(long)(count * 0.99)] * 1e6, late, untouched,
               cpu_ms());
        fflush(stdout);
        free(lat);
    }
    for (int i = 0; i < n; i++) hang_up(c[i].fd);
    printf("closed\n");
    close(ep);
    free(c); free(in);
    return 0;
}

static void usage(void) { fprintf(stderr, "usage: see the header of loadgen.c\n"); exit(2); }

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int a = 1;
    for (; a < argc; a++) {
        if (!strcmp(argv[a], "--tls")) tls = 1;
        else break;
    }
    if (tls) tls_init();
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
        printf("conns=%d rounds=%d total_ms=%.1f handshake_ms=%.1f client_cpu_ms=%.1f\n", atoi(v[0]), atoi(v[1]),
               (now() - t0) * 1e3, handshake_ms, cpu_ms());
        return 0;
    }
    if (!strcmp(mode, "scale") && rest == 1) {
        make_ring(64, 64 + 5);
        return scale(port, atoi(v[0]));
    }
    if (!strcmp(mode, "idle") && rest == 1) {
        make_ring(1, 16);
        return idle(port, atoi(v[0]));
    }
    usage();
}
