/* test_checksum.c -- pa_crc32c (checksum.c): the standard check value and
 * other published vectors, the SSE4.2 variant against the byte-wise table
 * bit for bit on every length and alignment up to 300 bytes and on a
 * large buffer, a checksum continued piece by piece equal to the whole,
 * a flipped bit always seen, empty and NULL ranges.  No Python; run plain
 * and under ASan + UBSan. */
#include "pyarena.h"
#include "checksum.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x243F6A8885A308D3ULL;

static void test_known_values(void) {
    /* the CRC-32C check value, and RFC 3720 (iSCSI) B.4's 32 bytes of zeros,
     * of 0xFF and of 0..31 */
    unsigned char buf[32];
    CHECK_EQ(pa_crc32c("123456789", 9, 0), 0xE3069283u);
    CHECK_EQ(_pa_crc32c_portable("123456789", 9, 0), 0xE3069283u);
    memset(buf, 0, sizeof buf);
    CHECK_EQ(pa_crc32c(buf, 32, 0), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    CHECK_EQ(pa_crc32c(buf, 32, 0), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    CHECK_EQ(pa_crc32c(buf, 32, 0), 0x46DD794Eu);
    CHECK_EQ(_pa_crc32c_portable(buf, 32, 0), 0x46DD794Eu);
}

static void test_variants_agree(void) {
    enum { N = 300, BIG = (1 << 20) + 13 };
    unsigned char *buf = malloc(BIG + 8);
    for (size_t i = 0; i < BIG + 8; i++)
        buf[i] = (unsigned char)(pa_rand(&seed) >> 56);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= N; n++) {
            uint32_t a = _pa_crc32c_portable(buf + off, n, 0);
            CHECK_EQ(_pa_crc32c_sse42(buf + off, n, 0), a);
            CHECK_EQ(pa_crc32c(buf + off, n, 0), a);
            CHECK_EQ(_pa_crc32c_sse42(buf + off, n, 0x12345678u),
                     _pa_crc32c_portable(buf + off, n, 0x12345678u));
        }
    CHECK_EQ(_pa_crc32c_sse42(buf + 3, BIG, 0), _pa_crc32c_portable(buf + 3, BIG, 0));
    free(buf);
}

static void test_continued_and_damaged(void) {
    enum { N = 4096 + 77 };
    unsigned char buf[N];
    for (size_t i = 0; i < N; i++)
        buf[i] = (unsigned char)(pa_rand(&seed) >> 56);
    uint32_t whole = pa_crc32c(buf, N, 0);
    size_t cuts[] = {1, 7, 8, 9, 1000, 4096};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
        CHECK_EQ(pa_crc32c(buf + cuts[i], N - cuts[i], pa_crc32c(buf, cuts[i], 0)), whole);
    int seen = 0, tried = 0;
    for (size_t bit = 0; bit < (size_t)N * 8; bit += 97) {
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        seen += pa_crc32c(buf, N, 0) != whole;
        tried++;
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    CHECK_EQ(seen, tried);
    CHECK_EQ(pa_crc32c(buf, N, 0), whole);
}

static void test_empty(void) {
    CHECK_EQ(pa_crc32c(NULL, 0, 0), 0u);
    CHECK_EQ(pa_crc32c(NULL, 5, 0xABCDu), 0xABCDu);
    CHECK_EQ(pa_crc32c("x", 0, 7u), 7u);
}

int main(void) {
    RUN(test_known_values);
    RUN(test_variants_agree);
    RUN(test_continued_and_damaged);
    RUN(test_empty);
    return pa_test_report();
}
