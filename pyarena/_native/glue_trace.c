/* glue_trace.c -- recording NumPy's data allocations (NEP 49), in
 * pyarena._native._glue.
 *
 * A recorder is a PyDataMem_Handler that serves every request from the
 * handler that was current when recording started (NumPy's default, or a
 * pool's) and writes one line per event to a text file in the trace format
 * of docs/traces.md: `a ID SIZE` (an allocation; the ID is a small slot
 * number, reused after its block is freed, so it is unique among live
 * blocks), `f ID` (a free) and `s` (a step boundary).  A realloc is an `a`
 * of the new block followed by an `f` of the old one.
 *
 * Design choices:
 *  - Recording must not change what the program does, and must be cheap
 *    (the goal: at most 2x on NumPy's allocation calls).  The hooks take a
 *    pthread mutex (NumPy may allocate or free from any thread; frees come
 *    from whichever thread drops the last reference), look the pointer up
 *    in an open-addressing table and format the line with a hand-written
 *    integer printer into the FILE's buffer; no Python runs in the hooks,
 *    except to read the calling line when call sites were asked for (and
 *    only while the thread holds the GIL).
 *  - Arrays keep their handler (NumPy stores it in each array), so frees
 *    of blocks made while recording arrive after recording stopped: the
 *    recorder keeps delegating and simply writes nothing once stopped.
 *  - Automatic step marks (optional): a free that brings the live bytes
 *    down to the floor of the recent past -- the lowest level after a free
 *    within the last 1024 events -- after something was allocated since
 *    the last mark, writes an `s`.  In a loop that allocates temporaries
 *    and frees them, iterations shorter than that window are marked at
 *    their ends (once the window has left the program's start behind);
 *    longer ones also get marks at their lowest points.  The window slides
 *    with every event (a monotonic queue of the levels that can still be
 *    its minimum), so a mark depends on the last 1024 events only: the
 *    window used to move in half-windows counted from the program's first
 *    event, and two runs that differed by a few allocations at start-up
 *    (an import, a cache) put every later boundary elsewhere -- 11 to 36
 *    marks on one NumPy program with 0 to 8 extra arrays allocated first.
 */
#include "glue.h"

#include <pthread.h>

#define RECORDER_NAME "pyarena_trace"
#define FLOOR_WINDOW 1024 /* events of the automatic-step window          */
#define FLOOR_RING (FLOOR_WINDOW + 1) /* one entry per event of the window */

typedef struct slot_entry {
    uintptr_t key;   /* block address; 0 = empty                          */
    uint32_t slot;   /* its ID in the trace                               */
    uint64_t size;   /* bytes asked for                                   */
} slot_entry_t;

typedef struct recorder {
    PyDataMem_Handler handler;   /* what NumPy sees                        */
    PyObject *base_cap;          /* the handler requests go to (owned)     */
    PyDataMemAllocator base;     /* its functions and context              */
    pthread_mutex_t lock;        /* guards everything below                */
    FILE *out;                   /* NULL once stopped                      */
    int auto_steps, callsites;
    char *skip;                  /* call sites: frames under this prefix are
                                    skipped (NumPy's own Python code); owned */
    size_t skip_len;
    slot_entry_t *table;         /* live blocks, open addressing           */
    size_t cap, used;            /* cap: a power of two                    */
    uint32_t *free_ids;          /* IDs of freed blocks, reused LIFO       */
    size_t nfree, cap_free;
    uint32_t next_id;
    uint64_t live;               /* live bytes                             */
    struct { uint64_t at, live; } floor[FLOOR_RING]; /* live after a free
                                   (event index, bytes) that can still be the
                                   window's minimum: a ring, levels rising
                                   from floor_head to floor_head + floor_n */
    size_t floor_head, floor_n;
    int risen;                   /* something was allocated since the mark */
    uint64_t events, allocs, frees, steps, peak_live, lost;
} recorder_t;

/* -- the live-block table (linear probing, backward-shift deletion) ---- */

static size_t slot_of(const recorder_t *r, uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (r->cap - 1);
}

static int table_grow(recorder_t *r)
{
    size_t cap = r->cap ? r->cap * 2 : 1024;
    slot_entry_t *t = (slot_entry_t *)calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    slot_entry_t *old = r->table;
    size_t old_cap = r->cap;
    r->table = t;
    r->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key == 0)
            continue;
        size_t j = slot_of(r, old[i].key);
        while (t[j].key != 0)
            j = (j + 1) & (cap - 1);
        t[j] = old[i];
    }
    free(old);
    return 0;
}

