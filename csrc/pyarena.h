/* pyarena.h -- the one public header of the pyarena C core.
 *
 * pyarena manages tensor memory for on-device neural-net inference:
 *   - pa_arena_*  a bump arena for long-lived data (weights, constants),
 *   - pa_pool_*   a dynamic work pool (slabs, buddy blocks, a large zone),
 *   - pa_plan_*   the static planner core that assigns offsets in one arena,
 *   - pa_conv2d_*, pa_act, ... float32 kernels that run in planned memory.
 *
 * Conventions shared by every function below (stated once, here):
 *   - Errors, one rule for the whole library:
 *       * a call that allocates (a handle or a block) returns the pointer,
 *         or NULL on failure, and takes a trailing `pa_status_t *status`:
 *         it may be NULL; otherwise it receives PA_OK on success and the
 *         reason on failure;
 *       * every other call that acts returns pa_status_t: PA_OK (0) is
 *         success and every error is negative (pa_status_string() names
 *         them);
 *       * pure queries (a size, a count, a name) return their answer and
 *         say what they return for bad input.
 *     There is no hidden "last error" state: the status is where the call
 *     returns.
 *   - The library never prints, never aborts and never calls exit() on bad
 *     input; a NULL handle is an error (PA_ERR_INVALID), not a crash.
 *   - Sizes are in bytes.  Alignments are powers of two; 0 means "the
 *     handle's default".  Every size computation is overflow-checked.
 *   - Handles are opaque and typed; the caller owns what *_create() returns
 *     and releases it with the matching *_destroy().
 *   - Option sets (modes, growth, zones, block states) are enums with fixed
 *     values; a value outside the enum is PA_ERR_INVALID.
 *   - Thread safety is stated per handle type.
 *
 * Everything between PA_CDEF_BEGIN and PA_CDEF_END is also the cffi cdef
 * (no preprocessor directives other than integer #defines in there, and
 * array sizes are integer literals).
 */
#ifndef PYARENA_H
#define PYARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PA_CDEF_BEGIN */

#define PA_VERSION_MAJOR 0
#define PA_VERSION_MINOR 1
#define PA_DEFAULT_ALIGNMENT 64
#define PA_MIN_ALIGNMENT 8

/* ------------------------------------------------------------------ */
/* Status codes                                                        */
/* ------------------------------------------------------------------ */

typedef enum pa_status {
    PA_OK = 0,
    PA_ERR_INVALID = -1,     /* a bad argument (NULL handle, bad config)   */
    PA_ERR_ALIGN = -2,       /* alignment is not a supported power of two  */
    PA_ERR_OVERFLOW = -3,    /* a size computation would overflow          */
    PA_ERR_NOMEM = -4,       /* out of memory: capacity, limit or the OS   */
    PA_ERR_STATE = -5,       /* call not valid now (stale mark, closed)    */
    PA_ERR_DOUBLE_FREE = -6, /* the block was already freed                */
    PA_ERR_FOREIGN = -7,     /* the pointer was not handed out by this     */
    PA_ERR_INFEASIBLE = -8,  /* no solution within the given capacity      */
    PA_ERR_TIMEOUT = -9      /* the time limit ran out before an answer    */
} pa_status_t;

/* A static, human-readable name for a status; never NULL. */
const char *pa_status_string(pa_status_t status);

/* ------------------------------------------------------------------ */
/* OS-memory backend (injectable; tests use it to force failures)      */
/* ------------------------------------------------------------------ */

typedef struct pa_backend {
    /* Return `size` bytes aligned to `align` (a power of two >= 4096 is
     * always asked for), or NULL.  Memory need not be zeroed. */
    void *(*map)(size_t size, size_t align, void *ctx);
    /* Give back exactly what map() returned, with the same size. */
    void (*unmap)(void *ptr, size_t size, void *ctx);
    /* Optional (may be NULL): tell the OS the pages are unused but keep the
     * range mapped (madvise DONTNEED).  Returns 0 on success. */
    int (*decommit)(void *ptr, size_t size, void *ctx);
    void *ctx;
} pa_backend_t;

/* The default backend: mmap/munmap/madvise.  Static; never NULL. */
const pa_backend_t *pa_backend_default(void);

/* Give the C library's free heap memory back to the system (glibc's
 * malloc_trim(0): the pages of freed malloc blocks that the heap kept).
 * Model loading leaves such garbage behind (parsers, shape inference);
 * pyarena calls this once a model is loaded.  Returns 1 if memory was
 * given back, 0 if none was or the C library has no such call.  Never
 * fails; safe from any thread. */
int pa_heap_trim(void);

/* ------------------------------------------------------------------ */
/* Arena: bump allocation for long-lived data                          */
/* ------------------------------------------------------------------ */
/* Not thread-safe: one thread at a time per arena (weights are loaded
 * once).  Blocks are never freed one by one: mark/rewind and reset
 * release everything allocated after a point. */

typedef struct pa_arena pa_arena_t;

/* How an arena or a pool grows when it runs out (see each config). */
typedef enum pa_growth {
    PA_GROW_POW2 = 0,      /* a new chunk of the next power of two, at
                              least double the previous chunk (ORT's
                              kNextPowerOfTwo)                          */
    PA_GROW_REQUESTED = 1, /* a new chunk just large enough (ORT's
                              kSameAsRequested)                         */
    PA_GROW_NONE = 2       /* fixed capacity: fail with PA_ERR_NOMEM    */
} pa_growth_t;

typedef struct pa_arena_config {
    size_t alignment;   /* granularity, power of two >= 8; default 64    */
    size_t chunk_size;  /* first chunk (bytes); 0 = 64 KiB              */
    size_t capacity;    /* hard limit on reserved bytes; 0 = unlimited  */
    pa_growth_t growth; /* PA_GROW_*                                    */
    const pa_backend_t *backend; /* NULL = pa_backend_default()        */
} pa_arena_config_t;

typedef struct pa_arena_stats {
    size_t reserved;      /* bytes obtained from the backend / caller    */
    size_t used;          /* bytes consumed, padding included            */
    size_t requested;     /* bytes asked for by live allocations         */
    size_t padding;       /* used - requested: alignment waste           */
    size_t peak;          /* highest `used` since create / reset_peak    */
    size_t count;         /* live allocations                            */
    size_t chunks;        /* chunks in use                               */
    size_t spare;         /* bytes in spare chunks (part of reserved)    */
    size_t capacity;      /* hard limit, 0 = unlimited                   */
    size_t alignment;     /* the arena's granularity                     */
} pa_arena_stats_t;

/* A position to rewind to.  Treat the fields as opaque. */
typedef struct pa_arena_mark {
    uint64_t epoch;
    size_t chunk;
    size_t offset;
    size_t requested;
    size_t count;
} pa_arena_mark_t;

/* Fill `cfg` with the defaults (alignment 64, 64 KiB chunks, POW2).
 * PA_ERR_INVALID for a NULL cfg. */
pa_status_t pa_arena_config_default(pa_arena_config_t *cfg);

/* Create an arena that owns its chunks (cfg NULL = defaults); release it
 * with pa_arena_destroy().  NULL on failure: PA_ERR_ALIGN (alignment not
 * a power of two in [8, 2^30]), PA_ERR_INVALID (unknown growth, a backend
 * without map/unmap), PA_ERR_NOMEM (the first chunk cannot be mapped). */
pa_arena_t *pa_arena_create(const pa_arena_config_t *cfg, pa_status_t *status);

/* Bytes of metadata pa_arena_init_static() needs. */
size_t pa_arena_metadata_size(void);

/* Create a fixed-capacity arena over caller-owned memory: `meta` holds
 * pa_arena_metadata_size() bytes, `buffer`/`size` the memory to hand out;
 * the base is aligned up to `alignment` (0 = 64) inside `buffer`.  Nothing
 * is ever mapped or freed by the arena.  NULL on failure: PA_ERR_ALIGN,
 * or PA_ERR_INVALID (NULL or too small / misaligned `meta`, NULL
 * `buffer`, a buffer that cannot hold one aligned block). */
pa_arena_t *pa_arena_init_static(void *meta, size_t meta_size, void *buffer,
                                 size_t size, size_t alignment,
                                 pa_status_t *status);

/* Release the arena and every chunk it mapped (caller memory is left
 * alone).  Invalidates the handle and every pointer it handed out.
 * PA_ERR_INVALID for NULL. */
pa_status_t pa_arena_destroy(pa_arena_t *arena);

/* Allocate `size` bytes aligned to `align` (0 = the arena granularity;
 * an alignment below the granularity is raised to it).  size 0 returns a
 * valid unique aligned pointer.  NULL on failure: PA_ERR_INVALID (NULL
 * arena), PA_ERR_ALIGN, PA_ERR_OVERFLOW, PA_ERR_NOMEM (capacity or the
 * backend).  A failure leaves the arena as it was (minus trimmed spares). */
void *pa_arena_alloc(pa_arena_t *arena, size_t size, size_t align,
                     pa_status_t *status);

/* Record the current position in `*mark`.  PA_ERR_INVALID for NULLs. */
pa_status_t pa_arena_mark(const pa_arena_t *arena, pa_arena_mark_t *mark);

/* Release everything allocated after `mark`.  Chunks begun after it stay
 * mapped as spares (reused by later growth; pa_arena_trim() unmaps them),
 * so stale pointers never fault.  Invalidates those pointers and later
 * marks; PA_ERR_STATE if the mark is from before a reset or lies beyond
 * the current position, PA_ERR_INVALID for NULLs.  Not detected: a mark released by an earlier
 * rewind whose position has since been reached again -- use marks in stack
 * order (pyarena.Arena enforces this). */
pa_status_t pa_arena_rewind(pa_arena_t *arena, const pa_arena_mark_t *mark);

/* Release every allocation; the first chunk stays current, the others
 * become spares.  Invalidates every pointer and mark.  PA_ERR_INVALID
 * for NULL. */
