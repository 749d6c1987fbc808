/* kernels/qconv_nchw.c -- the 8-bit convolution's NCHW panel path: NCHW
 * convolutions (not depthwise) that are 1x1 or have short rows (K at most
 * QC_NCHW_MAX_K) and at least QC_NCHW_MIN_PX output pixels.
 *
 * The GEMM driver of qconv.c works on pixel rows (NHWC): an NCHW image is
 * transposed to NHWC first and every output tile is scattered back one
 * byte per plane, which took most of a 1x1 layer's time (16 -> 32
 * channels at 160x160: 0.9 ms) and, with windows of 3 channels, most of a
 * first 3x3 layer's.  Here the pixels are the vector lanes instead: per
 * group and block of output pixels, each row of K (the image's planes
 * themselves for a 1x1 convolution at stride 1 without padding, else a
 * row of the window's byte at every pixel, padding as the zero point) is
 * interleaved by 4 into a panel of tiles of QC_PX pixels (qconv.h); a tile
 * multiplies it by QC_PMR output channels of the weights pa_qconv2d_pack
 * packed (the same blocks as the NHWC tiles'), and its accumulators are
 * runs of pixels of one output plane: requantized and stored as they lie.
 * The zero-point terms and the requantization are qconv.c's, so the bits
 * are the same as on its path (tests/c/kernels/test_qconv.c).
 */
#include "qconv.h"

/* Bytes of one panel (about L2's share of a block), and its most pixels. */
#define QC_PANEL_BYTES (96 << 10)
#define QC_PANEL_MAX_PX (QC_PX * 32)
/* The largest K of a convolution other than 1x1 the path takes: beyond
 * it the NHWC rows (runs of kw * c_in bytes per window row) are cheaper
 * to gather than K rows of pixels. */
#define QC_NCHW_MAX_K 128
/* The fewest output pixels (fewer: a tile's lanes mostly idle). */
#define QC_NCHW_MIN_PX 32

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static int64_t kdim(const pa_qconv2d_t *q) {
    return q->conv.kh * q->conv.kw * (q->conv.c_in / q->conv.groups);
}

int _pa_qc_nchw_takes(const pa_qconv2d_t *q) {
    const pa_conv2d_t *c = &q->conv;
    if (c->layout != PA_LAYOUT_NCHW || _pa_conv2d_is_depthwise(c))
        return 0;
    return c->h_out * c->w_out >= QC_NCHW_MIN_PX &&
           ((c->kh == 1 && c->kw == 1) || kdim(q) <= QC_NCHW_MAX_K);
}

/* Pixels of one block: a whole number of tiles. */
static int64_t block_px(const pa_qconv2d_t *q) {
    int64_t kq = (kdim(q) + 3) / 4, hwo = q->conv.h_out * q->conv.w_out;
    int64_t pb = QC_PANEL_BYTES / (kq * 4 * QC_PX) * QC_PX;
    int64_t all = (hwo + QC_PX - 1) / QC_PX * QC_PX;
    pb = pb < QC_PX ? QC_PX : pb > QC_PANEL_MAX_PX ? QC_PANEL_MAX_PX : pb;
    return pb < all ? pb : all;
}

static size_t panel_bytes(const pa_qconv2d_t *q) {
    return round64((size_t)(block_px(q) * ((kdim(q) + 3) / 4) * 4));
}

size_t _pa_qc_nchw_scratch(const pa_qconv2d_t *q) {
    size_t pb = (size_t)block_px(q);
    return panel_bytes(q) + round64(pb * 4) + round64(pb * 4);   /* + row sums + 4 rows */
}

/* The plain case: the output's pixels are the input's (1x1, stride 1, no
 * padding, same size), so a row of K is a plane. */
static int plain(const pa_conv2d_t *c) {
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pad_top == 0 &&
           c->pad_left == 0 && c->h_out == c->h && c->w_out == c->w;
}

/* Row k of group g for the pixels [p0, p0 + pb) of image img into dst
 * (bytes as in the image; padding as `pad`, which the flip takes to the
 * zero point). */