static int table_put(recorder_t *r, uintptr_t key, uint32_t id, uint64_t size)
{
    if ((r->used + 1) * 4 > r->cap * 3 && table_grow(r) < 0)
        return -1;
    size_t j = slot_of(r, key);
    while (r->table[j].key != 0 && r->table[j].key != key)
        j = (j + 1) & (r->cap - 1);
    if (r->table[j].key == 0)
        r->used++;
    r->table[j] = (slot_entry_t){key, id, size};
    return 0;
}

/* Remove `key`; 1 and its entry in *out if it was there. */
static int table_take(recorder_t *r, uintptr_t key, slot_entry_t *out)
{
    if (r->cap == 0)
        return 0;
    size_t mask = r->cap - 1, j = slot_of(r, key);
    while (r->table[j].key != key) {
        if (r->table[j].key == 0)
            return 0;
        j = (j + 1) & mask;
    }
    *out = r->table[j];
    /* backward shift: move later entries of the run into the hole */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; r->table[k].key != 0; k = (k + 1) & mask) {
        size_t home = slot_of(r, r->table[k].key);
        if (((k - home) & mask) >= ((k - hole) & mask)) {
            r->table[hole] = r->table[k];
            hole = k;
        }
    }
    r->table[hole].key = 0;
    r->used--;
    return 1;
}

/* -- writing events ----------------------------------------------------- */

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* ` file:line` of the Python code that allocates, when the GIL is held:
 * the innermost frame outside `r->skip` (NumPy's own Python functions, such
 * as np.full, are not where a program allocates). */
