/* kernels/dwconv.c -- depthwise 2-D convolution (groups = c_in = c_out),
 * any stride, padding and dilation, bias and activation fused, no
 * workspace.
 *
 * A depthwise layer does few multiply-adds per value it reads, so the
 * kernels are built around loads.  NHWC vectorises over channels: a tile
 * of PA_DW_MR output pixels times PA_VEC channels stays in registers while
 * the taps stream past, each tap's weight vector loaded once for the whole
 * tile.  NCHW vectorises along an output row of one channel plane, PA_VEC
 * columns at a time, each tap's weight a scalar, over bands of the plane
 * copied zero-padded to a stack tile (stride-2 rows split into even and
 * odd columns there); short rows of many channels (MobileNets' last
 * stages) instead go through a pixel-major stack tile of PA_VEC channels
 * and the NHWC register tile.  NHWC (and NCHW rows too wide for a band)
 * handle padding by geometry, not by copies: the taps whose rows fall outside the image are
 * skipped per output row, the columns whose taps all fall inside (the
 * interior) run the branch-free tile, and the few border columns run a
 * one-pixel loop that skips the outside taps.  The taps of an output row
 * are one flat list built per row (offsets and weight rows), so the inner
 * loop is the same for 3x3 and 7x7; kernels of more than PA_DW_MAX_TAPS
 * taps go to the direct convolution instead.  Packed weights: bias then
 * one row per tap, each c_in rounded up to PA_VEC floats, zero-filled.
 *
 * The NHWC rows, the NCHW channel blocks and the NCHW bands are walks
 * written once in dwconv.h; this file gives them the portable tiles, and
 * the run at the end takes dwconv_avx512.c's tiles instead where AVX-512
 * is usable (isa.h: there the blocks take rows of up to 28 columns), with
 * the same sums in the same order (the same bits).  Whole planes and
 * single rows (the other NCHW cases) are portable only.
 */
#include "dwconv.h"
#include "isa.h"

#ifndef PA_DW_ROWS
#define PA_DW_ROWS 4                     /* NCHW: output rows per span    */
#endif

static int64_t round_vec(int64_t c) { return (c + PA_VEC - 1) / PA_VEC * PA_VEC; }

size_t _pa_dwconv_packed_size(const pa_conv2d_t *c) {
    return (size_t)(round_vec(c->c_in) * (c->kh * c->kw + 1));
}

pa_status_t _pa_dwconv_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                            float *packed) {
    int64_t cp = round_vec(c->c_in), taps = c->kh * c->kw;
    for (int64_t ch = 0; ch < cp; ch++) {
        packed[ch] = (ch < c->c_in && bias) ? bias[ch] : 0.0f;
        for (int64_t t = 0; t < taps; t++)
            packed[cp + t * cp + ch] = ch < c->c_in ? weight[ch * taps + t] : 0.0f;
    }
    return PA_OK;
}

/* Output columns whose every tap column is inside: [lo, hi), maybe empty. */
static void interior(int64_t n_out, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n,
                     int64_t *lo, int64_t *hi) {
    int64_t a = (pad + s - 1) / s;
    int64_t last = n - 1 - (k - 1) * d + pad;       /* o * s <= last */
    int64_t b = last < 0 ? 0 : last / s + 1;
    *lo = a < n_out ? a : n_out;
    *hi = b < n_out ? b : n_out;
    if (*hi < *lo)
        *hi = *lo;
}

/* -- NHWC: channel vectors ------------------------------------------------- */

/* PA_DW_MR interior pixels times VW channels: x at the tile's first pixel's
 * window column 0 in input row t->row0, channel c0; w and bias at channel c0; y at the first pixel. */
PA_INLINE void nhwc_tile(const dw_taps_t *t, const float *x, int64_t ps, const float *w,
                         const float *bias, float *y, int64_t C, const pa_act_params_t *act,
                         int VW) {
    float acc[PA_DW_MR][PA_VEC];
    for (int p = 0; p < PA_DW_MR; p++)
        for (int v = 0; v < VW; v++)
            acc[p][v] = bias[v];
    for (int64_t k = 0; k < t->n; k++) {
        const float *restrict xq = x + t->xoff[k];
        const float *restrict wv = w + t->woff[k];
        for (int v = 0; v < VW; v++) {
            acc[0][v] += xq[v] * wv[v];
            acc[1][v] += xq[ps + v] * wv[v];
            acc[2][v] += xq[2 * ps + v] * wv[v];
            acc[3][v] += xq[3 * ps + v] * wv[v];
        }
    }
    for (int p = 0; p < PA_DW_MR; p++) {
        _pa_act_block(acc[p], (size_t)VW, act);
        for (int v = 0; v < VW; v++)
            y[p * C + v] = acc[p][v];
    }
}