static void fill_row(const pa_conv2d_t *c, const uint8_t *img, int64_t g, int64_t k, int64_t p0,
                     int64_t pb, uint8_t pad, uint8_t *restrict dst) {
    const int64_t cg = c->c_in / c->groups, ci = k % cg, ij = k / cg;
    const int64_t i = ij / c->kw, j = ij % c->kw, wo = c->w_out;
    const uint8_t *plane = img + (g * cg + ci) * c->h * c->w;
    const int64_t shift = j * c->dw - c->pad_left;      /* iw = ow * sw + shift */
    /* the output columns whose iw is inside the row: [lo, hi) */
    int64_t lo = shift >= 0 ? 0 : (-shift + c->sw - 1) / c->sw;
    int64_t hi = c->w - 1 - shift < 0 ? 0 : (c->w - 1 - shift) / c->sw + 1;
    hi = hi < wo ? hi : wo;
    lo = lo < hi ? lo : hi;
    for (int64_t p = p0, end = p0 + pb; p < end;) {
        int64_t oh = p / wo, ow = p % wo, n = wo - ow < end - p ? wo - ow : end - p;
        int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
        if (ih < 0 || ih >= c->h) {
            memset(dst, pad, (size_t)n);
        } else {
            const uint8_t *row = plane + ih * c->w;
            int64_t a = lo > ow ? lo : ow, b = hi < ow + n ? hi : ow + n;
            a = a < ow + n ? a : ow + n;
            b = b > a ? b : a;
            memset(dst, pad, (size_t)(a - ow));
            if (c->sw == 1)
                memcpy(dst + (a - ow), row + a + shift, (size_t)(b - a));
            else
                for (int64_t q = a; q < b; q++)
                    dst[q - ow] = row[q * c->sw + shift];
            memset(dst + (b - ow), pad, (size_t)(ow + n - b));
        }
        dst += n;
        p += n;
    }
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Step g of the panel from the 4 rows s (pb bytes each, flipped by xo):
 * pixel i's 4 bytes at tile i / QC_PX, offset (g * QC_PX + i % QC_PX) * 4;
 * a last tile's pixels past pb as zeros. */
static void interleave(const uint8_t *const s[4], int64_t pb, int64_t kq, int64_t g, uint8_t xo,
                       uint8_t *panel) {
    const int64_t tstride = kq * QC_PX * 4, end = (pb + QC_PX - 1) / QC_PX * QC_PX;
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128i flip = _mm_set1_epi8((char)xo);
    for (; i + 16 <= pb; i += 16) {
        __m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s[0] + i)), flip);
        __m128i a1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s[1] + i)), flip);
        __m128i a2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s[2] + i)), flip);
        __m128i a3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(s[3] + i)), flip);
        __m128i l01 = _mm_unpacklo_epi8(a0, a1), h01 = _mm_unpackhi_epi8(a0, a1);
        __m128i l23 = _mm_unpacklo_epi8(a2, a3), h23 = _mm_unpackhi_epi8(a2, a3);
        uint8_t *d = panel + (i / QC_PX) * tstride + (g * QC_PX + i % QC_PX) * 4;
        _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(l01, l23));
        _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(l01, l23));
        _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(h01, h23));
        _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(h01, h23));
    }
#endif
    for (; i < end; i++) {
        uint8_t *d = panel + (i / QC_PX) * tstride + (g * QC_PX + i % QC_PX) * 4;
        for (int t = 0; t < 4; t++)
            d[t] = i < pb ? (uint8_t)(s[t][i] ^ xo) : 0;
    }
}

/* The panel of group g's pixels [p0, p0 + pb) of image img; rows: 4 rows
 * of pb bytes of scratch. */
static void build_panel(const _pa_qc_gemm_t *R, const uint8_t *img, int64_t g, int64_t p0,
                        int64_t pb, uint8_t *panel, uint8_t *rows) {
    const pa_conv2d_t *c = &R->q->conv;
    const int64_t cg = c->c_in / c->groups, plane = c->h * c->w;
    const int is_plain = plain(c);
    const uint8_t pad = (uint8_t)(R->zu ^ R->xo);
    for (int64_t g4 = 0; g4 < R->kq; g4++) {
        const uint8_t *s[4];
        for (int t = 0; t < 4; t++) {
            int64_t k = 4 * g4 + t;
            uint8_t *row = rows + t * pb;
            if (k >= R->K) {                /* past K: bytes that flip to 0 */
                memset(row, R->xo, (size_t)pb);
                s[t] = row;
            } else if (is_plain) {
                s[t] = img + (g * cg + k) * plane + p0;
            } else {
                fill_row(c, img, g, k, p0, pb, pad, row);
                s[t] = row;
            }
        }
        interleave(s, pb, R->kq, g4, R->xo, panel);
    }
}

/* rs[i] = the sum of pixel i's K bytes in the panel (pb pixels). */
PA_MULTIVERSION
static void panel_row_sums(const uint8_t *panel, int64_t kq, int64_t pb, int32_t *rs) {
    for (int64_t t0 = 0; t0 < pb; t0 += QC_PX) {
        int32_t s[QC_PX] = {0};
        const uint8_t *p = panel + (t0 / QC_PX) * kq * QC_PX * 4;
        for (int64_t g = 0; g < kq; g++, p += QC_PX * 4)
            for (int i = 0; i < QC_PX; i++)
                s[i] += p[4 * i] + p[4 * i + 1] + p[4 * i + 2] + p[4 * i + 3];
        memcpy(rs + t0, s, sizeof s);
    }
}

static void ptile_portable(const uint8_t *panel, int64_t kq, const int8_t *w, int mr, int npx,
                           int32_t acc[QC_PMR][QC_PX]) {
    (void)npx;
    for (int r = 0; r < mr; r++)
        memset(acc[r], 0, sizeof acc[r]);
    for (int64_t g = 0; g < kq; g++) {
        const uint8_t *a = panel + g * QC_PX * 4;
        const int8_t *wg = w + g * QC_NR * 4;
        for (int r = 0; r < mr; r++) {
            const int32_t w0 = wg[4 * r], w1 = wg[4 * r + 1], w2 = wg[4 * r + 2],
                          w3 = wg[4 * r + 3];
            for (int i = 0; i < QC_PX; i++)
                acc[r][i] += a[4 * i] * w0 + a[4 * i + 1] * w1 + a[4 * i + 2] * w2 +
                             a[4 * i + 3] * w3;
        }
    }
}

