/* kernels/qconv_vnni.c -- the 8-bit convolution's AVX-512 VNNI tile.
 *
 * The product of qconv.h's tile: QC_MR = 6 rows of activations (unsigned
 * bytes after the XOR) times one or two blocks of 16 output channels of
 * packed signed weights, 12 accumulators of 16 int32.  Each step of 4
 * bytes of K broadcasts a row's 4 bytes (one 32-bit load) and adds their
 * four products with each channel's 4 weights in one vpdpbusd per
 * register; a last partial group of K reads only the bytes that are
 * there (the weights past K are zeros).  Integer sums: the same bits as
 * the portable tile (qconv.c), which tests/c/kernels/test_qconv.c checks.
 * Also the NCHW depthwise kernel's interior columns at stride 1 or 2:
 * 16 output columns in one register while every tap of the window goes by
 * (16 bytes widened to int32, the zero point off, times the tap's weight).
 * Picked by pa_qconv2d_run where the processor has AVX512-VNNI
 * (_pa_avx512vnni_usable, cpu.c: not with PA_DISABLE_AVX512 set).
 */
#include "qconv.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

#define VNNI PA_VNNI_TARGET

/* One row (a matrix-vector product: a streaming model's 1x1 convolution of
 * one pixel, a fully connected layer): four chains of accumulators per
 * block of 16 channels, steps of K taken in turn, so that the vpdpbusd
 * latencies overlap instead of one chain waiting on itself; summed at the
 * end (integer sums: any order gives the same bits). */
VNNI static void tile1_vnni(const uint8_t *a, int64_t k, const int8_t *w, int64_t kq, int nb,
                            uint8_t xo, int32_t acc[2 * QC_NR]) {
    __m512i c0[4], c1[4];
    for (int j = 0; j < 4; j++)
        c0[j] = c1[j] = _mm512_setzero_si512();
    const uint32_t x4 = 0x01010101u * xo;
    const int8_t *w1 = w + kq * QC_NR * 4;
    const int64_t full = k / 4;
    int64_t g = 0;
#define QC_STEP1(J, G, V)                                                                  \
    do {                                                                                   \
        const __m512i b_ = _mm512_set1_epi32((int)(V));                                    \
        c0[J] = _mm512_dpbusd_epi32(c0[J], b_, _mm512_loadu_si512((const void *)(w + (G) * 64))); \
        if (nb == 2)                                                                       \
            c1[J] = _mm512_dpbusd_epi32(c1[J], b_,                                         \
                                        _mm512_loadu_si512((const void *)(w1 + (G) * 64))); \
    } while (0)
    for (; g + 4 <= full; g += 4) {
        uint32_t v[4];
        memcpy(v, a + 4 * g, 16);
        QC_STEP1(0, g, v[0] ^ x4);
        QC_STEP1(1, g + 1, v[1] ^ x4);
        QC_STEP1(2, g + 2, v[2] ^ x4);
        QC_STEP1(3, g + 3, v[3] ^ x4);
    }
    for (; g < full; g++) {
        uint32_t v;
        memcpy(&v, a + 4 * g, 4);
        QC_STEP1(0, g, v ^ x4);
    }
    if (full < kq) {                        /* K's last 1-3 bytes */
        int64_t n = k - 4 * full;
        QC_STEP1(1, full, _pa_load4(a + 4 * full, n) ^ (x4 & (0xFFFFFFFFu >> (8 * (4 - n)))));
    }
#undef QC_STEP1
    __m512i s0 = _mm512_add_epi32(_mm512_add_epi32(c0[0], c0[1]), _mm512_add_epi32(c0[2], c0[3]));
    __m512i s1 = _mm512_add_epi32(_mm512_add_epi32(c1[0], c1[1]), _mm512_add_epi32(c1[2], c1[3]));
    _mm512_storeu_si512((void *)acc, s0);
    _mm512_storeu_si512((void *)(acc + QC_NR), s1);
}

