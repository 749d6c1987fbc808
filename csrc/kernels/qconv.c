/* kernels/qconv.c -- the 8-bit quantized convolution (pa_qconv2d_*): an
 * integer GEMM over im2col blocks with onnxruntime's requantization, and a
 * direct depthwise kernel.
 *
 * GEMM path.  Per image, group and block of output pixels, the block's
 * windows are copied (im2col) as rows of K = kh * kw * c_in / groups bytes
 * in (kh, kw, channel) order -- signed inputs flipped to unsigned, padding
 * written as the input zero point -- unless the convolution reads its rows
 * straight from the input (NHWC, 1x1, no top/left padding and windows
 * inside the image, one group: each pixel's channels are its row); NCHW
 * convolutions that are 1x1 or have short rows take the panel path of
 * qconv_nchw.c instead (pixels as the vector lanes, no transposes).  The
 * tile (qconv.h) multiplies QC_MR rows by two blocks of QC_NR output
 * channels of the weights packed by pa_qconv2d_pack.  With u the unsigned
 * row bytes, zu their zero point, s the stored weights and sz theirs:
 *     acc = bias - zu * sum_k s + K * zu * sz - sz * sum_k u + sum_k u * s
 * (the first three per channel and run, the fourth per pixel and only
 * where a weight zero point is not 0), all in int32 modulo 2^32, which is
 * exact while |acc| < 2^31 (K <= QC_MAX_K keeps every sum inside; a bias
 * near the int32 limits wraps, as in onnxruntime, rather than overflowing).
 *
 * Depthwise path (groups = c_in = c_out > 1, at most PA_DW_MAX_TAPS taps):
 * the packed weights are the centred int16 values w - w_zp, tap-major,
 * and each output accumulates (x - x_zp) * (w - w_zp) over the taps (a
 * tap in the padding adds 0): per band of output rows the input rows are
 * centred into int16 pixel-major rows with zero padding, then each pixel
 * sums its taps over a block of channels (both layouts; see the path).
 * The VNNI variant takes NCHW layers at stride 1 or 2 plane by plane
 * (qconv_vnni.c: each channel's band of rows centred and padded, output
 * rows of 16 columns per register, requantized in registers).
 *
 * The requantization is onnxruntime's MlasRequantizeOutput
 * (onnxruntime/core/mlas/lib/quantize.cpp): float(acc) * scale, clamped
 * to [lo - zp, hi - zp], rounded half to even by adding and taking off
 * 1.5 * 2^23 (MLAS_ROUNDING_BIAS_MAGIC), plus zp.  The tiles only
 * accumulate integers, so every instruction set gives the same bits.
 * Runs on the calling thread (`workers` is accepted for the API's sake).
 */
#include "qconv.h"

/* The largest K: 255 * 255 * K (and the zero-point terms) below 2^31. */
#define QC_MAX_K 32768
/* Bytes of one im2col block (rows of K bytes): about L1's size. */
#define QC_BLOCK_BYTES 32768
/* The most pixels of a block (their row sums). */
#define QC_MAX_BLOCK 1536

/* -- the descriptor ------------------------------------------------------ */

static int type_range(pa_qtype_t t, int32_t *lo, int32_t *hi) {
    switch (t) {
    case PA_Q_U8: *lo = 0; *hi = 255; return 1;
    case PA_Q_S8: *lo = -128; *hi = 127; return 1;
    case PA_Q_S32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    default: return 0;
    }
}

static int64_t qc_k(const pa_qconv2d_t *q) {
    return q->conv.kh * q->conv.kw * (q->conv.c_in / q->conv.groups);
}

static int qc_valid(const pa_qconv2d_t *q) {
    int32_t lo = 0, hi = 0, xl = 0, xh = 0;
    if (!q || !_pa_conv2d_valid(&q->conv) || q->conv.act.kind != PA_ACT_NONE)
        return 0;
    if ((q->x_type != PA_Q_U8 && q->x_type != PA_Q_S8) ||
        (q->w_type != PA_Q_U8 && q->w_type != PA_Q_S8) || !type_range(q->y_type, &lo, &hi))
        return 0;
    type_range(q->x_type, &xl, &xh);
    if (q->x_zp < xl || q->x_zp > xh)
        return 0;
    if (q->y_type != PA_Q_S32 && (q->y_lo > q->y_hi || q->y_lo < lo || q->y_hi > hi ||
                                  q->y_zp < lo || q->y_zp > hi))
        return 0;
    if (q->requant != PA_QREQ_FLOAT &&
        ((q->requant != PA_QREQ_FIXED && q->requant != PA_QREQ_FIXED_SINGLE) ||
         q->y_type == PA_Q_S32 || q->conv.layout != PA_LAYOUT_NHWC))
        return 0;
    return qc_k(q) <= QC_MAX_K;
}

static int qc_depthwise(const pa_qconv2d_t *q) {
    return _pa_conv2d_is_depthwise(&q->conv);
}

/* The GEMM path's counts: output channels per group, weight blocks per
 * group, groups of 4 of K. */
typedef struct qc_dims {
    int64_t K, kq, G, cog, nbk, hwo;
} qc_dims_t;

