/* kernels/isa.h -- the contract between a kernel's driver and an
 * instruction-set variant of its tiles; not installed.
 *
 * A kernel is a driver around a register tile.  The driver decides which
 * rows, bands or pixel tiles there are, in what order, and prepares what
 * a tile reads (a row's tap table, a band copied to the stack); the tile
 * computes a block of outputs in registers.  Each driver is written once,
 * in the kernel's header (dwconv.h, gemm_nhwc.h), as a walk that defines
 * a task for the workers (a _pa_task_fn) around a tile named by the
 * caller: PA_DW_NHWC_TASK(name, tile), PA_GEMM_NHWC_TASK(name, mr, tile)
 * ...  A variant for a wider instruction set (dwconv_avx512.c,
 * gemm_nhwc_avx512.c: intrinsics under a target attribute) supplies only
 * its tiles and makes its tasks in one line each, its target attribute in
 * front, as the portable files make theirs under PA_MULTIVERSION; it never
 * copies a walk.  The walks are macros, not functions taking the tile as a
 * function pointer: the tile is called by name, so the compiler inlines it
 * as before and each task compiles to the code the copies compiled to (a
 * constant function pointer, inlined too, gave GCC and clang other code,
 * and the AVX-512 NHWC rows of stride-2 layers 2-4% slower).  The tiles'
 * signatures are written at the walks.
 *
 * Each variant describes itself to a kernel in one table (below): its
 * tasks and the geometry its tiles need.  The kernel's run takes the
 * AVX-512 table where _pa_avx512_usable() (asked once), else its own
 * portable one; the _run_isa entries of kernels/internal.h let a test ask
 * for either.  The variants agree bit for bit: the same products and adds
 * in the same order (tests/c/kernels/test_kernels.c compares them).
 * Another instruction set (say NEON) would add its own *_neon.c files
 * filling the same tables, and a case where the runs pick.
 *
 * Grouped by the file that defines them.  Names start with _pa_. */
#ifndef PYARENA_KERNELS_ISA_H
#define PYARENA_KERNELS_ISA_H

#include "internal.h"

/* 1 where the AVX-512 variant is compiled: x86-64 with GCC >= 11 or clang
 * (target attributes and the intrinsics they enable), as PA_MULTIVERSION. */
#if defined(__x86_64__) && !defined(PA_NO_MULTIVERSION) && \
    (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#define PA_AVX512_BUILT 1
#else
#define PA_AVX512_BUILT 0
#endif

#if PA_AVX512_BUILT
/* The target of the 8-bit VNNI tiles (qconv_vnni.c, qrows_vnni.c):
 * AVX-512 with vpdpbusd. */
#define PA_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* The n <= 4 bytes at p as one little-endian word, the rest zero: a last
 * group of 4 along k that the reduction leaves short. */
PA_VNNI_TARGET static inline uint32_t _pa_load4(const uint8_t *p, int64_t n) {
    uint32_t v = 0;
    memcpy(&v, p, (size_t)n);
    return v;
}
#endif

/* cpu.c: 1 where PA_AVX512_BUILT and the processor has AVX-512F, unless
 * the environment variable PA_DISABLE_AVX512 is set to other than 0 (read
 * once). */
int _pa_avx512_usable(void);

/* cpu.c: 1 where _pa_avx512_usable and the processor has AVX512-VBMI
 * (byte permutes across a register); qlookup_vbmi.c: y[i] = table[x[i]]
 * for i < n with it (NULL where not built). */
int _pa_avx512vbmi_usable(void);
typedef void (*_pa_lookup256_fn)(const uint8_t *table, const uint8_t *x, uint8_t *y, int64_t n);
extern const _pa_lookup256_fn _pa_lookup256_vbmi;

/* What a variant supplies to the depthwise convolution (dwconv.c runs
 * it; the jobs and the walks: dwconv.h).  Where neither its blocks nor its
 * bands take a geometry, dwconv.c's portable kernels for the remaining
 * NCHW cases run (whole planes, single rows). */
typedef struct pa_dw_isa {
    _pa_task_fn nhwc_rows;      /* output rows of a dw_job_t: PA_DW_NHWC_TASK   */
    _pa_task_fn nchw_blocks;    /* items of a dw_block_job_t: PA_DW_BLOCKS_TASK */
    int64_t block_tile_floats;  /*   the blocks' stack tile: input band + output
                                     band of PA_VEC channels must fit it        */
    int64_t block_max_w;        /*   the widest output rows they take          */
    _pa_task_fn nchw_bands;     /* items of a dw_band_job_t: PA_DW_BANDS_TASK   */
} pa_dw_isa_t;

/* What a variant supplies to the NHWC pointwise / patch SGEMM
 * (gemm_nhwc.c runs it; the job and the walk: gemm_nhwc.h). */
typedef struct pa_gemm_nhwc_isa {
    _pa_task_fn tiles;  /* items of a pa_gemm_nhwc_job_t: PA_GEMM_NHWC_TASK      */
    int64_t mr;         /* pixels per tile                                      */
    int is_short;       /* 1: tiles of mr - 1 pixels too (_pa_gemm_pixel_tiles) */
    int64_t nb;         /* blocks of PA_GEMM_NR channels per tile (the last
                           tile of a row may take fewer)                        */
    _pa_task_fn row;    /* one pixel (a matrix-vector product): items of
                           PA_GEMM_ROW_BLOCKS blocks of a pa_gemm_nhwc_job_t    */
} pa_gemm_nhwc_isa_t;

/* dwconv_avx512.c, gemm_nhwc_avx512.c: the AVX-512 variant (all zeros
 * where not PA_AVX512_BUILT: never picked, as _pa_avx512_usable() is 0
 * there). */
extern const pa_dw_isa_t _pa_dw_avx512;
extern const pa_gemm_nhwc_isa_t _pa_gemm_nhwc_avx512;

#endif /* PYARENA_KERNELS_ISA_H */
