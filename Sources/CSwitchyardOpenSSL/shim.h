// The system OpenSSL 3 (Debian: libssl-dev) for SwitchyardTLS, through pkg-config.
//
// Swift imports OpenSSL's functions but not its function-like macros (most SSL_CTX_set_*
// and BIO_* setters are macros over SSL_CTX_ctrl/BIO_ctrl); each one SwitchyardTLS
// needs is wrapped here as a prefixed static inline function. The ALPN server callback
// is C too: it runs inside OpenSSL's handshake and only compares byte strings.
#ifndef C_SWITCHYARD_OPENSSL_SHIM_H
#define C_SWITCHYARD_OPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

static inline int switchyard_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int switchyard_ssl_ctx_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline int switchyard_ssl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline long switchyard_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

/// Turns OpenSSL's server-side session cache off.
static inline void switchyard_ssl_ctx_disable_session_cache(SSL_CTX *ctx) {
    (void)SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
}

static inline uint64_t switchyard_ssl_op_no_renegotiation(void) { return (uint64_t)SSL_OP_NO_RENEGOTIATION; }

static inline int switchyard_ssl_version_tls1_2(void) { return TLS1_2_VERSION; }
static inline int switchyard_ssl_version_tls1_3(void) { return TLS1_3_VERSION; }

/// Empties this thread's error queue before an SSL call (SSL_get_error needs it empty),
/// peeking first: the queue is almost always empty already (every failure drains it), and
/// a peek costs a fraction of ERR_clear_error's walk over all of the queue's slots.
static inline void switchyard_err_clear(void) {
    if (ERR_peek_error() != 0) ERR_clear_error();
}

static inline unsigned long switchyard_err_get_lib(unsigned long e) { return (unsigned long)ERR_GET_LIB(e); }
static inline unsigned long switchyard_err_get_reason(unsigned long e) { return (unsigned long)ERR_GET_REASON(e); }

/// The server's ALPN choice: its own list (wire format, `arg`) in its order of
/// preference against the client's offer. No overlap ends the handshake with the
/// no_application_protocol alert (RFC 7301, section 3.2).
static inline int switchyard_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                         const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const unsigned char *server = (const unsigned char *)arg;
    unsigned int serverLength = server[0] | (server[1] << 8);
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, server + 2, serverLength, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

/// Installs ``switchyard_alpn_select`` with `list`: two bytes of length (little-endian)
/// then the protocols in wire format. `list` must outlive `ctx`.
static inline void switchyard_ssl_ctx_set_alpn_server(SSL_CTX *ctx, const unsigned char *list) {
    SSL_CTX_set_alpn_select_cb(ctx, switchyard_alpn_select, (void *)list);
}

// MARK: The session's BIO: borrowed input, one reusable output buffer

/// What one TLS session's BIO reads from and writes to. OpenSSL reads ciphertext straight
/// from the bytes the wrapped connection lends (`lent`, valid only while it lends them)
/// and, before those, from `held`: what an earlier loan left unread, copied. What OpenSSL
/// writes is appended to `out`, which the caller hands to the wrapped connection (one
/// write for everything one call produced) and then empties; its storage is reused.
/// Instead of two memory BIOs: no copy of every received byte into a BIO and out again,
/// no memmove when a memory BIO compacts, no array per write.
typedef struct switchyard_tls_io {
    const unsigned char *lent;
    size_t lentCount;
    unsigned char *held;
    size_t heldStart;
    size_t heldEnd;
    size_t heldCapacity;
    unsigned char *out;
    size_t outCount;
    size_t outCapacity;
} switchyard_tls_io;

/// Makes room for `extra` more bytes after `used` in a malloc'd buffer, doubling it at
/// least (no floor: a connection that only shook hands keeps a buffer of its handshake's
/// size, one that streams a buffer of its largest write).
static inline int switchyard_tls_io_reserve(unsigned char **buffer, size_t *capacity, size_t used, size_t extra) {
    if (*capacity - used >= extra) return 1;
    size_t wanted = *capacity * 2;
    if (wanted < used + extra) wanted = used + extra;
    unsigned char *grown = (unsigned char *)realloc(*buffer, wanted);
    if (grown == NULL) return 0;
    *buffer = grown;
    *capacity = wanted;
    return 1;
}