static qc_dims_t qc_dims(const pa_qconv2d_t *q) {
    qc_dims_t d;
    d.K = qc_k(q);
    d.kq = (d.K + 3) / 4;
    d.G = q->conv.groups;
    d.cog = q->conv.c_out / d.G;
    d.nbk = (d.cog + QC_NR - 1) / QC_NR;
    d.hwo = q->conv.h_out * q->conv.w_out;
    return d;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t nchw_copy_bytes(const pa_qconv2d_t *q);
static size_t dw_scratch_bytes(const pa_qconv2d_t *q);

/* Packed GEMM weights: per group and block [kq][QC_NR][4] bytes, then four
 * arrays of G * nbk * QC_NR lanes (bias, column sums, weight zero points:
 * int32; scales: float -- in a FIXED requant mode the int32 multipliers),
 * and in a FIXED mode a fifth (the shifts). */
static size_t gemm_weight_bytes(const qc_dims_t *d) {
    return round64((size_t)(d->G * d->nbk * d->kq) * QC_NR * 4);
}

static size_t lanes(const qc_dims_t *d) { return (size_t)(d->G * d->nbk) * QC_NR; }

static int qc_fixed(const pa_qconv2d_t *q) { return q->requant != PA_QREQ_FLOAT; }

/* After the GEMM arrays: the per-lane constant term of the accumulators
 * (bias - zu * colsum + K * zu * zp) for the input zero point of the
 * packing (zu0), then a header (zu0, whether a weight zero point is not
 * 0): a run with that zero point reads them instead of working them out
 * (a streaming model's one-pixel layer spent a third of its time there). */
typedef struct qc_gemm_head {
    int32_t zu0, need_rs;
} qc_gemm_head_t;

static size_t gemm_arrays_bytes(const pa_qconv2d_t *q, const qc_dims_t *d) {
    return (qc_fixed(q) ? 5 : 4) * round64(lanes(d) * 4);
}

size_t pa_qconv2d_packed_size(const pa_qconv2d_t *q) {
    if (!qc_valid(q))
        return 0;
    if (qc_depthwise(q)) {
        size_t c = (size_t)q->conv.c_in, taps = (size_t)(q->conv.kh * q->conv.kw);
        return round64(c * taps * 2) + round64(c * 4) * (qc_fixed(q) ? 3 : 2);
    }
    qc_dims_t d = qc_dims(q);
    return gemm_weight_bytes(&d) + gemm_arrays_bytes(q, &d) + round64(lanes(&d) * 4) + 64;
}

/* Whether the rows are the image's own pixels, no im2col (the input, or the
 * NHWC copy of an NCHW one): 1x1, one group, no top/left padding and the
 * windows inside the image. */
static int qc_direct(const pa_qconv2d_t *q) {
    const pa_conv2d_t *c = &q->conv;
    return c->kh == 1 && c->kw == 1 && c->groups == 1 &&
           c->pad_top == 0 && c->pad_left == 0 && (c->h_out - 1) * c->sh < c->h &&
           (c->w_out - 1) * c->sw < c->w;
}

static int64_t qc_block(const pa_qconv2d_t *q, const qc_dims_t *d) {
    int64_t mb = QC_BLOCK_BYTES / d->K;
    mb = mb < QC_MR ? QC_MR : mb > QC_MAX_BLOCK ? QC_MAX_BLOCK : mb / QC_MR * QC_MR;
    (void)q;
    return mb < d->hwo ? mb : d->hwo;
}

size_t pa_qconv2d_scratch_size(const pa_qconv2d_t *q) {
    if (!qc_valid(q))
        return (size_t)-1;
    if (qc_depthwise(q))
        return dw_scratch_bytes(q);
    if (_pa_qc_nchw_takes(q))
        return _pa_qc_nchw_scratch(q);
    qc_dims_t d = qc_dims(q);
    int64_t mb = qc_block(q, &d);
    size_t sums = round64((size_t)mb * 4) + nchw_copy_bytes(q);
    return qc_direct(q) ? sums : sums + (size_t)(mb * d.K);
}

/* -- packing ------------------------------------------------------------- */

static int32_t weight_at(const pa_qconv2d_t *q, const void *w, int64_t i) {
    return q->w_type == PA_Q_S8 ? (int32_t)((const int8_t *)w)[i]
                                : (int32_t)((const uint8_t *)w)[i];
}

/* The packing of both requant modes: `scale` (float mode) or `ms` (the
 * multipliers then the shifts, FIXED modes), checked by the callers. */
static pa_status_t qc_pack(const pa_qconv2d_t *q, const void *weight, const int32_t *w_zp,
                           const int32_t *bias, const float *scale, const int32_t *ms,
                           void *packed, size_t need) {
    int32_t wl = q->w_type == PA_Q_S8 ? -128 : 0, wh = wl + 255;
    const int64_t cout = q->conv.c_out;
    for (int64_t o = 0; o < cout; o++) {
        if (w_zp && (w_zp[o] < wl || w_zp[o] > wh))
            return PA_ERR_INVALID;
        /* finite and not negative (NaN fails both) */
        if (scale && !(scale[o] >= 0.0f && scale[o] <= 3.4e38f))
            return PA_ERR_INVALID;
        if (ms && (ms[o] < 0 || ms[cout + o] < -31 || ms[cout + o] > 30))
            return PA_ERR_INVALID;
    }
    memset(packed, 0, need);
    if (qc_depthwise(q)) {
        const int64_t C = q->conv.c_in, taps = q->conv.kh * q->conv.kw;
        int16_t *wc = (int16_t *)packed;
        int32_t *b = (int32_t *)((char *)packed + round64((size_t)(C * taps) * 2));
        float *s = (float *)(b + round64((size_t)C * 4) / 4);
        int32_t *m = (int32_t *)s, *sh = m + round64((size_t)C * 4) / 4;  /* (FIXED) */
        for (int64_t c = 0; c < C; c++) {
            int32_t z = w_zp ? w_zp[c] : 0;
            for (int64_t t = 0; t < taps; t++)        /* OHWI: [c][t][0] -> [t][c] */
                wc[t * C + c] = (int16_t)(weight_at(q, weight, c * taps + t) - z);
            b[c] = bias ? bias[c] : 0;
            if (ms)
                m[c] = ms[c], sh[c] = ms[C + c];
            else
                s[c] = scale ? scale[c] : 0.0f;
        }
        return PA_OK;
    }
    qc_dims_t d = qc_dims(q);
    const int32_t off = q->w_type == PA_Q_U8 ? 128 : 0;
    int8_t *wp = (int8_t *)packed;
    int32_t *bias_p = (int32_t *)((char *)packed + gemm_weight_bytes(&d));
    size_t arr = round64(lanes(&d) * 4) / 4;
    int32_t *colsum = bias_p + arr, *zp = colsum + arr;
    float *sc = (float *)(zp + arr);
    int32_t *mult = zp + arr, *shift = mult + arr;     /* (FIXED: over sc) */
    for (int64_t g = 0; g < d.G; g++)
        for (int64_t o = 0; o < d.cog; o++) {
            int64_t oc = g * d.cog + o, b = o / QC_NR, l = o % QC_NR;
            int8_t *blk = wp + ((g * d.nbk + b) * d.kq) * QC_NR * 4;
            int32_t sum = 0;
            for (int64_t k = 0; k < d.K; k++) {
                int32_t v = weight_at(q, weight, oc * d.K + k) - off;
                blk[((k / 4) * QC_NR + l) * 4 + k % 4] = (int8_t)v;
                sum += v;
            }
            size_t lane = (size_t)((g * d.nbk + b) * QC_NR + l);
            bias_p[lane] = bias ? bias[oc] : 0;
            colsum[lane] = sum;
            zp[lane] = (w_zp ? w_zp[oc] : 0) - off;
            if (ms)
                mult[lane] = ms[oc], shift[lane] = ms[cout + oc];
            else
                sc[lane] = scale ? scale[oc] : 0.0f;
        }
    int32_t *corr = (int32_t *)((char *)bias_p + gemm_arrays_bytes(q, &d));
    qc_gemm_head_t *head = (qc_gemm_head_t *)(corr + round64(lanes(&d) * 4) / 4);
    const uint32_t zu = (uint32_t)(q->x_zp + (q->x_type == PA_Q_S8 ? 128 : 0));
    head->zu0 = (int32_t)zu;
    head->need_rs = 0;
    for (size_t l = 0; l < lanes(&d); l++) {        /* (modulo 2^32, as the run's) */
        corr[l] = (int32_t)((uint32_t)bias_p[l] - zu * (uint32_t)colsum[l] +
                            (uint32_t)d.K * zu * (uint32_t)zp[l]);
        head->need_rs |= zp[l] != 0;
    }
    return PA_OK;
}

pa_status_t pa_qconv2d_pack(const pa_qconv2d_t *q, const void *weight, const int32_t *w_zp,
                            const int32_t *bias, const float *scale, void *packed,
                            size_t packed_size) {
    size_t need = pa_qconv2d_packed_size(q);
    if (!need || !weight || !packed || packed_size < need || qc_fixed(q) ||
        (q->y_type != PA_Q_S32 && !scale))
        return PA_ERR_INVALID;
    return qc_pack(q, weight, w_zp, bias, q->y_type != PA_Q_S32 ? scale : NULL, NULL, packed,
                   need);
}

pa_status_t pa_qconv2d_pack_fixed(const pa_qconv2d_t *q, const void *weight,
                                  const int32_t *w_zp, const int32_t *bias,
                                  const int32_t *mult_shift, void *packed, size_t packed_size) {
    size_t need = pa_qconv2d_packed_size(q);
    if (!need || !weight || !packed || packed_size < need || !qc_fixed(q) || !mult_shift)
        return PA_ERR_INVALID;
    return qc_pack(q, weight, w_zp, bias, NULL, mult_shift, packed, need);
}

/* -- requantization -------------------------------------------------------- */

typedef struct qc_out {
    pa_qtype_t type;
    float lo, hi;           /* the clamp, zero point taken off */
    int32_t zp;
    /* FIXED requant modes (else fixed 0): the channels' multipliers and
     * shifts (the packed arrays), one rounding or two, the clamp, the
     * AVX-512 lanes or the portable loops (qrequant.c) */
    int fixed, single, avx512;
    int32_t ilo, ihi;
} qc_out_t;

static qc_out_t qc_out(const pa_qconv2d_t *q) {
    /* (int64: for int32 outputs the clamp fields are not read, nor checked) */
    qc_out_t o = {q->y_type, (float)((int64_t)q->y_lo - q->y_zp),
                  (float)((int64_t)q->y_hi - q->y_zp), q->y_zp,
                  qc_fixed(q), q->requant == PA_QREQ_FIXED_SINGLE, 0, q->y_lo, q->y_hi};
    return o;
}

/* dst[0 .. n) = the fixed-point requantization of acc[0 .. n) with the
 * multipliers and shifts m[0 .. n), sh[0 .. n) (the low bytes: int8 or
 * uint8 alike). */
PA_INLINE void qc_fixed_store(const int32_t *acc, const int32_t *m, const int32_t *sh, int64_t n,
                              const qc_out_t *o, uint8_t *dst) {
    _pa_qrequant_rows(m, sh, acc, dst, n, n, o->zp, o->ilo, o->ihi, o->single, o->avx512);
}

/* MlasRequantizeOutput's arithmetic for one value (see the top). */
PA_INLINE int32_t qc_requant(int32_t acc, float scale, const qc_out_t *o) {
    return _pa_qc_requant(acc, scale, o->lo, o->hi, o->zp);
}

PA_INLINE void qc_store(void *y, int64_t i, int32_t acc, float scale, const qc_out_t *o) {
    if (o->type == PA_Q_S32)
        ((int32_t *)y)[i] = acc;
    else if (o->type == PA_Q_U8)
        ((uint8_t *)y)[i] = (uint8_t)qc_requant(acc, scale, o);
    else
        ((int8_t *)y)[i] = (int8_t)qc_requant(acc, scale, o);
}

/* y[base + i] = the requantized acc[i], i < n, one scale (tiles of
 * QC_NR: vectorised). */
PA_MULTIVERSION
static void dw_store(void *y, int64_t base, const int32_t *restrict acc, int64_t n, float scale,
                     const qc_out_t *o) {
    const qc_out_t oo = *o;
    if (oo.type == PA_Q_S32) {
        memcpy((int32_t *)y + base, acc, (size_t)n * 4);
        return;
    }
    uint8_t *d = (uint8_t *)y + base;
    int64_t i = 0;
    for (; i + QC_NR <= n; i += QC_NR) {
        uint8_t t[QC_NR];
        for (int l = 0; l < QC_NR; l++)
            t[l] = (uint8_t)qc_requant(acc[i + l], scale, &oo);
        memcpy(d + i, t, QC_NR);
    }
    for (; i < n; i++)
        d[i] = (uint8_t)qc_requant(acc[i], scale, &oo);
}

/* -- the portable tile ------------------------------------------------------ */

static void qc_tile_portable(const uint8_t *const *rows, int mr, int64_t k, const int8_t *w,
                             int64_t kq, int nb, uint8_t xo, int32_t acc[QC_MR][2 * QC_NR]) {
    memset(acc, 0, sizeof(int32_t) * QC_MR * 2 * QC_NR);
    for (int r = 0; r < mr; r++) {
        const uint8_t *a = rows[r];
        for (int64_t g = 0; g < kq; g++) {
            uint8_t u[4] = {0, 0, 0, 0};
            int64_t n = k - 4 * g < 4 ? k - 4 * g : 4;
            for (int64_t t = 0; t < n; t++)
                u[t] = (uint8_t)(a[4 * g + t] ^ xo);
            for (int b = 0; b < nb; b++) {
                const int8_t *wb = w + ((int64_t)b * kq + g) * QC_NR * 4;
                int32_t *ac = acc[r] + b * QC_NR;
                for (int l = 0; l < QC_NR; l++)
                    ac[l] += u[0] * wb[4 * l] + u[1] * wb[4 * l + 1] + u[2] * wb[4 * l + 2] +
                             u[3] * wb[4 * l + 3];
            }
        }
    }
}

/* -- the GEMM path ---------------------------------------------------------- */

typedef struct qc_run {
    const pa_qconv2d_t *q;
    qc_dims_t d;
    _pa_qc_tile_fn tile;
    const int8_t *w;
    const int32_t *bias, *colsum, *zp;
    const float *scale;
    const int32_t *mult, *shift;    /* FIXED requant modes: per lane */
    const int32_t *corr;    /* the packed constant terms, NULL: this zu's worked out */
    uint8_t xo, zu;         /* XOR flipping x to unsigned; its zero point */
    qc_out_t out;
    int need_rs;            /* a weight zero point is not 0 */
    int direct;             /* rows read from the (NHWC) image itself */
} qc_run_t;

/* An NCHW image (c planes of hw bytes) as NHWC, flipped by xo, into dst:
 * blocks of 8 channels x 16 pixels transposed in SSE2 registers (three
 * rounds of byte / word / dword interleaves, each pixel's 8 channels
 * stored as one 8-byte word), the rest byte by byte.  (A byte-scatter
 * loop took a quarter of an 8 -> 8 channel 1x1 layer's time.) */
#if defined(__SSE2__)
#include <emmintrin.h>

static void to_nhwc_8x16(const uint8_t *src, uint8_t *dst, int64_t c, int64_t hw,
                         __m128i flip) {
    __m128i a[8], t[8], u[8], w[8];
    for (int i = 0; i < 8; i++)
        a[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i * hw)), flip);
    for (int i = 0; i < 4; i++) {       /* t[2i]: pixels 0-7, t[2i+1]: 8-15 */
        t[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++)         /* channels 4h .. 4h+3, 4 pixels each */
        for (int i = 0; i < 2; i++) {
            u[4 * h + 2 * i] = _mm_unpacklo_epi16(t[4 * h + i], t[4 * h + 2 + i]);
            u[4 * h + 2 * i + 1] = _mm_unpackhi_epi16(t[4 * h + i], t[4 * h + 2 + i]);
        }
    for (int i = 0; i < 4; i++) {       /* pixels 4i .. 4i+3, all 8 channels */
        w[2 * i] = _mm_unpacklo_epi32(u[i], u[4 + i]);
        w[2 * i + 1] = _mm_unpackhi_epi32(u[i], u[4 + i]);
    }
    for (int i = 0; i < 8; i++) {
        _mm_storel_epi64((__m128i *)(dst + (2 * i) * c), w[i]);
        _mm_storel_epi64((__m128i *)(dst + (2 * i + 1) * c), _mm_srli_si128(w[i], 8));
    }
}
#endif

