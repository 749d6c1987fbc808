/* kernels/nbits.c -- onnxruntime's com.microsoft MatMulNBits from its
 * packed blocks: Y = A @ W^T with W (N, K) stored as `bits`-bit integers
 * (2, 4 or 8) in blocks of `block` along K, a float scale per (column,
 * block), and zero points per (column, block) packed as the values are
 * (uint8), as floats, or 2^(bits-1) when absent:
 *     W[j][t] = (q[j][t] - zero point) * scale          (float32, this order)
 * A decoder's weights stay in their 2-8 bits: the float copy was 8x the
 * bytes of 4-bit weights.
 *
 *   pa_nbits_rows:   y = A @ W^T for a few rows of A (a decode step): each
 *                    column is dequantized once and dotted with every row
 *                    (4 bits in blocks of 32 or more: sixteen bytes at a
 *                    time against A's even and odd columns, split
 *                    beforehand into the workspace; otherwise the whole
 *                    column into the workspace, then a dot per row).
 *   pa_nbits_panel:  W's rows [n0, n1) dequantized into a ((n1 - n0) x K)
 *                    panel, for a caller that multiplies many rows of A
 *                    with a GEMM (A @ panel^T).
 *
 * Layout (as onnxruntime's): B [N][blocks][block * bits / 8] bytes, the
 * values of a byte from its low bits up; packed zero points a row of
 * ceil(blocks * bits / 8) bytes per column. */
#include "internal.h"

#define NB_MAX_BLOCK 4096

typedef float nb_v8f __attribute__((vector_size(32)));
typedef int32_t nb_v8i __attribute__((vector_size(32)));

typedef struct {
    const uint8_t *b;
    const float *scales, *zp_f;
    const uint8_t *zp_u8;
    int64_t k, blocks, block, row_bytes, zp_row_bytes;
    int bits;
} nbits_t;

static int nbits_init(nbits_t *w, const uint8_t *b, int bits, int64_t block, int64_t k,
                      int64_t n, const float *scales, const uint8_t *zp_u8, const float *zp_f) {
    if (!b || !scales || (bits != 2 && bits != 4 && bits != 8) || block < 16 ||
        block > NB_MAX_BLOCK || (block & (block - 1)) || k < 1 || n < 1 ||
        k > ((int64_t)1 << 30) || n > ((int64_t)1 << 30) || (zp_u8 && zp_f))
        return 0;
    w->b = b, w->scales = scales, w->zp_f = zp_f, w->zp_u8 = zp_u8;
    w->k = k, w->block = block, w->bits = bits;
    w->blocks = (k + block - 1) / block;
    w->row_bytes = block * bits / 8;
    w->zp_row_bytes = (w->blocks * bits + 7) / 8;
    return 1;
}

/* Block bi of column j, dequantized into out[0, len).  4 bits: sixteen
 * values at a time in 8-float vectors, the low and high halves of eight
 * bytes interleaved back into their order -- the same arithmetic per value
 * as the scalar tail. */
PA_MULTIVERSION
static int64_t nbits_block(const nbits_t *w, int64_t j, int64_t bi, float *restrict out) {
    const int64_t len = w->k - bi * w->block < w->block ? w->k - bi * w->block : w->block;
    const int bits = w->bits, mask = (1 << bits) - 1;
    const float s = w->scales[j * w->blocks + bi];
    float z;
    if (w->zp_f)
        z = w->zp_f[j * w->blocks + bi];
    else if (w->zp_u8) {
        const int64_t bit = bi * bits;
        z = (float)((w->zp_u8[j * w->zp_row_bytes + bit / 8] >> (bit % 8)) & mask);
    } else
        z = (float)(1 << (bits - 1));
    const uint8_t *q = w->b + (j * w->blocks + bi) * w->row_bytes;
    if (bits == 4) {
        const nb_v8f sv = {s, s, s, s, s, s, s, s}, zv = {z, z, z, z, z, z, z, z};
        int64_t t = 0;
        for (; t + 16 <= len; t += 16) {
            const uint8_t *p = q + t / 2;
            const nb_v8i qi = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
            const nb_v8f lo = (__builtin_convertvector(qi & 15, nb_v8f) - zv) * sv;
            const nb_v8f hi = (__builtin_convertvector(qi >> 4, nb_v8f) - zv) * sv;
            const nb_v8f v0 = __builtin_shufflevector(lo, hi, 0, 8, 1, 9, 2, 10, 3, 11);
            const nb_v8f v1 = __builtin_shufflevector(lo, hi, 4, 12, 5, 13, 6, 14, 7, 15);
            memcpy(out + t, &v0, sizeof v0);
            memcpy(out + t + 8, &v1, sizeof v1);
        }
        for (; t < len; t++)
            out[t] = ((float)((q[t / 2] >> ((t % 2) * 4)) & 15) - z) * s;
    } else {
        const int per = 8 / bits;
        for (int64_t t = 0; t < len; t++)
            out[t] = ((float)((q[t / per] >> ((t % per) * bits)) & mask) - z) * s;
    }
    return len;
}

/* sum over c < n of x[c] * y[c], in PA_VEC partial sums (vectorised). */
PA_MULTIVERSION
static float nb_dot(const float *restrict x, const float *restrict y, int64_t n) {
    float part[PA_VEC] = {0};
    int64_t c = 0;
    for (; c + PA_VEC <= n; c += PA_VEC)
        for (int t = 0; t < PA_VEC; t++)
            part[t] += x[c + t] * y[c + t];
    float s = 0.0f;
    for (int t = 0; t < PA_VEC; t++)
        s += part[t];
    for (; c < n; c++)
        s += x[c] * y[c];
    return s;
}

