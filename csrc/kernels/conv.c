/* kernels/conv.c -- direct 2-D convolution (any stride, padding, dilation,
 * groups; NCHW or NHWC) with the bias and activation fused, no workspace.
 *
 * The kernel is an implicit GEMM: a tile of PA_CONV_MR output pixels of one
 * output row times PA_VEC output channels of one group is accumulated in
 * registers over the kernel taps and the group's input channels, each step
 * broadcasting one input value per pixel against one row of PA_VEC packed
 * weights.  Nothing is copied: each pixel of the tile reads the input
 * through a pointer and a channel stride of its own, and a tap that falls
 * in the padding reads a zero through stride 0, so padding costs no
 * workspace and no branch in the inner loop.  The same code serves both
 * layouts (only the strides differ); stores go through the same strides.
 * A pixel tile past the end of a row repeats its last pixel (computed,
 * not stored).  Weights are packed once (pa_conv2d_pack): per group and
 * block of PA_VEC output channels, the block's bias then its weights
 * [kh][kw][c_in / groups][PA_VEC], zero-filled past the group's channels.
 *
 * Depthwise convolutions take the kernels of dwconv.c and
 * pointwise ones (1x1, stride 1, unpadded, groups 1) the packed SGEMM of
 * gemm.c (NCHW) or gemm_nhwc.c (NHWC), which pack their
 * own way; the dispatch and the geometry checks live here (the pointwise
 * and disjoint-window tests inline in internal.h, as the kernels ask too).
 */
#include "internal.h"

#define PA_CONV_MR 6

/* -- geometry ------------------------------------------------------------ */

