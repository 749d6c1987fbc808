/* kernels/planes.c -- NCHW <-> NHWC of 4-byte values (pa_transpose_planes).
 *
 * A model's image input is NCHW (3 planes); the NHWC region after it
 * starts with this reorder.  NumPy does it one channel at a time, each a
 * strided pass over the whole output.  Here a block of 16 pixels is read
 * from every plane and written once, interleaved: with AVX-512 (c <= 4)
 * the c input registers are shuffled into the c output ones by
 * permutes (vpermt2ps between pairs of sources, merged under masks),
 * else value by value within the block.  Values are moved as 32-bit
 * words, never as floats: the output holds the input's bits (NaN
 * payloads included).  Threads share the blocks of a large image.
 */
#include "internal.h"
#include "isa.h"

/* Pixels per block; blocks per work item. */
#define PL_BLOCK 16
#define PL_ITEM_BLOCKS 64

typedef struct {
    const uint32_t *x;
    uint32_t *y;
    int64_t n, c, hw, blocks;   /* blocks of PL_BLOCK pixels per image (the last short) */
    int to_nhwc, avx512;
    /* the AVX-512 shuffles (planes_tables): output register m's permute
     * indices for source registers 0-1 and 2-3, and its lanes from 2-3 */
    int32_t idx[4][2][PL_BLOCK];
    uint16_t from23[4];
} planes_job_t;

/* Output register m (of c) lane e is source register src / 16, lane
 * src % 16, where src is the lane's index in the 16 * c values of a
 * block taken source register by source register. */
static int64_t planes_src(int64_t c, int to_nhwc, int64_t m, int64_t e) {
    const int64_t q = 16 * m + e;   /* to_nhwc: output value q is pixel q / c, channel q % c */
    if (to_nhwc)
        return (q % c) * 16 + q / c;
    return (e * c + m);             /* to NCHW: plane m, pixel e is input value e * c + m */
}

/* The job's permute tables, once per call (not per block). */
static void planes_tables(planes_job_t *j) {
    for (int64_t m = 0; m < j->c; m++) {
        j->from23[m] = 0;
        for (int64_t e = 0; e < PL_BLOCK; e++) {
            const int64_t src = planes_src(j->c, j->to_nhwc, m, e);
            j->idx[m][0][e] = j->idx[m][1][e] = (int32_t)(src % 32);
            if (src >= 32)
                j->from23[m] |= (uint16_t)(1u << e);
        }
    }
}

/* pixels [p0, p1) of image b, value by value */
static void planes_scalar(const planes_job_t *j, int64_t b, int64_t p0, int64_t p1) {
    const int64_t c = j->c, hw = j->hw;
    const uint32_t *x = j->x + b * c * hw;
    uint32_t *y = j->y + b * c * hw;
    if (j->to_nhwc) {
        for (int64_t k = 0; k < c; k++)
            for (int64_t p = p0; p < p1; p++)
                y[p * c + k] = x[k * hw + p];
    } else {
        for (int64_t k = 0; k < c; k++)
            for (int64_t p = p0; p < p1; p++)
                y[k * hw + p] = x[p * c + k];
    }
}

#if PA_AVX512_BUILT
#include <immintrin.h>

#define PL512 __attribute__((target("avx512f")))

#define PL512_INLINE static inline __attribute__((always_inline, target("avx512f")))

/* One block of 16 pixels at x / y (the image's first value, pixel p);
 * c a constant where it is inlined: the registers stay registers. */
PL512_INLINE void planes_block512(const float *x, float *y, int64_t hw, int64_t p, int to_nhwc,
                                  const int64_t c, const __m512i idx[4][2],
                                  const __mmask16 msk[4]) {
    __m512 s[4];
    for (int64_t k = 0; k < c; k++)
        s[k] = to_nhwc ? _mm512_loadu_ps(x + k * hw + p) : _mm512_loadu_ps(x + p * c + 16 * k);
    for (int64_t m = 0; m < c; m++) {
        __m512 o = _mm512_permutex2var_ps(s[0], idx[m][0], s[c > 1 ? 1 : 0]);
        if (c > 2)
            o = _mm512_mask_mov_ps(o, msk[m],
                                   _mm512_permutex2var_ps(s[2], idx[m][1], s[c > 3 ? 3 : 2]));
        if (to_nhwc)
            _mm512_storeu_ps(y + p * c + 16 * m, o);
        else
            _mm512_storeu_ps(y + m * hw + p, o);
    }
}