pa_status_t pa_arena_reset(pa_arena_t *arena);

/* Unmap the spare chunks (no live pointer is affected: spares hold only
 * released blocks, whose stale pointers now fault).  `released` (may be
 * NULL) receives the bytes given back.  PA_ERR_INVALID for NULL. */
pa_status_t pa_arena_trim(pa_arena_t *arena, size_t *released);

/* Fill `*out` with the arena's statistics.  PA_ERR_INVALID for NULLs. */
pa_status_t pa_arena_stats(const pa_arena_t *arena, pa_arena_stats_t *out);

/* Set peak to the current use.  PA_ERR_INVALID for NULL. */
pa_status_t pa_arena_reset_peak(pa_arena_t *arena);

/* Number of chunks (0 for NULL), and the base/size of chunk `index`
 * (0 = first; PA_ERR_INVALID if there is no such chunk). */
size_t pa_arena_num_chunks(const pa_arena_t *arena);
pa_status_t pa_arena_chunk(const pa_arena_t *arena, size_t index,
                           void **base, size_t *size);

/* Which chunk holds `ptr`: its index and base; PA_ERR_FOREIGN if none. */
pa_status_t pa_arena_find(const pa_arena_t *arena, const void *ptr,
                          size_t *index, void **base, size_t *size);

/* Number of broken internal invariants (0 = healthy; 1 for NULL). */
size_t pa_arena_check(const pa_arena_t *arena);

/* ------------------------------------------------------------------ */
/* Work pool (alloc/pool.c and the files under it, see docs/pool.md) */
/* ------------------------------------------------------------------ */
/* A general-purpose pool for short-lived tensors (activations, scratch):
 * slab size classes for small blocks, a buddy allocator for medium
 * blocks and a page-run zone for large blocks, all carved from chunks
 * obtained through the pool's pa_backend_t.  Freed blocks go to per-class
 * LIFO caches first (deferred reclamation) and are coalesced by
 * pa_pool_reclaim() (a step boundary), by trimming, when a zone needs
 * memory from the page heap, or when the caches exceed their budget.
 *
 * Thread safety: every call is thread-safe (one lock per pool; see
 * docs/pool.md).  The only exception is the pa_pool_walk() callback,
 * which must not call back into the same pool (nor fork).
 *
 * fork(): safe.  pthread_atfork handlers (registered by the first
 * pa_pool_create) wait for every pool call in flight to finish before the
 * fork, so in the child every live pool is consistent and unlocked,
 * whatever the parent's other threads were doing; the child may allocate
 * from and free to every pool (blocks live at the fork stay live in the
 * child's copy).
 *
 * Block rules: every block is aligned to the pool's granularity and its
 * size is recorded by the pool.  A request of size 0 returns a valid,
 * unique block of one granule (free it like any other).  Pointers are
 * validated through side tables before anything is read: a pointer at the
 * start of a block that is not live (freed and still cached, or free)
 * gives PA_ERR_DOUBLE_FREE; any other pointer the pool did not hand out
 * (foreign, interior, inside free memory) PA_ERR_FOREIGN.  A double free
 * is always PA_ERR_DOUBLE_FREE until the next reclaim; after it, the block
 * may have merged into a larger free one and then reads as FOREIGN.  Any
 * call on a destroyed pool returns PA_ERR_STATE (NULL and PA_ERR_STATE
 * for allocating calls): the handle stays a 32-byte tombstone for the life
 * of the process.  Sizes above 2^47 fail with PA_ERR_OVERFLOW, sizes above the
 * limit with PA_ERR_NOMEM.
 */

typedef struct pa_pool pa_pool_t;

/* Which zones serve which sizes. */
typedef enum pa_pool_mode {
    PA_POOL_HYBRID = 0,     /* slabs + buddy + large zone (default)     */
    PA_POOL_SLAB_ONLY = 1,  /* size classes for every size (to 512 MiB) */
    PA_POOL_BUDDY_ONLY = 2  /* power-of-two buddy blocks for every size
                               (to 2 GiB)                               */
} pa_pool_mode_t;

/* What a trim does with a chunk it gives back. */
typedef enum pa_release {
    PA_RELEASE_UNMAP = 0,   /* trimmed chunks go back to the backend
                               (the reserved range's free tail is
                               decommitted either way)                  */
    PA_RELEASE_DECOMMIT = 1 /* trimmed chunks are decommitted (madvise)
                               and kept mapped for reuse; they no longer
                               count as reserved                        */
} pa_release_t;

/* The pool's zones; PA_ZONE_COUNT sizes pa_pool_stats_t.zone. */
typedef enum pa_zone {
    PA_ZONE_SLAB = 0,
    PA_ZONE_BUDDY = 1,
    PA_ZONE_LARGE = 2,
    PA_ZONE_COUNT = 3
} pa_zone_t;

/* The state of a block seen by pa_pool_walk(). */
typedef enum pa_block_state {
    PA_BLOCK_FREE = 0,   /* free memory inside the pool              */
    PA_BLOCK_LIVE = 1,   /* handed out, not yet freed                */
    PA_BLOCK_CACHED = 2  /* freed, held in a deferred cache          */
} pa_block_state_t;

#define PA_POOL_MAX_CLASSES 48 /* entries of pa_pool_config_t.classes */

typedef struct pa_pool_config {
    size_t alignment;      /* granularity: power of two in [8, 4096];
                              0 = 64                                    */
    pa_pool_mode_t mode;   /* PA_POOL_HYBRID / _SLAB_ONLY / _BUDDY_ONLY  */
    pa_growth_t growth;    /* PA_GROW_REQUESTED (default) / _POW2 /
                              _NONE.  With the default backend the pool
                              reserves one address range (`limit` bytes,
                              else 64 GiB; address space only) and grows
                              by committing its end: _REQUESTED by what the
                              free tail lacks, _POW2 doubling the
                              committed size.  Other backends (or when
                              the range is full) get separate chunks:
                              _REQUESTED maps exact chunks and gives
                              fully free chunks back before mapping      */
    size_t chunk_size;     /* first chunk mapped (bytes); 0 = 1 MiB.
                              With PA_GROW_NONE the pool's only chunk
                              (0 = `limit`, which is then required)      */
    size_t limit;          /* hard limit on reserved bytes; 0 = none     */
    size_t high_watermark; /* trim when reserved exceeds it; 0 = never   */
    size_t low_watermark;  /* ...down to this (<= high_watermark)        */
    size_t cache_budget;   /* max bytes held in the deferred caches;
                              0 = 16 MiB; SIZE_MAX = unbounded           */
    pa_release_t release;  /* PA_RELEASE_UNMAP (default) / _DECOMMIT     */
    unsigned classes_per_doubling; /* slab class spacing: 1, 2, 4 or 8
                              classes per power of two; 0 = 4            */
    size_t slab_max;       /* hybrid: largest slab class; 0 = 16 KiB     */
    size_t slab_size;      /* bytes per slab (multiple of 4 KiB); 0 = 64 KiB */
    size_t num_classes;    /* > 0: use classes[0..num_classes) (strictly
                              increasing multiples of the granularity)
                              instead of the generated slab classes      */
    size_t classes[48];    /* custom slab classes (PA_POOL_MAX_CLASSES)  */
    size_t buddy_region;   /* bytes per buddy region, power of two
                              >= 64 KiB; 0 = 1 MiB                       */
    size_t large_threshold; /* hybrid: blocks above go to the large zone;
                              0 = 16 KiB (at most buddy_region)         */
    const pa_backend_t *backend; /* NULL = pa_backend_default()         */
    /* Learning the step (pa_pool_step(), alloc/pool_learn.c, docs/pool.md): */
    int learn;             /* 1 (default): record each step's alloc/free
                              sequence once pa_pool_step() has been called,
                              plan a sequence seen `learn_repeats` times
                              and serve it at planned offsets; 0: off    */
    unsigned learn_repeats; /* identical steps before a plan is used;
                              0 = 2                                     */
    unsigned learn_sequences; /* learned sequences kept (they share one
                              region sized to the largest); 0 = 16, at
                              most 64                                   */
    size_t learn_max_events; /* a step with more allocs + frees is not
                              recorded; 0 = 65536                       */
    int auto_step;         /* 1: a free that brings the live bytes back to
                              the step's starting level also marks a
                              step boundary; 0 (default): only
                              pa_pool_step()                            */
    int huge_pages;        /* 1: once 16 MiB of the reserved range are
                              committed, back it with transparent huge
                              pages (fewer TLB misses on large random
                              heaps; each 2 MiB segment is resident whole
                              and collapsing costs a few ms per segment
                              as the heap grows); 0 (default): 4 KiB
                              pages only                                */
} pa_pool_config_t;

typedef struct pa_pool_zone_stats {
    size_t requested;      /* bytes asked for by live blocks            */
    size_t allocated;      /* bytes of live blocks (size-class rounded) */
    size_t reserved;       /* bytes of the spans the zone holds         */
    size_t cached;         /* bytes in this zone's deferred caches      */
    size_t peak_requested;
    size_t peak_allocated;
    size_t live;           /* live blocks                               */
    uint64_t allocs;       /* successful allocations                    */
    uint64_t frees;        /* successful frees                          */
    uint64_t cache_hits;   /* allocations served by the cache           */
} pa_pool_zone_stats_t;

