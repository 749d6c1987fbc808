/* kernels/internal.h -- what the native float32 kernels share; not installed.
 *
 * Vectorisation: the kernels are plain C whose innermost loops run over a
 * contiguous dimension with a trip count the compiler knows (a tile of
 * PA_VEC floats) and `restrict` pointers, so GCC and clang vectorise them
 * at -O2 for whatever ISA they compile for.  On x86-64 (GCC/clang, ELF)
 * each hot function is compiled three times by PA_MULTIVERSION -- AVX-512,
 * AVX2 and the SSE2 baseline -- and the loader picks one per machine
 * (ifunc), so the wheel runs on any x86-64 and uses the wide registers
 * where they exist.  Elsewhere (aarch64: NEON is the baseline) the one
 * baseline build is used.  (Every multiversioned function needs a name
 * unique in the library, static or not: clang 14 emits its resolver as a
 * global symbol.)  FMA contraction stays off (-std=c11): a clone
 * gives bit-for-bit the results of the baseline -- except in
 * gemm.c, whose products are contracted where the clone has FMA
 * (AVX2, AVX-512: 10-20% faster there; results differ from the SSE2
 * build by rounding only).
 *
 * Grouped by the file that defines them.  Names start with _pa_.
 */
#ifndef PYARENA_KERNELS_INTERNAL_H
#define PYARENA_KERNELS_INTERNAL_H

#include "../pyarena.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Floats per register tile of the channel- or column-vector loops. */
#define PA_VEC 16
/* The most taps (kh * kw) the depthwise kernels take (their per-row tap
 * tables live on the stack); larger depthwise kernels run as grouped
 * direct convolutions. */
#define PA_DW_MAX_TAPS 256