static char *put_callsite(const recorder_t *r, char *p, const char *end)
{
    if (!PyGILState_Check())
        return p;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (f == NULL)
        return p;
    Py_INCREF(f);
    const char *file = NULL;
    int line = 0;
    for (int depth = 0; f != NULL && depth < 64; depth++) {
        PyCodeObject *code = PyFrame_GetCode(f);
        file = PyUnicode_AsUTF8(code->co_filename);
        Py_DECREF(code);
        if (file == NULL) {
            PyErr_Clear();
            break;
        }
        line = PyFrame_GetLineNumber(f);
        if (r->skip_len == 0 || strncmp(file, r->skip, r->skip_len) != 0)
            break;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (file == NULL)
        return p;
    size_t n = strlen(file);
    if (n > (size_t)(end - p) - 32)
        n = (size_t)(end - p) - 32;
    *p++ = ' ';
    for (size_t i = 0; i < n; i++)  /* one event per line, whatever the name */
        *p++ = (file[i] == '\n' || file[i] == '\r') ? '?' : file[i];
    *p++ = ':';
    return put_u64(p, (uint64_t)(line < 0 ? 0 : line));
}

static void emit(recorder_t *r, char kind, uint32_t id, uint64_t size, int with_size)
{
    char buf[512], *p = buf;
    *p++ = kind;
    if (kind != 's') {
        *p++ = ' ';
        p = put_u64(p, id);
        if (with_size) {
            *p++ = ' ';
            p = put_u64(p, size);
            if (r->callsites)
                p = put_callsite(r, p, buf + sizeof buf);
        }
    }
    *p++ = '\n';
    fwrite(buf, 1, (size_t)(p - buf), r->out);
    r->events++;
}

static void note_step(recorder_t *r)
{
    emit(r, 's', 0, 0, 0);
    r->steps++;
    r->risen = 0;
}

/* After a free: mark a step if the live bytes are down to the window's
 * floor, then enter this level (the levels it undercuts can never be the
 * minimum again: they leave the queue from its back). */
static void auto_step(recorder_t *r)
{
    while (r->floor_n && r->events - r->floor[r->floor_head].at > FLOOR_WINDOW) {
        r->floor_head = (r->floor_head + 1) % FLOOR_RING;
        r->floor_n--;
    }
    uint64_t floor = r->floor_n ? r->floor[r->floor_head].live : UINT64_MAX;
    if (r->risen && r->live <= floor)
        note_step(r);
    while (r->floor_n && r->floor[(r->floor_head + r->floor_n - 1) % FLOOR_RING].live >= r->live)
        r->floor_n--;
    size_t at = (r->floor_head + r->floor_n) % FLOOR_RING; /* room: one per event */
    r->floor[at].at = r->events;
    r->floor[at].live = r->live;
    r->floor_n++;
}

/* Record the allocation of `p` (size bytes); with the lock held. */
static void record_alloc(recorder_t *r, void *p, uint64_t size)
{
    if (r->out == NULL)
        return;
    uint32_t id = r->nfree ? r->free_ids[--r->nfree] : r->next_id++;
    if (table_put(r, (uintptr_t)p, id, size) < 0) {
        r->lost++;   /* out of memory for the table: the block is not traced */
        return;
    }
    emit(r, 'a', id, size, 1);
    r->allocs++;
    r->live += size;
    if (r->live > r->peak_live)
        r->peak_live = r->live;
    r->risen = 1;
}

/* Record the free of `p` if it was traced; with the lock held. */
static void record_free(recorder_t *r, void *p)
{
    slot_entry_t e;
    if (r->out == NULL || !table_take(r, (uintptr_t)p, &e))
        return;
    if (r->nfree == r->cap_free) {
        size_t cap = r->cap_free ? r->cap_free * 2 : 256;
        uint32_t *ids = (uint32_t *)realloc(r->free_ids, cap * sizeof *ids);
        if (ids == NULL) {
            r->next_id++; /* the ID is retired instead of reused: still unique */
        } else {
            r->free_ids = ids;
            r->cap_free = cap;
        }
    }
    if (r->nfree < r->cap_free)
        r->free_ids[r->nfree++] = e.slot;
    emit(r, 'f', e.slot, 0, 0);
    r->frees++;
    r->live -= e.size;
    if (r->auto_steps)
        auto_step(r);
}

/* -- the NEP 49 hooks ---------------------------------------------------- */

static void *t_malloc(void *ctx, size_t size)
{
    recorder_t *r = (recorder_t *)ctx;
    void *p = r->base.malloc(r->base.ctx, size);
    if (p != NULL) {
        pthread_mutex_lock(&r->lock);
        record_alloc(r, p, size);
        pthread_mutex_unlock(&r->lock);
    }
    return p;
}

static void *t_calloc(void *ctx, size_t nelem, size_t elsize)
{
    recorder_t *r = (recorder_t *)ctx;
    void *p = r->base.calloc(r->base.ctx, nelem, elsize);
    if (p != NULL) {
        pthread_mutex_lock(&r->lock);
        record_alloc(r, p, (uint64_t)nelem * (uint64_t)elsize);
        pthread_mutex_unlock(&r->lock);
    }
    return p;
}

static void *t_realloc(void *ctx, void *ptr, size_t new_size)
{
    recorder_t *r = (recorder_t *)ctx;
    void *p = r->base.realloc(r->base.ctx, ptr, new_size);
    if (p != NULL) {
        pthread_mutex_lock(&r->lock);
        /* the new block before the old one goes: both live for a moment */
        slot_entry_t old;
        int had = ptr != NULL && r->out != NULL && table_take(r, (uintptr_t)ptr, &old);
        if (had)   /* put the old entry back under a key that cannot clash */
            (void)table_put(r, (uintptr_t)ptr | (uintptr_t)1, old.slot, old.size);
        record_alloc(r, p, new_size);
        if (had)
            record_free(r, (void *)((uintptr_t)ptr | (uintptr_t)1));
        pthread_mutex_unlock(&r->lock);
    }
    return p;
}

static void t_free(void *ctx, void *ptr, size_t size)
{
    recorder_t *r = (recorder_t *)ctx;
    if (ptr != NULL) {
        pthread_mutex_lock(&r->lock);
        record_free(r, ptr);
        pthread_mutex_unlock(&r->lock);
    }
    r->base.free(r->base.ctx, ptr, size);
}

/* -- the recorder capsule ------------------------------------------------- */

static void recorder_destroy(PyObject *cap)
{
    recorder_t *r = (recorder_t *)PyCapsule_GetPointer(cap, "mem_handler");
    if (r == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    if (r->out != NULL)
        fclose(r->out);
    pthread_mutex_destroy(&r->lock);
    free(r->table);
    free(r->free_ids);
    Py_XDECREF(r->base_cap);
    PyMem_Free(r->skip);
    PyMem_Free(r);
}

static recorder_t *recorder_from(PyObject *cap)
{
    if (PyCapsule_CheckExact(cap) && PyCapsule_IsValid(cap, "mem_handler")) {
        PyDataMem_Handler *hd = (PyDataMem_Handler *)PyCapsule_GetPointer(cap, "mem_handler");
        if (hd != NULL && hd->allocator.malloc == t_malloc)
            return (recorder_t *)hd->allocator.ctx;
    }
    PyErr_Clear();
    PyErr_SetString(PyExc_TypeError, "not a pyarena trace recorder");
    return NULL;
}

/* trace_open(path, base_handler, auto_steps, callsites, skip="") -> a
 * "mem_handler" capsule that records into `path` (created; events only, the
 * header is the caller's) and serves requests from `base_handler`; call
 * sites skip the frames of files whose names start with `skip`. */
PyObject *glue_trace_open(PyObject *self, PyObject *args)
{
    PyObject *path, *base;
    int auto_steps, callsites;
    const char *skip = "";
    if (!PyArg_ParseTuple(args, "O&Opp|s:trace_open", PyUnicode_FSConverter, &path, &base,
                          &auto_steps, &callsites, &skip))
        return NULL;
    PyDataMem_Handler *bh = NULL;
    if (PyCapsule_CheckExact(base) && PyCapsule_IsValid(base, "mem_handler"))
        bh = (PyDataMem_Handler *)PyCapsule_GetPointer(base, "mem_handler");
    if (bh == NULL) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_TypeError, "base_handler must be a mem_handler capsule");
        return NULL;
    }
    recorder_t *r = (recorder_t *)PyMem_Calloc(1, sizeof *r);
    if (r == NULL) {
        Py_DECREF(path);
        return PyErr_NoMemory();
    }
    r->skip_len = strlen(skip);
    r->skip = (char *)PyMem_Malloc(r->skip_len + 1);
    if (r->skip == NULL) {
        Py_DECREF(path);
        PyMem_Free(r);
        return PyErr_NoMemory();
    }
    memcpy(r->skip, skip, r->skip_len + 1);
    r->out = fopen(PyBytes_AS_STRING(path), "a");
    if (r->out == NULL) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(path);
        PyMem_Free(r->skip);
        PyMem_Free(r);
        return NULL;
    }
    Py_DECREF(path);
    setvbuf(r->out, NULL, _IOFBF, 1 << 16);
    pthread_mutex_init(&r->lock, NULL);
    r->auto_steps = auto_steps;
    r->callsites = callsites;
    r->base = bh->allocator;
    r->base_cap = Py_NewRef(base);
    strncpy(r->handler.name, RECORDER_NAME, sizeof r->handler.name - 1);
    r->handler.version = 1;
    r->handler.allocator = (PyDataMemAllocator){r, t_malloc, t_calloc, t_realloc, t_free};
    PyObject *cap = PyCapsule_New(&r->handler, "mem_handler", recorder_destroy);
    if (cap == NULL) {
        fclose(r->out);
        pthread_mutex_destroy(&r->lock);
        Py_DECREF(r->base_cap);
        PyMem_Free(r->skip);
        PyMem_Free(r);
    }
    return cap;
}