static void to_nhwc(const uint8_t *restrict src, uint8_t *restrict dst, int64_t c, int64_t hw,
                    uint8_t xo) {
    int64_t c8 = 0, p16 = 0;
#if defined(__SSE2__)
    const __m128i flip = _mm_set1_epi8((char)xo);
    c8 = c / 8 * 8, p16 = hw / 16 * 16;
    for (int64_t p0 = 0; p0 < p16; p0 += 16)
        for (int64_t c0 = 0; c0 < c8; c0 += 8)
            to_nhwc_8x16(src + c0 * hw + p0, dst + p0 * c + c0, c, hw, flip);
#endif
    /* what the blocks leave: the channels past c8 at every pixel, and
     * the pixels past p16 at the first c8 channels */
    for (int64_t p = 0; p < hw; p++)
        for (int64_t ch = p < p16 ? c8 : 0; ch < c; ch++)
            dst[p * c + ch] = (uint8_t)(src[ch * hw + p] ^ xo);
}

/* The sum of the n bytes at a, each flipped by xo: 32 lanes of 16-bit
 * sums over blocks of 32 bytes (a fixed trip the compiler vectorises),
 * emptied into 32 bits every 256 blocks, before they could overflow.  A
 * byte at a time, the row sums of a 1x1 layer with weight zero points
 * (ConvInteger, MatMulInteger) took longer than its products. */