/* nhwc_tile for VW = PA_VEC (16 channels) with the tile in GNU C vectors
 * of 8 floats: with plain arrays GCC keeps the 4 x 16 accumulators in
 * memory and reloads them at every tap (as gemm.c notes). */
typedef float pa_dw_v8 __attribute__((vector_size(32)));
#define DW_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_dw_v8))

PA_INLINE void nhwc_tile16(const dw_taps_t *t, const float *x, int64_t ps, const float *w,
                           const float *bias, float *y, int64_t C,
                           const pa_act_params_t *act) {
    pa_dw_v8 a0, a1, b0, b1, c0, c1, d0, d1, lo, hi, xv;
    DW_LOAD(lo, bias);
    DW_LOAD(hi, bias + 8);
    a0 = b0 = c0 = d0 = lo;
    a1 = b1 = c1 = d1 = hi;
    for (int64_t k = 0; k < t->n; k++) {
        const float *xq = x + t->xoff[k];
        const float *wv = w + t->woff[k];
        DW_LOAD(lo, wv);
        DW_LOAD(hi, wv + 8);
        DW_LOAD(xv, xq);
        a0 += xv * lo;
        DW_LOAD(xv, xq + 8);
        a1 += xv * hi;
        DW_LOAD(xv, xq + ps);
        b0 += xv * lo;
        DW_LOAD(xv, xq + ps + 8);
        b1 += xv * hi;
        DW_LOAD(xv, xq + 2 * ps);
        c0 += xv * lo;
        DW_LOAD(xv, xq + 2 * ps + 8);
        c1 += xv * hi;
        DW_LOAD(xv, xq + 3 * ps);
        d0 += xv * lo;
        DW_LOAD(xv, xq + 3 * ps + 8);
        d1 += xv * hi;
    }
    float acc[PA_DW_MR][PA_VEC];
    memcpy(acc[0], &a0, 32), memcpy(acc[0] + 8, &a1, 32);
    memcpy(acc[1], &b0, 32), memcpy(acc[1] + 8, &b1, 32);
    memcpy(acc[2], &c0, 32), memcpy(acc[2] + 8, &c1, 32);
    memcpy(acc[3], &d0, 32), memcpy(acc[3] + 8, &d1, 32);
    for (int p = 0; p < PA_DW_MR; p++) {
        _pa_act_block(acc[p], (size_t)PA_VEC, act);
        memcpy(y + p * C, acc[p], sizeof acc[p]);
    }
}

/* One pixel anywhere (border columns skip the taps outside): iw0 is the
 * input column of its window's column 0 (maybe outside), added to the
 * offsets of the taps inside before a pointer is formed from xrow0 (input
 * row t->row0), so only in-range taps are dereferenced. */
PA_INLINE void nhwc_pixel(const dw_taps_t *t, const float *xrow0, int64_t iw0, int64_t W,
                          const float *w, const float *bias, float *y,
                          const pa_act_params_t *act, int64_t C, int VW) {
    float acc[PA_VEC];
    for (int v = 0; v < VW; v++)
        acc[v] = bias[v];
    for (int64_t k = 0; k < t->n; k++) {
        int64_t iw = iw0 + t->col[k];
        if (iw < 0 || iw >= W)
            continue;
        const float *restrict xq = xrow0 + (t->xoff[k] + iw0 * C);
        const float *restrict wv = w + t->woff[k];
        for (int v = 0; v < VW; v++)
            acc[v] += xq[v] * wv[v];
    }
    _pa_act_block(acc, (size_t)VW, act);
    for (int v = 0; v < VW; v++)
        y[v] = acc[v];
}

/* Every channel of one pixel (tile = 0) or of a tile of pixels, in steps
 * of 16, 8, 4 and 1 channels (fixed widths, so each step vectorises). */
