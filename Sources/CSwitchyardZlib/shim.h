// The system zlib (Debian: zlib1g-dev) for gRPC's gzip message compression in
// SwitchyardCalls, through pkg-config.
//
// deflateInit2 and inflateInit2 are macros over deflateInit2_/inflateInit2_ (they pass
// zlib's version and the stream's size, so a header and a library of different versions
// are caught); Swift imports no function-like macros, so each is wrapped here as a
// prefixed static inline function.
#ifndef C_SWITCHYARD_ZLIB_SHIM_H
#define C_SWITCHYARD_ZLIB_SHIM_H

#include <zlib.h>

/// deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY).
/// windowBits 15 + 16 writes a gzip wrapper (RFC 1952).
static inline int switchyard_deflate_init2(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}

/// inflateInit2(stream, windowBits). windowBits 15 + 16 reads a gzip wrapper only.
static inline int switchyard_inflate_init2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

#endif