PA_MULTIVERSION
static int32_t byte_sum(const uint8_t *a, int64_t n, uint8_t xo) {
    uint32_t total = 0;
    int64_t i = 0;
    while (n - i >= 32) {
        uint16_t part[32] = {0};
        int64_t blocks = (n - i) / 32 < 256 ? (n - i) / 32 : 256;
        for (int64_t b = 0; b < blocks; b++, i += 32)
            for (int t = 0; t < 32; t++)
                part[t] = (uint16_t)(part[t] + (uint8_t)(a[i + t] ^ xo));
        for (int t = 0; t < 32; t++)
            total += part[t];
    }
    for (; i < n; i++)
        total += (uint8_t)(a[i] ^ xo);
    return (int32_t)total;
}

/* dst[0 .. n) = s[0 .. n) flipped by xo; returns their sum where `sum`,
 * else 0. */
PA_MULTIVERSION
static void flip_copy(uint8_t *restrict dst, const uint8_t *restrict s, int64_t n, uint8_t xo) {
    int64_t t = 0;
    for (; t + 32 <= n; t += 32)        /* (a fixed trip: vectorised) */
        for (int j = 0; j < 32; j++)
            dst[t + j] = (uint8_t)(s[t + j] ^ xo);
    for (; t < n; t++)
        dst[t] = (uint8_t)(s[t] ^ xo);
}

static int32_t copy_run(uint8_t *dst, const uint8_t *s, int64_t n, uint8_t xo, int sum) {
    if (n < 16)             /* (a call costs more than a few bytes) */
        for (int64_t t = 0; t < n; t++)
            dst[t] = (uint8_t)(s[t] ^ xo);
    else if (xo)            /* (signed inputs: each byte flipped) */
        flip_copy(dst, s, n, xo);
    else
        memcpy(dst, s, (size_t)n);
    return sum ? byte_sum(dst, n, 0) : 0;
}

/* Output pixel p's row of image `img` (NHWC, flipped by xo), group g,
 * into dst (K bytes in (kh, kw, channel) order, padding as zu); returns
 * the sum of its bytes. */
static int32_t im2col_row(const qc_run_t *R, const uint8_t *img, uint8_t xo, int64_t g,
                          int64_t p, uint8_t *dst) {
    const pa_conv2d_t *c = &R->q->conv;
    const int64_t cg = c->c_in / c->groups, oh = p / c->w_out, ow = p % c->w_out;
    int32_t sum = 0;
    const int64_t iw0 = ow * c->sw - c->pad_left, run = c->kw * cg;
    const int whole_rows = c->groups == 1 && c->dw == 1 && iw0 >= 0 && iw0 + c->kw <= c->w;
    for (int64_t i = 0; i < c->kh; i++) {
        int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
        if (whole_rows && ih >= 0 && ih < c->h) {
            /* the window's row: kw pixels of all channels, one run */
            sum += copy_run(dst, img + (ih * c->w + iw0) * c->c_in, run, xo, R->need_rs);
            dst += run;
            continue;
        }
        for (int64_t j = 0; j < c->kw; j++, dst += cg) {
            int64_t iw = ow * c->sw - c->pad_left + j * c->dw;
            if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) {
                memset(dst, R->zu, (size_t)cg);
                sum += (int32_t)R->zu * (int32_t)cg;
                continue;
            }
            sum += copy_run(dst, img + (ih * c->w + iw) * c->c_in + g * cg, cg, xo, R->need_rs);
        }
    }
    return sum;
}

/* Where output pixel p's row starts in the image (direct rows). */
PA_INLINE int64_t direct_offset(const pa_conv2d_t *c, int64_t p) {
    if (c->sh == 1 && c->sw == 1 && c->w_out == c->w)  /* the pixels in order */
        return p * c->c_in;
    int64_t oh = p / c->w_out, ow = p % c->w_out;
    return (oh * c->sh * c->w + ow * c->sw) * c->c_in;
}


/* dst[l] (l < n, of the output type) = the requantized
 * acc[l] + corr[l] - zp[l] * rs; computed over nb whole blocks of QC_NR
 * lanes (fixed trip counts: vectorised), n of them stored. */
PA_MULTIVERSION
static void qc_epilogue(const int32_t *restrict acc, const int32_t *restrict corr,
                        const int32_t *restrict zp, uint32_t rs, const float *restrict scale,
                        int nb, int n, const qc_out_t *o, void *dst) {
    int32_t v[2 * QC_NR];
    uint8_t b8[2 * QC_NR];
    const qc_out_t oo = *o;
    for (int b = 0; b < nb; b++) {
        const int k = b * QC_NR;
        for (int l = 0; l < QC_NR; l++)
            v[k + l] = (int32_t)((uint32_t)acc[k + l] + (uint32_t)corr[k + l] -
                                 (uint32_t)zp[k + l] * rs);
        if (oo.type != PA_Q_S32)
            for (int l = 0; l < QC_NR; l++)
                b8[k + l] = (uint8_t)qc_requant(v[k + l], scale[k + l], &oo);
    }
    if (oo.type == PA_Q_S32)
        memcpy(dst, v, (size_t)n * 4);
    else
        memcpy(dst, b8, (size_t)n);
}

/* qc_epilogue in a FIXED requant mode: TFLite's requantization of the
 * corrected accumulators with the lanes' multipliers and shifts
 * (qrequant.c: corrected in registers there), n bytes stored. */
static void qc_epilogue_fixed(const int32_t *acc, const int32_t *corr, const int32_t *zp,
                              uint32_t rs, const int32_t *mult, const int32_t *shift, int n,
                              const qc_out_t *o, void *dst) {
    _pa_qrequant_tile(acc, corr, zp, rs, mult, shift, dst, n, o->zp, o->ilo, o->ihi, o->single,
                      o->avx512);
}

/* One block of pb output pixels from p0 of image n, group g; `img` is
 * the image as NHWC bytes flipped by xo. */