PA_INLINE void nhwc_channels(const dw_job_t *j, const dw_taps_t *t, const float *xrow0,
                             float *y, int64_t ow, int tile) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in, iw0 = ow * c->sw - c->pad_left;
    int64_t c0 = 0;
#define PA_DW_STEP(VW)                                                                 \
    for (; c0 + (VW) <= C; c0 += (VW)) {                                               \
        if (tile && (VW) == PA_VEC)                                                    \
            nhwc_tile16(t, xrow0 + iw0 * C + c0, c->sw * C, j->w + c0, j->bias + c0,   \
                        y + c0, C, &c->act);                                           \
        else if (tile)                                                                 \
            nhwc_tile(t, xrow0 + iw0 * C + c0, c->sw * C, j->w + c0, j->bias + c0,     \
                      y + c0, C, &c->act, (VW));                                       \
        else                                                                           \
            nhwc_pixel(t, xrow0 + c0, iw0, c->w, j->w + c0, j->bias + c0, y + c0,      \
                       &c->act, C, (VW));                                              \
    }
    PA_DW_STEP(PA_VEC)
    PA_DW_STEP(8)
    PA_DW_STEP(4)
    PA_DW_STEP(1)
#undef PA_DW_STEP
}

PA_MULTIVERSION
PA_DW_NHWC_TASK(dw_nhwc_rows, nhwc_channels)

/* -- NCHW: row vectors ------------------------------------------------------ */

/* Interior columns [ow0, ow0 + nv) of R output rows (yrs floats apart,
 * their input rows xrs floats apart), nv <= VW, column stride SW (R, VW
 * and SW constants in the callers, so the loads vectorise and the
 * accumulators stay in registers); wt: this channel's tap weights in the
 * order of t; pl: the left pad the row pointer is offset by.  Several rows
 * at once give the adds of independent accumulators to interleave: one
 * row's 9 taps are one chain of dependent adds (MobileNetV2's 384-channel
 * 14x14 layers spent most of their time waiting on it). */
PA_INLINE void nchw_span(const dw_taps_t *t, const float *wt, const float *xrow0, int64_t xrs,
                         float *yrow, int64_t yrs, int R, float b, int64_t ow0, int64_t nv,
                         int64_t pl, int64_t SW, const pa_act_params_t *act, int VW) {
    float acc[PA_DW_ROWS][PA_VEC];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < VW; v++)
            acc[r][v] = b;
    const float *xb = xrow0 + ow0 * SW - pl;
    for (int64_t k = 0; k < t->n; k++) {
        const float wv = wt[k];
        for (int r = 0; r < R; r++) {
            const float *restrict xq = xb + t->xoff[k] + r * xrs;
            for (int64_t v = 0; v < (VW < PA_VEC ? VW : nv); v++)
                acc[r][v] += xq[v * SW] * wv;
        }
    }
    for (int r = 0; r < R; r++) {
        _pa_act_block(acc[r], (size_t)VW, act);
        for (int64_t v = 0; v < nv; v++)
            yrow[r * yrs + ow0 + v] = acc[r][v];
    }
}

/* One border column of one output row. */
static void nchw_pixel(const dw_taps_t *t, const float *wt, const float *xrow0, float *yrow,
                       float b, int64_t ow, const pa_conv2d_t *c) {
    float acc = b;
    int64_t iw0 = ow * c->sw - c->pad_left;
    for (int64_t k = 0; k < t->n; k++) {
        int64_t iw = iw0 + t->col[k];
        if (iw >= 0 && iw < c->w)
            acc += xrow0[t->xoff[k] + iw0] * wt[k];
    }
    _pa_act_block(&acc, 1, &c->act);
    yrow[ow] = acc;
}

/* Columns [lo, hi) whose taps are all inside, of R output rows (see
 * nchw_span): spans of 16; the rest as one more span overlapping the
 * previous (the same values written twice), or for narrow rows two
 * overlapping spans of 8 or 4; a variable-length span only below 4
 * columns. */
