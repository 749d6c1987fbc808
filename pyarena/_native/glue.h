/* glue.h -- what the files of the glue module (pyarena._native._glue)
 * share; internal, not installed.  Bottom up: glue_handle.c the handles,
 * pool blocks and the retry policy; glue_shape.c the one shape parser;
 * glue_empty.c the native empty(); glue_numpy.c NumPy's allocator (NEP 49);
 * glue_module.c on top, the module and the C core's function table.
 *
 * Every function here runs with the GIL held (it is called from Python or
 * from NumPy with the GIL), except the NEP 49 hooks, which only touch the
 * C pool (thread-safe) and atomic counters.
 */
#ifndef PYARENA_GLUE_H
#define PYARENA_GLUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL pyarena_glue_ARRAY_API
#ifndef PYARENA_GLUE_MAIN
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#if NPY_ABI_VERSION < 0x02000000 /* building against NumPy 1.x headers */
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif

#include <stdint.h>
#include <string.h>

#include "pyarena.h"

#if PY_VERSION_HEX >= 0x030D0000
#define PA_FINALIZING() Py_IsFinalizing()
#else
#define PA_FINALIZING() _Py_IsFinalizing()
#endif

#if PY_VERSION_HEX < 0x030A0000 /* Py_NewRef is 3.10+ */
static inline PyObject *Py_NewRef(PyObject *o) { Py_INCREF(o); return o; }
#endif

#define HANDLE_CAPSULE "pyarena.handle"
#define BLOCK_CAPSULE "pyarena.block"

/* The C core, through pointers from the cffi module (glue_module.c: bind). */
typedef struct glue_api {
    void *(*arena_alloc)(pa_arena_t *, size_t, size_t, pa_status_t *);
    pa_status_t (*arena_destroy)(pa_arena_t *);
    void *(*pool_alloc)(pa_pool_t *, size_t, pa_status_t *);
    void *(*pool_realloc)(pa_pool_t *, void *, size_t, pa_status_t *);
    pa_status_t (*pool_free)(pa_pool_t *, void *);
    pa_status_t (*pool_free_all)(pa_pool_t *);
    pa_status_t (*pool_destroy)(pa_pool_t *);
} glue_api_t;
extern glue_api_t glue_api;

/* pyarena.errors classes (glue_module.c: configure) */
extern PyObject *glue_InvalidArgumentError, *glue_AlignmentError, *glue_StateError;

static inline void counter_add(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}
static inline uint64_t counter_get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

enum { KIND_ARENA = 0, KIND_POOL = 1, KIND_COUNT = 2 };

/* What a handle capsule owns. */
typedef struct handle {
    int kind;
    void *c;          /* pa_arena_t * or pa_pool_t *                       */
    PyObject *keep;   /* what the C object needs alive (a static arena's
                         buffer and metadata), or NULL                     */
    /* pool retry-policy counters (atomic: the NEP 49 handler may run in
       any thread) */
    uint64_t retries; /* allocations retried after a reclaim               */
    uint64_t ooms;    /* allocations that failed after the retry           */
} handle_t;

/* glue_handle.c */
/* handle(kind, address[, keep]), live_handles(kind), pool_counters(handle) */
PyObject *glue_handle(PyObject *self, PyObject *args);
PyObject *glue_live_handles(PyObject *self, PyObject *arg);
PyObject *glue_pool_counters(PyObject *self, PyObject *cap);
/* The handle of a capsule, or NULL with TypeError; kind -1 accepts both. */
handle_t *glue_handle_from(PyObject *cap, int kind);
/* Pool alloc (ptr NULL) or realloc under the one retry policy. */
void *glue_pool_realloc(handle_t *h, void *ptr, size_t size, pa_status_t *status);
/* A capsule that frees pool block `ptr` when it dies and holds `hcap`;
 * NULL (the block freed) on a Python error. */
PyObject *glue_block_owner(PyObject *hcap, handle_t *h, void *ptr);

/* glue_shape.c: the one shape parser.  The common cases are inline here
 * (cross-file calls cost 5 ns of a 130 ns Arena.empty). */
/* Any shape (an int or a sequence of ints, __index__ objects included),
 * with the errors: TypeError, InvalidArgumentError. */
int glue_parse_shape_slow(PyObject *shape, npy_intp *dims, int *nd);
/* An alignment object that is not None: a power of two in [1, 2**30]. */
int glue_parse_align_slow(PyObject *obj, size_t *out);

/* `shape` into dims / *nd; 0, or -1 with TypeError or
 * InvalidArgumentError set. */
static inline int glue_parse_shape(PyObject *shape, npy_intp *dims, int *nd)
{
    /* the common cases: a non-negative Python int, a tuple of them */
    if (PyLong_CheckExact(shape)) {
        dims[0] = PyLong_AsSsize_t(shape);
        if (dims[0] < 0) {
            PyErr_Clear();
            return glue_parse_shape_slow(shape, dims, nd);
        }
        *nd = 1;
        return 0;
    }
    if (PyTuple_CheckExact(shape) && PyTuple_GET_SIZE(shape) <= NPY_MAXDIMS) {
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *d = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(d))
                return glue_parse_shape_slow(shape, dims, nd);
            dims[i] = PyLong_AsSsize_t(d);
            if (dims[i] < 0) {
                PyErr_Clear();
                return glue_parse_shape_slow(shape, dims, nd);
            }
        }
        *nd = (int)n;
        return 0;
    }
    return glue_parse_shape_slow(shape, dims, nd);
}

/* Bytes of the shape at dtype `d` (at most PY_SSIZE_T_MAX); 0, or -1 with
 * InvalidArgumentError set. */
static inline int glue_shape_bytes(PyObject *shape, PyArray_Descr *d, const npy_intp *dims,
                                   int nd, size_t *out)
{
    size_t n = (size_t)PyDataType_ELSIZE(d);
    int overflow = 0;
    for (int i = 0; i < nd; i++) {
        if (dims[i] == 0) {
            *out = 0;
            return 0;
        }
        overflow |= __builtin_mul_overflow(n, (size_t)dims[i], &n);
    }
    if (overflow || n > (size_t)PY_SSIZE_T_MAX) {
        PyErr_Format(glue_InvalidArgumentError, "shape %R of %S needs more bytes than the "
                     "%zd a size can hold", shape, (PyObject *)d, PY_SSIZE_T_MAX);
        return -1;
    }
    *out = n;
    return 0;
}

/* None -> 0 (the granularity), else a power of two in [1, 2**30]; 0, or -1
 * with the error set. */
static inline int glue_parse_align(PyObject *obj, size_t *out)
{
    *out = 0;
    if (obj == NULL || obj == Py_None)
        return 0;
    return glue_parse_align_slow(obj, out);
}

/* glue_empty.c */
int glue_empty_ready(void);
PyObject *glue_empty_function(PyObject *self, PyObject *args);

/* glue_numpy.c */
PyObject *glue_handler_new(PyObject *self, PyObject *hcap);
PyObject *glue_handler_counts(PyObject *self, PyObject *cap);
PyObject *glue_set_handler(PyObject *self, PyObject *cap);
PyObject *glue_get_handler(PyObject *self, PyObject *unused);
PyObject *glue_owner(PyObject *self, PyObject *obj);

/* glue_trace.c: recording NumPy's allocations (docs/traces.md) */
PyObject *glue_trace_open(PyObject *self, PyObject *args);
PyObject *glue_trace_step(PyObject *self, PyObject *cap);
PyObject *glue_trace_close(PyObject *self, PyObject *cap);

#endif
