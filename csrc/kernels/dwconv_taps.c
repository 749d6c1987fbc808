/* kernels/dwconv_taps.c -- the tap table of a depthwise convolution's
 * output row: the kernel rows whose input row is inside the image, and
 * per tap its input offset, weight row and column.
 *
 * Built once per output row by the NHWC walk (dwconv.h) and the NCHW
 * per-row kernel (dwconv.c), so their inner loops walk one flat list
 * whatever the kernel size.  Its own file, out of line as it always was
 * (one call per row), so that the AVX-512 tiles, which run under the same
 * walk, need nothing from dwconv.c, which picks them.
 */
#include "dwconv.h"

/* Taps i in [*lo, *hi) whose input row oh * sh - pad + i * dh is inside. */
static void valid_taps(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n,
                       int64_t *lo, int64_t *hi) {
    int64_t i0 = o * s - pad;
    int64_t a = i0 >= 0 ? 0 : (-i0 + d - 1) / d;
    int64_t b = i0 > n - 1 ? 0 : (n - 1 - i0) / d + 1;
    *lo = a < k ? a : k;
    *hi = b < k ? b : k;
    if (*hi < *lo)
        *hi = *lo;
}

void _pa_dw_row_taps(const pa_conv2d_t *c, int64_t oh, int64_t px, int64_t wstep,
                     dw_taps_t *t) {
    int64_t ilo, ihi;
    valid_taps(oh, c->sh, c->pad_top, c->kh, c->dh, c->h, &ilo, &ihi);
    t->n = 0;
    t->row0 = ihi > ilo ? oh * c->sh - c->pad_top + ilo * c->dh : 0;
    for (int64_t i = ilo; i < ihi; i++)
        for (int64_t jj = 0; jj < c->kw; jj++) {
            t->xoff[t->n] = ((i - ilo) * c->dh * c->w + jj * c->dw) * px;
            t->woff[t->n] = (i * c->kw + jj) * wstep;
            t->col[t->n] = jj * c->dw;
            t->n++;
        }
}