PA_INLINE void nchw_columns(const dw_taps_t *t, const float *wt, const float *xrow0,
                            int64_t xrs, float *yrow, int64_t yrs, int R, float b, int64_t lo,
                            int64_t hi, int64_t pl, int64_t SW, const pa_act_params_t *act) {
    int64_t width = hi - lo, ow = lo;
    if (width >= PA_VEC) {
        for (; ow + PA_VEC <= hi; ow += PA_VEC)
            nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, ow, PA_VEC, pl, SW, act, PA_VEC);
        if (ow < hi)
            nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, hi - PA_VEC, PA_VEC, pl, SW, act,
                      PA_VEC);
    } else if (width >= 8) {
        nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, lo, 8, pl, SW, act, 8);
        nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, hi - 8, 8, pl, SW, act, 8);
    } else if (width >= 4) {
        nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, lo, 4, pl, SW, act, 4);
        nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, hi - 4, 4, pl, SW, act, 4);
    } else if (width > 0) {
        nchw_span(t, wt, xrow0, xrs, yrow, yrs, R, b, lo, width, pl, SW, act, PA_VEC);
    }
}

/* Output rows [0, nr) of a zero-padded tile (input rows xrs floats apart
 * per output row) into y (rows w_out apart), all columns interior.  Rows
 * narrower than PA_VEC (spans of 8 or 4: one vector each) PA_DW_ROWS at a
 * time, the rest one at a time: on wider rows (spans of 16) the larger
 * accumulator block left the registers and MobileNetV2's 56- and
 * 112-column layers took 1.2-1.5x longer. */
PA_INLINE void nchw_tile_rows(const dw_taps_t *t, const float *wt, const float *tile,
                              int64_t xrs, float *y, int64_t nr, float b, int64_t SW,
                              const pa_conv2d_t *c) {
    const int64_t wo = c->w_out;
    int64_t r = 0;
    if (wo < PA_VEC)
        for (; r + PA_DW_ROWS <= nr; r += PA_DW_ROWS)
            nchw_columns(t, wt, tile + r * xrs, xrs, y + r * wo, wo, PA_DW_ROWS, b, 0, wo, 0,
                         SW, &c->act);
    for (; r < nr; r++)
        nchw_columns(t, wt, tile + r * xrs, xrs, y + r * wo, wo, 1, b, 0, wo, 0, SW, &c->act);
}

/* Every output row of rows [begin, end) of (plane, row) items, reading the
 * input in place: border columns one by one. */
PA_INLINE void nchw_rows_sw(const dw_job_t *j, int64_t begin, int64_t end, int64_t SW) {
    const pa_conv2d_t *c = j->c;
    dw_taps_t t;
    float wt[PA_DW_MAX_TAPS];
    for (int64_t r = begin; r < end; r++) {
        int64_t plane = r / c->h_out, oh = r % c->h_out;
        int64_t ch = plane % c->c_in;
        _pa_dw_row_taps(c, oh, 1, j->cp, &t);
        for (int64_t k = 0; k < t.n; k++)
            wt[k] = j->w[t.woff[k] + ch];
        const float b = j->bias[ch];
        const float *xrow0 = j->x + (plane * c->h + t.row0) * c->w;
        float *yrow = j->y + r * c->w_out;
        for (int64_t ow = 0; ow < j->ow_lo; ow++)
            nchw_pixel(&t, wt, xrow0, yrow, b, ow, c);
        nchw_columns(&t, wt, xrow0, 0, yrow, 0, 1, b, j->ow_lo, j->ow_hi, c->pad_left, SW,
                     &c->act);
        for (int64_t ow = j->ow_hi; ow < c->w_out; ow++)
            nchw_pixel(&t, wt, xrow0, yrow, b, ow, c);
    }
}

PA_MULTIVERSION
static void dw_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const dw_job_t *j = ctx;
    if (j->c->sw == 1)
        nchw_rows_sw(j, begin, end, 1);
    else
        nchw_rows_sw(j, begin, end, j->c->sw);
}

/* -- NCHW, small planes: one zero-padded copy on the stack ------------------ */

/* Rows and columns of the padded plane the windows read. */
static void padded_extent(const pa_conv2d_t *c, int64_t *hp, int64_t *wp) {
    *hp = (c->h_out - 1) * c->sh + (c->kh - 1) * c->dh + 1;
    *wp = (c->w_out - 1) * c->sw + (c->kw - 1) * c->dw + 1;
}

/* A small plane has many border columns (a 14x14 plane under a 5x5 kernel:
 * 4 of 14), which the per-row kernel runs one by one; below
 * PA_DW_TILE_FLOATS the plane is copied once into a zero-padded tile on the
 * stack (a fixed 16 KiB per thread, no arena workspace) and every column
 * runs as interior. */