static void gemm_block(const qc_run_t *R, const uint8_t *img, uint8_t xo, void *y, int64_t n,
                       int64_t g, int64_t p0, int64_t pb, uint8_t *cols, int32_t *rs) {
    const pa_conv2d_t *c = &R->q->conv;
    const qc_dims_t *d = &R->d;
    const int64_t esize = R->out.type == PA_Q_S32 ? 4 : 1;
    const uint8_t *rowp[QC_MR];
    for (int64_t r = 0; r < pb; r++) {
        int64_t p = p0 + r;
        if (R->direct) {
            if (R->need_rs)
                rs[r] = byte_sum(img + direct_offset(c, p), d->K, xo);
        } else {
            rs[r] = im2col_row(R, img, xo, g, p, cols + r * d->K);
        }
    }
    const uint8_t txo = R->direct ? xo : 0;
    const int nhwc = c->layout == PA_LAYOUT_NHWC;
    for (int64_t b = 0; b < d->nbk; b += 2) {
        int nb = d->nbk - b >= 2 ? 2 : 1;
        int64_t lane0 = (g * d->nbk + b) * QC_NR, o0 = g * d->cog + b * QC_NR;
        int nvalid = (int)(d->cog - b * QC_NR < nb * QC_NR ? d->cog - b * QC_NR : nb * QC_NR);
        int32_t own[2 * QC_NR];     /* (the lanes past nvalid: packed zeros, unused) */
        const int32_t *corr = R->corr ? R->corr + lane0 : own;
        if (!R->corr)
            for (int l = 0; l < nb * QC_NR; l++) {
                uint32_t v = (uint32_t)R->bias[lane0 + l] -
                             (uint32_t)R->zu * (uint32_t)R->colsum[lane0 + l] +
                             (uint32_t)d->K * (uint32_t)R->zu * (uint32_t)R->zp[lane0 + l];
                own[l] = (int32_t)v;
            }
        const int8_t *wb = R->w + (g * d->nbk + b) * d->kq * QC_NR * 4;
        for (int64_t t0 = 0; t0 < pb; t0 += QC_MR) {
            int mr = (int)(pb - t0 < QC_MR ? pb - t0 : QC_MR);
            for (int r = 0; r < mr; r++) {
                int64_t p = p0 + t0 + r;
                if (R->direct) {
                    rowp[r] = img + direct_offset(c, p);
                } else {
                    rowp[r] = cols + (t0 + r) * d->K;
                }
            }
            int32_t acc[QC_MR][2 * QC_NR];
            R->tile(rowp, mr, d->K, wb, d->kq, nb, txo, acc);
            int32_t out[QC_MR][2 * QC_NR];      /* a tile's outputs, any type */
            for (int r = 0; r < mr; r++) {
                int64_t p = p0 + t0 + r;
                uint32_t srs = R->need_rs ? (uint32_t)rs[t0 + r] : 0;
                void *dst = nhwc ? (char *)y + ((n * d->hwo + p) * c->c_out + o0) * esize
                                 : (void *)out[r];
                if (R->out.fixed)
                    qc_epilogue_fixed(acc[r], corr, R->zp + lane0, srs, R->mult + lane0,
                                      R->shift + lane0, nvalid, &R->out, dst);
                else
                    qc_epilogue(acc[r], corr, R->zp + lane0, srs, R->scale + lane0, nb, nvalid,
                                &R->out, dst);
            }
            if (!nhwc) {                        /* channel l: mr consecutive pixels */
                int64_t at = (n * c->c_out + o0) * d->hwo + p0 + t0;
                if (esize == 1)
                    for (int l = 0; l < nvalid; l++) {
                        uint8_t *yo = (uint8_t *)y + at + l * d->hwo;
                        for (int r = 0; r < mr; r++)
                            yo[r] = ((const uint8_t *)out[r])[l];
                    }
                else
                    for (int l = 0; l < nvalid; l++) {
                        int32_t *yo = (int32_t *)y + at + l * d->hwo;
                        for (int r = 0; r < mr; r++)
                            yo[r] = out[r][l];
                    }
            }
        }
    }
}

/* Bytes of the NHWC copy an NCHW input takes (one image). */
static size_t nchw_copy_bytes(const pa_qconv2d_t *q) {
    const pa_conv2d_t *c = &q->conv;
    return c->layout == PA_LAYOUT_NCHW ? round64((size_t)(c->c_in * c->h * c->w)) : 0;
}

/* The NCHW panel path (qconv_nchw.c) with this run's arrays. */
static void nchw_run(const qc_run_t *R, const uint8_t *x, void *y, void *scratch, int isa) {
    _pa_qc_gemm_t G;
    G.q = R->q;
    G.K = R->d.K, G.kq = R->d.kq, G.G = R->d.G, G.cog = R->d.cog, G.nbk = R->d.nbk;
    G.hwo = R->d.hwo;
    G.w = R->w, G.bias = R->bias, G.colsum = R->colsum, G.zp = R->zp, G.scale = R->scale;
    G.xo = R->xo, G.zu = R->zu, G.need_rs = R->need_rs;
    G.y_type = R->out.type, G.lo = R->out.lo, G.hi = R->out.hi, G.y_zp = R->out.zp;
    _pa_qc_nchw_run(&G, x, y, scratch, isa);
}

static void gemm_run(const pa_qconv2d_t *q, const void *packed, const uint8_t *x, void *y,
                     void *scratch, _pa_qc_tile_fn tile, int avx512) {
    qc_run_t R;
    R.q = q;
    R.d = qc_dims(q);
    R.tile = tile;
    R.w = (const int8_t *)packed;
    size_t arr = round64(lanes(&R.d) * 4) / 4;
    R.bias = (const int32_t *)((const char *)packed + gemm_weight_bytes(&R.d));
    R.colsum = R.bias + arr;
    R.zp = R.colsum + arr;
    R.scale = (const float *)(R.zp + arr);
    R.mult = R.zp + arr;        /* (FIXED modes: over the scales) */
    R.shift = R.mult + arr;
    R.xo = q->x_type == PA_Q_S8 ? 0x80 : 0;
    R.zu = (uint8_t)(q->x_zp + (q->x_type == PA_Q_S8 ? 128 : 0));
    R.out = qc_out(q);
    R.out.avx512 = avx512;
    const int32_t *corr = (const int32_t *)((const char *)R.bias + gemm_arrays_bytes(q, &R.d));
    const qc_gemm_head_t *head =
        (const qc_gemm_head_t *)(corr + round64(lanes(&R.d) * 4) / 4);
    R.need_rs = head->need_rs;
    R.corr = head->zu0 == (int32_t)R.zu ? corr : NULL;
    R.direct = qc_direct(q);
    if (_pa_qc_nchw_takes(q)) {
        nchw_run(&R, x, y, scratch, tile == qc_tile_portable ? 0 : 1);
        return;
    }
    const pa_conv2d_t *c = &q->conv;
    int64_t mb = qc_block(q, &R.d), plane = c->h * c->w;
    int32_t *rs = (int32_t *)scratch;
    uint8_t *copy = (uint8_t *)scratch + round64((size_t)mb * 4);
    uint8_t *cols = R.direct ? NULL : copy + nchw_copy_bytes(q);
    for (int64_t n = 0; n < c->n; n++) {
        const uint8_t *img = x + n * plane * c->c_in;
        uint8_t xo = R.xo;
        if (c->layout == PA_LAYOUT_NCHW) {
            to_nhwc(img, copy, c->c_in, plane, xo);
            img = copy;
            xo = 0;
        }
        for (int64_t g = 0; g < R.d.G; g++)
            for (int64_t p0 = 0; p0 < R.d.hwo; p0 += mb) {
                int64_t pb = R.d.hwo - p0 < mb ? R.d.hwo - p0 : mb;
                gemm_block(&R, img, xo, y, n, g, p0, pb, cols, rs);
            }
    }
}

/* -- the depthwise path ------------------------------------------------------ */

/* Per band of output rows, the input rows it reads are laid out once as
 * int16 values x - x_zp, pixel-major (channels innermost, as NHWC) with
 * the padding written as 0 -- an NCHW input is transposed on the way in --
 * so every output pixel is, per channel block, a sum over the taps of
 * int16 x int16 products with no bounds test: a register tile of QC_NR
 * channels kept over all the taps, then requantized and stored (NHWC: a
 * run of channels; NCHW: one byte per plane). */

/* Input bytes of one band (the pixel-major int16 rows it reads), at most
 * this many unless one output row needs more. */
#define QC_DW_BAND_BYTES (256 << 10)
/* The most bytes of one output row's input rows the band path lays out. */
#define QC_DW_BAND_MAX (16 << 20)
/* The row path (dw_nchw: per output row and tap, QC_NR columns at a
 * time, no transposition) takes NCHW convolutions of fewer channels than
 * QC_DW_ROW_MAX_C (a pixel's channel blocks are too short for the band
 * path) whose output rows have at least QC_DW_ROW_MIN columns (narrower
 * rows spend more on the edges than on the interior). */