static int mul_ok(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

int _pa_conv2d_valid(const pa_conv2d_t *c) {
    if (!c || (c->layout != PA_LAYOUT_NCHW && c->layout != PA_LAYOUT_NHWC))
        return 0;
    if (c->n < 1 || c->c_in < 1 || c->h < 1 || c->w < 1 || c->c_out < 1 || c->h_out < 1 ||
        c->w_out < 1 || c->kh < 1 || c->kw < 1 || c->sh < 1 || c->sw < 1 || c->dh < 1 ||
        c->dw < 1 || c->pad_top < 0 || c->pad_left < 0 || c->groups < 1)
        return 0;
    if (c->groups != 1 && (c->c_in % c->groups || c->c_out % c->groups))
        return 0;
    if ((unsigned)c->act.kind > (unsigned)PA_ACT_GELU)
        return 0;
    int64_t t;
    const int64_t lim = (int64_t)1 << 40;
    if (!mul_ok(c->n, c->c_in, &t) || !mul_ok(t, c->h, &t) || !mul_ok(t, c->w, &t) || t > lim)
        return 0;
    if (!mul_ok(c->n, c->c_out, &t) || !mul_ok(t, c->h_out, &t) || !mul_ok(t, c->w_out, &t) ||
        t > lim)
        return 0;
    if (!mul_ok(c->kh, c->kw, &t) || !mul_ok(t, c->c_in, &t) || t > lim)
        return 0;
    /* the weights too: every packed size is about their count */
    if (!mul_ok(c->kh * c->kw, c->groups == 1 ? c->c_in : c->c_in / c->groups, &t) ||
        !mul_ok(t, c->c_out, &t) || t > lim)
        return 0;
    /* the first and last taps' coordinates stay representable (products,
     * not divisions: a streaming model validates a dozen small
     * convolutions per step) */
    int64_t a, b, d, e;
    if (!mul_ok(c->h_out, c->sh, &a) || a > lim || !mul_ok(c->kh, c->dh, &b) || b > lim ||
        !mul_ok(c->w_out, c->sw, &d) || d > lim || !mul_ok(c->kw, c->dw, &e) || e > lim ||
        c->pad_top > lim || c->pad_left > lim)
        return 0;
    return 1;
}

int _pa_conv2d_is_depthwise(const pa_conv2d_t *c) {
    return c->groups == c->c_in && c->c_out == c->c_in && c->groups > 1 &&
           c->kh * c->kw <= PA_DW_MAX_TAPS;
}

/* A convolution with at most PA_CONV_DOT_MAX output channels (a
 * segmentation or heatmap head: 8 -> 1 channel at 256x256) would leave
 * all but a few lanes of the PA_VEC-channel register tile idle (a 16x
 * waste for one channel: 5.5 ms where im2col + BLAS took 3.1).  In NHWC
 * with groups 1 and no column dilation the window row of an interior
 * pixel is kw * c_in consecutive floats, as is each output channel's
 * weight row (OHWI): each output is kh dot products of that length,
 * PA_DOT_W lanes wide, every output channel from the same loads (rows
 * shorter than PA_DOT_W floats, e.g. one input channel, keep the tile). */
#define PA_CONV_DOT_MAX 4
#define PA_DOT_W 8
#define PA_DOT_P 4     /* pixels of a tile of one output channel */
_Static_assert(PA_DOT_W == 8, "dot_pixel and dot_tile sum eight lanes");

static int is_dot(const pa_conv2d_t *c) {
    return c->layout == PA_LAYOUT_NHWC && c->groups == 1 && c->c_out <= PA_CONV_DOT_MAX &&
           c->dw == 1 && c->kw * c->c_in >= PA_DOT_W && !_pa_conv2d_is_depthwise(c) &&
           !_pa_conv2d_is_pointwise(c);
}

static int64_t blocks_per_group(const pa_conv2d_t *c) {
    return (c->c_out / c->groups + PA_VEC - 1) / PA_VEC;
}

size_t pa_conv2d_packed_size(const pa_conv2d_t *c) {
    if (!_pa_conv2d_valid(c))
        return 0;
    if (_pa_conv2d_is_depthwise(c))
        return _pa_dwconv_packed_size(c);
    if (_pa_conv2d_is_pointwise(c))
        return _pa_gemm_packed_size(c);
    if (is_dot(c))
        return (size_t)(c->c_out * (1 + c->kh * c->kw * c->c_in));
    if (_pa_fewin_fits(c))
        return _pa_fewin_packed_size(c);
    if (_pa_conv2d_is_disjoint(c) || _pa_conv2d_is_padded_window(c))
        return _pa_gemm_packed_size(c);
    int64_t cg = c->c_in / c->groups;
    int64_t per_block = PA_VEC * (1 + c->kh * c->kw * cg);
    return (size_t)(c->groups * blocks_per_group(c) * per_block + 1);
}

pa_status_t pa_conv2d_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                           float *packed, size_t packed_size) {
    size_t need = pa_conv2d_packed_size(c);
    if (!need || !weight || !packed || packed_size < need)
        return PA_ERR_INVALID;
    if (_pa_conv2d_is_depthwise(c))
        return _pa_dwconv_pack(c, weight, bias, packed);
    if (_pa_conv2d_is_pointwise(c))
        return _pa_gemm_pack(c, weight, bias, packed);
    if (is_dot(c)) {    /* the bias, then the weights as given (OHWI) */
        size_t nw = (size_t)(c->c_out * c->kh * c->kw * c->c_in);
        for (int64_t co = 0; co < c->c_out; co++)
            packed[co] = bias ? bias[co] : 0.0f;
        memcpy(packed + c->c_out, weight, nw * sizeof *packed);
        return PA_OK;
    }
    if (_pa_fewin_fits(c))
        return _pa_fewin_pack(c, weight, bias, packed);
    if (_pa_conv2d_is_disjoint(c) || _pa_conv2d_is_padded_window(c))
        return _pa_gemm_pack(c, weight, bias, packed);
    int64_t cg = c->c_in / c->groups, cog = c->c_out / c->groups;
    int64_t k = c->kh * c->kw * cg; /* (tap, input channel) rows */
    float *p = packed;
    for (int64_t g = 0; g < c->groups; g++)
        p = _pa_pack_blocks(p, weight + g * cog * k, bias ? bias + g * cog : NULL, cog, k,
                            PA_VEC);
    *p = 0.0f; /* the value padded taps read */
    return PA_OK;
}

/* -- the register tile ----------------------------------------------------- */

