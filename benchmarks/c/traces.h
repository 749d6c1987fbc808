/* traces.h -- allocation traces for the pool benchmark (bench_pool.c).
 *
 * A trace is a flat array of operations on numbered slots: an op with
 * size > 0 allocates `size` bytes into `slot`, an op with size == 0 frees
 * the block held in `slot`, and an op with slot BT_STEP (size 0) marks the
 * end of a step (an inference; allocators that learn steps get told).  Slots are reused LIFO, so `nslots` is the
 * largest number of blocks ever live at once.  Every trace ends with all
 * blocks freed, so one replay leaves the allocator empty and the number of
 * alloc/free pairs equals `n_allocs`. */
#ifndef PA_BENCH_TRACES_H
#define PA_BENCH_TRACES_H

#include <stddef.h>
#include <stdint.h>

#define BT_STEP UINT32_MAX /* slot of a step mark */

typedef struct bt_op {
    uint32_t slot;
    uint32_t size; /* 0 = free */
} bt_op_t;

typedef struct bt_trace {
    char name[64];
    char desc[160];
    bt_op_t *ops;
    size_t n;            /* ops (allocs + frees + step marks)          */
    size_t n_steps;      /* step marks                                 */
    size_t n_allocs;     /* alloc ops (== frees)                       */
    uint32_t nslots;     /* most blocks live at once                   */
    uint64_t peak_live;  /* highest sum of requested bytes live        */
    uint64_t total_req;  /* sum of all requested sizes                 */
    uint32_t min_size, max_size;
} bt_trace_t;

/* (a) Log-uniform sizes in [min_size, max_size], random frees, the live
 * count mean-reverting around `live` (it wanders roughly +-25%).  Emits
 * `n_allocs` allocations then frees the rest; a step mark every 1000
 * allocations (random traffic has no loop: the marks show what learning
 * costs when nothing repeats). */
int bt_gen_loguniform(bt_trace_t *t, size_t n_allocs, uint32_t live,
                      uint32_t min_size, uint32_t max_size, uint64_t seed);

/* The CNN models bt_gen_cnn knows. */
#define BT_MOBILENETV2 1
#define BT_RESNET50 2
#define BT_BOTH 3 /* alternate at random between the two */

/* (b)/(c) The activation and scratch allocations of `inferences` forward
 * passes, batch 1, float32, NCHW.  Each tensor is allocated when its
 * producer runs and freed right after its last reader; a conv with groups
 * == 1 that is not a 1x1/stride-1 conv allocates an im2col scratch buffer
 * (Cin*k*k*Ho*Wo floats) for the duration of the op.  If `res_min` !=
 * `res_max` the input resolution of each inference is drawn uniformly from
 * the multiples of 32 in [res_min, res_max] (dynamic shapes). */
int bt_gen_cnn(bt_trace_t *t, int model, size_t inferences, uint32_t res_min,
               uint32_t res_max, uint64_t seed);

/* Like bt_gen_cnn at one resolution, with the batch size of each
 * inference drawn uniformly from [batch_min, batch_max] (every tensor and
 * scratch buffer scales with it).  A step mark ends every inference (in
 * bt_gen_cnn too). */
int bt_gen_cnn_batch(bt_trace_t *t, int model, size_t inferences, uint32_t res,
                     uint32_t batch_min, uint32_t batch_max, uint64_t seed);

/* Write the trace as CSV ("op,slot,size", op = a|f|s, s = step mark) to
 * `path`; 0 on success. */
int bt_write_csv(const bt_trace_t *t, const char *path);

void bt_free(bt_trace_t *t);

#endif