typedef struct pa_pool_stats {
    size_t requested;      /* bytes asked for by live blocks            */
    size_t allocated;      /* bytes of live blocks                      */
    size_t reserved;       /* bytes obtained from the backend (minus
                              decommitted spares)                       */
    size_t cached;         /* bytes in the deferred caches              */
    size_t peak_requested; /* peaks since create / pa_pool_reset_peak() */
    size_t peak_allocated;
    size_t peak_reserved;
    size_t live;           /* live blocks                               */
    size_t total_free;     /* reserved - allocated                      */
    size_t largest_free;   /* largest block servable without growing    */
    size_t chunks;         /* chunks mapped                             */
    size_t limit;          /* hard limit, 0 = none                      */
    size_t high_watermark;
    size_t low_watermark;
    size_t alignment;      /* the pool's granularity                    */
    uint64_t allocs;       /* successful allocations                    */
    uint64_t frees;        /* successful frees                          */
    uint64_t failures;     /* allocations that returned NULL            */
    uint64_t trims;        /* trims run (explicit, watermark, limit)    */
    uint64_t grows;        /* chunks mapped after create                */
    uint64_t reclaims;     /* cache flushes (explicit, budget, step)    */
    double frag_internal;  /* 1 - requested / allocated (0 if empty)    */
    double frag_external;  /* 1 - largest_free / total_free (0 if none) */
    double frag_overall;   /* 1 - requested / reserved (0 if none)      */
    pa_pool_zone_stats_t zone[3]; /* indexed by pa_zone_t (PA_ZONE_COUNT) */
    /* learned steps (counted in the totals above too: requested,
       allocated, reserved, live, allocs, frees) */
    size_t learned_sequences; /* plans held                            */
    size_t planned_bytes;  /* bytes of the one learned region (part of
                              reserved)                                  */
    size_t planned_live;   /* bytes of live blocks in that region       */
    uint64_t plan_hits;    /* allocations served at a planned offset    */
    uint64_t plan_misses;  /* steps that diverged from their plan        */
    uint64_t plan_steps;   /* steps served from a plan to their end      */
    uint64_t steps;        /* step boundaries seen                       */
    uint64_t learn_fallbacks; /* times learning did not pay (over 64
                              step marks, steps that missed plus twice
                              the plans made at least 8 and more than
                              twice the steps served from a plan): the
                              plans were
                              dropped and the pool ran as the plain pool
                              for a while (64 << 2k steps, k the
                              fallbacks in a row; at most 4,096)       */
} pa_pool_stats_t;

typedef struct pa_pool_block {
    void *ptr;             /* first byte of the block                   */
    size_t size;           /* block bytes (what the pool set aside)     */
    size_t requested;      /* bytes asked for (0 unless LIVE)           */
    pa_zone_t zone;        /* PA_ZONE_*                                 */
    pa_block_state_t state; /* PA_BLOCK_*                               */
} pa_pool_block_t;

/* Walker callback: return 0 to continue, anything else to stop. */
typedef int (*pa_pool_walker_t)(const pa_pool_block_t *block, void *ctx);

/* Fill `cfg` with the defaults (hybrid, alignment 64, 1 MiB chunks, REQUESTED,
 * no limit, no watermarks, 4 classes per doubling up to 4 KiB).
 * PA_ERR_INVALID for a NULL cfg. */
pa_status_t pa_pool_config_default(pa_pool_config_t *cfg);

/* Create a pool (NULL cfg = defaults); release it with pa_pool_destroy().
 * NULL on failure: PA_ERR_ALIGN, PA_ERR_INVALID (a bad config), or
 * PA_ERR_NOMEM (the first chunk or the metadata cannot be had). */
pa_pool_t *pa_pool_create(const pa_pool_config_t *cfg, pa_status_t *status);

/* Release every chunk and invalidate every block (live ones included).
 * The handle becomes a tombstone: later calls return PA_ERR_STATE
 * (destroying twice too).  NULL is PA_ERR_INVALID.  Safe against
 * concurrent calls on the pool; the blocks themselves die with it. */
pa_status_t pa_pool_destroy(pa_pool_t *pool);

/* Allocate `size` bytes aligned to the granularity.  NULL on failure:
 * PA_ERR_OVERFLOW (absurd sizes), PA_ERR_NOMEM (over the limit, backend
 * failure), PA_ERR_STATE (destroyed pool), PA_ERR_INVALID (NULL pool). */
void *pa_pool_alloc(pa_pool_t *pool, size_t size, pa_status_t *status);

/* calloc: `count * size` zeroed bytes.  NULL on failure, as
 * pa_pool_alloc(), plus PA_ERR_OVERFLOW if the product overflows. */
void *pa_pool_calloc(pa_pool_t *pool, size_t count, size_t size,
                     pa_status_t *status);

/* realloc: resize the live block `ptr` to `size` bytes, keeping the
 * first min(old requested, size) bytes.  ptr NULL = alloc.  Returns the
 * (possibly moved) block; a move invalidates `ptr`.  NULL on failure, as
 * pa_pool_alloc(), plus PA_ERR_FOREIGN / PA_ERR_DOUBLE_FREE for a bad
 * `ptr`; `ptr` is then untouched (and still live if it was). */
void *pa_pool_realloc(pa_pool_t *pool, void *ptr, size_t size,
                      pa_status_t *status);

/* Free a block.  It goes to its bin's LIFO cache (reused by the next
 * request of the same size class).  Returns PA_ERR_DOUBLE_FREE /
 * PA_ERR_FOREIGN / PA_ERR_STATE without touching the pool on bad input;
 * freeing NULL is PA_OK. */
pa_status_t pa_pool_free(pa_pool_t *pool, void *ptr);

/* Usable bytes of the live block starting at `ptr` (>= the requested
 * size); 0 if `ptr` is not a live block of this pool. */
size_t pa_pool_block_size(pa_pool_t *pool, const void *ptr);

/* Flush every deferred cache: cached blocks go back to their slab / buddy
 * / large zone and are coalesced; the spare empty slabs / buddy region go
 * back to the page heap.  Call at a step boundary.  Maps and unmaps
 * nothing. */
pa_status_t pa_pool_reclaim(pa_pool_t *pool);

/* Reclaim, then give fully free chunks back to the backend until
 * reserved <= `target_reserved` (or nothing more can go).  `released`
 * (may be NULL) receives the bytes given back. */
pa_status_t pa_pool_trim(pa_pool_t *pool, size_t target_reserved,
                         size_t *released);

/* CuPy's free_all_blocks: reclaim and release every fully free chunk. */
pa_status_t pa_pool_free_all(pa_pool_t *pool);

/* Set the hard limit on reserved bytes (0 = none).  Trims first if
 * needed; PA_ERR_INVALID (limit unchanged) if reserved bytes still exceed
 * `limit` after trimming, i.e. live blocks need more. */
pa_status_t pa_pool_set_limit(pa_pool_t *pool, size_t limit);

/* Set the watermarks (0, 0 = off) and trim down to `low` if reserved
 * bytes already exceed `high`.  PA_ERR_INVALID (nothing changed) if
 * low > high. */
pa_status_t pa_pool_set_watermarks(pa_pool_t *pool, size_t high, size_t low);

/* Mark the end of one step (one inference, one loop iteration).  With
 * `learn` on, the pool records each step's sequence of allocations and
 * frees (sizes, order, lifetimes); once the same sequence has been seen
 * `learn_repeats` times it is planned (pa_plan_assign, offsets at or near
 * the lower bound) in one region shared by every learned sequence, and
 * the following steps that repeat it are served at planned offsets (the
 * i-th allocation compares its size with the plan's and adds an offset).
 * A request that diverges from the plan (another size, order or an extra
 * block) is served by the zones for the rest of that step; blocks already
 * handed out stay valid until freed.  Blocks of a step that are freed
 * during the next step are planned too (double-buffered); blocks living
 * longer come from the zones.  When a new plan is made the pool trims
 * (the warm-up memory goes back), unless the plans need under 1/16 of
 * the zones' memory.  Cheap except when a plan is made: it runs the
 * planner's greedy heuristic (no timed search: the same steps, the same
 * plan) under the pool lock.  A sequence is planned only if fewer other
 * step kinds than the plans kept came between its sightings.  PA_OK, or
 * PA_ERR_STATE / PA_ERR_INVALID for a destroyed / NULL pool; a pool with
 * learning off just counts the step. */
pa_status_t pa_pool_step(pa_pool_t *pool);

/* Fill `*out` with a consistent snapshot of the statistics
 * (PA_ERR_INVALID for a NULL `out`). */
pa_status_t pa_pool_stats(pa_pool_t *pool, pa_pool_stats_t *out);

/* Set the peaks to the current values. */
pa_status_t pa_pool_reset_peak(pa_pool_t *pool);

/* Number of broken internal invariants (0 = healthy; 1 for NULL or a
 * destroyed pool), the learned region and plans included.  O(pool size):
 * for tests and debugging. */
size_t pa_pool_check(pa_pool_t *pool);

/* Call `fn` for every block (live, cached and free) of the zones in
 * address order within each chunk, under the pool lock (the learned
 * region is not walked: its bytes are in the statistics).  Stops early
 * when `fn` returns nonzero (still PA_OK).  PA_ERR_INVALID for a NULL
 * `fn`. */
pa_status_t pa_pool_walk(pa_pool_t *pool, pa_pool_walker_t fn, void *ctx);


/* ------------------------------------------------------------------ */
/* Static planner core (plan*.c)                                       */
/* ------------------------------------------------------------------ */
/* The planner assigns byte offsets to buffers with known lifetimes so
 * that buffers whose lifetimes overlap never overlap in bytes.  Lifetimes
 * are inclusive step ranges [first, last].  Pure computation: re-entrant,
 * thread-safe across distinct inputs.  See docs/planner-core.md. */

typedef enum pa_plan_strategy {
    PA_PLAN_FIRST_FIT = 0,         /* execution order, lowest fitting gap */
    PA_PLAN_GREEDY_BY_SIZE = 1,    /* largest first, best gap (TFLite)     */
    PA_PLAN_GREEDY_BY_BREADTH = 2, /* Pisarchyk & Lee 2020                 */
    PA_PLAN_BEST = 3,              /* heuristics + search, time-bounded    */
    PA_PLAN_EXACT = 4              /* exact search, proves optimality      */
} pa_plan_strategy_t;