VNNI static void tile_vnni(const uint8_t *const *rows, int mr, int64_t k, const int8_t *w,
                           int64_t kq, int nb, uint8_t xo, int32_t acc[QC_MR][2 * QC_NR]) {
    if (mr == 1) {
        tile1_vnni(rows[0], k, w, kq, nb, xo, acc[0]);
        return;
    }
    __m512i c[QC_MR][2];
    const uint8_t *a[QC_MR];
    for (int r = 0; r < QC_MR; r++) {
        c[r][0] = _mm512_setzero_si512();
        c[r][1] = _mm512_setzero_si512();
        a[r] = rows[r < mr ? r : 0];        /* rows past mr: computed, not kept */
    }
    const uint32_t x4 = 0x01010101u * xo;
    const int8_t *w1 = w + kq * QC_NR * 4;
    const int64_t full = k / 4;
#define QC_STEP(R, V)                                                            \
    do {                                                                         \
        __m512i b = _mm512_set1_epi32((int)(V));                                 \
        c[R][0] = _mm512_dpbusd_epi32(c[R][0], b, w0v);                          \
        if (nb == 2)                                                             \
            c[R][1] = _mm512_dpbusd_epi32(c[R][1], b, w1v);                      \
    } while (0)
    for (int64_t g = 0; g < full; g++) {
        __m512i w0v = _mm512_loadu_si512((const void *)(w + g * 64));
        __m512i w1v = nb == 2 ? _mm512_loadu_si512((const void *)(w1 + g * 64))
                              : _mm512_setzero_si512();
        uint32_t v[QC_MR];
        for (int r = 0; r < QC_MR; r++) {
            memcpy(&v[r], a[r] + 4 * g, 4);
            v[r] ^= x4;
        }
        QC_STEP(0, v[0]); QC_STEP(1, v[1]); QC_STEP(2, v[2]);
        QC_STEP(3, v[3]); QC_STEP(4, v[4]); QC_STEP(5, v[5]);
    }
    if (full < kq) {                        /* the last 1-3 bytes of K */
        int64_t g = full, n = k - 4 * g;
        uint32_t xn = x4 & (0xFFFFFFFFu >> (8 * (4 - n)));
        __m512i w0v = _mm512_loadu_si512((const void *)(w + g * 64));
        __m512i w1v = nb == 2 ? _mm512_loadu_si512((const void *)(w1 + g * 64))
                              : _mm512_setzero_si512();
        uint32_t v[QC_MR];
        for (int r = 0; r < QC_MR; r++)
            v[r] = _pa_load4(a[r] + 4 * g, n) ^ xn;
        QC_STEP(0, v[0]); QC_STEP(1, v[1]); QC_STEP(2, v[2]);
        QC_STEP(3, v[3]); QC_STEP(4, v[4]); QC_STEP(5, v[5]);
    }
#undef QC_STEP
    for (int r = 0; r < mr; r++) {
        _mm512_storeu_si512((void *)acc[r], c[r][0]);
        _mm512_storeu_si512((void *)(acc[r] + QC_NR), c[r][1]);
    }
}

const _pa_qc_tile_fn _pa_qc_tile_vnni = tile_vnni;

/* The NCHW panel tile (qconv.h): MR channels x NV vectors of 16 pixels,
 * each step of 4 bytes of K one load per vector and one broadcast weight
 * word per channel, MR * NV vpdpbusd (the activations unsigned, the
 * weights signed, as the instruction takes them). */
VNNI static inline __attribute__((always_inline)) void
ptile_body(const uint8_t *panel, int64_t kq, const int8_t *w, const int MR, const int NV,
           int32_t acc[QC_PMR][QC_PX]) {
    __m512i c[QC_PMR][3];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            c[r][v] = _mm512_setzero_si512();
    for (int64_t g = 0; g < kq; g++) {
        const uint8_t *a = panel + g * QC_PX * 4;
        const int8_t *wg = w + g * QC_NR * 4;
        __m512i av[3];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            av[v] = _mm512_loadu_si512((const void *)(a + 64 * v));
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            int32_t wv;
            memcpy(&wv, wg + 4 * r, 4);
            const __m512i b = _mm512_set1_epi32(wv);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                c[r][v] = _mm512_dpbusd_epi32(c[r][v], av[v], b);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            _mm512_storeu_si512((void *)(acc[r] + 16 * v), c[r][v]);
}

#define PTILE(MR, NV)                                                                        \
    VNNI static void ptile_##MR##_##NV(const uint8_t *panel, int64_t kq, const int8_t *w,    \
                                       int32_t acc[QC_PMR][QC_PX]) {                         \
        ptile_body(panel, kq, w, MR, NV, acc);                                               \
    }
