// leaf-digests: what a digest of each 64 KiB leaf costs per GiB on one core, for the
// transfer protocol's choice of leaf digest. SHA-256 as the transfer hashes it (OpenSSL's
// EVP, which uses SHA-NI where the CPU has it; swift-crypto's BoringSSL does the same),
// against XXH3-128 (libxxhash-dev's header, inlined: SSE2 at gcc's default -O2 target) and CRC32C (the SSE4.2
// instruction, one stream). 1 GiB in memory, ROUNDS rounds, each digest in turn; prints
// seconds per GiB per round and the median.
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <openssl/evp.h>
#include <nmmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LEAF = 64 << 10, MAX_ROUNDS = 15 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        c = _mm_crc32_u64(c, v);
    }
    for (; i < n; i++) c = _mm_crc32_u8((uint32_t)c, p[i]);
    return ~(uint32_t)c;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
    size_t total = (size_t)1 << 30;
    uint8_t *bytes = malloc(total);
    if (!bytes) return 1;
    for (size_t i = 0; i < total; i++) bytes[i] = (uint8_t)((i * 2654435761u) >> 13);
    const char *names[3] = {"SHA-256 (OpenSSL EVP)", "XXH3-128 (libxxhash)", "CRC32C (SSE4.2)"};
    double seconds[3][MAX_ROUNDS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < rounds; r++) {
        for (int d = 0; d < 3; d++) {
            double start = now();
            for (size_t at = 0; at < total; at += LEAF) {
                if (d == 0) {
                    unsigned char digest[32];
                    unsigned int length;
                    EVP_Digest(bytes + at, LEAF, digest, &length, EVP_sha256(), NULL);
                    sink += digest[0];
                } else if (d == 1) {
                    sink += XXH3_128bits(bytes + at, LEAF).low64;
                } else {
                    sink += crc32c(bytes + at, LEAF);
                }
            }
            seconds[d][r] = now() - start;
        }
    }
    printf("| digest of each 64 KiB leaf | s per GiB, median of %d | rounds |\n|---|---:|---|\n", rounds);
    for (int d = 0; d < 3; d++) {
        printf("| %s | ", names[d]);
        double sorted[MAX_ROUNDS];
        memcpy(sorted, seconds[d], sizeof(double) * rounds);
        qsort(sorted, rounds, sizeof(double), compare);
        printf("%.3f | ", sorted[rounds / 2]);
        for (int r = 0; r < rounds; r++) printf("%s%.3f", r ? ", " : "", seconds[d][r]);
        printf(" |\n");
    }
    (void)sink;
    return 0;
}