typedef struct pa_plan_buffer {
    uint64_t size;   /* bytes (padded to the alignment by the planner)   */
    int64_t first;   /* first step the buffer is live (inclusive)        */
    int64_t last;    /* last step the buffer is live (inclusive)         */
    uint64_t offset; /* output: byte offset, a multiple of the alignment */
} pa_plan_buffer_t;

typedef struct pa_plan_options {
    pa_plan_strategy_t strategy;
    uint64_t alignment;  /* power of two (1 allowed); 0 = 64             */
    double time_limit;   /* seconds for BEST / EXACT search; <= 0: 10 s  */
    uint64_t capacity;   /* 0 = minimise; else the arena must fit in it  */
} pa_plan_options_t;

typedef struct pa_plan_result {
    uint64_t arena_bytes;  /* max over buffers of offset + padded size   */
    uint64_t lower_bound;  /* max over steps of padded bytes live        */
    int optimal;           /* 1 if arena_bytes is proven minimal         */
    double seconds;        /* wall time spent                            */
    pa_plan_strategy_t strategy; /* what produced it: a heuristic, BEST
                                    (randomised search) or EXACT         */
} pa_plan_result_t;

/* Fill `opt` with the defaults (BEST, alignment 64, 10 s).
 * PA_ERR_INVALID for a NULL opt. */
pa_status_t pa_plan_options_default(pa_plan_options_t *opt);

/* Assign `offset` to every buffer in `bufs` (other fields are read only;
 * offsets are written only on PA_OK).  opt NULL = defaults; result may be
 * NULL.  PA_ERR_INVALID: NULL bufs, first < 0, first > last, an unknown
 * strategy; PA_ERR_ALIGN: alignment not a power of two; PA_ERR_OVERFLOW:
 * padded sizes sum past INT64_MAX.  With a capacity: PA_ERR_INFEASIBLE when
 * the lower bound exceeds it, when a plain heuristic's plan does not fit,
 * or when BEST/EXACT proved no plan fits; PA_ERR_TIMEOUT when BEST/EXACT
 * ran out of time first; `result` then describes the best plan found (its
 * offsets are not written).  EXACT without a capacity minimises; if time
 * runs out it returns its best plan with optimal = 0. */
pa_status_t pa_plan_assign(pa_plan_buffer_t *bufs, size_t n,
                           const pa_plan_options_t *opt,
                           pa_plan_result_t *result);

/* The lower bound: the largest total of padded sizes live at one step.
 * O(n log n).  Returns 0 for n == 0; UINT64_MAX on overflow or bad input. */
uint64_t pa_plan_lower_bound(const pa_plan_buffer_t *bufs, size_t n,
                             uint64_t alignment);

/* ------------------------------------------------------------------ */
/* Native kernels: float32 convolution, activations, pooling, resize  */
/* ------------------------------------------------------------------ */
/* Functions of caller-owned float32 buffers, dense and in C order in the
 * layout named: they allocate nothing, touch no memory but their
 * arguments' and need no workspace.  Bad geometry is PA_ERR_INVALID,
 * found before anything is written.  `workers` NULL runs on the calling
 * thread; a pool splits the output rows (or planes) over its threads.
 * Reentrant: concurrent calls are safe when their outputs differ and they
 * do not share a pool. */

typedef struct pa_workers pa_workers_t;

/* A pool of `nthreads` - 1 threads that help the calling thread (1 starts
 * none).  NULL with PA_ERR_INVALID for nthreads < 1 or > 256, PA_ERR_NOMEM
 * when a thread cannot start.  One caller at a time. */
pa_workers_t *pa_workers_create(int nthreads, pa_status_t *status);
/* Stop and join the threads, free the pool.  PA_ERR_INVALID for NULL. */
pa_status_t pa_workers_destroy(pa_workers_t *workers);
/* Threads that run a call (the caller included); 1 for NULL. */
int pa_workers_count(const pa_workers_t *workers);

typedef enum pa_layout {
    PA_LAYOUT_NCHW = 0,     /* ONNX: channels before rows                 */
    PA_LAYOUT_NHWC = 1      /* TFLite: channels innermost                 */
} pa_layout_t;

typedef enum pa_act {
    PA_ACT_NONE = 0,
    PA_ACT_RELU = 1,        /* max(x, 0)                                   */
    PA_ACT_CLIP = 2,        /* min(max(x, alpha), beta): ReLU6 is 0..6     */
    PA_ACT_SIGMOID = 3,     /* 1 / (1 + exp(-x))                           */
    PA_ACT_SILU = 4,        /* x * sigmoid(x) (Swish)                      */
    PA_ACT_HARDSWISH = 5,   /* x * clip(x + 3, 0, 6) / 6                   */
    PA_ACT_HARDSIGMOID = 6, /* clip(alpha * x + beta, 0, 1)                */
    PA_ACT_GELU = 7         /* x * (1 + erf(x / sqrt 2)) / 2 (erf form)    */
} pa_act_t;

typedef struct pa_act_params {
    pa_act_t kind;
    float alpha, beta;      /* CLIP: bounds; HARDSIGMOID: slope, offset    */
} pa_act_params_t;

/* y = act(x), n floats; y may be x.  PA_ERR_INVALID for NULL pointers
 * (with n > 0) or an unknown kind. */
pa_status_t pa_act(const pa_act_params_t *act, const float *x, float *y, size_t n,
                   pa_workers_t *workers);

/* y = a + b, n floats each (float32 additions, one per value: NumPy's
 * bits); y may be a or b, otherwise none of the three may overlap.
 * PA_ERR_INVALID for NULL pointers (with n > 0). */
pa_status_t pa_add(const float *a, const float *b, float *y, size_t n, pa_workers_t *workers);

/* NCHW <-> NHWC of n images of c channels of hw pixels, 4-byte values
 * (float32, int32) moved as they are (the same bits): to_nhwc (not 0)
 * y[(b * hw + p) * c + k] = x[(b * c + k) * hw + p], else the inverse,
 * x[(b * hw + p) * c + k] to y[(b * c + k) * hw + p].  x and y may not
 * overlap.  PA_ERR_INVALID for NULL pointers (with values), negative
 * sizes, more than INT64_MAX bytes or overlapping buffers. */
pa_status_t pa_transpose_planes(const void *x, void *y, int64_t n, int64_t c, int64_t hw,
                                int to_nhwc, pa_workers_t *workers);

/* 1 where pa_transpose_planes moves c channels with vector shuffles
 * (AVX-512 built and usable, 2 <= c <= 4), else 0: there it copies value
 * by value, no faster than a strided copy per plane. */
int pa_transpose_planes_vectorised(int64_t c);

/* y = act(x + bias[c]) over n images of c channels of `spatial` values
 * each, in `layout`; bias may be NULL (no bias); y may be x.  The epilogue
 * of a convolution done elsewhere (a BLAS product).  PA_ERR_INVALID for
 * NULL pointers, negative sizes or an unknown kind. */
pa_status_t pa_bias_act(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                        const float *x, const float *bias, float *y,
                        const pa_act_params_t *act, pa_workers_t *workers);

/* y = act(x * scale[c] + bias[c]) over n images of c channels of `spatial`
 * values each, in `layout`; y may be x.  An inference BatchNormalization
 * (with the per-channel Mul / Add after it folded in) and its activation
 * in one pass.  PA_ERR_INVALID for NULL pointers, negative sizes or an
 * unknown kind. */
pa_status_t pa_scale_bias_act(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                              const float *x, const float *scale, const float *bias, float *y,
                              const pa_act_params_t *act, pa_workers_t *workers);

/* The wider instruction sets the kernels dispatch to on this processor
 * (kernels/cpu.c, asked once), as pa_isa_t bits: PA_ISA_AVX512 where the
 * AVX-512 tiles run (not with PA_DISABLE_AVX512=1 in the environment),
 * PA_ISA_AVX512_VNNI where the 8-bit VNNI tiles run too; 0 on a build or
 * processor without them.  The runtime weighs its tiles against the BLAS
 * library's with it. */
typedef enum pa_isa {
    PA_ISA_AVX512 = 1,
    PA_ISA_AVX512_VNNI = 2
} pa_isa_t;
unsigned pa_kernels_isa(void);

/* The logistic function and the hyperbolic tangent of n floats as
 * onnxruntime computes them on x86-64 with FMA3 (kernels/ort_approx.c:
 * MLAS's rational approximations, bit for bit on every target); NaN gives
 * NaN.  y is x or disjoint from it.  PA_ERR_INVALID for NULL pointers
 * (n > 0) or x and y partly overlapping. */
pa_status_t pa_ort_logistic(const float *x, float *y, size_t n);
pa_status_t pa_ort_tanh(const float *x, float *y, size_t n);

/* Softmax over the last axis: y[r, :] = exp(x[r, :] - max) / sum for
 * `rows` rows of n floats (a row of -inf only gives NaN, as NumPy); y is
 * x or disjoint from it.  PA_ERR_INVALID for NULL pointers (rows > 0),
 * n < 1, rows < 0, x and y partly overlapping. */
pa_status_t pa_softmax_rows(const float *x, float *y, int64_t rows, int64_t n,
                            pa_workers_t *workers);

/* Scaled dot-product attention, one (batch, head) pair at a time:
 * out[b, h, i, :] = softmax_j(scale * q[b, h, i, :] . k[b, h, j, :]
 * + mask[b, h, i, j]) @ v[b, h, j, :], over the keys j < `keys` (the live
 * length: a KV cache's later rows are never read) and, when causal >= 0,
 * j <= causal + i only (query i of a step whose past is `causal` long).
 * Every operand is addressed by element strides (batch, head, row or
 * key, element), so transposed or broadcast views need no copy (a stride
 * may be 0); mask may be NULL (no mask).  No keys (keys 0): out is 0. */