/* dst[i] (i < npx, of the output type) = the requantized
 * acc[i] + corr - zp * rs[i] (over the whole tile: vectorised). */
PA_MULTIVERSION
static void nchw_epilogue(const _pa_qc_gemm_t *R, const int32_t *restrict acc, uint32_t corr,
                          uint32_t zp, const int32_t *restrict rs, float scale, int npx,
                          void *dst) {
    int32_t v[QC_PX];
    for (int i = 0; i < QC_PX; i++)
        v[i] = (int32_t)((uint32_t)acc[i] + corr - zp * (uint32_t)rs[i]);
    if (R->y_type == PA_Q_S32) {
        memcpy(dst, v, (size_t)npx * 4);
        return;
    }
    const float lo = R->lo, hi = R->hi;
    const int32_t yz = R->y_zp;
    uint8_t b[QC_PX];
    for (int i = 0; i < QC_PX; i++)
        b[i] = (uint8_t)_pa_qc_requant(v[i], scale, lo, hi, yz);
    memcpy(dst, b, (size_t)npx);
}

/* Output channels [o0, o0 + m) of group g (m <= QC_PMR, in weight block
 * wb at lane l0) over the block's pixels [p0, p0 + pb). */
static void channel_tile(const _pa_qc_gemm_t *R, _pa_qc_ptile_fn tile, const uint8_t *panel,
                         const int32_t *rs, int64_t lane0, const int8_t *wb, int m, void *yimg,
                         int64_t o0, int64_t p0, int64_t pb) {
    static const int32_t zeros[QC_PX];
    const int64_t esize = R->y_type == PA_Q_S32 ? 4 : 1, hwo = R->hwo;
    uint32_t corr[QC_PMR], zp[QC_PMR];
    for (int r = 0; r < m; r++) {
        int64_t l = lane0 + r;
        corr[r] = (uint32_t)R->bias[l] - (uint32_t)R->zu * (uint32_t)R->colsum[l] +
                  (uint32_t)R->K * (uint32_t)R->zu * (uint32_t)R->zp[l];
        zp[r] = R->need_rs ? (uint32_t)R->zp[l] : 0;
    }
    int32_t acc[QC_PMR][QC_PX] = {{0}};     /* (a tile of npx < QC_PX: lanes left) */
    for (int64_t t0 = 0; t0 < pb; t0 += QC_PX) {
        int npx = (int)(pb - t0 < QC_PX ? pb - t0 : QC_PX);
        tile(panel + (t0 / QC_PX) * R->kq * QC_PX * 4, R->kq, wb, m, npx, acc);
        const int32_t *rst = R->need_rs ? rs + t0 : zeros;
        for (int r = 0; r < m; r++)
            nchw_epilogue(R, acc[r], corr[r], zp[r], rst, R->scale[lane0 + r], npx,
                          (char *)yimg + ((o0 + r) * hwo + p0 + t0) * esize);
    }
}

void _pa_qc_nchw_run(const _pa_qc_gemm_t *R, const uint8_t *x, void *y, void *scratch,
                     int isa) {
    const pa_conv2d_t *c = &R->q->conv;
    _pa_qc_ptile_fn tile = isa == 1 ? _pa_qc_ptile_vnni : ptile_portable;
    const int64_t pbmax = block_px(R->q), esize = R->y_type == PA_Q_S32 ? 4 : 1;
    uint8_t *panel = (uint8_t *)scratch;
    int32_t *rs = (int32_t *)(panel + panel_bytes(R->q));
    uint8_t *rows = (uint8_t *)rs + round64((size_t)pbmax * 4);
    for (int64_t n = 0; n < c->n; n++) {
        const uint8_t *img = x + n * c->c_in * c->h * c->w;
        char *yimg = (char *)y + n * c->c_out * R->hwo * esize;
        for (int64_t g = 0; g < R->G; g++)
            for (int64_t p0 = 0; p0 < R->hwo; p0 += pbmax) {
                int64_t pb = R->hwo - p0 < pbmax ? R->hwo - p0 : pbmax;
                build_panel(R, img, g, p0, pb, panel, rows);
                if (R->need_rs)
                    panel_row_sums(panel, R->kq, pb, rs);
                for (int64_t o = 0; o < R->cog; o += QC_PMR) {
                    int m = (int)(R->cog - o < QC_PMR ? R->cog - o : QC_PMR);
                    int64_t b = o / QC_NR, lane0 = (g * R->nbk + b) * QC_NR + o % QC_NR;
                    const int8_t *wb = R->w + ((g * R->nbk + b) * R->kq) * QC_NR * 4 +
                                       (o % QC_NR) * 4;
                    channel_tile(R, tile, panel, rs, lane0, wb, m, yimg, g * R->cog + o, p0,
                                 pb);
                }
            }
    }
}