typedef struct {
    const pa_conv2d_t *c;
    const float *packed, *x;
    float *y;
    int64_t cs, rs, ps;    /* input strides: channel, row, pixel (floats)  */
    int64_t ocs, ops;      /* output strides: channel, pixel              */
    const float *zero;     /* a 0.0f the padded taps read (stride 0)     */
    int merge_row;         /* NHWC, dilation 1 and groups 1: a kernel row's
                              taps are consecutive in memory             */
} conv_job_t;

/* acc[p][v] += sum over ci of x_p[ci * xs_p] * w[ci][v]: the inner loop. */
PA_INLINE void tile_taps(const float *const *xp, const int64_t *xs, int64_t cg,
                         const float *restrict w, float acc[PA_CONV_MR][PA_VEC]) {
    const float *x0 = xp[0], *x1 = xp[1], *x2 = xp[2], *x3 = xp[3], *x4 = xp[4], *x5 = xp[5];
    const int64_t s0 = xs[0], s1 = xs[1], s2 = xs[2], s3 = xs[3], s4 = xs[4], s5 = xs[5];
    for (int64_t ci = 0; ci < cg; ci++) {
        const float *restrict wv = w + ci * PA_VEC;
        const float a0 = x0[ci * s0], a1 = x1[ci * s1], a2 = x2[ci * s2];
        const float a3 = x3[ci * s3], a4 = x4[ci * s4], a5 = x5[ci * s5];
        for (int v = 0; v < PA_VEC; v++) {
            acc[0][v] += a0 * wv[v];
            acc[1][v] += a1 * wv[v];
            acc[2][v] += a2 * wv[v];
            acc[3][v] += a3 * wv[v];
            acc[4][v] += a4 * wv[v];
            acc[5][v] += a5 * wv[v];
        }
    }
}

/* One tile: pixels ow0.. of output row (img, oh), block blk of group g.
 * Inline: it must be compiled inside each clone of conv_rows. */
PA_INLINE void conv_tile(const conv_job_t *j, int64_t img, int64_t oh, int64_t ow0, int64_t g,
                      int64_t blk) {
    const pa_conv2d_t *c = j->c;
    int64_t cg = c->c_in / c->groups, cog = c->c_out / c->groups;
    int64_t taps = c->kh * c->kw;
    const float *pk = j->packed + (g * blocks_per_group(c) + blk) * PA_VEC * (1 + taps * cg);
    float acc[PA_CONV_MR][PA_VEC];
    for (int p = 0; p < PA_CONV_MR; p++)
        for (int v = 0; v < PA_VEC; v++)
            acc[p][v] = pk[v];
    const float *w = pk + PA_VEC;
    const float *xg = j->x + img * c->c_in * c->h * c->w + g * cg * j->cs;
    int64_t ih0 = oh * c->sh - c->pad_top;
    int64_t last = c->w_out - 1;
    for (int64_t i = 0; i < c->kh; i++) {
        int64_t ih = ih0 + i * c->dh;
        int row_ok = ih >= 0 && ih < c->h;
        if (row_ok && j->merge_row) {
            /* NHWC, dilation 1: the kw taps of this row read kw * cg
             * consecutive floats per pixel -- one run of the inner loop
             * when every pixel's window row is inside the image */
            int64_t iw_first = ow0 * c->sw - c->pad_left;
            int64_t iw_last = (ow0 + PA_CONV_MR - 1 < last ? ow0 + PA_CONV_MR - 1 : last) *
                              c->sw - c->pad_left + c->kw - 1;
            if (iw_first >= 0 && iw_last < c->w) {
                const float *xp[PA_CONV_MR];
                int64_t xs[PA_CONV_MR];
                for (int p = 0; p < PA_CONV_MR; p++) {
                    int64_t ow = ow0 + p < last ? ow0 + p : last;
                    xp[p] = xg + ih * j->rs + (ow * c->sw - c->pad_left) * j->ps;
                    xs[p] = 1;
                }
                tile_taps(xp, xs, c->kw * cg, w + i * c->kw * cg * PA_VEC, acc);
                continue;
            }
        }
        for (int64_t jj = 0; jj < c->kw; jj++) {
            const float *xp[PA_CONV_MR];
            int64_t xs[PA_CONV_MR];
            for (int p = 0; p < PA_CONV_MR; p++) {
                int64_t ow = ow0 + p < last ? ow0 + p : last;
                int64_t iw = ow * c->sw - c->pad_left + jj * c->dw;
                int ok = row_ok && iw >= 0 && iw < c->w;
                xp[p] = ok ? xg + ih * j->rs + iw * j->ps : j->zero;
                xs[p] = ok ? j->cs : 0;
            }
            tile_taps(xp, xs, cg, w + (i * c->kw + jj) * cg * PA_VEC, acc);
        }
    }
    _pa_act_block(&acc[0][0], PA_CONV_MR * PA_VEC, &c->act);
    int64_t np = c->w_out - ow0 < PA_CONV_MR ? c->w_out - ow0 : PA_CONV_MR;
    int64_t nv = cog - blk * PA_VEC < PA_VEC ? cog - blk * PA_VEC : PA_VEC;
    float *yb = j->y + img * c->c_out * c->h_out * c->w_out + (g * cog + blk * PA_VEC) * j->ocs +
                (oh * c->w_out + ow0) * j->ops;
    for (int64_t p = 0; p < np; p++)
        for (int64_t v = 0; v < nv; v++)
            yb[p * j->ops + v * j->ocs] = acc[p][v];
}

