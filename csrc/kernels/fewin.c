/* kernels/fewin.c -- direct 2-D convolution over few input channels (the
 * first layer over RGB: 3 -> 32 channels, 3x3, stride 2), groups 1, column
 * stride 1 or 2, no column dilation; NCHW and NHWC; bias and activation
 * fused; no workspace but a stack tile.
 *
 * With 3 input channels im2col + BLAS writes and reads a 27-row column
 * matrix for a GEMM whose reduction is 27 long, and the general direct
 * kernel spends its time on per-tap pointer setup.  Here each output row
 * first copies the c_in * kh input rows it reads into a stack tile,
 * zero-padded, stride-2 rows split into their even then odd columns (the
 * depthwise bands' row copy): the input of output column ow for tap column
 * jj is then element ow + jj / S of half jj % S of its tile row, so the
 * columns of a tile are consecutive floats.  A register tile of
 * PA_FI_CO output channels times PA_FI_PX output columns accumulates over
 * the c_in * kh * kw taps: NCHW vectorises over the columns (one vector
 * load of the tile per tap, the weights broadcast), NHWC over the output
 * channels (one weight vector per tap, the tile's values broadcast; two
 * blocks at once where there are two, 16 channels a vector: one AVX-512
 * register).
 * Packed weights: per block of PA_FI_CO output channels its bias, then one
 * row of PA_FI_CO weights per tap (ci, i, jj), zero-filled past c_out; in
 * NHWC each pair of blocks the tile takes together as one block of twice
 * the channels (fi_pack_pair: a tap's 16 weights one load -- the two
 * 8-float halves joined by a shuffle cost one more vector operation per 8
 * multiply-adds).
 * Like gemm.c, products and sums may be contracted into FMA where
 * the clone has it (the baseline build differs by rounding only).
 */
#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#define PA_FI_CO 8          /* output channels of a register tile */
#define PA_FI_PX 8          /* output columns of a register tile  */

typedef float pa_fi_v8 __attribute__((vector_size(32)));
typedef float pa_fi_v16 __attribute__((vector_size(64)));
_Static_assert(PA_FI_CO == 8 && PA_FI_PX == 8, "one vector of 8 floats per tile row");

static int64_t fi_blocks(const pa_conv2d_t *c) { return (c->c_out + PA_FI_CO - 1) / PA_FI_CO; }

/* Floats of half a tile row: every column a register tile reads. */
static int64_t fi_half(const pa_conv2d_t *c) {
    int64_t cols = (c->w_out + PA_FI_PX - 1) / PA_FI_PX * PA_FI_PX;
    return cols + (c->kw - 1) / c->sw;
}

int _pa_fewin_fits(const pa_conv2d_t *c) {
    if (c->groups != 1 || c->c_in > PA_FEWIN_MAX_CIN || c->dw != 1 || c->sw > 2 ||
        _pa_conv2d_is_pointwise(c))
        return 0;
    int64_t rows = c->c_in * c->kh;
    return c->w_out <= PA_FEWIN_TILE_FLOATS && rows <= PA_FEWIN_TILE_FLOATS &&
           rows * c->sw * fi_half(c) <= PA_FEWIN_TILE_FLOATS;
}

size_t _pa_fewin_packed_size(const pa_conv2d_t *c) {
    return (size_t)(fi_blocks(c) * PA_FI_CO * (1 + c->c_in * c->kh * c->kw));
}

/* NHWC blocks b and b + 1 (fi_row's pairs) as one block of 2 * PA_FI_CO
 * channels: the 16 biases, then 16 weights per tap (ci, i, jj) -- one
 * AVX-512 register a tap, not two halves joined by a shuffle.  The same
 * floats as two blocks (fi_blocks' size). */
static float *fi_pack_pair(const pa_conv2d_t *c, const float *weight, const float *bias,
                           int64_t b, float *p) {
    const int64_t taps = c->kh * c->kw;
    for (int64_t v = 0; v < 2 * PA_FI_CO; v++) {
        int64_t co = b * PA_FI_CO + v;
        *p++ = (co < c->c_out && bias) ? bias[co] : 0.0f;
    }
    for (int64_t ci = 0; ci < c->c_in; ci++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t v = 0; v < 2 * PA_FI_CO; v++) {
                int64_t co = b * PA_FI_CO + v;
                *p++ = co < c->c_out ? weight[(co * taps + t) * c->c_in + ci] : 0.0f;
            }
    return p;
}