/* 4-bit weights, the common case: A's even and odd columns split once into
 * ws (ae, ao: m rows of blocks * block / 2 each, zero past k) so that each
 * byte's low and high values meet contiguous operands; per column, sixteen
 * bytes at a time are dequantized ((q - z) * s, as nbits_block) and
 * accumulated into sixteen partial sums per row, in explicit 16-float
 * vectors (one AVX-512 register; two AVX2 ones).  Blocks of 32 values or
 * more (whole groups of 16 bytes). */
typedef float nb_v16f __attribute__((vector_size(64)));
typedef int32_t nb_v16i __attribute__((vector_size(64)));

PA_MULTIVERSION
static void rows4(const nbits_t *w, const float *a, int64_t m, int64_t n, const float *bias,
                  float *y, float *ws) {
    const int64_t half = w->blocks * w->block / 2, hb = w->block / 2, k = w->k;
    float *ae = ws, *ao = ws + m * half;
    for (int64_t i = 0; i < m; i++)
        for (int64_t u = 0; u < half; u++) {
            ae[i * half + u] = 2 * u < k ? a[i * k + 2 * u] : 0.0f;
            ao[i * half + u] = 2 * u + 1 < k ? a[i * k + 2 * u + 1] : 0.0f;
        }
    nb_v16f part[64];
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < m; i++)
            part[i] = (nb_v16f){0};
        for (int64_t bi = 0; bi < w->blocks; bi++) {
            const float s = w->scales[j * w->blocks + bi];
            float z;
            if (w->zp_f)
                z = w->zp_f[j * w->blocks + bi];
            else if (w->zp_u8)
                z = (float)((w->zp_u8[j * w->zp_row_bytes + bi / 2] >> ((bi % 2) * 4)) & 15);
            else
                z = 8.0f;
            const nb_v16f sv = (nb_v16f){0} + s, zv = (nb_v16f){0} + z;
            const uint8_t *q = w->b + (j * w->blocks + bi) * w->row_bytes;
            for (int64_t u = 0; u < hb; u += 16) {
                const nb_v16i qi = {q[u], q[u + 1], q[u + 2], q[u + 3], q[u + 4], q[u + 5],
                                    q[u + 6], q[u + 7], q[u + 8], q[u + 9], q[u + 10],
                                    q[u + 11], q[u + 12], q[u + 13], q[u + 14], q[u + 15]};
                const nb_v16f wl = (__builtin_convertvector(qi & 15, nb_v16f) - zv) * sv;
                const nb_v16f wh = (__builtin_convertvector(qi >> 4, nb_v16f) - zv) * sv;
                const int64_t col = bi * hb + u;
                for (int64_t i = 0; i < m; i++) {
                    nb_v16f e, o;
                    memcpy(&e, ae + i * half + col, sizeof e);
                    memcpy(&o, ao + i * half + col, sizeof o);
                    part[i] += e * wl + o * wh;
                }
            }
        }
        for (int64_t i = 0; i < m; i++) {
            float t[16];
            memcpy(t, &part[i], sizeof t);
            for (int h = 8; h >= 1; h /= 2)     /* pairwise: lanes h apart */
                for (int l = 0; l < h; l++)
                    t[l] += t[l + h];
            y[i * n + j] = bias ? t[0] + bias[j] : t[0];
        }
    }
}

pa_status_t pa_nbits_rows(const float *a, int64_t m, int64_t k, const uint8_t *b, int bits,
                          int64_t block, const float *scales, const uint8_t *zp_u8,
                          const float *zp_f, int64_t n, const float *bias, float *y,
                          float *ws) {
    nbits_t w;
    if (m < 0 || m > 64 || !nbits_init(&w, b, bits, block, k, n, scales, zp_u8, zp_f))
        return PA_ERR_INVALID;
    if (m == 0)
        return PA_OK;
    if (!a || !y || !ws)
        return PA_ERR_INVALID;
    if (bits == 4 && block >= 32) {
        rows4(&w, a, m, n, bias, y, ws);
        return PA_OK;
    }
    for (int64_t j = 0; j < n; j++) {   /* the column dequantized into ws, then a dot per row */
        for (int64_t bi = 0; bi < w.blocks; bi++)
            nbits_block(&w, j, bi, ws + bi * block);
        for (int64_t i = 0; i < m; i++) {
            float v = nb_dot(a + i * k, ws, k);
            y[i * n + j] = bias ? v + bias[j] : v;
        }
    }
    return PA_OK;
}

pa_status_t pa_nbits_panel(const uint8_t *b, int bits, int64_t block, int64_t k,
                           const float *scales, const uint8_t *zp_u8, const float *zp_f,
                           int64_t n, int64_t n0, int64_t n1, float *panel) {
    nbits_t w;
    if (!nbits_init(&w, b, bits, block, k, n, scales, zp_u8, zp_f) || n0 < 0 || n1 < n0 ||
        n1 > n || !panel)
        return PA_ERR_INVALID;
    for (int64_t j = n0; j < n1; j++)
        for (int64_t bi = 0; bi < w.blocks; bi++)
            nbits_block(&w, j, bi, panel + (j - n0) * k + bi * block);
    return PA_OK;
}