PA_INLINE void nchw_plane_sw(const dw_job_t *j, int64_t plane, int64_t SW) {
    const pa_conv2d_t *c = j->c;
    float tile[PA_DW_TILE_FLOATS];
    int64_t hp, wp;
    padded_extent(c, &hp, &wp);
    const float *x = j->x + plane * c->h * c->w;
    /* columns [q0, q1) of a tile row come from the image */
    int64_t q0 = c->pad_left < wp ? c->pad_left : wp;
    int64_t q1 = c->pad_left + c->w < wp ? c->pad_left + c->w : wp;
    for (int64_t r = 0; r < hp; r++) {
        int64_t ih = r - c->pad_top;
        float *tr = tile + r * wp;
        if (ih < 0 || ih >= c->h) {
            memset(tr, 0, (size_t)wp * sizeof *tr);
            continue;
        }
        memset(tr, 0, (size_t)q0 * sizeof *tr);
        memcpy(tr + q0, x + ih * c->w, (size_t)(q1 - q0) * sizeof *tr);
        memset(tr + q1, 0, (size_t)(wp - q1) * sizeof *tr);
    }
    int64_t ch = plane % c->c_in, taps = c->kh * c->kw;
    dw_taps_t t;
    float wt[PA_DW_MAX_TAPS];
    t.n = taps;
    for (int64_t i = 0; i < c->kh; i++)
        for (int64_t jj = 0; jj < c->kw; jj++) {
            int64_t k = i * c->kw + jj;
            t.xoff[k] = i * c->dh * wp + jj * c->dw;
            wt[k] = j->w[k * j->cp + ch];
        }
    const float b = j->bias[ch];
    nchw_tile_rows(&t, wt, tile, c->sh * wp, j->y + plane * c->h_out * c->w_out, c->h_out, b,
                   SW, c);
}

PA_MULTIVERSION
static void dw_nchw_planes(void *ctx, int64_t begin, int64_t end) {
    const dw_job_t *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        if (j->c->sw == 1)
            nchw_plane_sw(j, p, 1);
        else if (j->c->sw == 2)
            nchw_plane_sw(j, p, 2);
        else
            nchw_plane_sw(j, p, j->c->sw);
    }
}

/* -- NCHW, stride 1 or 2: bands of a zero-padded plane ------------------- */

/* The per-row kernel above pays, for every output row, its tap table, the
 * weight gather and two border columns run one tap at a time (a 112-column
 * MobileNetV2 row spent more than a third of its time there).  Instead a
 * band of the plane's input rows is copied once, zero-padded, into a stack
 * tile, and every output row of the band runs as interior columns with
 * one tap table per band.  A column stride of 2 makes every tap a strided
 * load, which the compiler turns into shuffles per vector, so with stride 2
 * each tile row holds the padded row's even columns, then its odd ones:
 * tap (i, jj) of output column ow reads half (jj * dw) & 1 at
 * ow + (jj * dw >> 1), contiguous.  Each input row is copied (or split)
 * once per band, not once per output row reading it.  Bands hold as many
 * output rows as fit PA_DW_TILE_FLOATS (16 KiB per thread); rows too wide
 * for even one band, and other strides, take the per-row kernel. */

/* Floats per tile row: the padded row, or its two halves for stride 2. */
static int64_t band_row_floats(const pa_conv2d_t *c) {
    int64_t hp, wp;
    padded_extent(c, &hp, &wp);
    return c->sw == 2 ? 2 * ((wp + 1) / 2) : wp;
}

/* Output rows per band (at most h_out); 0: not even one fits. */
static int64_t band_rows(const pa_conv2d_t *c) {
    if (c->sw != 1 && c->sw != 2)
        return 0;
    int64_t in_max = PA_DW_TILE_FLOATS / band_row_floats(c);
    int64_t span = (c->kh - 1) * c->dh + 1;
    if (in_max < span)
        return 0;
    int64_t r = (in_max - span) / c->sh + 1;
    return r < c->h_out ? r : c->h_out;
}

/* The band rows of the walk (dwconv.h): the tile's rows as above. */
PA_INLINE void band_tile_rows(const dw_taps_t *t, const float *wt, const float *tile,
                              int64_t xrs, float *y, int64_t nr, float b, const pa_conv2d_t *c) {
    nchw_tile_rows(t, wt, tile, xrs, y, nr, b, 1, c);
}