PTILE(8, 3)
PTILE(8, 2)
PTILE(8, 1)
PTILE(4, 3)
PTILE(4, 2)
PTILE(4, 1)
#undef PTILE

VNNI static void ptile_vnni(const uint8_t *panel, int64_t kq, const int8_t *w, int mr, int npx,
                            int32_t acc[QC_PMR][QC_PX]) {
    int nv = (npx + 15) / 16;
    if (mr > 4)
        (nv == 3 ? ptile_8_3 : nv == 2 ? ptile_8_2 : ptile_8_1)(panel, kq, w, acc);
    else
        (nv == 3 ? ptile_4_3 : nv == 2 ? ptile_4_2 : ptile_4_1)(panel, kq, w, acc);
}

const _pa_qc_ptile_fn _pa_qc_ptile_vnni = ptile_vnni;

/* The first n (1..16) of 16 input bytes at column stride sw (1 or 2)
 * from p, widened to int32 (signed or not); the lanes past n are 0.  Masked
 * loads: nothing past the last byte used is read (stride 2 keeps the even
 * bytes of 2n - 1). */
VNNI static inline __m512i dw_load16(const uint8_t *p, int64_t sw, int sgn, int64_t n) {
    if (sw == 1) {
        __m128i b = _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1u), p);
        return sgn ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    }
    __m256i b = _mm256_maskz_loadu_epi8((__mmask32)((1ull << (2 * n - 1)) - 1u), p);
    __m256i even = sgn ? _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8)
                       : _mm256_and_si256(b, _mm256_set1_epi16(0xFF));
    return sgn ? _mm512_cvtepi16_epi32(even) : _mm512_cvtepu16_epi32(even);
}

VNNI static void dw_interior_vnni(int32_t *acc, const uint8_t *const *rows, const int32_t *w,
                                  int64_t nr, int64_t kw, int64_t dw, int64_t sw, int64_t shift,
                                  int64_t lo, int64_t hi, int32_t zp, int sgn) {
    const __m512i z = _mm512_set1_epi32(zp);
    for (int64_t ow = lo; ow < hi; ow += 16) {
        int64_t n = hi - ow < 16 ? hi - ow : 16;      /* a last tile: masked */
        __mmask16 m = (__mmask16)((1u << n) - 1u);
        __m512i a = _mm512_maskz_loadu_epi32(m, (const void *)(acc + ow));
        for (int64_t r = 0; r < nr; r++) {
            const uint8_t *row = rows[r] + ow * sw + shift;
            for (int64_t j = 0; j < kw; j++) {
                __m512i v = _mm512_sub_epi32(dw_load16(row + j * dw, sw, sgn, n), z);
                a = _mm512_add_epi32(a, _mm512_mullo_epi32(v, _mm512_set1_epi32(w[r * kw + j])));
            }
        }
        _mm512_mask_storeu_epi32((void *)(acc + ow), m, a);
    }
}

const _pa_qc_dw_fn _pa_qc_dw_vnni = dw_interior_vnni;

/* The NCHW depthwise plane path (qconv.h): rows [ih0, ih0 + nrows) of one
 * channel's plane as int16 x - x_zp at column pad_left + iw of rows of wp
 * values, the rest (padding, rows outside the image, the slack) 0. */
VNNI static void plane_fill(const pa_qconv2d_t *q, const _pa_qc_plane_t *g, const uint8_t *plane,
                            int64_t ih0, int64_t nrows, int16_t *buf) {
    const pa_conv2d_t *c = &q->conv;
    const int sgn = q->x_type == PA_Q_S8;
    const __m256i z = _mm256_set1_epi16((short)q->x_zp);
    memset(buf, 0, (size_t)(nrows * g->wp + QC_DW_SLACK) * 2);
    const int64_t cols = g->wp - c->pad_left < c->w ? g->wp - c->pad_left : c->w;
    const int64_t iw0 = c->pad_left < 0 ? -c->pad_left : 0;
    for (int64_t b = 0; b < nrows; b++) {
        int64_t ih = ih0 + b;
        if (ih < 0 || ih >= c->h)
            continue;
        const uint8_t *src = plane + ih * c->w;
        int16_t *d = buf + b * g->wp + c->pad_left;
        for (int64_t iw = iw0; iw < cols; iw += 16) {
            int64_t n = cols - iw < 16 ? cols - iw : 16;
            __mmask16 mk = (__mmask16)((1u << n) - 1u);
            __m128i v = _mm_maskz_loadu_epi8(mk, src + iw);
            __m256i e = sgn ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
            _mm256_mask_storeu_epi16(d + iw, mk, _mm256_sub_epi16(e, z));
        }
    }
}