PA_MULTIVERSION
static void conv_rows(void *ctx, int64_t begin, int64_t end) {
    const conv_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    int64_t nb = blocks_per_group(c);
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / c->h_out, oh = r % c->h_out;
        for (int64_t ow0 = 0; ow0 < c->w_out; ow0 += PA_CONV_MR)
            for (int64_t g = 0; g < c->groups; g++)
                for (int64_t b = 0; b < nb; b++)
                    conv_tile(j, img, oh, ow0, g, b);
    }
}

/* -- few output channels: dot products ------------------------------------ */

typedef struct {
    const pa_conv2d_t *c;
    const float *packed, *x;
    float *y;
} dot_job_t;

/* s[co][lane] += x[0 .. n) . w[co * ws ..] by lanes (the tail of n past a
 * multiple of PA_DOT_W into t[co]), CO output channels. */
PA_INLINE void dot_run(const float *restrict x, const float *restrict w, int64_t ws, int64_t n,
                       float s[PA_CONV_DOT_MAX][PA_DOT_W], float *t, int CO) {
    int64_t k = 0;
    for (; k + PA_DOT_W <= n; k += PA_DOT_W)
        for (int o = 0; o < CO; o++)
            for (int v = 0; v < PA_DOT_W; v++)
                s[o][v] += x[k + v] * w[o * ws + k + v];
    for (int o = 0; o < CO; o++)
        for (int64_t q = k; q < n; q++)
            t[o] += x[q] * w[o * ws + q];
}

/* One output pixel: the lanes are summed once, in a fixed order (the same
 * result on any thread). */
PA_INLINE void dot_pixel(const dot_job_t *j, const float *ximg, int64_t oh, int64_t ow,
                         float *yp, int CO) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in, taps = c->kh * c->kw, ws = taps * C;
    const float *w = j->packed + c->c_out;
    float s[PA_CONV_DOT_MAX][PA_DOT_W], acc[PA_CONV_DOT_MAX];
    for (int o = 0; o < CO; o++) {
        acc[o] = 0.0f;
        for (int v = 0; v < PA_DOT_W; v++)
            s[o][v] = 0.0f;
    }
    int64_t iw0 = ow * c->sw - c->pad_left;
    int whole = iw0 >= 0 && iw0 + c->kw <= c->w;
    for (int64_t i = 0; i < c->kh; i++) {
        int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
        if (ih < 0 || ih >= c->h)
            continue;
        const float *xr = ximg + ih * c->w * C;
        if (whole) {
            dot_run(xr + iw0 * C, w + i * c->kw * C, ws, c->kw * C, s, acc, CO);
            continue;
        }
        for (int64_t jj = 0; jj < c->kw; jj++) {
            int64_t iw = iw0 + jj;
            if (iw >= 0 && iw < c->w)
                dot_run(xr + iw * C, w + (i * c->kw + jj) * C, ws, C, s, acc, CO);
        }
    }
    for (int o = 0; o < CO; o++) {
        float a = (s[o][0] + s[o][4]) + (s[o][1] + s[o][5]);
        float b = (s[o][2] + s[o][6]) + (s[o][3] + s[o][7]);
        acc[o] = j->packed[o] + (acc[o] + (a + b));
    }
    _pa_act_block(acc, (size_t)CO, &c->act);
    for (int o = 0; o < CO; o++)
        yp[o] = acc[o];
}