PA_MULTIVERSION
PA_DW_BANDS_TASK(dw_nchw_bands, band_tile_rows)

/* -- NCHW, small planes with many channels: blocks of PA_VEC channels ------- */

/* MobileNets end in 7x7 to 28x28 planes of hundreds of channels: rows of 7
 * to 28 columns are too short for the row-vector kernel (a 7-column row is
 * two 4-wide spans) and every plane pays its own setup, so there the
 * layout is turned around on the stack: a band of input rows of PA_VEC
 * channels is copied, zero-padded, into a pixel-major tile (PA_VEC
 * channels per pixel, like NHWC), the NHWC register tile (nhwc_tile)
 * computes PA_DW_MR pixels x PA_VEC channels with every pixel interior,
 * and the band's outputs go back to their planes.  Channels past c_in in
 * the last block read zeros and are not stored.  Tile: PA_DW_TILE_FLOATS
 * floats (16 KiB per thread) for the input band and the output band. */
#ifndef PA_DW_BLOCK_MAX_W
#define PA_DW_BLOCK_MAX_W 12
#endif

/* Output rows per band so that input band + output band fit tile_floats
 * floats; 0: not even one row. */
static int64_t block_band_rows(const pa_conv2d_t *c, int64_t tile_floats) {
    int64_t hp, wp;
    padded_extent(c, &hp, &wp);
    if (wp > tile_floats / PA_VEC)      /* (and in_rows * wp cannot overflow) */
        return 0;
    for (int64_t r = c->h_out; r >= 1; r--) {
        int64_t in_rows = (r - 1) * c->sh + (c->kh - 1) * c->dh + 1;
        if ((in_rows * wp + r * c->w_out) * PA_VEC <= tile_floats)
            return r;
    }
    return 0;
}

/* One item of the walk (dwconv.h): the band in, the tiles, the band out. */
PA_INLINE void nchw_block_band(const dw_block_job_t *bj, const dw_block_t *b,
                               const dw_taps_t *t) {
    const dw_job_t *j = bj->j;
    const pa_conv2d_t *c = j->c;
    const int64_t V = PA_VEC, wp = bj->wp, img = b->img, c0 = b->c0, nc = b->nc;
    const int64_t oh0 = b->oh0, nr = b->nr, in_rows = b->in_rows;
    float tile[PA_DW_TILE_FLOATS];
    float *in = tile, *out = tile + in_rows * wp * V;
    /* in[r][q][v] = padded input row oh0 * sh + r, column q, channel c0 + v */
    memset(in, 0, (size_t)(in_rows * wp * V) * sizeof *in);
    int64_t q0 = c->pad_left < wp ? c->pad_left : wp;
    int64_t q1 = c->pad_left + c->w < wp ? c->pad_left + c->w : wp;
    for (int64_t r = 0; r < in_rows; r++) {
        int64_t ih = oh0 * c->sh + r - c->pad_top;
        if (ih < 0 || ih >= c->h)
            continue;
        for (int64_t v = 0; v < nc; v++) {
            const float *restrict xr =
                j->x + ((img * c->c_in + c0 + v) * c->h + ih) * c->w - c->pad_left;
            float *restrict d = in + r * wp * V + v;
            for (int64_t q = q0; q < q1; q++)
                d[q * V] = xr[q];
        }
    }
    const float *w = j->w + c0, *bias = j->bias + c0;
    const int64_t ps = c->sw * V;
    for (int64_t r = 0; r < nr; r++) {
        const float *xrow = in + r * c->sh * wp * V;
        float *orow = out + r * c->w_out * V;
        int64_t ow = 0;
        for (; ow + PA_DW_MR <= c->w_out; ow += PA_DW_MR)
            nhwc_tile16(t, xrow + ow * ps, ps, w, bias, orow + ow * V, V, &c->act);
        if (ow < c->w_out && c->w_out >= PA_DW_MR)      /* overlapping last tile */
            nhwc_tile(t, xrow + (c->w_out - PA_DW_MR) * ps, ps, w, bias,
                      orow + (c->w_out - PA_DW_MR) * V, V, &c->act, PA_VEC);
        else
            for (; ow < c->w_out; ow++) {
                float acc[PA_VEC];
                for (int64_t v = 0; v < V; v++)
                    acc[v] = bias[v];
                for (int64_t k = 0; k < t->n; k++) {
                    const float *restrict xq = xrow + ow * ps + t->xoff[k];
                    const float *restrict wv = w + t->woff[k];
                    for (int64_t v = 0; v < V; v++)
                        acc[v] += xq[v] * wv[v];
                }
                _pa_act_block(acc, PA_VEC, &c->act);
                for (int64_t v = 0; v < V; v++)
                    orow[ow * V + v] = acc[v];
            }
    }
    /* back to the planes: rows [oh0, oh0 + nr) of channels c0 .. c0 + nc */
    int64_t npix = nr * c->w_out;
    for (int64_t v = 0; v < nc; v++) {
        float *restrict yp = j->y + ((img * c->c_in + c0 + v) * c->h_out + oh0) * c->w_out;
        for (int64_t p = 0; p < npix; p++)
            yp[p] = out[p * V + v];
    }
}