#define QC_DW_ROW_MIN 48
#define QC_DW_ROW_MAX_C 32

typedef struct qc_dw_geo {
    int64_t wp;         /* the band's row width: the columns the taps read */
    int64_t rows;       /* output rows per band */
    int64_t rows_in;    /* input rows of a full band */
} qc_dw_geo_t;

static int64_t dw_rows_in(const pa_conv2d_t *c, int64_t rows) {
    return (rows - 1) * c->sh + (c->kh - 1) * c->dh + 1;
}

/* The band path's geometry; rows 0 where one output row's input rows
 * would take more than QC_DW_BAND_MAX bytes (a large dilation or stride:
 * the pixel paths take those). */
static qc_dw_geo_t dw_geo(const pa_qconv2d_t *q) {
    const pa_conv2d_t *c = &q->conv;
    qc_dw_geo_t g = {0, 0, 0};
    int64_t a, b, row, all;
    if (c->w_out < 1 || c->h_out < 1 || __builtin_mul_overflow(c->w_out - 1, c->sw, &a) ||
        __builtin_mul_overflow(c->kw - 1, c->dw, &b) || __builtin_add_overflow(a, b + 1, &g.wp) ||
        __builtin_mul_overflow(g.wp, c->c_in * 2, &row) ||
        __builtin_mul_overflow(c->kh - 1, c->dh, &a) || __builtin_mul_overflow(a + 1, row, &all) ||
        all > QC_DW_BAND_MAX)
        return g;
    g.rows = 1;
    while (g.rows < c->h_out && dw_rows_in(c, g.rows + 1) * row <= QC_DW_BAND_BYTES)
        g.rows++;
    g.rows_in = dw_rows_in(c, g.rows);
    return g;
}

/* The NCHW plane path's geometry (qconv.h; the VNNI variant's): bands of
 * output rows whose input rows take at most QC_DW_PLANE_BYTES; 0 where
 * it does not apply (NHWC, a stride past 2, one output row's input rows
 * past QC_DW_BAND_MAX bytes). */
#define QC_DW_PLANE_BYTES (64 << 10)

static int dw_plane_geo(const pa_qconv2d_t *q, _pa_qc_plane_t *g) {
    const pa_conv2d_t *c = &q->conv;
    int64_t a, b, all;
    if (c->layout != PA_LAYOUT_NCHW || c->sw > 2 || c->sh > 2 || c->w_out < 1 ||
        c->h_out < 1 || __builtin_mul_overflow(c->w_out - 1, c->sw, &a) ||
        __builtin_mul_overflow(c->kw - 1, c->dw, &b) || __builtin_add_overflow(a, b + 1, &g->wp) ||
        __builtin_mul_overflow(c->kh - 1, c->dh, &a) || __builtin_mul_overflow(a + 1, g->wp, &all) ||
        (all + QC_DW_SLACK) * 2 > QC_DW_BAND_MAX)
        return 0;
    g->rows = 1;
    while (g->rows < c->h_out &&
           (dw_rows_in(c, g->rows + 1) * g->wp + QC_DW_SLACK) * 2 <= QC_DW_PLANE_BYTES)
        g->rows++;
    g->rows_in = dw_rows_in(c, g->rows);
    return 1;
}

/* An NCHW convolution whose output rows are wide enough for the row path
 * (runs of QC_NR output columns per tap, no transposition). */
static int dw_by_rows(const pa_qconv2d_t *q) {
    return q->conv.layout == PA_LAYOUT_NCHW && q->conv.w_out >= QC_DW_ROW_MIN &&
           q->conv.c_in < QC_DW_ROW_MAX_C;
}

/* NHWC depthwise layers of at most this many output pixels (a streaming
 * model's step: one) take the pixel path, taps read straight from the
 * input: laying the band's rows out as int16 first cost more than the
 * taps themselves. */
#define QC_DW_PIXELS_MAX 4

static int dw_by_pixels(const pa_qconv2d_t *q, const qc_dw_geo_t *g) {
    return q->conv.layout == PA_LAYOUT_NHWC &&
           (!g->rows || q->conv.h_out * q->conv.w_out <= QC_DW_PIXELS_MAX);
}

static size_t dw_scratch_bytes(const pa_qconv2d_t *q) {
    qc_dw_geo_t g = dw_geo(q);
    _pa_qc_plane_t pg;
    size_t n = dw_by_rows(q) || !g.rows || dw_by_pixels(q, &g)  /* their accumulators */
                   ? (size_t)(q->conv.layout == PA_LAYOUT_NHWC ? q->conv.c_in : q->conv.w_out) * 4
                   : (size_t)(g.rows_in * g.wp * q->conv.c_in) * 2;
    if (dw_plane_geo(q, &pg)) {             /* (the VNNI variant's plane path) */
        size_t p = (size_t)(pg.rows_in * pg.wp + QC_DW_SLACK) * 2;
        n = p > n ? p : n;
    }
    return n;
}

/* The band's input rows from input row ih0 on (rows before 0 or past the
 * image, and the padding columns, as 0). */
PA_MULTIVERSION
static void dw_fill(const pa_qconv2d_t *q, const qc_dw_geo_t *g, const uint8_t *img,
                    int64_t ih0, int64_t nrows, int16_t *restrict buf) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in, wp = g->wp;
    const int16_t zp = (int16_t)q->x_zp;
    const int sgn = q->x_type == PA_Q_S8, nchw = c->layout == PA_LAYOUT_NCHW;
    /* the image's columns iw in [0, cols) land at column pad_left + iw */
    int64_t cols = wp - c->pad_left < c->w ? wp - c->pad_left : c->w;
    int64_t iw0 = c->pad_left < 0 ? -c->pad_left : 0;
    /* zeros only where the image leaves some (a streaming layer's one
     * output pixel reads its whole window: no padding to write) */
    if (ih0 < 0 || ih0 + nrows > c->h || c->pad_left != 0 || cols != wp)
        memset(buf, 0, (size_t)(nrows * wp * C) * 2);
    for (int64_t b = 0; b < nrows; b++) {
        int64_t ih = ih0 + b;
        if (ih < 0 || ih >= c->h)
            continue;
        for (int64_t iw = iw0; iw < cols; iw++) {
            int16_t *d = buf + (b * wp + c->pad_left + iw) * C;
            if (nchw) {
                const uint8_t *s = img + ih * c->w + iw;
                const int64_t plane = c->h * c->w;
                if (sgn)
                    for (int64_t ch = 0; ch < C; ch++)
                        d[ch] = (int16_t)((int8_t)s[ch * plane] - zp);
                else
                    for (int64_t ch = 0; ch < C; ch++)
                        d[ch] = (int16_t)(s[ch * plane] - zp);
            } else {
                const uint8_t *s = img + (ih * c->w + iw) * C;
                if (sgn)
                    PA_MAP(d, (size_t)C, k, (int16_t)((int8_t)s[k] - zp));
                else
                    PA_MAP(d, (size_t)C, k, (int16_t)(s[k] - zp));
            }
        }
    }
}

/* Output channels [ch, ch + n) of one pixel: acc = bias + sum over the
 * taps of src[off[t] + l] * w[t * C + l] (modulo 2^32), then stored. */
