// The limit for libuv on this machine: a plain single-threaded libuv echo server, the
// way one writes it for speed.
// - One 64 KiB read buffer per connection, allocated on its first read and reused for
//   every read after (alloc_cb hands back the same buffer).
// - Each read is echoed with uv_try_write first; only the tail the kernel did not take
//   is copied into a uv_write request.
// - While anything is queued, reading stops (uv_read_stop), and starts again when the
//   queue drains: a peer that does not read its echo is pushed back by TCP, and the
//   server holds at most one tail per connection.
// Usage: c-libuv-echo PORT   (0 picks a port; prints "listening on PORT" when ready)
// Build: gcc -O2 -o c-libuv-echo c-libuv-echo.c $(pkg-config --cflags --libs libuv)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define READ_BUFFER_SIZE 65536

typedef struct {
    uv_tcp_t tcp;      // first: the handle's address is the connection's
    char *buffer;      // the reused read buffer
    int queued;        // uv_write requests not yet completed
} conn_t;

typedef struct {
    uv_write_t req;
    uv_buf_t buf;
    char data[];       // the unwritten tail
} tail_t;

static uv_loop_t *loop;

static void on_close(uv_handle_t *handle) {
    conn_t *c = (conn_t *)handle;
    free(c->buffer);
    free(c);
}

static void drop(conn_t *c) {
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    conn_t *c = (conn_t *)handle;
    if (!c->buffer) c->buffer = malloc(READ_BUFFER_SIZE);
    *buf = uv_buf_init(c->buffer, c->buffer ? READ_BUFFER_SIZE : 0);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_write(uv_write_t *req, int status) {
    tail_t *t = (tail_t *)req;
    conn_t *c = (conn_t *)req->handle;
    free(t);
    c->queued--;
    if (status < 0) { drop(c); return; }
    if (c->queued == 0 && !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    conn_t *c = (conn_t *)stream;
    if (nread < 0) { drop(c); return; }  // UV_EOF or an error
    if (nread == 0) return;
    uv_buf_t out = uv_buf_init(buf->base, (unsigned)nread);
    int written = uv_try_write(stream, &out, 1);
    if (written == UV_EAGAIN) written = 0;
    if (written < 0) { drop(c); return; }
    if (written == nread) return;
    size_t left = (size_t)nread - (size_t)written;
    tail_t *t = malloc(sizeof *t + left);
    memcpy(t->data, buf->base + written, left);
    t->buf = uv_buf_init(t->data, (unsigned)left);
    if (uv_write(&t->req, stream, &t->buf, 1, on_write) < 0) { free(t); drop(c); return; }
    c->queued++;
    uv_read_stop(stream);
}

static void on_connection(uv_stream_t *server, int status) {
    if (status < 0) return;
    conn_t *c = calloc(1, sizeof *c);
    uv_tcp_init(loop, &c->tcp);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) { drop(c); return; }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int port = argc > 1 ? atoi(argv[1]) : 7100;
    loop = uv_default_loop();
    uv_tcp_t server;
    uv_tcp_init(loop, &server);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port, &addr);
    int r = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (!r) r = uv_listen((uv_stream_t *)&server, 4096, on_connection);
    if (r) { fprintf(stderr, "listen: %s\n", uv_strerror(r)); return 1; }
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
    printf("listening on %d\n", ntohs(bound.sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}