/* P column-interior pixels ow, ow + 1, .. at once (independent sums, so
 * the adds of one pixel do not wait on each other); the same order of
 * operations per pixel as dot_pixel. */
PA_INLINE void dot_tile(const dot_job_t *j, const float *ximg, int64_t oh, int64_t ow,
                        float *yp, int CO, int P) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in, ws = c->kh * c->kw * C, n = c->kw * C, ps = c->sw * C;
    const float *w = j->packed + c->c_out;
    float s[PA_DOT_P][PA_CONV_DOT_MAX][PA_DOT_W], acc[PA_DOT_P][PA_CONV_DOT_MAX];
    for (int p = 0; p < P; p++)
        for (int o = 0; o < CO; o++) {
            acc[p][o] = 0.0f;
            for (int v = 0; v < PA_DOT_W; v++)
                s[p][o][v] = 0.0f;
        }
    for (int64_t i = 0; i < c->kh; i++) {
        int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
        if (ih < 0 || ih >= c->h)
            continue;
        const float *restrict xr = ximg + (ih * c->w + ow * c->sw - c->pad_left) * C;
        const float *restrict wr = w + i * c->kw * C;
        int64_t k = 0;
        for (; k + PA_DOT_W <= n; k += PA_DOT_W)
            for (int p = 0; p < P; p++)
                for (int o = 0; o < CO; o++)
                    for (int v = 0; v < PA_DOT_W; v++)
                        s[p][o][v] += xr[p * ps + k + v] * wr[o * ws + k + v];
        for (int p = 0; p < P; p++)
            for (int o = 0; o < CO; o++)
                for (int64_t q = k; q < n; q++)
                    acc[p][o] += xr[p * ps + q] * wr[o * ws + q];
    }
    for (int p = 0; p < P; p++) {
        for (int o = 0; o < CO; o++) {
            const float *l = s[p][o];
            float a = (l[0] + l[4]) + (l[1] + l[5]), b = (l[2] + l[6]) + (l[3] + l[7]);
            acc[p][o] = j->packed[o] + (acc[p][o] + (a + b));
        }
        _pa_act_block(acc[p], (size_t)CO, &c->act);
        for (int o = 0; o < CO; o++)
            yp[p * c->c_out + o] = acc[p][o];
    }
}

/* One output row: border pixels one by one, interior ones P at a time
 * (P * CO <= PA_DOT_P sums of PA_DOT_W lanes). */
PA_INLINE void dot_row(const dot_job_t *j, const float *ximg, int64_t oh, float *yrow, int CO) {
    const pa_conv2d_t *c = j->c;
    const int P = PA_DOT_P / CO > 0 ? PA_DOT_P / CO : 1;
    int64_t lo = (c->pad_left + c->sw - 1) / c->sw;
    int64_t last = c->w - c->kw + c->pad_left;        /* ow * sw <= last */
    int64_t hi = last < 0 ? 0 : last / c->sw + 1;
    lo = lo < c->w_out ? lo : c->w_out;
    hi = hi < c->w_out ? hi : c->w_out;
    hi = hi > lo ? hi : lo;
    int64_t ow = 0;
    for (; ow < lo; ow++)
        dot_pixel(j, ximg, oh, ow, yrow + ow * c->c_out, CO);
    for (; ow + P <= hi; ow += P)
        dot_tile(j, ximg, oh, ow, yrow + ow * c->c_out, CO, P);
    for (; ow < c->w_out; ow++)
        dot_pixel(j, ximg, oh, ow, yrow + ow * c->c_out, CO);
}