typedef struct pa_attention {
    int64_t batch, heads;       /* the (batch, head) pairs                 */
    int64_t rows, keys, size;   /* queries, keys read, head size           */
    int64_t causal;             /* -1: none; else key j <= causal + i      */
    float scale;
    int64_t q[4], k[4], v[4], mask[4], out[4];  /* element strides        */
} pa_attention_t;

/* Floats of scratch pa_attention needs for `a` (at least 1; 0 for a bad
 * `a`). */
size_t pa_attention_scratch_floats(const pa_attention_t *a);

/* Run `a` (see pa_attention_t); scratch holds
 * pa_attention_scratch_floats(a) floats, disjoint from out; out must not
 * overlap the inputs.  PA_ERR_INVALID for NULL pointers (work to do),
 * sizes < 0 or past 2^40 elements, causal < -1. */
pa_status_t pa_attention(const pa_attention_t *a, const float *q, const float *k,
                         const float *v, const float *mask, float *out, float *scratch,
                         pa_workers_t *workers);

/* Layer normalisation over the last axis: y[r, i] = (x[r, i] - mean) /
 * sqrt(var + eps) * gamma[i] + beta[i] (population variance; beta may be
 * NULL) for `rows` rows of n floats; y is x or disjoint from it.
 * PA_ERR_INVALID for NULL x / y (rows > 0) or gamma, n < 1, rows < 0,
 * eps < 0 or NaN, x and y partly overlapping. */
pa_status_t pa_layer_norm_rows(const float *x, const float *gamma, const float *beta,
                               float *y, int64_t rows, int64_t n, float eps,
                               pa_workers_t *workers);

/* y = x where x >= 0, else x * slope[channel] (PRelu; LeakyRelu is one
 * channel), over n images of c channels of `spatial` values each in
 * `layout`; y may be x.  PA_ERR_INVALID for NULL pointers or bad sizes. */
pa_status_t pa_prelu(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                     const float *x, const float *slope, float *y, pa_workers_t *workers);

/* A 2-D convolution: sizes, strides, dilations, top/left zero padding
 * (bottom/right padding follows from the output size), groups, and the
 * activation fused after the bias. */
typedef struct pa_conv2d {
    pa_layout_t layout;
    int64_t n, c_in, h, w;          /* input                              */
    int64_t c_out, h_out, w_out;    /* output                             */
    int64_t kh, kw, sh, sw, dh, dw; /* kernel, strides, dilations         */
    int64_t pad_top, pad_left;
    int64_t groups;                 /* c_in and c_out are multiples of it */
    pa_act_params_t act;
} pa_conv2d_t;

/* Floats of the packed weights pa_conv2d_pack() writes (weights, bias and
 * a zero row, in the order the kernel reads them); 0 for bad geometry. */
size_t pa_conv2d_packed_size(const pa_conv2d_t *conv);

/* Pack `weight` ([c_out][kh][kw][c_in / groups], i.e. OHWI; depthwise
 * 1HWC weights are this with groups = c_in) and `bias` (c_out floats, or
 * NULL for none) into `packed` of `packed_size` floats, which the caller
 * owns and passes to every pa_conv2d_run().  PA_ERR_INVALID for bad
 * geometry, NULL pointers or a packed_size below pa_conv2d_packed_size(). */
pa_status_t pa_conv2d_pack(const pa_conv2d_t *conv, const float *weight,
                           const float *bias, float *packed, size_t packed_size);

/* y = act(conv(x) + bias) for `conv` (the geometry it was packed with).
 * Depthwise convolutions (groups = c_in = c_out) run a channel-vector
 * (NHWC) or row-vector (NCHW) kernel, pointwise ones (1x1, stride 1,
 * unpadded, groups 1) a packed SGEMM, those over at most 4 input channels
 * (groups 1, column stride 1 or 2: first layers over RGB) a stack-tile
 * kernel, the others a register-blocked direct convolution.  x and y must not overlap.  PA_ERR_INVALID for bad
 * geometry or NULL pointers. */
pa_status_t pa_conv2d_run(const pa_conv2d_t *conv, const float *packed,
                          const float *x, float *y, pa_workers_t *workers);

/* pa_conv2d_run() of a pointwise convolution (1x1, stride 1, unpadded,
 * groups 1: the packed SGEMM) with a residual: y = act(conv(x) + bias + r),
 * r holding n images of h x w pixels of c_res channels in the same layout;
 * output channels from c_res on add nothing (a residual zero-padded on
 * the channel axis, the Pad fused).  r must not overlap y, except that
 * in NHWC r may be y itself (c_res = c_out: the output written over the
 * residual, each value read before its place is written).
 * PA_ERR_INVALID for other geometry, c_res outside [1, c_out] or NULL. */
pa_status_t pa_conv2d_run_residual(const pa_conv2d_t *conv, const float *packed,
                                   const float *x, const float *r, int64_t c_res,
                                   float *y, pa_workers_t *workers);

/* Max or average pooling over 2-D windows (no dilation), padding never
 * counted as a maximum; for averages `count_include_pad` says whether the
 * explicit pads (not the ceil-mode overhang) count in the divisor. */
typedef struct pa_pool2d {
    pa_layout_t layout;
    int64_t n, c, h, w, h_out, w_out;
    int64_t kh, kw, sh, sw, pad_top, pad_left, pad_bottom, pad_right;
    int count_include_pad;
} pa_pool2d_t;

/* y = max (pa_maxpool2d) or mean (pa_avgpool2d) of each window.
 * PA_ERR_INVALID for bad geometry or NULL pointers. */
pa_status_t pa_maxpool2d(const pa_pool2d_t *pool, const float *x, float *y,
                         pa_workers_t *workers);
pa_status_t pa_avgpool2d(const pa_pool2d_t *pool, const float *x, float *y,
                         pa_workers_t *workers);

/* The order in which an average pool sums its window (kernels/pool_mlas.c):
 * onnxruntime MLAS's, so its float32 bits where a QDQ file runs a float
 * pool between a DequantizeLinear and a QuantizeLinear. */
typedef enum pa_pool_order {
    PA_POOL_ORDER_KERNEL = 0,  /* pa_avgpool2d's own                        */
    /* every tap of the padded window (a pad reads +0.0f), rows then
     * columns, from the first tap, then sum / (float)count (MLAS's NCHWc
     * pooling kernels) */
    PA_POOL_ORDER_TAPS = 1,
    /* a whole-image window, no pads, a 1 x 1 output (GlobalAveragePool):
     * four lanes over the plane (lane k from x[k] on, x[4i + k] added in
     * order), (l0 + l2) + (l1 + l3), the tail added one by one, then
     * / (float)(h * w) (MLAS's MlasPoolGlobalKernel, mlas/lib/pooling.cpp) */
    PA_POOL_ORDER_LANES = 2
} pa_pool_order_t;

/* pa_avgpool2d() summing in `order`.  PA_ERR_INVALID as pa_avgpool2d, for
 * an unknown order, and for PA_POOL_ORDER_LANES on other than a global
 * window. */
pa_status_t pa_avgpool2d_ordered(const pa_pool2d_t *pool, pa_pool_order_t order,
                                 const float *x, float *y, pa_workers_t *workers);

/* -- 8-bit quantized convolution (kernels/qconv.c) ------------------------
 * ONNX QLinearConv / ConvInteger (and QLinearMatMul / MatMulInteger as
 * 1x1 convolutions), TFLite's int8 CONV_2D / DEPTHWISE_CONV_2D.  With x
 * and w the 8-bit values and their zero points:
 *     acc = bias[o] + sum over taps and channels (x - x_zp) * (w - w_zp[o])
 * exactly in int32 (padding reads as x_zp, so it adds nothing); then for an
 * 8-bit output, as onnxruntime's MlasRequantizeOutput
 * (onnxruntime/core/mlas/lib/quantize.cpp):
 *     y = clamp(nearbyint(float(acc) * scale[o]), y_lo - y_zp, y_hi - y_zp) + y_zp
 * (float32 product, rounding half to even), or y = acc for PA_Q_S32.
 * Weights are packed once (pa_qconv2d_pack); a run needs a workspace of
 * pa_qconv2d_scratch_size() bytes (im2col blocks, or none). */
typedef enum pa_qtype {
    PA_Q_U8 = 0,
    PA_Q_S8 = 1,
    PA_Q_S32 = 2            /* outputs only: the int32 accumulators        */
} pa_qtype_t;

/* How an 8-bit output is requantized: onnxruntime's float32 product
 * (above), or TFLite's fixed-point multiplier and shift per channel with
 * pa_qrequant's arithmetic (two roundings: CONV_2D / DEPTHWISE_CONV_2D;
 * one: FULLY_CONNECTED), in the kernel's epilogue: the same bits as the
 * int32 accumulators (PA_Q_S32) followed by pa_qrequant. */
typedef enum pa_qrequant_mode {
    PA_QREQ_FLOAT = 0,
    PA_QREQ_FIXED = 1,          /* TFLite's two roundings                  */
    PA_QREQ_FIXED_SINGLE = 2    /* TFLite FULLY_CONNECTED's one rounding   */
} pa_qrequant_mode_t;

typedef struct pa_qconv2d {
    pa_conv2d_t conv;       /* the geometry; conv.act must be PA_ACT_NONE  */
    pa_qtype_t x_type, w_type, y_type; /* x, w: U8 or S8; y: U8, S8 or S32 */
    int32_t x_zp;           /* may change between runs (a zero point computed
                               at run time): the packed weights do not hold it */
    int32_t y_zp, y_lo, y_hi; /* output zero point and clamp (within the type) */
    pa_qrequant_mode_t requant; /* PA_QREQ_FLOAT (0), or a FIXED mode: then
                               y is U8 or S8, the layout NHWC, and the
                               weights are packed by pa_qconv2d_pack_fixed */
} pa_qconv2d_t;

/* Bytes of the packed weights pa_qconv2d_pack() writes; 0 for a bad
 * descriptor (the geometry of pa_conv2d_packed_size, types out of range,
 * y_lo > y_hi or either outside the output type, a zero point outside its
 * type). */