/* trace_step(recorder): write a step boundary. */
PyObject *glue_trace_step(PyObject *self, PyObject *cap)
{
    recorder_t *r = recorder_from(cap);
    if (r == NULL)
        return NULL;
    pthread_mutex_lock(&r->lock);
    if (r->out != NULL)
        note_step(r);
    pthread_mutex_unlock(&r->lock);
    Py_RETURN_NONE;
}

/* trace_close(recorder) -> counts dict; stops recording (the recorder
 * keeps serving the arrays made under it) and closes the file. */
PyObject *glue_trace_close(PyObject *self, PyObject *cap)
{
    recorder_t *r = recorder_from(cap);
    if (r == NULL)
        return NULL;
    int err = 0;
    pthread_mutex_lock(&r->lock);
    if (r->out != NULL) {
        err = ferror(r->out) | fclose(r->out);
        r->out = NULL;
    }
    uint64_t v[7] = {r->events, r->allocs, r->frees, r->steps, r->peak_live, r->live, r->lost};
    pthread_mutex_unlock(&r->lock);
    if (err) {
        PyErr_SetString(PyExc_OSError, "writing the trace failed (disk full?)");
        return NULL;
    }
    return Py_BuildValue("{sKsKsKsKsKsKsK}", "events", v[0], "allocations", v[1],
                         "frees", v[2], "steps", v[3], "peak_live_bytes", v[4],
                         "live_bytes", v[5], "untraced", v[6]);
}