PA_INLINE void dw_pixel_store(const pa_qconv2d_t *q, const qc_out_t *o, void *y, int64_t at,
                              int64_t step, const uint32_t *acc, const float *scale,
                              const int32_t *shift, int n) {
    if (o->type == PA_Q_S32) {
        for (int l = 0; l < n; l++)
            ((int32_t *)y)[at + l * step] = (int32_t)acc[l];
        return;
    }
    uint8_t t[QC_NR];
    if (o->fixed)       /* (scale: the channels' int32 multipliers) */
        qc_fixed_store((const int32_t *)acc, (const int32_t *)scale, shift, n, o, t);
    else
        for (int l = 0; l < QC_NR; l++)
            t[l] = (uint8_t)qc_requant((int32_t)acc[l], scale[l], o);
    uint8_t *d = (uint8_t *)y + at;
    if (step == 1)
        memcpy(d, t, (size_t)n);
    else
        for (int l = 0; l < n; l++)
            d[l * step] = t[l];
    (void)q;
}

PA_MULTIVERSION
static void dw_band(const pa_qconv2d_t *q, const qc_out_t *out, const int16_t *wc,
                    const int32_t *bias, const float *scale, const int32_t *shift,
                    const int16_t *buf, const int64_t *off, int64_t wp, int64_t r0, int64_t r1,
                    int64_t n, void *y) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in, Wo = c->w_out, Ho = c->h_out;
    const int nchw = c->layout == PA_LAYOUT_NCHW;
    const qc_out_t o = *out;
    for (int64_t oh = r0; oh < r1; oh++) {
        /* the kernel rows inside the image (the others read zeros): taps
         * [t0, t1) */
        int64_t i0 = 0, i1 = c->kh, top = oh * c->sh - c->pad_top;
        while (i0 < i1 && top + i0 * c->dh < 0)
            i0++;
        while (i1 > i0 && top + (i1 - 1) * c->dh >= c->h)
            i1--;
        const int64_t t0 = i0 * c->kw, t1 = i1 * c->kw;
        for (int64_t ow = 0; ow < Wo; ow++) {
            const int16_t *px = buf + ((oh - r0) * c->sh * wp + ow * c->sw) * C;
            /* the pixel's first channel in y, and the step between channels */
            int64_t at = nchw ? (n * C * Ho + oh) * Wo + ow : ((n * Ho + oh) * Wo + ow) * C;
            int64_t step = nchw ? Ho * Wo : 1;
            for (int64_t ch = 0; ch < C; ch += QC_NR) {
                uint32_t acc[QC_NR];
                float sc[QC_NR];
                if (ch + QC_NR <= C) {
                    for (int l = 0; l < QC_NR; l++)
                        acc[l] = (uint32_t)bias[ch + l];
                    for (int64_t t = t0; t < t1; t++) {
                        const int16_t *s = px + off[t] + ch, *w = wc + t * C + ch;
                        for (int l = 0; l < QC_NR; l++)
                            acc[l] += (uint32_t)((int32_t)s[l] * (int32_t)w[l]);
                    }
                    for (int l = 0; l < QC_NR; l++)
                        sc[l] = scale[ch + l];
                    dw_pixel_store(q, &o, y, at + ch * step, step, acc,
                                   o.fixed ? scale + ch : sc, shift + ch, QC_NR);
                } else {
                    int m = (int)(C - ch);
                    for (int l = 0; l < QC_NR; l++) {
                        acc[l] = l < m ? (uint32_t)bias[ch + l] : 0;
                        sc[l] = l < m ? scale[ch + l] : 0.0f;
                    }
                    for (int64_t t = t0; t < t1; t++) {
                        const int16_t *s = px + off[t] + ch, *w = wc + t * C + ch;
                        for (int l = 0; l < m; l++)
                            acc[l] += (uint32_t)((int32_t)s[l] * (int32_t)w[l]);
                    }
                    dw_pixel_store(q, &o, y, at + ch * step, step, acc,
                                   o.fixed ? scale + ch : sc, shift + ch, m);
                }
            }
        }
    }
}

/* One output row's accumulators plus the taps of one input row:
 * acc[ow] += (x[ow * sw + shift] - zp) * wv for ow in [lo, hi), in tiles
 * of QC_NR (a trip count the compiler knows: vectorised at -O2). */
#define QC_DW_ROW(NAME, T)                                                               \
    PA_MULTIVERSION                                                                      \
    static void NAME(int32_t *restrict acc, const T *restrict row, int64_t lo, int64_t hi, \
                     int64_t sw, int64_t shift, int32_t zp, int32_t wv) {                 \
        int64_t ow = lo;                                                                 \
        if (sw == 1)                                                                     \
            for (; ow + QC_NR <= hi; ow += QC_NR) {                                      \
                const T *r = row + ow + shift;                                           \
                for (int t = 0; t < QC_NR; t++)                                          \
                    acc[ow + t] = (int32_t)((uint32_t)acc[ow + t] +                      \
                                            (uint32_t)(((int32_t)r[t] - zp) * wv));      \
            }                                                                            \
        for (; ow < hi; ow++)                                                            \
            acc[ow] = (int32_t)((uint32_t)acc[ow] +                                      \
                                (uint32_t)(((int32_t)row[ow * sw + shift] - zp) * wv));  \
    }
QC_DW_ROW(dw_row_u8, uint8_t)
QC_DW_ROW(dw_row_s8, int8_t)
#undef QC_DW_ROW

static void dw_row(int32_t *acc, const uint8_t *row, int64_t lo, int64_t hi, int64_t sw,
                   int64_t shift, int32_t zp, int32_t wv, int sgn) {
    if (sgn)
        dw_row_s8(acc, (const int8_t *)row, lo, hi, sw, shift, zp, wv);
    else
        dw_row_u8(acc, row, lo, hi, sw, shift, zp, wv);
}

static void dw_nchw(const pa_qconv2d_t *q, const int16_t *wc, const int32_t *bias,
                    const float *scale, const uint8_t *x, void *y, int32_t *acc,
                    _pa_qc_dw_fn interior) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in, Wo = c->w_out;
    const int sgn = q->x_type == PA_Q_S8;
    const int32_t zp = q->x_zp;
    qc_out_t o = qc_out(q);
    /* the interior columns (every tap inside the row: the first tap's left
     * edge, the last one's right edge), all taps at once where a variant
     * has a kernel for them; the others tap by tap */
    const int64_t last = (c->kw - 1) * c->dw - c->pad_left;
    int64_t ilo = (c->pad_left + c->sw - 1) / c->sw;
    int64_t ihi = c->w - 1 - last < 0 ? 0 : (c->w - 1 - last) / c->sw + 1;
    ihi = ihi < Wo ? ihi : Wo;
    if (!interior || c->sw > 2 || ilo >= ihi)
        ilo = ihi = 0;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            const uint8_t *plane = x + (n * C + ch) * c->h * c->w;
            for (int64_t oh = 0; oh < c->h_out; oh++) {
                for (int64_t ow = 0; ow < Wo; ow++)
                    acc[ow] = bias[ch];
                const uint8_t *rows[PA_DW_MAX_TAPS];
                int32_t wr[PA_DW_MAX_TAPS];
                int64_t nr = 0;
                for (int64_t i = 0; i < c->kh; i++) {
                    int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
                    if (ih < 0 || ih >= c->h)
                        continue;
                    const uint8_t *row = plane + ih * c->w;
                    rows[nr] = row;
                    for (int64_t j = 0; j < c->kw; j++) {
                        int32_t wv = wc[(i * c->kw + j) * C + ch];
                        wr[nr * c->kw + j] = wv;
                        int64_t shift = j * c->dw - c->pad_left;   /* iw = ow * sw + shift */
                        int64_t lo = shift >= 0 ? 0 : (-shift + c->sw - 1) / c->sw;
                        int64_t hi = c->w - 1 - shift < 0 ? 0 : (c->w - 1 - shift) / c->sw + 1;
                        hi = hi < Wo ? hi : Wo;
                        /* the columns outside the interior [ilo, ihi) */
                        int64_t e0 = hi < ilo ? hi : ilo, e1 = lo > ihi ? lo : ihi;
                        if (lo < e0)
                            dw_row(acc, row, lo, e0, c->sw, shift, zp, wv, sgn);
                        if (e1 < hi)
                            dw_row(acc, row, e1, hi, c->sw, shift, zp, wv, sgn);
                    }
                    nr++;
                }
                if (ilo < ihi && nr)
                    interior(acc, rows, wr, nr, c->kw, c->dw, c->sw, -c->pad_left, ilo, ihi, zp,
                             sgn);
                int64_t base = ((n * C + ch) * c->h_out + oh) * Wo;
                dw_store(y, base, acc, Wo, scale[ch], &o);
            }
        }
}