size_t pa_qconv2d_packed_size(const pa_qconv2d_t *q);

/* Bytes of the workspace pa_qconv2d_run() takes (0: none); (size_t)-1 for
 * a bad descriptor. */
size_t pa_qconv2d_scratch_size(const pa_qconv2d_t *q);

/* Pack `weight` (OHWI: [c_out][kh][kw][c_in / groups] 8-bit values of
 * w_type), the weight zero points `w_zp` (c_out values, or NULL: all 0),
 * `bias` (c_out int32, or NULL) and `scale` (c_out multipliers
 * x_scale * w_scale[o] / y_scale as float32, or NULL for PA_Q_S32) into
 * `packed` (packed_size bytes, 64-byte aligned).  PA_ERR_INVALID for a bad
 * descriptor, NULL pointers, a zero point outside w_type, a non-finite or
 * negative scale, or packed_size below pa_qconv2d_packed_size(). */
pa_status_t pa_qconv2d_pack(const pa_qconv2d_t *q, const void *weight, const int32_t *w_zp,
                            const int32_t *bias, const float *scale, void *packed,
                            size_t packed_size);

/* pa_qconv2d_pack for a FIXED requant mode: `mult_shift` holds the c_out
 * fixed-point multipliers (>= 0) then the c_out shifts (in [-31, 30]), as
 * pa_qrequant takes them.  PA_ERR_INVALID as pa_qconv2d_pack, and for a
 * descriptor in PA_QREQ_FLOAT mode or a multiplier or shift out of range
 * (pa_qconv2d_pack refuses a FIXED descriptor). */
pa_status_t pa_qconv2d_pack_fixed(const pa_qconv2d_t *q, const void *weight,
                                  const int32_t *w_zp, const int32_t *bias,
                                  const int32_t *mult_shift, void *packed, size_t packed_size);

/* y = the quantized convolution of x (n images, conv.layout) with the
 * weights packed for the same descriptor (x_zp may differ).  x and y must
 * not overlap; `scratch` holds scratch_size >= pa_qconv2d_scratch_size()
 * bytes (NULL when that is 0).  Deterministic: the same bits on every
 * machine and instruction set.  PA_ERR_INVALID for a bad descriptor, NULL
 * pointers or a short scratch. */
pa_status_t pa_qconv2d_run(const pa_qconv2d_t *q, const void *packed, const void *x, void *y,
                           void *scratch, size_t scratch_size, pa_workers_t *workers);

/* W [k][n] of w_type (PA_Q_U8 or PA_Q_S8) with its n zero points w_zp (in
 * W's range; NULL for 0) packed once for pa_qrows_run (kernels/qrows.c):
 * pa_qrows_packed_size(k, n) bytes (0 for k or n negative, k > 32768 or
 * n > 2^24) at `packed`, 4-byte aligned, the caller's.  PA_ERR_INVALID for
 * a short or misaligned buffer, bad sizes, type or zero points, NULL w. */
size_t pa_qrows_packed_size(int64_t k, int64_t n);
pa_status_t pa_qrows_pack(const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t k,
                          int64_t n, void *packed, size_t size);

/* An 8-bit matrix product from a packed W (for the few rows the 6-row
 * integer GEMM tile would mostly waste: a recurrent step; and a sequence's
 * input product): y (m x n) = (a - a_zp) (w - w_zp) in int32, exactly, `a`
 * m rows of k bytes; the AVX-512 VNNI tile where the processor has it,
 * else a portable one (the same bits).  One thread.
 * PA_ERR_INVALID for what is not a packed W, m < 0, a_zp outside 0..255,
 * NULL a or y (m, n > 0), y overlapping a or the packed W. */
pa_status_t pa_qrows_run(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                         int32_t *y);

/* The few-columns twin of pa_qrows_*: W [k][n] of w_type (PA_Q_U8 or
 * PA_Q_S8) with its n zero points w_zp (in W's range; NULL for 0) packed
 * once column by column for pa_qcols_run (kernels/qcols.c):
 * pa_qcols_packed_size(k, n) bytes (0 for k or n negative, k > 32768 or
 * n > 2^24) at `packed`, 4-byte aligned, the caller's.  PA_ERR_INVALID for
 * a short or misaligned buffer, bad sizes, type or zero points, NULL w. */
size_t pa_qcols_packed_size(int64_t k, int64_t n);
pa_status_t pa_qcols_pack(const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t k,
                          int64_t n, void *packed, size_t size);

/* An 8-bit matrix product for the few columns a GEMM tile would mostly
 * pad (an attention's score vector, n = 1): y (m x n) = (a - a_zp)
 * (w - w_zp) in int32, exactly, `a` m rows of k bytes, each column one dot
 * product per row; the AVX-512 VNNI tile where the processor has it, else
 * a portable one (the same bits).  One thread.  PA_ERR_INVALID for what is
 * not a W packed by pa_qcols_pack, m < 0, a_zp outside 0..255, NULL a or
 * y (m, n > 0), y overlapping a or the packed W. */
pa_status_t pa_qcols_run(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                         int32_t *y);

/* One time step of onnxruntime's DynamicQuantizeLSTM with its default gates
 * (sigmoid, tanh, tanh; no peepholes, clip or input_forget) for n rows of
 * `hidden` units (kernels/dqlstm.c): h_src quantized as DynamicQuantizeLinear,
 * its exact product with the 8-bit R [hidden][4 hidden] (packed by
 * pa_qrows_pack with its zero points; float32 r_scale per column),
 * g = xw + that * (r_scale * h scale) (+ bias), the gates by pa_ort_logistic /
 * pa_ort_tanh, c_out = c f + i c~, h_out = tanh(c_out) o -- onnxruntime's
 * roundings, bit for bit.  g (n x 4H), hq (n x H bytes), acc (n x 4H), mult
 * (4H): the caller's workspace; c_out may be c, h_out may be h_src.
 * PA_ERR_INVALID for bad sizes, NULL or what pa_qrows_run refuses. */
pa_status_t pa_dqlstm_step(const float *h_src, const float *c, const float *xw,
                           const float *bias, const void *r_packed, const float *r_scale,
                           int64_t n, int64_t hidden, float *g, float *c_out, float *h_out,
                           uint8_t *hq, int32_t *acc, float *mult);

/* `steps` steps of pa_dqlstm_step in one call (a direction without
 * sequence_lens): step t reads xw + t n 4H (steps x n x 4H), forward or
 * (reverse 1) from the last step back; h and c (n x hidden) hold the
 * initial state and are left holding the last; y (NULL: not kept) gets each
 * step's h, row i of step t at y + t y_step + i y_row (floats).  The same
 * workspace as the step.  PA_ERR_INVALID as the step, or steps < 0, y_row
 * < hidden with n > 1. */
pa_status_t pa_dqlstm_run(const float *xw, int64_t steps, int reverse, const float *bias,
                          const void *r_packed, const float *r_scale, int64_t n, int64_t hidden,
                          float *h, float *c, float *y, int64_t y_step, int64_t y_row, float *g,
                          uint8_t *hq, int32_t *acc, float *mult);

/* The steps of one direction of a float32 ONNX LSTM with the default gates
 * (sigmoid, tanh, tanh; no peepholes, clip or input_forget), n rows of
 * `hidden` units, as one call (kernels/lstm.c).  Step t (walked from the
 * last when `reverse`) reads row i of the input at x + t * x_step + i *
 * x_row (`input` floats); g = (x[t][i] @ wt + h[i] @ rt) + bias, wt = W^T
 * [input][4 hidden] and rt = R^T [hidden][4 hidden] row-major, bias (Wb +
 * Rb, 4 hidden) or NULL; the gates by pa_ort_logistic / pa_ort_tanh
 * (onnxruntime's); c[i] = c[i] f + i c~, h[i] = tanh(c[i]) o, both in place
 * (n x hidden each: the state in, the last state out), and h[i] copied to
 * y + t * y_step + i * y_row when y is not NULL.  g: the caller's workspace
 * of 4 hidden floats.  PA_ERR_INVALID for bad sizes or NULL. */
pa_status_t pa_lstm_run(const float *x, int64_t x_step, int64_t x_row, int64_t input,
                        const float *wt, const float *bias, const float *rt, int64_t n,
                        int64_t hidden, int64_t steps, int reverse, float *h, float *c, float *y,
                        int64_t y_step, int64_t y_row, float *g);

/* onnxruntime's com.microsoft MatMulNBits from its packed blocks
 * (kernels/nbits.c): W (n x k) in `bits`-bit values (2, 4 or 8; low bits
 * of a byte first), b [n][blocks][block * bits / 8] with blocks =
 * ceil(k / block), block a power of 2 in [16, 4096]; scales [n][blocks];
 * zero points packed as b (zp_u8, a row of ceil(blocks * bits / 8) bytes
 * per column) or floats [n][blocks] (zp_f), 2^(bits - 1) when both are
 * NULL; W[j][t] = (q - zero point) * scale in float32.
 * pa_nbits_rows: y (m x n) = a (m x k) @ W^T (+ bias[n] when not NULL) for
 * m <= 64 rows; ws: a workspace of m * blocks * block floats.  pa_nbits_panel: W's rows [n0, n1) into panel
 * ((n1 - n0) x k, row-major).  PA_ERR_INVALID for bad sizes, NULL or both
 * kinds of zero points. */
pa_status_t pa_nbits_rows(const float *a, int64_t m, int64_t k, const uint8_t *b, int bits,
                          int64_t block, const float *scales, const uint8_t *zp_u8,
                          const float *zp_f, int64_t n, const float *bias, float *y,
                          float *ws);
pa_status_t pa_nbits_panel(const uint8_t *b, int bits, int64_t block, int64_t k,
                           const float *scales, const uint8_t *zp_u8, const float *zp_f,
                           int64_t n, int64_t n0, int64_t n1, float *panel);