pa_status_t _pa_fewin_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                           float *packed) {
    const int64_t taps = c->kh * c->kw;
    float *p = packed;
    for (int64_t b = 0; b < fi_blocks(c); b++) {
        if (c->layout == PA_LAYOUT_NHWC && b + 1 < fi_blocks(c)) {    /* a pair */
            p = fi_pack_pair(c, weight, bias, b++, p);
            continue;
        }
        for (int64_t v = 0; v < PA_FI_CO; v++) {
            int64_t co = b * PA_FI_CO + v;
            *p++ = (co < c->c_out && bias) ? bias[co] : 0.0f;
        }
        for (int64_t ci = 0; ci < c->c_in; ci++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t v = 0; v < PA_FI_CO; v++) {
                    int64_t co = b * PA_FI_CO + v;
                    *p++ = co < c->c_out ? weight[(co * taps + t) * c->c_in + ci] : 0.0f;
                }
    }
    return PA_OK;
}

typedef struct {
    const pa_conv2d_t *c;
    const float *packed, *x;
    float *y;
    int64_t hf, rf;         /* half and whole tile row, floats */
} fi_job_t;

/* The tile rows of input row ih (row i of the kernel), one per input
 * channel (outside the image: zeros).  NCHW: the depthwise bands' row
 * copy; NHWC: each half of each row gathered from the pixels' channel ci,
 * the inside columns [qa, qb) without a branch. */
PA_INLINE void fi_copy_rows(const fi_job_t *j, const float *ximg, int64_t i, int64_t ih,
                         float *restrict tile) {
    const pa_conv2d_t *c = j->c;
    const int64_t rf = j->rf, hf = j->hf, S = c->sw, pl = c->pad_left, C = c->c_in;
    for (int64_t ci = 0; ci < C; ci++) {
        float *restrict tr = tile + (ci * c->kh + i) * rf;
        if (ih < 0 || ih >= c->h) {
            memset(tr, 0, (size_t)rf * sizeof *tr);
            continue;
        }
        if (c->layout == PA_LAYOUT_NCHW) {
            int64_t q0 = pl < rf ? pl : rf, q1 = pl + c->w < rf ? pl + c->w : rf;
            _pa_band_copy_row(tr, ximg + (ci * c->h + ih) * c->w, q0, q1, pl, rf, S, 0.0f);
            continue;
        }
        const float *restrict xr = ximg + ih * c->w * C + ci;
        for (int64_t h = 0; h < S; h++, tr += hf) {
            /* position q of half h: padded column q * S + h */
            int64_t qa = pl - h <= 0 ? 0 : (pl - h + S - 1) / S;
            int64_t qb = (c->w + pl - h + S - 1) / S;
            qa = qa < hf ? qa : hf;
            qb = qb < hf ? qb : hf;
            qb = qb > qa ? qb : qa;
            for (int64_t q = 0; q < qa; q++)
                tr[q] = 0.0f;
            for (int64_t q = qa; q < qb; q++)
                tr[q] = xr[(q * S + h - pl) * C];
            for (int64_t q = qb; q < hf; q++)
                tr[q] = 0.0f;
        }
    }
}

/* a vector from 8 floats anywhere (a macro: a function returning a vector
 * would warn about the baseline clone's ABI) */
#define FI_LOAD(v, p) memcpy(&(v), (p), sizeof(v))

/* acc[a] over PA_FI_CO x PA_FI_PX: NCHW acc[co] is a vector of columns,
 * NHWC acc[px] a vector of output channels.  The eight accumulators are
 * named (GCC at -O2 does not unroll a loop over an array of them and keeps
 * it in memory). */