/* One output row of one channel from its band rows `row` (the first tap's
 * row): 16 columns per register over every tap, then requantized as
 * MlasRequantizeOutput (float32 product, clamp, round half to even: the
 * vector conversion in its nearest-even mode is the scalar trick for
 * these small values) and stored. */
VNNI static void plane_row(const pa_qconv2d_t *q, const int16_t *row, const int64_t *off,
                           const int32_t *wt, int64_t taps, int32_t bias, float scale,
                           void *yrow) {
    const pa_conv2d_t *c = &q->conv;
    const int s2 = c->sw == 2, s32 = q->y_type == PA_Q_S32;
    const __m512 lo = _mm512_set1_ps((float)((int64_t)q->y_lo - q->y_zp));
    const __m512 hi = _mm512_set1_ps((float)((int64_t)q->y_hi - q->y_zp));
    const __m512i zp = _mm512_set1_epi32(q->y_zp);
    const __m512 sc = _mm512_set1_ps(scale);
    for (int64_t ow = 0; ow < c->w_out; ow += 16) {
        int64_t n = c->w_out - ow < 16 ? c->w_out - ow : 16;
        __mmask16 mk = (__mmask16)((1u << n) - 1u);
        __m512i acc = _mm512_set1_epi32(bias);
        const int16_t *base = row + ow * c->sw;
        for (int64_t t = 0; t < taps; t++) {
            const int16_t *p = base + off[t];
            __m512i v = s2 ? _mm512_srai_epi32(
                                 _mm512_slli_epi32(_mm512_loadu_si512((const void *)p), 16), 16)
                           : _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)p));
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, _mm512_set1_epi32(wt[t])));
        }
        if (s32) {
            _mm512_mask_storeu_epi32((int32_t *)yrow + ow, mk, acc);
            continue;
        }
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), sc);
        f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
        __m512i r = _mm512_add_epi32(
            _mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
        _mm_mask_storeu_epi8((uint8_t *)yrow + ow, mk, _mm512_cvtepi32_epi8(r));
    }
}

VNNI static void dwplane_vnni(const pa_qconv2d_t *q, const _pa_qc_plane_t *g, const int16_t *wc,
                              const int32_t *bias, const float *scale, const uint8_t *x, void *y,
                              int16_t *buf) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in, taps = c->kh * c->kw, esize = q->y_type == PA_Q_S32 ? 4 : 1;
    int64_t off[PA_DW_MAX_TAPS];
    int32_t wt[PA_DW_MAX_TAPS];
    for (int64_t i = 0; i < c->kh; i++)
        for (int64_t j = 0; j < c->kw; j++)
            off[i * c->kw + j] = i * c->dh * g->wp + j * c->dw;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            const uint8_t *plane = x + (n * C + ch) * c->h * c->w;
            for (int64_t t = 0; t < taps; t++)
                wt[t] = wc[t * C + ch];
            for (int64_t r0 = 0; r0 < c->h_out; r0 += g->rows) {
                int64_t r1 = r0 + g->rows < c->h_out ? r0 + g->rows : c->h_out;
                plane_fill(q, g, plane, r0 * c->sh - c->pad_top,
                           (r1 - r0 - 1) * c->sh + (c->kh - 1) * c->dh + 1, buf);
                for (int64_t oh = r0; oh < r1; oh++)
                    plane_row(q, buf + (oh - r0) * c->sh * g->wp, off, wt, taps, bias[ch],
                              scale[ch],
                              (char *)y + (((n * C + ch) * c->h_out + oh) * c->w_out) * esize);
            }
        }
}

const _pa_qc_dwplane_fn _pa_qc_dwplane_vnni = dwplane_vnni;

#else

const _pa_qc_tile_fn _pa_qc_tile_vnni = 0;
const _pa_qc_ptile_fn _pa_qc_ptile_vnni = 0;
const _pa_qc_dw_fn _pa_qc_dw_vnni = 0;
const _pa_qc_dwplane_fn _pa_qc_dwplane_vnni = 0;

#endif