/* ONNX DynamicQuantizeLinear (kernels/qdynamic.c), as onnxruntime's
 * GetQuantizationParameter and MlasQuantizeLinear compute it
 * (onnxruntime/core/util/qmath.h): the range [min(0, min x), max(0, max x)]
 * (a NaN anywhere makes it [0, 0]); *scale = (max - min) / 255 in float32,
 * 1 when max == min; *zero_point = round_half_even(clamp(0 - min / scale,
 * 0, 255)); y[i] = clamp(round_half_even(x[i] / scale) + zero_point, 0, 255)
 * (NaN: 0).  PA_ERR_INVALID for NULL pointers (with n > 0 for x and y). */
pa_status_t pa_dynamic_quantize(const float *x, size_t n, uint8_t *y, float *scale,
                                uint8_t *zero_point);

/* Separable 2-D resampling of the last two spatial axes: output row i
 * blends input rows r0[i] and r1[i] as x0 (1 - rw[i]) + x1 rw[i] in
 * float32, then output column j columns c0[j], c1[j] likewise with cw[j]
 * (0 * Inf is NaN); a pair with r0 == r1 (or c0 == c1) copies that pixel
 * (nearest, an axis not resized).  The tables hold h_out / w_out entries, indices in
 * range.  PA_ERR_INVALID for bad sizes, an index out of range or NULL. */
pa_status_t pa_resize2d(pa_layout_t layout, int64_t n, int64_t c, int64_t h, int64_t w,
                        int64_t h_out, int64_t w_out,
                        const int32_t *r0, const int32_t *r1, const float *rw,
                        const int32_t *c0, const int32_t *c1, const float *cw,
                        const float *x, float *y, pa_workers_t *workers);

/* A transposed 2-D convolution whose taps do not overlap (kernels/deconv.c):
 * stride = kernel size (kh, kw <= 16), no dilation, no padding, no output
 * padding, groups 1, NCHW: y (n x c_out x h kh x w kw) with
 * y[n, o, h kh + i, w kw + j] = act(bias[o] + sum_c x[n, c, h, w] W[c, o, i, j]),
 * W in ONNX's ConvTranspose layout [c_in][c_out][kh][kw]. */
typedef struct pa_deconv2d {
    pa_layout_t layout;             /* PA_LAYOUT_NCHW                     */
    int64_t n, c_in, h, w, c_out, kh, kw;
    pa_act_params_t act;
} pa_deconv2d_t;

/* Floats pa_deconv2d_pack() writes; 0 for a bad descriptor (another
 * layout, sizes < 1, kh or kw past 16, more than 2^40 elements, an
 * unknown activation). */
size_t pa_deconv2d_packed_size(const pa_deconv2d_t *d);

/* Pack `weight` ([c_in][c_out][kh][kw]) and `bias` (c_out floats, or NULL)
 * into `packed` (packed_size floats, the caller's).  PA_ERR_INVALID for a
 * bad descriptor, NULL pointers or a short buffer. */
pa_status_t pa_deconv2d_pack(const pa_deconv2d_t *d, const float *weight, const float *bias,
                             float *packed, size_t packed_size);

/* y = the transposed convolution of x (see pa_deconv2d_t) with the weights
 * packed for the same descriptor; x and y must not overlap.
 * PA_ERR_INVALID for a bad descriptor or NULL pointers. */
pa_status_t pa_deconv2d_run(const pa_deconv2d_t *d, const float *packed, const float *x,
                            float *y, pa_workers_t *workers);

/* ------------------------------------------------------------------ */
/* 8-bit quantized element-wise kernels (onnxruntime's QOperator ops)  */
/* ------------------------------------------------------------------ */

/* The element type of an 8-bit quantized tensor: pa_qtype_t above,
 * PA_Q_U8 or PA_Q_S8 (PA_Q_S32 is refused here). */

typedef enum pa_qbinary_op {
    PA_QBINARY_ADD = 0,
    PA_QBINARY_MUL = 1,
    /* DequantizeLinear -> Add / Mul -> QuantizeLinear run op by op, in
     * float32 (a QDQ group onnxruntime leaves unfused): y = quantize(
     * ((a - za) * sa) op ((b - zb) * sb)), quantize as
     * pa_quantize_linear: rint(t / sy) + zy, saturated. */
    PA_QBINARY_DQ_ADD = 2,
    PA_QBINARY_DQ_MUL = 3,
    /* TFLite's int8 MUL (reference_integer_ops/mul.h): the exact int32
     * product (a - za) * (b - zb) requantized by the Q31 `multiplier` and
     * `shift` as pa_qrequant (two roundings), + zy, clamped; the scales
     * are checked but not used */
    PA_QBINARY_TFLITE_MUL = 4
} pa_qbinary_op_t;

/* A quantized Add or Mul, y = quantize(dequantize(a) op dequantize(b)),
 * with onnxruntime's arithmetic on x86-64 (MLAS; kernels/qelementwise.c
 * gives the formulas), so the results are its bits.  y holds
 * outer x middle x inner elements, C-contiguous; operand element
 * (o, m, i) is at o * *_outer + m * *_middle + i * *_inner elements from
 * its base.  An operand whose inner stride is 0 is one value per inner
 * run (onnxruntime's "scalar" span, which it computes otherwise: when a's
 * inner stride is 0, b is the vector operand).  y_min / y_max clamp the
 * output (a fused activation) within the type's range. */
typedef struct pa_qbinary {
    pa_qbinary_op_t op;
    pa_qtype_t type;
    float a_scale, b_scale, y_scale;
    int32_t a_zero_point, b_zero_point, y_zero_point;
    int32_t y_min, y_max;
    int64_t outer, middle, inner;
    int64_t a_outer, a_middle, a_inner;     /* strides in elements; inner 0 or 1 */
    int64_t b_outer, b_middle, b_inner;
    int32_t multiplier, shift;  /* PA_QBINARY_TFLITE_MUL: Q31 (>= 0), [-31, 30] */
} pa_qbinary_t;

/* y = a op b as described by `p`.  PA_ERR_INVALID for a NULL pointer, a
 * negative size or stride, an inner stride other than 0 or 1, a scale
 * that is not finite and > 0, a zero point outside the type's range or
 * y_min > y_max outside it.  y must not overlap a or b unless it is the
 * same array read at the same strides (in-place). */
pa_status_t pa_qbinary(const pa_qbinary_t *p, const void *a, const void *b, void *y);

/* y = table[x] for 8-bit x and y (the byte of x read as unsigned): any
 * element-wise function of one 8-bit value as its 256 results (QLinearLookup,
 * sigmoid or leaky ReLU tables, a requantization into a concatenation).
 * `blocks` runs of `block_len` bytes, the k-th at x + k * x_stride and
 * y + k * y_stride (bytes).  PA_ERR_INVALID for NULL or negative sizes. */
pa_status_t pa_qlookup(const uint8_t *table, const void *x, void *y, int64_t blocks,
                       int64_t block_len, int64_t x_stride, int64_t y_stride);

/* TFLite's requantization of int32 accumulators into 8 bits (its reference
 * kernels' MultiplyByQuantizedMultiplier, kernels/internal/common.h): per
 * channel c a multiplier m[c] (Q31, >= 0) and a shift s[c] in [-31, 30],
 * y = clamp(RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc <<
 * max(s, 0), m), max(-s, 0)) + zero_point, y_min, y_max) -- two roundings
 * (half up, then half away from zero), not one: 9750 x 0.0111281 =
 * 108.494 becomes 109 there.  `channels` is the innermost axis of acc and
 * y (NHWC); `mult_shift` holds the channels' multipliers then their
 * shifts.  `single_rounding` 1: one rounding instead, acc * m / 2^(31 -
 * s) rounded half away from zero, saturated to int32, as TFLite's
 * FULLY_CONNECTED computes it (ruy's MultiplyByQuantizedMultiplier,
 * ruy/apply_multiplier.cc): 108.494 stays 108. */
typedef struct pa_qrequant {
    pa_qtype_t type;            /* PA_Q_U8 or PA_Q_S8                      */
    int64_t channels;           /* > 0                                     */
    int32_t zero_point, y_min, y_max;
    int32_t single_rounding;    /* 0: two roundings (conv), 1: one (FC)    */
} pa_qrequant_t;

/* y[i] = the requantized acc[i], i < n (a multiple of p->channels; the
 * channel is i % channels).  PA_ERR_INVALID for NULL pointers (n > 0), a
 * bad type, channels < 1, n < 0 or not a multiple of it, a multiplier
 * < 0, a shift outside [-31, 30], a clamp range empty or outside the
 * type, or single_rounding other than 0 or 1. */
pa_status_t pa_qrequant(const pa_qrequant_t *p, const int32_t *mult_shift, const int32_t *acc,
                        void *y, int64_t n);

/* y = tables[k % ntables][x] for block k of `blocks` consecutive blocks of
 * `block_len` bytes (x and y C-contiguous): a function of one 8-bit value
 * per channel of an NCHW tensor (blocks = N * C, ntables = C, a QDQ
 * model's DequantizeLinear -> BatchNormalization -> QuantizeLinear).
 * `tables` holds ntables x 256 bytes.  PA_ERR_INVALID for NULL pointers,
 * negative sizes or ntables < 1. */
pa_status_t pa_qlookup_channels(const uint8_t *tables, int64_t ntables, const void *x,
                                void *y, int64_t blocks, int64_t block_len);

/* QuantizeLinear per tensor: y = clamp(rint(x / scale) + zero_point,
 * y_min, y_max) in float32 (ONNX: round half to even, saturation), NaN to 0
 * (what the NumPy cast gives on x86-64).  PA_ERR_INVALID for NULL, n < 0,
 * a bad type or an empty / out-of-type clamp range. */
pa_status_t pa_quantize_linear(pa_qtype_t type, const float *x, void *y, int64_t n,
                               float scale, int32_t zero_point, int32_t y_min, int32_t y_max);

