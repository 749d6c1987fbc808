/* embed_arena.c -- how an existing C runtime embeds the pyarena arena.
 *
 * The runtime owns one static buffer for its weights; pyarena carves it up
 * with aligned bump allocation and tells the runtime when it is full.
 * Build: make -C csrc   (links build/libpyarena.a) */
#include "pyarena.h"

#include <stdio.h>
#include <string.h>

static _Alignas(64) unsigned char arena_meta[512];
static unsigned char weights_memory[1 << 20];

int main(void) {
    if (pa_arena_metadata_size() > sizeof arena_meta) return 1;
    pa_status_t st;
    pa_arena_t *weights = pa_arena_init_static(arena_meta, sizeof arena_meta,
                                               weights_memory,
                                               sizeof weights_memory, 64, &st);
    if (!weights) {
        fprintf(stderr, "arena: %s\n", pa_status_string(st));
        return 1;
    }
    /* "load" three layers of float weights */
    size_t sizes[] = {3 * 3 * 3 * 32, 32 * 64, 64 * 1000};
    for (int i = 0; i < 3; i++) {
        float *w = pa_arena_alloc(weights, sizes[i] * sizeof(float), 0, &st);
        if (!w) {
            fprintf(stderr, "layer %d: %s\n", i, pa_status_string(st));
            return 1;
        }
        for (size_t k = 0; k < sizes[i]; k++) w[k] = (float)k;
    }
    /* a request larger than the buffer fails cleanly */
    if (pa_arena_alloc(weights, sizeof weights_memory, 0, &st) != NULL ||
        st != PA_ERR_NOMEM)
        return 1;
    pa_arena_stats_t stats;
    pa_arena_stats(weights, &stats);
    printf("weights: %zu blocks, %zu bytes used of %zu, %zu padding\n",
           stats.count, stats.used, stats.reserved, stats.padding);
    return pa_arena_destroy(weights) == PA_OK ? 0 : 1;
}
