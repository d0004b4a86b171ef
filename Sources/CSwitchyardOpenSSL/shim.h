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

/// An empty memory BIO asks the caller to retry instead of reporting end of file: the
/// bytes are still on the network, the wrapped connection brings them.
static inline void switchyard_bio_set_mem_eof_retry(BIO *bio) {
    (void)BIO_set_mem_eof_return(bio, -1);
}

static inline uint64_t switchyard_ssl_op_no_renegotiation(void) { return (uint64_t)SSL_OP_NO_RENEGOTIATION; }

static inline int switchyard_ssl_version_tls1_2(void) { return TLS1_2_VERSION; }
static inline int switchyard_ssl_version_tls1_3(void) { return TLS1_3_VERSION; }

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

#endif