/* acc[ch] += (x[ch] - zp) * w[ch], ch < C (modulo 2^32), in blocks of
 * QC_NR (a fixed trip count; the pointers restrict: vectorised). */
#define QC_DW_TAP(NAME, T)                                                                \
    PA_INLINE void NAME(int32_t *restrict acc, const T *restrict x, const int16_t *restrict w, \
                        int64_t C, int32_t zp) {                                           \
        int64_t ch = 0;                                                                    \
        for (; ch + QC_NR <= C; ch += QC_NR)                                               \
            for (int l = 0; l < QC_NR; l++)                                                \
                acc[ch + l] = (int32_t)((uint32_t)acc[ch + l] +                            \
                                        (uint32_t)(((int32_t)x[ch + l] - zp) * w[ch + l])); \
        for (; ch < C; ch++)                                                               \
            acc[ch] = (int32_t)((uint32_t)acc[ch] + (uint32_t)(((int32_t)x[ch] - zp) * w[ch])); \
    }
QC_DW_TAP(dw_tap_s8, int8_t)
QC_DW_TAP(dw_tap_u8, uint8_t)
#undef QC_DW_TAP

PA_MULTIVERSION
static void dw_nhwc(const pa_qconv2d_t *q, const qc_out_t *out, const int16_t *wc,
                    const int32_t *bias, const float *scale, const int32_t *shift,
                    const uint8_t *x, void *y, int32_t *acc) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in;
    const int sgn = q->x_type == PA_Q_S8;
    const int32_t zp = q->x_zp;
    const qc_out_t o = *out;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t oh = 0; oh < c->h_out; oh++)
            for (int64_t ow = 0; ow < c->w_out; ow++) {
                memcpy(acc, bias, (size_t)C * 4);
                for (int64_t i = 0; i < c->kh; i++) {
                    int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
                    if (ih < 0 || ih >= c->h)
                        continue;
                    for (int64_t j = 0; j < c->kw; j++) {
                        int64_t iw = ow * c->sw - c->pad_left + j * c->dw;
                        if (iw < 0 || iw >= c->w)
                            continue;
                        const uint8_t *s = x + ((n * c->h + ih) * c->w + iw) * C;
                        const int16_t *wt = wc + (i * c->kw + j) * C;
                        if (sgn)
                            dw_tap_s8(acc, (const int8_t *)s, wt, C, zp);
                        else
                            dw_tap_u8(acc, s, wt, C, zp);
                    }
                }
                int64_t base = ((n * c->h_out + oh) * c->w_out + ow) * C;
                if (o.fixed)
                    qc_fixed_store(acc, (const int32_t *)scale, shift, C, &o, (uint8_t *)y + base);
                else
                    for (int64_t ch = 0; ch < C; ch++)
                        qc_store(y, base + ch, acc[ch], scale[ch], &o);
            }
}

static void dw_run(const pa_qconv2d_t *q, const void *packed, const uint8_t *x, void *y,
                   void *scratch, _pa_qc_dw_fn interior, _pa_qc_dwplane_fn plane, int avx512) {
    const pa_conv2d_t *c = &q->conv;
    const int64_t C = c->c_in, taps = c->kh * c->kw;
    const int16_t *wc = (const int16_t *)packed;
    const int32_t *bias = (const int32_t *)((const char *)packed + round64((size_t)(C * taps) * 2));
    const float *scale = (const float *)(bias + round64((size_t)C * 4) / 4);
    /* FIXED modes: scale holds the multipliers, the shifts follow (NHWC
     * only: the plane and row paths, NCHW, never see one) */
    const int32_t *shift = (const int32_t *)scale + round64((size_t)C * 4) / 4;
    qc_out_t out = qc_out(q);
    out.avx512 = avx512;
    const qc_dw_geo_t g = dw_geo(q);
    _pa_qc_plane_t pg;
    if (plane && dw_plane_geo(q, &pg)) {
        plane(q, &pg, wc, bias, scale, x, y, (int16_t *)scratch);
        return;
    }
    if (dw_by_rows(q) || (!g.rows && q->conv.layout == PA_LAYOUT_NCHW)) {
        dw_nchw(q, wc, bias, scale, x, y, (int32_t *)scratch, interior);
        return;
    }
    if (!g.rows || dw_by_pixels(q, &g)) {
        dw_nhwc(q, &out, wc, bias, scale, shift, x, y, (int32_t *)scratch);
        return;
    }
    int64_t off[PA_DW_MAX_TAPS];
    for (int64_t i = 0; i < c->kh; i++)
        for (int64_t j = 0; j < c->kw; j++)
            off[i * c->kw + j] = (i * c->dh * g.wp + j * c->dw) * C;
    const int64_t img_bytes = C * c->h * c->w;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t r0 = 0; r0 < c->h_out; r0 += g.rows) {
            int64_t r1 = r0 + g.rows < c->h_out ? r0 + g.rows : c->h_out;
            dw_fill(q, &g, x + n * img_bytes, r0 * c->sh - c->pad_top, dw_rows_in(c, r1 - r0),
                    (int16_t *)scratch);
            dw_band(q, &out, wc, bias, scale, shift, (const int16_t *)scratch, off, g.wp, r0, r1,
                    n, y);
        }
}

/* -- runs ----------------------------------------------------------------- */

pa_status_t _pa_qconv2d_run_isa(const pa_qconv2d_t *q, const void *packed, const void *x,
                                void *y, void *scratch, size_t scratch_size, int isa) {
    size_t need = pa_qconv2d_scratch_size(q);
    if (need == (size_t)-1 || !packed || !x || !y || scratch_size < need ||
        (need && !scratch) || (isa != 0 && isa != 1))
        return PA_ERR_INVALID;
    if (isa == 1 && !_pa_avx512vnni_usable())
        return PA_ERR_STATE;
    if (qc_depthwise(q))
        dw_run(q, packed, (const uint8_t *)x, y, scratch, isa == 1 ? _pa_qc_dw_vnni : NULL,
               isa == 1 ? _pa_qc_dwplane_vnni : NULL, isa);
    else
        gemm_run(q, packed, (const uint8_t *)x, y, scratch,
                 isa == 1 ? _pa_qc_tile_vnni : qc_tile_portable, isa);
    return PA_OK;
}

pa_status_t pa_qconv2d_run(const pa_qconv2d_t *q, const void *packed, const void *x, void *y,
                           void *scratch, size_t scratch_size, pa_workers_t *workers) {
    (void)workers;
    return _pa_qconv2d_run_isa(q, packed, x, y, scratch, scratch_size,
                               _pa_avx512vnni_usable() ? 1 : 0);
}
