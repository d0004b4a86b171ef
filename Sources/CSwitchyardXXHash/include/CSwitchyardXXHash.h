// XXH3-128 for the transfer protocol's leaf digests (SwitchyardTransfer), from the
// system xxHash's header (Debian: libxxhash-dev), compiled into this target: nothing is
// linked at run time.
#ifndef C_SWITCHYARD_XXHASH_H
#define C_SWITCHYARD_XXHASH_H

#include <stddef.h>
#include <stdint.h>

/// XXH3-128 (seed 0) of `count` bytes at `bytes`, in xxHash's canonical form (the
/// 128-bit value big-endian, as `xxh128sum` prints it) at `out`.
void csy_xxh3_128(const void *bytes, size_t count, uint8_t out[16]);

#endif