/* DequantizeLinear per tensor: y = (x - zero_point) * scale in float32.
 * PA_ERR_INVALID for NULL, n < 0 or a bad type. */
pa_status_t pa_dequantize_linear(pa_qtype_t type, const void *x, float *y, int64_t n,
                                 float scale, int32_t zero_point);

/* QLinearGlobalAveragePool: for each of n images and c channels the mean
 * of `spatial` values, mean = (float)((double)sum / spatial), then
 * y = clamp(rint((mean - x_zero_point) * multiplier) + y_zero_point,
 * y_min, y_max), float32 steps in that order.  x is (n, c, spatial) in
 * NCHW, (n, spatial, c) in NHWC; y is (n, c).  PA_ERR_INVALID for NULL,
 * a negative or too large size (spatial * 256 must stay below 2^24, where
 * float32 sums are still exact) or a bad clamp range. */
pa_status_t pa_qglobal_avgpool(pa_qtype_t type, pa_layout_t layout, int64_t n, int64_t c,
                               int64_t spatial, const void *x, void *y, float x_zero_point,
                               float multiplier, float y_zero_point, int32_t y_min,
                               int32_t y_max);

/* QLinearSoftmax (com.microsoft) with onnxruntime's arithmetic
 * (kernels/qsoftmax.c gives it): pa_qsoftmax_table fills table[256], the
 * exponentials of x_scale times 0, -1, ... -255 steps below a row's
 * maximum, scaled for rows of reduce_len values; pa_qsoftmax then runs
 * outer x inner rows of n values each (x is (outer, n, inner),
 * C-contiguous: the softmax is over the middle axis) into y.  The
 * table's x_scale and the run's y_scale must be finite and > 0;
 * PA_ERR_INVALID for those, NULL, negative sizes, a bad type or a zero
 * point outside it.  x_zero_point plays no part. */
pa_status_t pa_qsoftmax_table(float x_scale, int64_t reduce_len, float *table);
pa_status_t pa_qsoftmax(pa_qtype_t type, const float *table, const void *x, void *y,
                        int64_t outer, int64_t n, int64_t inner, float y_scale,
                        int32_t y_zero_point);

/* QLinearAveragePool (com.microsoft) over 2-D windows (a 1-D pool is one
 * with h = kernel_h = 1 and no pad along it), with onnxruntime's
 * arithmetic (kernels/qavgpool.c): x is (n, c, h, w) in NCHW or
 * (n, h, w, c) in NHWC, y (n, c, out_h, out_w) or (n, out_h, out_w, c).
 * The output size is the caller's (ceil_mode, auto_pad: the shape rule's);
 * every window must reach the input.  PA_ERR_INVALID for NULL, a bad type
 * or layout, sizes < 1 (n, c, out_*: < 0), negative pads, a top / left
 * pad not below the kernel, a window past the input, h * w >= 2^23,
 * kernel_w > 2048 (but for the whole-image window), scales not finite and
 * > 0 or zero points outside the type. */
typedef struct pa_qavgpool {
    pa_qtype_t type;
    pa_layout_t layout;
    int64_t n, c, h, w, out_h, out_w;
    int64_t kernel_h, kernel_w, stride_h, stride_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int32_t count_include_pad;
    float x_scale, y_scale;
    int32_t x_zero_point, y_zero_point;
    /* 1: TFLite's AVERAGE_POOL_2D (reference_integer_ops/pooling.h): the
     * raw values of the window's taps inside the input summed in int32,
     * divided by their count rounding half away from zero (C's division
     * of sum +- count / 2), clamped to [y_min, y_max] (within the type);
     * count_include_pad, the scales and zero points play no part (a
     * whole-image window too: no global-pool arithmetic) */
    int32_t integer_average;
    int32_t y_min, y_max;       /* integer_average only                 */
} pa_qavgpool_t;

pa_status_t pa_qavgpool(const pa_qavgpool_t *p, const void *x, void *y);

/* MaxPool (no dilation) of an 8-bit tensor of p's type, layout and
 * geometry (its scales and zero points unused): each output the maximum
 * of its window's input values.  PA_ERR_INVALID as pa_qavgpool, and for
 * kernel_w > 2048. */
pa_status_t pa_qmaxpool(const pa_qavgpool_t *p, const void *x, void *y);

/* A list of native kernel calls run in order by one call: a patched
 * stage's bands (tens of ops in tens of bands) with no return to the
 * caller's interpreter between two of them.  Each call names a kernel
 * above and that kernel's arguments; every buffer is the caller's.
 * `i` holds the sizes a kind needs (unused entries are ignored). */
typedef enum pa_call_kind {
    PA_CALL_CONV2D = 0,          /* pa_conv2d_run(params, w, a, y)          */
    PA_CALL_CONV2D_RESIDUAL = 1, /* pa_conv2d_run_residual(params, w, a,
                                    b, i[0] = c_res, y)                     */
    PA_CALL_MAXPOOL = 2,         /* pa_maxpool2d(params, a, y)              */
    PA_CALL_AVGPOOL = 3,         /* pa_avgpool2d(params, a, y)              */
    PA_CALL_PRELU = 4,           /* pa_prelu(i[0] = layout, i[1] = n,
                                    i[2] = c, i[3] = spatial, a, w, y)      */
    PA_CALL_ACT = 5,             /* pa_act(params, a, y, i[0] floats)       */
    PA_CALL_COPY = 6,            /* i[0] blocks of i[1] bytes, block k from
                                    a + k * i[2] to y + k * i[3] (bytes;
                                    the two may overlap, as memmove)       */
    PA_CALL_QCONV2D = 7,         /* pa_qconv2d_run(params, w, a, y, s,
                                    i[0] = scratch bytes)                  */
    PA_CALL_QBINARY = 8,         /* pa_qbinary(params, a, b, y)             */
    PA_CALL_QLOOKUP = 9,         /* pa_qlookup(w = the table, a, y, i[0] =
                                    blocks, i[1] = block_len, i[2] =
                                    x_stride, i[3] = y_stride)             */
    PA_CALL_QUANTIZE = 10,       /* pa_quantize_linear(params' type, a, y,
                                    i[0] = n, params' scale, zero point,
                                    y_min, y_max)                          */
    PA_CALL_DEQUANTIZE = 11,     /* pa_dequantize_linear(params' type, a, y,
                                    i[0] = n, params' scale, zero point)   */
    PA_CALL_ADD = 12,            /* pa_add(a, b, y, i[0] floats)            */
    PA_CALL_LAYER_NORM = 13,     /* pa_layer_norm_rows(a, w = gamma, b =
                                    beta or NULL, y, i[0] = rows, i[1] = n,
                                    params: the float epsilon)             */
    PA_CALL_TRANSPOSE_PLANES = 14, /* pa_transpose_planes(a, y, i[0] = n,
                                    i[1] = c, i[2] = hw, i[3] = to_nhwc)   */
    PA_CALL_DECONV2D = 15,       /* pa_deconv2d_run(params, w, a, y)        */
    PA_CALL_QREQUANT = 16,       /* pa_qrequant(params, w = multipliers and
                                    shifts, a = int32 accumulators, y,
                                    i[0] = n)                              */
    PA_CALL_AVGPOOL_ORDERED = 17, /* pa_avgpool2d_ordered(params, i[0] =
                                    order, a, y)                           */
    PA_CALL_QAVGPOOL = 18        /* pa_qavgpool(params, a, y)               */
} pa_call_kind_t;

/* A per-tensor affine quantization as a call record's params (QUANTIZE,
 * DEQUANTIZE): the 8-bit type, scale, zero point and output clamp
 * (y_min / y_max: QUANTIZE only). */
typedef struct pa_qaffine {
    pa_qtype_t type;
    float scale;
    int32_t zero_point, y_min, y_max;
} pa_qaffine_t;

typedef struct pa_call {
    pa_call_kind_t kind;
    const void *params;     /* pa_conv2d_t, pa_deconv2d_t, pa_pool2d_t,
                               pa_act_params_t, pa_qconv2d_t, pa_qbinary_t,
                               pa_qavgpool_t, pa_qaffine_t, pa_qrequant_t or a float (LAYER_NORM's
                               epsilon)                                    */
    const float *w;         /* packed weights (CONV2D*, DECONV2D; QCONV2D: its bytes),
                               slopes (PRELU), the table (QLOOKUP: bytes),
                               gamma (LAYER_NORM)                          */
    const void *a, *b;      /* the input; b: the residual or second operand */
    void *y;                /* the output                                  */
    int64_t i[4];
    void *s;                /* the workspace (QCONV2D), or NULL            */
} pa_call_t;

/* Run calls[0 .. n) in order, each as its kernel would run alone.  Stops
 * at the first call that fails and returns that kernel's status (an
 * unknown kind, a negative copy size, copy blocks spanning more than
 * INT64_MAX bytes or NULL pointers: PA_ERR_INVALID),
 * its index in *failed (may be NULL; n when every call ran).
 * PA_ERR_INVALID for NULL calls with n > 0. */
pa_status_t pa_calls_run(const pa_call_t *calls, size_t n, pa_workers_t *workers,
                         size_t *failed);

/* ------------------------------------------------------------------ */
/* Checksums                                                           */
/* ------------------------------------------------------------------ */
/* CRC-32C (Castagnoli; iSCSI, ext4) of the n bytes at data, continuing
 * crc (0 to start; the result of one range is the crc of the next): the
 * checksum of a compiled model's arrays (checksum.c).  The same value on
 * every machine; SSE4.2's instruction where there is one.  Returns crc
 * unchanged for n == 0 or a NULL data.  Never fails. */
uint32_t pa_crc32c(const void *data, size_t n, uint32_t crc);

/* PA_CDEF_END */

#ifdef __cplusplus
}
#endif

#endif /* PYARENA_H */
