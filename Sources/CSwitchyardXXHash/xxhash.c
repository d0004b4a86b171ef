// xxHash's functions inlined into this file (XXH_INLINE_ALL): the library needs only
// its header at build time, and XXH3 picks its vector code (SSE2 on x86-64) from the
// target it is compiled for.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "CSwitchyardXXHash.h"

void csy_xxh3_128(const void *bytes, size_t count, uint8_t out[16]) {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes, count));
    for (int index = 0; index < 16; index++) out[index] = canonical.digest[index];
}