PA_MULTIVERSION
static void conv_dot_rows(void *ctx, int64_t begin, int64_t end) {
    const dot_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / c->h_out, oh = r % c->h_out;
        const float *ximg = j->x + img * c->h * c->w * c->c_in;
        float *yrow = j->y + r * c->w_out * c->c_out;
        switch (c->c_out) {
        case 1: dot_row(j, ximg, oh, yrow, 1); break;
        case 2: dot_row(j, ximg, oh, yrow, 2); break;
        case 3: dot_row(j, ximg, oh, yrow, 3); break;
        default: dot_row(j, ximg, oh, yrow, PA_CONV_DOT_MAX); break;
        }
    }
}

/* The packed SGEMM (pointwise and disjoint-window convolutions) of either layout:
 * gemm_nhwc.c's pixel tiles for NHWC, gemm.c's for NCHW,
 * both over gemm.c's packing. */
static pa_status_t gemm_run(const pa_conv2d_t *c, const float *packed, const float *x,
                            const float *r, int64_t c_res, float *y, pa_workers_t *workers) {
    if (c->layout == PA_LAYOUT_NHWC)
        return _pa_gemm_nhwc_run(c, packed, x, r, c_res, y, workers);
    return _pa_gemm_nchw_run(c, packed, x, r, c_res, y, workers);
}

pa_status_t pa_conv2d_run(const pa_conv2d_t *c, const float *packed, const float *x, float *y,
                          pa_workers_t *workers) {
    if (!_pa_conv2d_valid(c) || !packed || !x || !y)
        return PA_ERR_INVALID;
    if (_pa_conv2d_is_depthwise(c))
        return _pa_dwconv_run(c, packed, x, y, workers);
    if (_pa_conv2d_is_pointwise(c))
        return gemm_run(c, packed, x, NULL, 0, y, workers);
    int64_t rows = c->n * c->h_out;
    double macs = (double)rows * (double)c->w_out * (double)c->c_out * (double)c->kh *
                  (double)c->kw * (double)(c->c_in / c->groups);
    if (is_dot(c)) {
        dot_job_t d = {c, packed, x, y};
        _pa_parallel(_pa_workers_for(workers, macs), rows, conv_dot_rows, &d);
        return PA_OK;
    }
    if (_pa_fewin_fits(c))
        return _pa_fewin_run(c, packed, x, y, workers);
    if (_pa_conv2d_is_disjoint(c) || _pa_conv2d_is_padded_window(c))
        return gemm_run(c, packed, x, NULL, 0, y, workers);
    conv_job_t j = {c, packed, x, y, 0, 0, 0, 0, 0, NULL, 0};
    if (c->layout == PA_LAYOUT_NHWC) {
        j.cs = 1, j.ps = c->c_in, j.rs = c->w * c->c_in;
        j.ocs = 1, j.ops = c->c_out;
        j.merge_row = c->dw == 1 && c->groups == 1;
    } else {
        j.cs = c->h * c->w, j.ps = 1, j.rs = c->w;
        j.ocs = c->h_out * c->w_out, j.ops = 1;
    }
    j.zero = packed + pa_conv2d_packed_size(c) - 1;
    _pa_parallel(_pa_workers_for(workers, macs), rows, conv_rows, &j);
    return PA_OK;
}

pa_status_t pa_conv2d_run_residual(const pa_conv2d_t *c, const float *packed, const float *x,
                                   const float *r, int64_t c_res, float *y,
                                   pa_workers_t *workers) {
    if (!_pa_conv2d_valid(c) || !_pa_conv2d_is_pointwise(c) || !packed || !x || !r || !y ||
        c_res < 1 || c_res > c->c_out)
        return PA_ERR_INVALID;
    return gemm_run(c, packed, x, r, c_res, y, workers);
}