PA_INLINE void fi_tile(const fi_job_t *j, const float *tile, const float *pk, int64_t ow,
                       pa_fi_v8 acc[8], int nhwc, int S) {
    const pa_conv2d_t *c = j->c;
    const int64_t kh = c->kh, kw = c->kw, hf = j->hf, rf = j->rf;
    const float *restrict w = pk + PA_FI_CO;
    pa_fi_v8 a0, a1, a2, a3, a4, a5, a6, a7;
    if (nhwc) {
        FI_LOAD(a0, pk);
        a1 = a2 = a3 = a4 = a5 = a6 = a7 = a0;
    } else {
        const pa_fi_v8 z = {0};
        a0 = z + pk[0], a1 = z + pk[1], a2 = z + pk[2], a3 = z + pk[3];
        a4 = z + pk[4], a5 = z + pk[5], a6 = z + pk[6], a7 = z + pk[7];
    }
    for (int64_t r = 0; r < c->c_in * kh; r++) {
        const float *tr = tile + r * rf + ow;
        for (int64_t jj = 0; jj < kw; jj++, w += PA_FI_CO) {
            const float *restrict xs = tr + (jj % S) * hf + jj / S;
            pa_fi_v8 v;
            /* NHWC: v the weights, s the inputs; NCHW the other way */
            const float *restrict sc = nhwc ? xs : w;
            FI_LOAD(v, nhwc ? w : xs);
            a0 += v * sc[0], a1 += v * sc[1], a2 += v * sc[2], a3 += v * sc[3];
            a4 += v * sc[4], a5 += v * sc[5], a6 += v * sc[6], a7 += v * sc[7];
        }
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
    acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
}

/* NHWC: two blocks of output channels (16) x PA_FI_PX columns at once,
 * each column's 16 channels one vector (AVX-512: one register, half the
 * multiply-adds of two 8-channel tiles; other clones split it in two).
 * Each channel sums the taps in fi_tile's order, so the bits are its.
 * out[px] gets the 16 channels of column ow + px. */
PA_INLINE void fi_tile_pair(const fi_job_t *j, const float *tile, const float *pk, int64_t ow,
                            float out[PA_FI_PX][2 * PA_FI_CO], int S) {
    const pa_conv2d_t *c = j->c;
    const int64_t kw = c->kw, hf = j->hf, rf = j->rf;
    const float *restrict w = pk + 2 * PA_FI_CO;
    pa_fi_v16 a0, a1, a2, a3, a4, a5, a6, a7;
    FI_LOAD(a0, pk);
    a1 = a2 = a3 = a4 = a5 = a6 = a7 = a0;
    for (int64_t r = 0; r < c->c_in * c->kh; r++) {
        const float *tr = tile + r * rf + ow;
        for (int64_t jj = 0; jj < kw; jj++, w += 2 * PA_FI_CO) {
            const float *restrict xp = tr + (jj % S) * hf + jj / S;
            pa_fi_v16 v;
            FI_LOAD(v, w);
            a0 += v * xp[0], a1 += v * xp[1], a2 += v * xp[2], a3 += v * xp[3];
            a4 += v * xp[4], a5 += v * xp[5], a6 += v * xp[6], a7 += v * xp[7];
        }
    }
    memcpy(out[0], &a0, sizeof a0), memcpy(out[1], &a1, sizeof a1);
    memcpy(out[2], &a2, sizeof a2), memcpy(out[3], &a3, sizeof a3);
    memcpy(out[4], &a4, sizeof a4), memcpy(out[5], &a5, sizeof a5);
    memcpy(out[6], &a6, sizeof a6), memcpy(out[7], &a7, sizeof a7);
}

/* NHWC output row oh, blocks b and b + 1 (fi_tile_pair). */
PA_INLINE void fi_row_pair(const fi_job_t *j, const float *tile, int64_t img, int64_t oh,
                           int64_t b, int S) {
    const pa_conv2d_t *c = j->c;
    const int64_t per_block = PA_FI_CO * (1 + c->c_in * c->kh * c->kw);
    const int64_t c0 = b * PA_FI_CO;
    const int64_t nco = c->c_out - c0 < 2 * PA_FI_CO ? c->c_out - c0 : 2 * PA_FI_CO;
    for (int64_t ow = 0; ow < c->w_out; ow += PA_FI_PX) {
        float out[PA_FI_PX][2 * PA_FI_CO];
        fi_tile_pair(j, tile, j->packed + b * per_block, ow, out, S);
        _pa_act_block(&out[0][0], PA_FI_PX * 2 * PA_FI_CO, &c->act);
        const int64_t npx = c->w_out - ow < PA_FI_PX ? c->w_out - ow : PA_FI_PX;
        float *y = j->y + ((img * c->h_out + oh) * c->w_out + ow) * c->c_out + c0;
        if (nco == 2 * PA_FI_CO)
            for (int64_t p = 0; p < npx; p++)
                memcpy(y + p * c->c_out, out[p], sizeof out[p]);
        else
            for (int64_t p = 0; p < npx; p++)
                for (int64_t v = 0; v < nco; v++)
                    y[p * c->c_out + v] = out[p][v];
    }
}

PA_INLINE void fi_row(const fi_job_t *j, const float *tile, int64_t img, int64_t oh, int nhwc,
                      int S) {
    const pa_conv2d_t *c = j->c;
    const int64_t per_block = PA_FI_CO * (1 + c->c_in * c->kh * c->kw);
    const int64_t plane = c->h_out * c->w_out;
    for (int64_t b = 0; b < fi_blocks(c); b++) {
        if (nhwc && b + 1 < fi_blocks(c)) {     /* a pair of blocks */
            fi_row_pair(j, tile, img, oh, b++, S);
            continue;
        }
        const float *pk = j->packed + b * per_block;
        const int64_t nco = c->c_out - b * PA_FI_CO < PA_FI_CO ? c->c_out - b * PA_FI_CO
                                                                 : PA_FI_CO;
        for (int64_t ow = 0; ow < c->w_out; ow += PA_FI_PX) {
            pa_fi_v8 acc[8];
            float out[8][8];
            fi_tile(j, tile, pk, ow, acc, nhwc, S);
            memcpy(out, acc, sizeof out);
            _pa_act_block(&out[0][0], 64, &c->act);
            const int64_t npx = c->w_out - ow < PA_FI_PX ? c->w_out - ow : PA_FI_PX;
            if (nhwc) {
                float *y = j->y + ((img * c->h_out + oh) * c->w_out + ow) * c->c_out +
                           b * PA_FI_CO;
                if (nco == PA_FI_CO)        /* fixed sizes: inline stores, no calls */
                    for (int64_t p = 0; p < npx; p++)
                        memcpy(y + p * c->c_out, out[p], sizeof out[p]);
                else
                    for (int64_t p = 0; p < npx; p++)
                        for (int64_t v = 0; v < nco; v++)
                            y[p * c->c_out + v] = out[p][v];
            } else {
                float *y = j->y + (img * c->c_out + b * PA_FI_CO) * plane + oh * c->w_out + ow;
                if (npx == PA_FI_PX)
                    for (int64_t co = 0; co < nco; co++)
                        memcpy(y + co * plane, out[co], sizeof out[co]);
                else
                    for (int64_t co = 0; co < nco; co++)
                        for (int64_t v = 0; v < npx; v++)
                            y[co * plane + v] = out[co][v];
            }
        }
    }
}

PA_MULTIVERSION
static void fewin_rows(void *ctx, int64_t begin, int64_t end) {
    const fi_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    float tile[PA_FEWIN_TILE_FLOATS];
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / c->h_out, oh = r % c->h_out;
        const float *ximg = j->x + img * c->c_in * c->h * c->w;
        for (int64_t i = 0; i < c->kh; i++)
            fi_copy_rows(j, ximg, i, oh * c->sh - c->pad_top + i * c->dh, tile);
        /* the layout and the stride as constants: the tap offsets
         * jj % S, jj / S without divisions, one loop body per case */
        int nhwc = c->layout == PA_LAYOUT_NHWC;
        if (c->sw == 1)
            nhwc ? fi_row(j, tile, img, oh, 1, 1) : fi_row(j, tile, img, oh, 0, 1);
        else
            nhwc ? fi_row(j, tile, img, oh, 1, 2) : fi_row(j, tile, img, oh, 0, 2);
    }
}

pa_status_t _pa_fewin_run(const pa_conv2d_t *c, const float *packed, const float *x, float *y,
                          pa_workers_t *workers) {
    fi_job_t j = {c, packed, x, y, fi_half(c), fi_half(c) * c->sw};
    int64_t rows = c->n * c->h_out;
    double macs = (double)rows * (double)c->w_out * (double)c->c_out * (double)c->kh *
                  (double)c->kw * (double)c->c_in;
    _pa_parallel(_pa_workers_for(workers, macs), rows, fewin_rows, &j);
    return PA_OK;
}