static inline int switchyard_tls_io_bio_read(BIO *bio, char *data, size_t size, size_t *read) {
    switchyard_tls_io *io = (switchyard_tls_io *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    size_t done = 0;
    size_t held = io->heldEnd - io->heldStart;
    if (held > 0 && size > 0) {
        size_t n = held < size ? held : size;
        memcpy(data, io->held + io->heldStart, n);
        io->heldStart += n;
        if (io->heldStart == io->heldEnd) io->heldStart = io->heldEnd = 0;
        done = n;
    }
    if (done < size && io->lentCount > 0) {
        size_t n = io->lentCount < size - done ? io->lentCount : size - done;
        memcpy(data + done, io->lent, n);
        io->lent += n;
        io->lentCount -= n;
        done += n;
    }
    *read = done;
    if (done == 0) {
        // Nothing yet: the bytes are still on the network, the wrapped connection brings them.
        BIO_set_retry_read(bio);
        return 0;
    }
    return 1;
}

static inline int switchyard_tls_io_bio_write(BIO *bio, const char *data, size_t size, size_t *written) {
    switchyard_tls_io *io = (switchyard_tls_io *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    *written = 0;
    if (size == 0) return 1;
    if (!switchyard_tls_io_reserve(&io->out, &io->outCapacity, io->outCount, size)) return 0;
    memcpy(io->out + io->outCount, data, size);
    io->outCount += size;
    *written = size;
    return 1;
}

static inline long switchyard_tls_io_bio_ctrl(BIO *bio, int cmd, long num, void *ptr) {
    (void)num;
    (void)ptr;
    switchyard_tls_io *io = (switchyard_tls_io *)BIO_get_data(bio);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return (long)(io->heldEnd - io->heldStart + io->lentCount);
    case BIO_CTRL_WPENDING: return (long)io->outCount;
    default: return 0;
    }
}

static inline int switchyard_tls_io_bio_create(BIO *bio) {
    BIO_set_init(bio, 0);
    return 1;
}

/// A new BIO method for ``switchyard_tls_io`` (make it once, keep it), or NULL.
static inline BIO_METHOD *switchyard_tls_io_method_new(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "switchyard");
    if (method == NULL) return NULL;
    if (BIO_meth_set_read_ex(method, switchyard_tls_io_bio_read) != 1
        || BIO_meth_set_write_ex(method, switchyard_tls_io_bio_write) != 1
        || BIO_meth_set_ctrl(method, switchyard_tls_io_bio_ctrl) != 1
        || BIO_meth_set_create(method, switchyard_tls_io_bio_create) != 1) {
        BIO_meth_free(method);
        return NULL;
    }
    return method;
}

/// A BIO of `method` over `io` (which must outlive it), or NULL.
static inline BIO *switchyard_tls_io_bio_new(BIO_METHOD *method, switchyard_tls_io *io) {
    BIO *bio = BIO_new(method);
    if (bio == NULL) return NULL;
    BIO_set_data(bio, io);
    BIO_set_init(bio, 1);
    return bio;
}

/// Copies what OpenSSL left unread of the loan into `held` and ends the loan. Returns 0
/// if there was no memory for it.
static inline int switchyard_tls_io_end_loan(switchyard_tls_io *io) {
    size_t rest = io->lentCount;
    const unsigned char *from = io->lent;
    io->lent = NULL;
    io->lentCount = 0;
    if (rest == 0) return 1;
    if (io->heldStart > 0) {
        memmove(io->held, io->held + io->heldStart, io->heldEnd - io->heldStart);
        io->heldEnd -= io->heldStart;
        io->heldStart = 0;
    }
    if (!switchyard_tls_io_reserve(&io->held, &io->heldCapacity, io->heldEnd, rest)) return 0;
    memcpy(io->held + io->heldEnd, from, rest);
    io->heldEnd += rest;
    return 1;
}

/// Frees the output buffer if it is empty (its records were handed on); the next write
/// makes a new one of that write's size.
static inline void switchyard_tls_io_release_output(switchyard_tls_io *io) {
    if (io->outCount != 0) return;
    free(io->out);
    io->out = NULL;
    io->outCapacity = 0;
}

/// Frees the buffers (after the BIO is gone).
static inline void switchyard_tls_io_free(switchyard_tls_io *io) {
    free(io->held);
    free(io->out);
    memset(io, 0, sizeof(*io));
}

#endif