#if defined(__x86_64__) && defined(__ELF__) && !defined(PA_NO_MULTIVERSION) && \
    (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#define PA_MULTIVERSION \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PA_MULTIVERSION
#endif

#if defined(__GNUC__)
#define PA_INLINE static inline __attribute__((always_inline))
#else
#define PA_INLINE static inline
#endif

/* -- element-wise maths (inline, so each clone gets its own copy) ------- */

PA_INLINE float _pa_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

PA_INLINE uint32_t _pa_float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* exp(x) for float32 without branches or libm: x = n ln2 + r with n
 * rounded by the 1.5 * 2^23 trick (its low mantissa bits are n, so no
 * float-to-int conversion), Cephes' degree-6 polynomial on
 * |r| <= ln2 / 2, 2^n from the exponent bits.  Inputs are clamped to
 * [-87.3, 88.7] (results stay normal and finite); NaN stays NaN.  Within
 * 2 ulp of expf over that range (tests/c/kernels/test_kernels.c checks
 * it). */
PA_INLINE float _pa_expf(float x) {
    const float hi = 88.7f, lo = -87.3f;
    x = x > hi ? hi : x;
    x = x < lo ? lo : x;
    const float magic = 12582912.0f;            /* 1.5 * 2^23 */
    float t = x * 1.44269504088896341f + magic;
    float n = t - magic;
    uint32_t k = _pa_float_bits(t) - _pa_float_bits(magic); /* n, mod 2^32 */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    return p * _pa_bits_float((k + 127u) << 23);
}

PA_INLINE float _pa_sigmoidf(float x) { return 1.0f / (1.0f + _pa_expf(-x)); }

PA_INLINE float _pa_clampf(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (outside, erf is
 * +-1 in float32): Eigen's rational approximation for float, the one
 * pyarena/runtime/kernels/erf.py evaluates in NumPy; branch-free, so it
 * vectorises.  Within 5e-7 of erf (tests/c/kernels/test_kernels.c). */
PA_INLINE float _pa_erff(float x) {
    x = _pa_clampf(x, -4.0f, 4.0f);
    const float t = x * x;
    float p = -2.72614225801306e-10f;
    p = p * t + 2.77068142495902e-08f;
    p = p * t + -2.10102402082508e-06f;
    p = p * t + -5.69250639462346e-05f;
    p = p * t + -7.34990630326855e-04f;
    p = p * t + -2.95459980854025e-03f;
    p = p * t + -1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * t + -2.13374055278905e-04f;
    q = q * t + -1.68282697438203e-03f;
    q = q * t + -7.37332916720468e-03f;
    q = q * t + -1.42647390514189e-02f;
    return x * p / q;
}

/* The activation of a pa_act_t on one value (alpha, beta: CLIP's bounds,
 * HARDSIGMOID's slope and offset).  Callers switch on the kind outside
 * their loops and call the matching case inside. */
PA_INLINE float _pa_act_relu(float x) { return x < 0.0f ? 0.0f : x; }
PA_INLINE float _pa_act_silu(float x) { return x / (1.0f + _pa_expf(-x)); }
PA_INLINE float _pa_act_hardswish(float x) {
    return x * _pa_clampf(x + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f);
}
PA_INLINE float _pa_act_hardsigmoid(float x, float a, float b) {
    return _pa_clampf(x * a + b, 0.0f, 1.0f);
}
PA_INLINE float _pa_act_gelu(float x) {
    return 0.5f * x * (1.0f + _pa_erff(x * 0.70710678118654752f));
}

/* round(f) half to even, as an int32, for |f| <= 2^22: 1.5 * 2^23 added
 * (the add rounds under the default mode) and its bits taken off -- the
 * 8-bit kernels' requantization, onnxruntime's MLAS_ROUNDING_BIAS_MAGIC
 * trick; branch-free, so it vectorises. */
PA_INLINE int32_t _pa_round_half_even(float f) {
    return (int32_t)(_pa_float_bits(f + 12582912.0f) - 0x4B400000u);
}

/* dst[i] = EXPR for i < n, where EXPR reads index i: blocks of PA_VEC
 * with a fixed trip count (which GCC vectorises even at -O2, whose cheap
 * cost model leaves loops of unknown length scalar), then the tail. */
#define PA_MAP(dst, n, i, EXPR)                                          \
    do {                                                                 \
        size_t i##_0 = 0;                                                \
        for (; i##_0 + PA_VEC <= (n); i##_0 += PA_VEC)                   \
            for (size_t i = i##_0; i < i##_0 + PA_VEC; i++)              \
                (dst)[i] = (EXPR);                                       \
        for (size_t i = i##_0; i < (n); i++)                             \
            (dst)[i] = (EXPR);                                           \
    } while (0)

/* Apply `act` to v[0..n) in place, inline (a register tile's epilogue:
 * one switch per tile, a branch-free loop per kind). */
PA_INLINE void _pa_act_block(float *restrict v, size_t n, const pa_act_params_t *act) {
    const float a = act->alpha, b = act->beta;
    switch (act->kind) {
    case PA_ACT_RELU:
        PA_MAP(v, n, i, _pa_act_relu(v[i]));
        break;
    case PA_ACT_CLIP:
        PA_MAP(v, n, i, _pa_clampf(v[i], a, b));
        break;
    case PA_ACT_SIGMOID:
        PA_MAP(v, n, i, _pa_sigmoidf(v[i]));
        break;
    case PA_ACT_SILU:
        PA_MAP(v, n, i, _pa_act_silu(v[i]));
        break;
    case PA_ACT_HARDSWISH:
        PA_MAP(v, n, i, _pa_act_hardswish(v[i]));
        break;
    case PA_ACT_HARDSIGMOID:
        PA_MAP(v, n, i, _pa_act_hardsigmoid(v[i], a, b));
        break;
    case PA_ACT_GELU:
        PA_MAP(v, n, i, _pa_act_gelu(v[i]));
        break;
    case PA_ACT_NONE:
        break;
    }
}

/* conv.c */
/* 1 if the geometry is usable (sizes positive, groups divide the channels,
 * element counts -- input, output, weights -- below 2^40, a known
 * activation). */
int _pa_conv2d_valid(const pa_conv2d_t *c);
/* 1 for groups = c_in = c_out > 1 and at most PA_DW_MAX_TAPS taps. */
int _pa_conv2d_is_depthwise(const pa_conv2d_t *c);
/* Inline here, not in conv.c: the kernels it dispatches to ask
 * too (fewin.c, the SGEMM's row geometry below).
 * 1 for 1x1 kernels, stride 1, no padding, groups 1 (output = input size). */
static inline int _pa_conv2d_is_pointwise(const pa_conv2d_t *c) {
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pad_top == 0 &&
           c->pad_left == 0 && c->h_out == c->h && c->w_out == c->w && c->groups == 1;
}
/* 1 for an NHWC convolution, groups 1, no dilation, no padding (every
 * window inside the input), not pointwise: the packed SGEMM reads each
 * output pixel's window in place as kh runs of kw * c_in floats (an
 * implicit im2col) -- e.g. 2x2 stride-2 disjoint-window convolutions. */
static inline int _pa_conv2d_is_disjoint(const pa_conv2d_t *c) {
    return c->layout == PA_LAYOUT_NHWC && c->groups == 1 && c->dh == 1 && c->dw == 1 &&
           c->pad_top == 0 && c->pad_left == 0 && (c->h_out - 1) * c->sh + c->kh <= c->h &&
           (c->w_out - 1) * c->sw + c->kw <= c->w && !_pa_conv2d_is_pointwise(c);
}

/* Input channels up to which the packed SGEMM also takes padded windows
 * (_pa_conv2d_is_padded_window): a tap outside the input reads c_in
 * floats of a static zero row of this length. */
#define PA_GEMM_PAD_MAX_CIN 1024

/* NHWC, groups 1, no dilation, not pointwise and not _pa_conv2d_is_disjoint
 * (a window reaches into the padding: a SAME 3x3), at most
 * PA_GEMM_PAD_MAX_CIN input channels: the packed SGEMM reads the windows
 * inside the input in place as a disjoint-window convolution does, and a
 * tile with a window past an edge tap by tap (gemm_nhwc.h). */
static inline int _pa_conv2d_is_padded_window(const pa_conv2d_t *c) {
    return c->layout == PA_LAYOUT_NHWC && c->groups == 1 && c->dh == 1 && c->dw == 1 &&
           c->c_in <= PA_GEMM_PAD_MAX_CIN && !_pa_conv2d_is_pointwise(c) &&
           !_pa_conv2d_is_disjoint(c);
}

/* The stride-2 split deinterleaves 16 floats into 8 even and 8 odd with
 * two shuffles (GCC >= 12, clang); GCC's own vectoriser leaves the
 * interleaved copy scalar, the slower half of a stride-2 layer. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define PA_SHUFFLE 1
typedef float pa_shuf_v8 __attribute__((vector_size(32)));
#else
#define PA_SHUFFLE 0
#endif

/* Padded columns [q0, q1) of one input row xr (its column 0 is padded
 * column pl) into tile row tr of rf floats: as is (S = 1), or split (S = 2)
 * into the even columns then the odd ones, rf / 2 floats each; fill
 * elsewhere (0 for a convolution, -inf for a max pool).  The band
 * kernels of dwconv.c and pooling.c fill their tiles so
 * (_pa_band_fill below), the few-input-channel kernel row by row. */
PA_INLINE void _pa_band_copy_row(float *restrict tr, const float *restrict xr, int64_t q0,
                                 int64_t q1, int64_t pl, int64_t rf, int64_t S, float fill) {
    if (S == 1) {
        for (int64_t q = 0; q < q0; q++)
            tr[q] = fill;
        if (q1 > q0)
            memcpy(tr + q0, xr + (q0 - pl), (size_t)(q1 - q0) * sizeof *tr);
        for (int64_t q = q1; q < rf; q++)
            tr[q] = fill;
        return;
    }
    const int64_t half = rf / 2;
    /* even column 2e is inside for e in [e0, e1), odd 2e + 1 for [o0, o1) */
    const int64_t e0 = (q0 + 1) / 2, e1 = (q1 + 1) / 2, o0 = q0 / 2, o1 = q1 / 2;
    float *restrict ev = tr, *restrict od = tr + half;
    for (int64_t q = 0; q < rf; q++)
        tr[q] = fill;
    if (q1 <= q0)
        return;
    /* pairs (2e, 2e + 1) both inside in one loop (an interleaved load the
     * compiler vectorises with shuffles), then at most one odd column
     * before them and one even column after */
    const float *restrict s = xr + (2 * e0 - pl);
    int64_t e = 0;
#if PA_SHUFFLE
    for (; e + 8 <= o1 - e0; e += 8) {
        pa_shuf_v8 a, b, lo, hi;
        memcpy(&a, s + 2 * e, sizeof a);
        memcpy(&b, s + 2 * e + 8, sizeof b);
        lo = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
        hi = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
        memcpy(ev + e0 + e, &lo, sizeof lo);
        memcpy(od + e0 + e, &hi, sizeof hi);
    }
#endif
    for (; e < o1 - e0; e++) {
        ev[e0 + e] = s[2 * e];
        od[e0 + e] = s[2 * e + 1];
    }
    for (int64_t q = o0; q < e0 && q < o1; q++)
        od[q] = xr[2 * q + 1 - pl];
    for (int64_t q = o1 > e0 ? o1 : e0; q < e1; q++)
        ev[q] = xr[2 * q - pl];
}

/* Input rows row0 .. row0 + rows - 1 of one plane x (h rows of w floats)
 * into a band tile of rf floats per row, as _pa_band_copy_row lays them
 * out for the padded width wp the tile covers; rows outside [0, h) are
 * all `fill`.  The NCHW depthwise and max-pool bands fill their tiles so. */
PA_INLINE void _pa_band_fill(float *restrict tile, const float *restrict x, int64_t row0,
                             int64_t rows, int64_t h, int64_t w, int64_t pl, int64_t wp,
                             int64_t rf, int64_t S, float fill) {
    int64_t q0 = pl < wp ? pl : wp;
    int64_t q1 = pl + w < wp ? pl + w : wp;
    if (q1 < q0)
        q1 = q0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t ih = row0 + r;
        float *tr = tile + r * rf;
        if (ih < 0 || ih >= h)
            for (int64_t q = 0; q < rf; q++)
                tr[q] = fill;
        else
            _pa_band_copy_row(tr, x + ih * w, q0, q1, pl, rf, S, fill);
    }
}

/* One group's output channels in blocks of bl, as the register tiles read
 * them: per block its bias, then k rows of bl weights, weight[co * k + r]
 * (channels past n_out are zeros).  Returns the float after the last one.
 * The direct convolution (per group, k = taps * c_in/groups) and the
 * packed SGEMM (k = c_in) pack their blocks so. */
PA_INLINE float *_pa_pack_blocks(float *restrict p, const float *restrict weight,
                                 const float *restrict bias, int64_t n_out, int64_t k,
                                 int64_t bl) {
    for (int64_t b0 = 0; b0 < n_out; b0 += bl) {
        for (int64_t v = 0; v < bl; v++)
            *p++ = (b0 + v < n_out && bias) ? bias[b0 + v] : 0.0f;
        for (int64_t r = 0; r < k; r++)
            for (int64_t v = 0; v < bl; v++)
                *p++ = b0 + v < n_out ? weight[(b0 + v) * k + r] : 0.0f;
    }
    return p;
}

/* dwconv.c */
size_t _pa_dwconv_packed_size(const pa_conv2d_t *c);
pa_status_t _pa_dwconv_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                            float *packed);
pa_status_t _pa_dwconv_run(const pa_conv2d_t *c, const float *packed, const float *x,
                           float *y, pa_workers_t *workers);
/* _pa_dwconv_run with the AVX-512 NHWC rows allowed (where usable) or
 * not: the same bits either way. */
pa_status_t _pa_dwconv_run_isa(const pa_conv2d_t *c, const float *packed, const float *x,
                               float *y, pa_workers_t *workers, int avx512);

/* fewin.c: groups 1, at most PA_FEWIN_MAX_CIN input channels,
 * column stride 1 or 2, no column dilation, not pointwise, the c_in * kh
 * input rows of an output row (padded, PA_FI_PX-column rounded) within a
 * stack tile of PA_FEWIN_TILE_FLOATS floats (32 KiB: a 7x7 stride-2 stem
 * at 224 columns needs 4,830). */
#define PA_FEWIN_MAX_CIN 4
#define PA_FEWIN_TILE_FLOATS 8192
int _pa_fewin_fits(const pa_conv2d_t *c);
size_t _pa_fewin_packed_size(const pa_conv2d_t *c);
pa_status_t _pa_fewin_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                           float *packed);
pa_status_t _pa_fewin_run(const pa_conv2d_t *c, const float *packed, const float *x, float *y,
                          pa_workers_t *workers);

/* gemm.c */
/* The register tile: PA_GEMM_MR rows x PA_GEMM_NR columns (PA_GEMM_NV
 * vectors of 8 floats); NHWC packed weights past PA_GEMM_L2 bytes run
 * block by block. */
#define PA_GEMM_MR 6
#define PA_GEMM_NV 2
#define PA_GEMM_NR (8 * PA_GEMM_NV)
#define PA_GEMM_L2 (128 * 1024)
size_t _pa_gemm_packed_size(const pa_conv2d_t *c);
pa_status_t _pa_gemm_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                          float *packed);
/* The NCHW case; r: NULL, or a residual of c_res channels added before
 * the activation.  (conv.c runs NHWC on gemm_nhwc.c.) */
pa_status_t _pa_gemm_nchw_run(const pa_conv2d_t *c, const float *packed, const float *x,
                              const float *r, int64_t c_res, float *y, pa_workers_t *workers);

/* gemm_nhwc.c: the NHWC case of the packed SGEMM (the same packing), on
 * the AVX-512 tile where usable, else the portable one (the same sums).
 * _pa_gemm_nhwc_run_isa: with the AVX-512 tile allowed (avx512 1, where
 * usable) or not (0); the same bits either way. */
pa_status_t _pa_gemm_nhwc_run(const pa_conv2d_t *c, const float *packed, const float *x,
                              const float *r, int64_t c_res, float *y, pa_workers_t *workers);
pa_status_t _pa_gemm_nhwc_run_isa(const pa_conv2d_t *c, const float *packed, const float *x,
                                  const float *r, int64_t c_res, float *y,
                                  pa_workers_t *workers, int avx512);

/* attention.c: pa_attention with its blocked path's AVX-512 registers
 * allowed (avx512 1, where usable: what pa_attention runs) or not (0):
 * the same sums in the same order (the same bits where both contract
 * to FMA). */
pa_status_t _pa_attention_isa(const pa_attention_t *a, const float *q, const float *k,
                              const float *v, const float *mask, float *out, float *scratch,
                              pa_workers_t *workers, int avx512);

/* elementwise.c */
/* Apply `act` to v[0..n) in place (PA_ACT_NONE: nothing). */
void _pa_act_inplace(float *v, size_t n, const pa_act_params_t *act);
/* y[i] = act(x[i] + b) for i < n: one bias value for a whole plane. */
void _pa_bias_act_plane(const float *x, float *y, size_t n, float b,
                        const pa_act_params_t *act);
/* y[p, c] = act(x[p, c] + b[c]) for p < np, c < nc (rows of nc floats). */
void _pa_bias_act_rows(const float *x, float *y, size_t np, size_t nc, const float *b,
                       const pa_act_params_t *act);
void _pa_affine_act_plane(const float *x, float *y, size_t n, float s, float b,
                          const pa_act_params_t *act);
void _pa_affine_act_rows(const float *x, float *y, size_t np, size_t nc, const float *s,
                         const float *b, const pa_act_params_t *act);

/* Pooling windows (pooling.c: NCHW, pooling_nhwc.c: NHWC). */
/* Taps [lo, hi) of a window starting at o * s - pad inside [0, n). */
static inline void _pa_pool_taps_in(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t n,
                                    int64_t *lo, int64_t *hi) {
    int64_t i0 = o * s - pad;
    *lo = i0 >= 0 ? 0 : (-i0 < k ? -i0 : k);
    int64_t b = n - i0;
    *hi = b < 0 ? 0 : (b < k ? b : k);
    if (*hi < *lo)
        *hi = *lo;
}

/* The divisor of an average along one axis: taps inside the image, or
 * inside [-pad_lo, n + pad_hi) with count_include_pad. */
static inline int64_t _pa_pool_axis_count(const pa_pool2d_t *p, int64_t o, int64_t s,
                                          int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t n) {
    int64_t lo, hi;
    if (p->count_include_pad)
        _pa_pool_taps_in(o, s, 0, k, n + pad_lo + pad_hi, &lo, &hi);
    else
        _pa_pool_taps_in(o, s, pad_lo, k, n, &lo, &hi);
    return hi - lo;
}

/* Along axis 0 (rows) or 1 (columns), the taps [lo, hi) of output
 * position o's window inside the image and its average's divisor along
 * that axis. */
static inline void _pa_pool_axis(const pa_pool2d_t *p, int axis, int64_t o, int64_t *lo,
                                 int64_t *hi, int64_t *count) {
    if (axis == 0) {
        _pa_pool_taps_in(o, p->sh, p->pad_top, p->kh, p->h, lo, hi);
        *count = _pa_pool_axis_count(p, o, p->sh, p->pad_top, p->pad_bottom, p->kh, p->h);
    } else {
        _pa_pool_taps_in(o, p->sw, p->pad_left, p->kw, p->w, lo, hi);
        *count = _pa_pool_axis_count(p, o, p->sw, p->pad_left, p->pad_right, p->kw, p->w);
    }
}

/* pooling.c: 1 if the pool's layout and sizes are valid (pa_avgpool2d's
 * checks, the pointers apart). */
int _pa_pool_valid(const pa_pool2d_t *p);

/* pooling_nhwc.c: pa_maxpool2d / pa_avgpool2d in NHWC, output
 * columns [ow_lo, ow_hi) interior (every tap inside the image). */
void _pa_pool_nhwc_run(const pa_pool2d_t *p, const float *x, float *y, pa_workers_t *w,
                       int is_max, int64_t ow_lo, int64_t ow_hi);

/* rows.c: y = softmax(y) over one row of n >= 1 floats, in place. */
void _pa_softmax_row_inplace(float *y, size_t n);

/* planes.c: pa_transpose_planes with the AVX-512 shuffles allowed
 * (avx512 1, where built and usable) or not (0: the portable copy). */
pa_status_t _pa_transpose_planes_isa(const void *x, void *y, int64_t n, int64_t c, int64_t hw,
                                     int to_nhwc, pa_workers_t *workers, int avx512);

/* workers.c */
typedef void (*_pa_task_fn)(void *ctx, int64_t begin, int64_t end);
/* Run fn(ctx, b, e) over [0, n) split into contiguous parts, one per
 * worker (the caller takes part 0); `w` NULL or one thread: one call on
 * the calling thread.  Returns when every part is done. */
void _pa_parallel(pa_workers_t *w, int64_t n, _pa_task_fn fn, void *ctx);
/* The argument checks the packed 8-bit products share (qrows.c: a few
 * rows of A, qcols.c: a few columns of B).  Packing: the buffer of `need`
 * bytes in `size`, 4-aligned; the weights there when there are any; uint8
 * or int8; each zero point in its type's range. */
static inline int _pa_q8_pack_args_ok(const void *w, pa_qtype_t w_type, const int32_t *w_zp,
                                      int64_t k, int64_t n, const void *packed, size_t size,
                                      size_t need) {
    if (need == 0 || size < need || packed == NULL || (uintptr_t)packed % 4 != 0 ||
        (w == NULL && k > 0 && n > 0) || (w_type != PA_Q_U8 && w_type != PA_Q_S8))
        return 0;
    int s8 = w_type == PA_Q_S8;
    if (w_zp != NULL)
        for (int64_t j = 0; j < n; j++)
            if (w_zp[j] < (s8 ? -128 : 0) || w_zp[j] > (s8 ? 127 : 255))
                return 0;
    return 1;
}

/* Running (m, n > 0): y (m x n int32) given and A (m x k bytes) too when
 * k > 0, y overlapping neither A nor the packed weights' `packed_bytes`. */
static inline int _pa_q8_run_args_ok(const uint8_t *a, int64_t m, int64_t k, int64_t n,
                                     const int32_t *y, const void *packed, size_t packed_bytes) {
    if (y == NULL || (k > 0 && a == NULL))
        return 0;
    uintptr_t y0 = (uintptr_t)y, y1 = y0 + (uintptr_t)(m * n) * sizeof *y;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + (uintptr_t)(m * k);
    uintptr_t p0 = (uintptr_t)packed, p1 = p0 + packed_bytes;
    return !((k > 0 && y0 < a1 && a0 < y1) || (y0 < p1 && p0 < y1));
}

/* `w`, or NULL when a call of `work` multiply-adds is too small to share
 * (waking the pool would cost more than it saves). */
pa_workers_t *_pa_workers_for(pa_workers_t *w, double work);

/* TFLite's MultiplyByQuantizedMultiplier of one accumulator (qrequant.c's
 * banner), branch-free (its loops vectorize: variable
 * 64-bit shifts and products, selects).  m >= 0 (checked by the caller),
 * so SaturatingRoundingDoublingHighMul's one overflow (INT32_MIN *
 * INT32_MIN) cannot occur; its truncating division by 2^31 is a shift of
 * the value biased by 2^31 - 1 when negative; RoundingDivideByPOT as
 * TFLite writes it (mask, remainder, threshold). */
PA_INLINE int32_t _pa_requant_fixed(int32_t acc, int32_t m, int32_t shift) {
    const int64_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    int64_t a = (int64_t)acc * (INT64_C(1) << left);       /* (no shift of a negative) */
    a = a > INT32_MAX ? INT32_MAX : a < INT32_MIN ? INT32_MIN : a;   /* (int32 in TFLite) */
    const int64_t ab = a * (int64_t)m;
    const int64_t q = ab + (ab >= 0 ? (INT64_C(1) << 30) : (INT64_C(1) - (INT64_C(1) << 30)));
    const int32_t h = (int32_t)((q + (q < 0 ? (INT64_C(1) << 31) - 1 : 0)) >> 31);
    const int32_t mask = (int32_t)((INT64_C(1) << right) - 1);
    const int32_t rem = h & mask, threshold = (mask >> 1) + (h < 0 ? 1 : 0);
    return (h >> right) + (rem > threshold ? 1 : 0);
}

/* qavgpool_int.c: pa_qavgpool of a descriptor it has checked, with
 * integer_average set (TFLite's AVERAGE_POOL_2D), n, c, out_h, out_w > 0. */
void _pa_qavgpool_integer(const pa_qavgpool_t *p, const void *x, void *y);

/* qrequant.c: pa_qrequant on its AVX-512 lanes (avx512 != 0, where
 * _pa_avx512_usable) or on its portable loops (avx512 0): the same bits;
 * tests/c/kernels/test_qrequant.c runs both. */
pa_status_t _pa_qrequant_isa(const pa_qrequant_t *p, const int32_t *mult_shift,
                             const int32_t *acc, void *y, int64_t n, int avx512);

/* qrequant.c: the checked-argument core of pa_qrequant, for the kernels
 * that requantize in their epilogue (qconv.c: a TFLite convolution's
 * tile of accumulators): y[i + c] = the low byte of clamp(requant(acc[i +
 * c], mult[c], shift[c]) + zp, lo, hi) for i < n in steps of C (n a
 * multiple of C), two roundings or one (single), on the AVX-512 lanes
 * where avx512 and usable.  Arguments are not checked: mult >= 0, shift
 * in [-31, 30], lo <= hi within the output type. */
void _pa_qrequant_rows(const int32_t *mult, const int32_t *shift, const int32_t *acc, void *y,
                       int64_t n, int64_t C, int32_t zp, int32_t lo, int32_t hi, int single,
                       int avx512);

/* qrequant.c: _pa_qrequant_rows of one row of n channels whose
 * accumulators are acc[c] + corr[c] - zpw[c] * rs (modulo 2^32: the
 * 8-bit GEMM's zero-point terms), corrected in registers on the AVX-512
 * lanes (qconv.c's fused epilogue). */
void _pa_qrequant_tile(const int32_t *acc, const int32_t *corr, const int32_t *zpw, uint32_t rs,
                       const int32_t *mult, const int32_t *shift, void *y, int64_t n,
                       int32_t zp, int32_t lo, int32_t hi, int single, int avx512);

#endif /* PYARENA_KERNELS_INTERNAL_H */