PA_MULTIVERSION
PA_DW_BLOCKS_TASK(dw_nchw_blocks, nchw_block_band)

/* The portable variant (isa.h). */
static const pa_dw_isa_t dw_portable = {dw_nhwc_rows, dw_nchw_blocks, PA_DW_TILE_FLOATS,
                                        PA_DW_BLOCK_MAX_W, dw_nchw_bands};

pa_status_t _pa_dwconv_run(const pa_conv2d_t *c, const float *packed, const float *x,
                           float *y, pa_workers_t *workers) {
    return _pa_dwconv_run_isa(c, packed, x, y, workers, _pa_avx512_usable());
}

pa_status_t _pa_dwconv_run_isa(const pa_conv2d_t *c, const float *packed, const float *x,
                               float *y, pa_workers_t *workers, int avx512) {
    const pa_dw_isa_t *isa = avx512 && _pa_avx512_usable() ? &_pa_dw_avx512 : &dw_portable;
    dw_job_t j = {c, packed, NULL, x, y, round_vec(c->c_in), 0, 0};
    j.w = packed + j.cp;
    interior(c->w_out, c->sw, c->pad_left, c->kw, c->dw, c->w, &j.ow_lo, &j.ow_hi);
    double work = (double)c->n * (double)c->c_in * (double)c->h_out * (double)c->w_out *
                  (double)(c->kh * c->kw);
    pa_workers_t *w = _pa_workers_for(workers, work);
    int64_t hp, wp;
    padded_extent(c, &hp, &wp);
    dw_block_job_t bj = {&j, 0, 0, 0, wp};
    dw_band_job_t band = {&j, band_rows(c), 0, wp, band_row_floats(c)};
    /* rows of up to 12 columns: channel blocks (7 and 12 columns: 30-50%
     * faster than the bands); wider ones (14 columns on, either stride):
     * the bands (MobileNetV2's 28 -> 14 stride-2 rows: 181 vs 231 us,
     * 56 -> 28: 228 vs 434 us).  On AVX-512 the blocks take rows up to
     * 28 columns (the variant's block_max_w; MobileNetV2's 28-column rows:
     * 87 vs 122 us on the AVX-512 bands; 56 columns: 346 vs 285 us) */
    if (c->layout == PA_LAYOUT_NCHW && c->c_in >= PA_VEC && c->w_out <= isa->block_max_w)
        bj.band = block_band_rows(c, isa->block_tile_floats);
    if (c->layout == PA_LAYOUT_NHWC) {
        _pa_parallel(w, c->n * c->h_out, isa->nhwc_rows, &j);
    } else if (bj.band > 0) {
        bj.nbands = (c->h_out + bj.band - 1) / bj.band;
        bj.nblocks = (c->c_in + PA_VEC - 1) / PA_VEC;
        _pa_parallel(w, c->n * bj.nblocks * bj.nbands, isa->nchw_blocks, &bj);
    } else if (band.band > 0) {
        band.nbands = (c->h_out + band.band - 1) / band.band;
        _pa_parallel(w, c->n * c->c_in * band.nbands, isa->nchw_bands, &band);
    } else if (hp <= PA_DW_TILE_FLOATS / wp) {    /* hp * wp: up to 2^82 */
        _pa_parallel(w, c->n * c->c_in, dw_nchw_planes, &j);
    } else {
        _pa_parallel(w, c->n * c->c_in * c->h_out, dw_nchw_rows, &j);
    }
    return PA_OK;
}