/* blocks [k0, k1) of the job's n * blocks, AVX-512 for the whole ones, an
 * image's short last block value by value */
PL512_INLINE void planes_run512(const planes_job_t *j, int64_t k0, int64_t k1, const int64_t c) {
    __m512i idx[4][2];
    __mmask16 msk[4];
    for (int64_t m = 0; m < c; m++) {
        for (int h = 0; h < 2; h++)
            idx[m][h] = _mm512_loadu_si512(j->idx[m][h]);
        msk[m] = (__mmask16)j->from23[m];
    }
    const int64_t hw = j->hw;
    int64_t b = k0 / j->blocks, p = (k0 % j->blocks) * PL_BLOCK;
    for (int64_t k = k0; k < k1; k++) {
        if (p + PL_BLOCK <= hw)
            planes_block512((const float *)(j->x + b * c * hw), (float *)(j->y + b * c * hw), hw,
                            p, j->to_nhwc, c, (const __m512i(*)[2])idx, msk);
        else
            planes_scalar(j, b, p, hw);
        p += PL_BLOCK;
        if (p >= hw)
            b++, p = 0;
    }
}

PL512 static void planes_range512(const planes_job_t *j, int64_t k0, int64_t k1) {
    switch (j->c) {
    case 2:
        planes_run512(j, k0, k1, 2);
        return;
    case 3:
        planes_run512(j, k0, k1, 3);
        return;
    default:
        planes_run512(j, k0, k1, 4);
        return;
    }
}
#endif

static void planes_range(const planes_job_t *j, int64_t k0, int64_t k1) {
#if PA_AVX512_BUILT
    if (j->avx512) {
        planes_range512(j, k0, k1);
        return;
    }
#endif
    for (int64_t k = k0; k < k1; k++) {
        const int64_t b = k / j->blocks, p = (k % j->blocks) * PL_BLOCK;
        planes_scalar(j, b, p, p + PL_BLOCK < j->hw ? p + PL_BLOCK : j->hw);
    }
}

static void planes_items(void *ctx, int64_t b, int64_t e) {
    const planes_job_t *j = ctx;
    const int64_t total = j->n * j->blocks;
    const int64_t k1 = e * PL_ITEM_BLOCKS < total ? e * PL_ITEM_BLOCKS : total;
    planes_range(j, b * PL_ITEM_BLOCKS, k1);
}

pa_status_t _pa_transpose_planes_isa(const void *x, void *y, int64_t n, int64_t c, int64_t hw,
                                     int to_nhwc, pa_workers_t *workers, int avx512) {
    if (n < 0 || c < 0 || hw < 0)
        return PA_ERR_INVALID;
    int64_t total;
    if (__builtin_mul_overflow(n, c, &total) || __builtin_mul_overflow(total, hw, &total) ||
        total > INT64_MAX / 4)
        return PA_ERR_INVALID;
    if (!total)
        return PA_OK;
    if (!x || !y)
        return PA_ERR_INVALID;
    const uintptr_t xa = (uintptr_t)x, ya = (uintptr_t)y, bytes = (uintptr_t)total * 4;
    if (xa < ya + bytes && ya < xa + bytes)
        return PA_ERR_INVALID;      /* overlapping: each pass would read what it wrote */
    planes_job_t j = {x, y, n, c, hw, (hw + PL_BLOCK - 1) / PL_BLOCK, to_nhwc != 0,
                      avx512 && pa_transpose_planes_vectorised(c), {{{0}}}, {0}};
    if (j.avx512)
        planes_tables(&j);
    const int64_t items = (n * j.blocks + PL_ITEM_BLOCKS - 1) / PL_ITEM_BLOCKS;
    _pa_parallel(_pa_workers_for(workers, (double)total), items, planes_items, &j);
    return PA_OK;
}

int pa_transpose_planes_vectorised(int64_t c) {
    return PA_AVX512_BUILT && c >= 2 && c <= 4 && _pa_avx512_usable();
}

pa_status_t pa_transpose_planes(const void *x, void *y, int64_t n, int64_t c, int64_t hw,
                                int to_nhwc, pa_workers_t *workers) {
    return _pa_transpose_planes_isa(x, y, n, c, hw, to_nhwc, workers, 1);
}
