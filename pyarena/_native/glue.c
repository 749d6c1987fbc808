/* glue.c -- the CPython/NumPy glue of pyarena (module pyarena._native._glue).
 *
 * Compiled as its own extension module, never into the embeddable C library
 * (csrc/).  It calls the C core through function pointers taken from the
 * cffi module (bind(), once at import), so the process holds one copy of
 * the core.  It does what the cffi layer cannot, the same way for the arena
 * and the pool:
 *
 *  1. One lifetime scheme.  A C arena or pool is owned by a *handle*
 *     capsule ("pyarena.handle") that destroys it when the last reference
 *     is gone.  Every array handed out keeps the handle alive through its
 *     base: an arena array's base is the handle itself (arena blocks are
 *     released together by rewind / reset, never one by one); a pool
 *     array's base is a *block* capsule ("pyarena.block") that frees its
 *     block when it dies and holds the handle.  Every NumPy allocator
 *     capsule ("mem_handler", NEP 49) holds the handle too.  So arrays keep
 *     their memory, memory keeps its allocator, and dropping or closing the
 *     Python Arena / Pool first is fine.  No object the handle reaches
 *     refers back to an array: the owners form no reference cycle.
 *  2. One shape parser and one fast allocation path: Empty objects (the
 *     bound ``empty`` / ``zeros`` of an Arena or a Pool) parse the shape,
 *     look up the dtype, allocate and wrap the block in an ndarray in one C
 *     call.  Every error message about a shape, a dtype or an alignment is
 *     made here; a failed allocation is explained by a Python callback
 *     (which reads the allocator's statistics).
 *  3. NEP 49: a PyDataMem_Handler whose context is a pool, installed with
 *     PyDataMem_SetHandler (a context variable inside NumPy: per thread and
 *     per asyncio context).
 *
 * The ONE retry policy of the pool lives here, in pool_realloc(): on
 * PA_ERR_NOMEM the pool's cached blocks and fully free chunks are released
 * (pa_pool_free_all) and the allocation retried once; a second failure is
 * final (counted as an OOM).
 *
 * Destructors never raise and do nothing while the interpreter finalizes
 * (the process is exiting; the OS takes the memory back).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
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
#define HANDLER_NAME "pyarena_pool"
#define MAX_ALIGN ((size_t)1 << 30)

/* The C core, through pointers from the cffi module (see g_bind). */
static struct {
    void *(*arena_alloc)(pa_arena_t *, size_t, size_t, pa_status_t *);
    pa_status_t (*arena_destroy)(pa_arena_t *);
    void *(*pool_alloc)(pa_pool_t *, size_t, pa_status_t *);
    void *(*pool_realloc)(pa_pool_t *, void *, size_t, pa_status_t *);
    pa_status_t (*pool_free)(pa_pool_t *, void *);
    pa_status_t (*pool_free_all)(pa_pool_t *);
    pa_status_t (*pool_destroy)(pa_pool_t *);
} api;

/* pyarena.errors classes (see g_configure) */
static PyObject *InvalidArgumentError, *AlignmentError, *StateError;

static void counter_add(uint64_t *c, uint64_t v) { __atomic_fetch_add(c, v, __ATOMIC_RELAXED); }
static uint64_t counter_get(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------ */
/* Handles: one capsule owns one C arena or pool                       */
/* ------------------------------------------------------------------ */

enum { KIND_ARENA = 0, KIND_POOL = 1, KIND_COUNT = 2 };

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

/* handles made minus destroyed, per kind: lets tests see the lifetime chain */
static uint64_t live[KIND_COUNT];

static void handle_destroy(PyObject *cap)
{
    handle_t *h = (handle_t *)PyCapsule_GetPointer(cap, HANDLE_CAPSULE);
    if (h == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    if (h->kind == KIND_POOL)
        (void)api.pool_destroy((pa_pool_t *)h->c);
    else
        (void)api.arena_destroy((pa_arena_t *)h->c);
    Py_XDECREF(h->keep);
    __atomic_fetch_sub(&live[h->kind], 1, __ATOMIC_RELAXED);
    PyMem_Free(h);
}

/* The handle of a capsule, or NULL with TypeError; kind -1 accepts both. */
static handle_t *handle_from(PyObject *cap, int kind)
{
    if (api.arena_alloc == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pyarena._native._glue.bind() was not called");
        return NULL;
    }
    if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, HANDLE_CAPSULE)) {
        PyErr_SetString(PyExc_TypeError, "expected a pyarena handle");
        return NULL;
    }
    handle_t *h = (handle_t *)PyCapsule_GetPointer(cap, HANDLE_CAPSULE);
    if (h != NULL && kind >= 0 && h->kind != kind) {
        PyErr_SetString(PyExc_TypeError, kind == KIND_POOL ? "expected a pool handle"
                                                           : "expected an arena handle");
        return NULL;
    }
    return h;
}

/* handle(kind, address[, keep]) -> a capsule owning the C arena (kind 0)
 * or pool (kind 1) at address; it is destroyed with the capsule. */
static PyObject *g_handle(PyObject *self, PyObject *args)
{
    int kind;
    PyObject *addr, *keep = NULL;
    if (!PyArg_ParseTuple(args, "iO|O:handle", &kind, &addr, &keep))
        return NULL;
    if (kind != KIND_ARENA && kind != KIND_POOL) {
        PyErr_SetString(PyExc_ValueError, "handle kind must be 0 (arena) or 1 (pool)");
        return NULL;
    }
    void *c = PyLong_AsVoidPtr(addr);
    if (c == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "NULL handle");
        return NULL;
    }
    handle_t *h = (handle_t *)PyMem_Calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    h->kind = kind;
    h->c = c;
    h->keep = (keep == Py_None) ? NULL : keep;
    PyObject *cap = PyCapsule_New(h, HANDLE_CAPSULE, handle_destroy);
    if (cap == NULL) {
        PyMem_Free(h);
        return NULL;
    }
    Py_XINCREF(h->keep);
    counter_add(&live[kind], 1);
    return cap;
}

/* live_handles(kind) -> C arenas (0) or pools (1) owned and not destroyed */
static PyObject *g_live_handles(PyObject *self, PyObject *arg)
{
    long kind = PyLong_AsLong(arg);
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    if (kind < 0 || kind >= KIND_COUNT) {
        PyErr_SetString(PyExc_ValueError, "kind must be 0 (arena) or 1 (pool)");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(counter_get(&live[kind]));
}

/* pool_counters(handle) -> (retries, ooms) */
static PyObject *g_pool_counters(PyObject *self, PyObject *cap)
{
    handle_t *h = handle_from(cap, KIND_POOL);
    if (h == NULL)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)counter_get(&h->retries),
                         (unsigned long long)counter_get(&h->ooms));
}

/* The one retry policy (CuPy's): on PA_ERR_NOMEM give every cached and
 * fully free chunk back (pa_pool_free_all: reclaim + release), then retry
 * once.  A second NOMEM is final and counted as an OOM.  ptr NULL = alloc. */
static void *pool_realloc(handle_t *h, void *ptr, size_t size, pa_status_t *status)
{
    pa_pool_t *pool = (pa_pool_t *)h->c;
    pa_status_t st = PA_OK;
    void *p = ptr ? api.pool_realloc(pool, ptr, size, &st) : api.pool_alloc(pool, size, &st);
    if (p == NULL && st == PA_ERR_NOMEM) {
        counter_add(&h->retries, 1);
        (void)api.pool_free_all(pool);
        p = ptr ? api.pool_realloc(pool, ptr, size, &st) : api.pool_alloc(pool, size, &st);
        if (p == NULL && st == PA_ERR_NOMEM)
            counter_add(&h->ooms, 1);
    }
    if (status != NULL)
        *status = st;
    return p;
}

/* ------------------------------------------------------------------ */
/* Blocks: a pool block owned by a capsule, the base of its array      */
/* ------------------------------------------------------------------ */

static void block_destroy(PyObject *cap)
{
    void *ptr = PyCapsule_GetPointer(cap, BLOCK_CAPSULE);
    PyObject *hcap = (PyObject *)PyCapsule_GetContext(cap);
    if (ptr == NULL || hcap == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    handle_t *h = (handle_t *)PyCapsule_GetPointer(hcap, HANDLE_CAPSULE);
    if (h == NULL)
        PyErr_Clear();
    else
        (void)api.pool_free((pa_pool_t *)h->c, ptr);
    Py_DECREF(hcap);
}

/* A capsule that frees pool block `ptr` when it dies and holds `hcap`;
 * NULL (the block freed) on a Python error. */
static PyObject *block_owner(PyObject *hcap, handle_t *h, void *ptr)
{
    PyObject *owner = PyCapsule_New(ptr, BLOCK_CAPSULE, NULL);
    if (owner == NULL) {
        (void)api.pool_free((pa_pool_t *)h->c, ptr);
        return NULL;
    }
    /* context = a strong reference to the handle; only then the destructor,
     * so that it always finds both */
    Py_INCREF(hcap);
    PyCapsule_SetContext(owner, hcap);
    PyCapsule_SetDestructor(owner, block_destroy);
    return owner;
}

/* ------------------------------------------------------------------ */
/* The one shape parser                                                */
/* ------------------------------------------------------------------ */

/* `shape` (an int or a sequence of ints) into dims / *nd.  0 on success;
 * -1 with TypeError (not a shape) or InvalidArgumentError (negative, too
 * many dimensions, too large) set. */
static int parse_shape_slow(PyObject *shape, npy_intp *dims, int *nd);

static int parse_shape(PyObject *shape, npy_intp *dims, int *nd)
{
    /* the common cases: a non-negative Python int, a tuple of them */
    if (PyLong_CheckExact(shape)) {
        dims[0] = PyLong_AsSsize_t(shape);
        if (dims[0] < 0) {
            PyErr_Clear();
            return parse_shape_slow(shape, dims, nd);
        }
        *nd = 1;
        return 0;
    }
    if (PyTuple_CheckExact(shape) && PyTuple_GET_SIZE(shape) <= NPY_MAXDIMS) {
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *d = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(d))
                return parse_shape_slow(shape, dims, nd);
            dims[i] = PyLong_AsSsize_t(d);
            if (dims[i] < 0) {
                PyErr_Clear();
                return parse_shape_slow(shape, dims, nd);
            }
        }
        *nd = (int)n;
        return 0;
    }
    return parse_shape_slow(shape, dims, nd);
}

/* Every other shape: an int or any sequence of ints (NumPy integers and
 * other __index__ objects too), with the errors. */
static int parse_shape_slow(PyObject *shape, npy_intp *dims, int *nd)
{
    if (PyLong_CheckExact(shape) || PyIndex_Check(shape)) {
        *nd = 1;
        dims[0] = PyNumber_AsSsize_t(shape, NULL);
        if (dims[0] == -1 && PyErr_Occurred())
            goto bad_type;
        goto check_sign;
    }
    PyObject *seq = PySequence_Fast(shape, "");
    if (seq == NULL)
        goto bad_type;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > NPY_MAXDIMS) {
        Py_DECREF(seq);
        PyErr_Format(InvalidArgumentError, "shape %R has %zd dimensions, at most %d are "
                     "supported", shape, n, (int)NPY_MAXDIMS);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = items[i];
        dims[i] = PyLong_CheckExact(d) ? PyLong_AsSsize_t(d) : PyNumber_AsSsize_t(d, NULL);
        if (dims[i] == -1 && PyErr_Occurred()) {
            int overflow = PyErr_ExceptionMatches(PyExc_OverflowError) ||
                           (PyIndex_Check(d) && !PyErr_ExceptionMatches(PyExc_TypeError));
            Py_DECREF(seq);
            if (!overflow)
                goto bad_type;
            PyErr_Clear();
            PyErr_Format(InvalidArgumentError, "shape %R needs more bytes than a size "
                         "can hold", shape);
            return -1;
        }
    }
    Py_DECREF(seq);
    *nd = (int)n;
check_sign:
    for (int i = 0; i < *nd; i++) {
        if (dims[i] < 0) {
            PyErr_Format(InvalidArgumentError, "negative dimension in shape %R", shape);
            return -1;
        }
    }
    return 0;
bad_type:
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "shape must be an int or a sequence of ints, not %R",
                 shape);
    return -1;
}

/* Bytes of `nd` dims of `itemsize`, at most PY_SSIZE_T_MAX; -1 with
 * InvalidArgumentError when it would not fit a size. */
static int shape_bytes(PyObject *shape, PyArray_Descr *d, const npy_intp *dims, int nd,
                       size_t *out)
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
        PyErr_Format(InvalidArgumentError, "shape %R of %S needs more bytes than the "
                     "%zd a size can hold", shape, (PyObject *)d, PY_SSIZE_T_MAX);
        return -1;
    }
    *out = n;
    return 0;
}

/* An alignment argument: None -> 0 (the allocator's granularity), else a
 * power of two in [1, 2**30]; -1 with the error set. */
static int parse_align(PyObject *obj, size_t *out)
{
    *out = 0;
    if (obj == NULL || obj == Py_None)
        return 0;
    long long v;
    if (PyFloat_Check(obj)) {
        double d = PyFloat_AS_DOUBLE(obj);
        v = (long long)d;
        if ((double)v != d)
            goto bad_pow2;
    } else {
        v = PyLong_AsLongLong(obj);   /* accepts ints and __index__ objects */
        if (v == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_Format(InvalidArgumentError, "align must be an integer, not %R", obj);
                return -1;
            }
            PyErr_Clear();
            goto bad_pow2;
        }
    }
    if (v < 1 || (unsigned long long)v > MAX_ALIGN || (v & (v - 1)))
        goto bad_pow2;
    *out = (size_t)v;
    return 0;
bad_pow2:
    PyErr_Format(AlignmentError, "align %R is not a power of two in [1, %zu]", obj, MAX_ALIGN);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Empty: the bound empty() / zeros() of an Arena or a Pool            */
/* ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *hcap;       /* the handle capsule                           */
    handle_t *h;
    int kind;             /* h->kind and h->c, copied: one cache line     */
    void *c;
    int zero;             /* zeros(): fill the block                      */
    int closed;           /* close() was called: every call raises        */
    size_t granularity;   /* every block is aligned to it                 */
    PyObject *records;    /* arena: list of handed-out arrays; else NULL  */
    PyObject *dtypes;     /* dict: dtype spec -> np.dtype (shared cache)  */
    PyObject *resolve;    /* resolve(spec) -> np.dtype, raises if bad     */
    PyObject *failed;     /* failed(nbytes, status, align) raises why      */
    PyArray_Descr *default_descr;
} Empty;

/* The dtype for `spec` (None: float64), a new reference; NULL with the
 * error set (resolve() explains unknown and object dtypes). */
static PyArray_Descr *empty_dtype(Empty *self, PyObject *spec)
{
    PyObject *d = NULL;
    if (spec == NULL || spec == Py_None) {
        d = (PyObject *)self->default_descr;
    } else if (PyArray_DescrCheck(spec)) {
        d = spec;
    } else {
        d = PyDict_GetItemWithError(self->dtypes, spec);
        if (d == NULL)
            PyErr_Clear(); /* unknown or unhashable: resolve() says why */
    }
    if (d == NULL || PyDataType_REFCHK((PyArray_Descr *)d)) {
        d = PyObject_CallOneArg(self->resolve, spec ? spec : Py_None);
        if (d == NULL)
            return NULL;
        if (!PyArray_DescrCheck(d)) {
            Py_DECREF(d);
            PyErr_SetString(PyExc_TypeError, "resolve() did not return a dtype");
            return NULL;
        }
    } else {
        Py_INCREF(d);
    }
    if (self->kind == KIND_POOL && PyDataType_ELSIZE((PyArray_Descr *)d) == 0) {
        PyErr_Format(InvalidArgumentError, "dtype %S has no size; give a sized dtype "
                     "(e.g. 'S8', 'U4')", d);
        Py_DECREF(d);
        return NULL;
    }
    return (PyArray_Descr *)d;
}

/* The block for `nbytes` at `align` (0: the granularity): its data pointer
 * and the array's base (a new reference), or NULL after `failed` raised. */
static void *empty_block(Empty *self, size_t nbytes, size_t align, PyObject **base)
{
    pa_status_t st = PA_OK;
    void *p, *data;
    if (self->kind == KIND_ARENA) {
        p = data = api.arena_alloc((pa_arena_t *)self->c, nbytes, align, &st);
        if (p != NULL) {
            Py_INCREF(self->hcap);
            *base = self->hcap;
        }
    } else {
        /* a pool block is aligned to the granularity: over-allocate for more */
        size_t extra = align > self->granularity ? align - self->granularity : 0;
        size_t n = nbytes;
        if (__builtin_add_overflow(n, extra, &n))
            n = SIZE_MAX;
        p = pool_realloc(self->h, NULL, n, &st);
        data = p;
        if (p != NULL) {
            data = (void *)(((uintptr_t)p + extra) & ~(uintptr_t)(extra ? align - 1 : 0));
            *base = block_owner(self->hcap, self->h, p);
            if (*base == NULL)
                return NULL;
        }
    }
    if (p == NULL) {
        PyObject *r = PyObject_CallFunction(self->failed, "nik", (Py_ssize_t)nbytes, (int)st,
                                            (unsigned long)align);
        Py_XDECREF(r);
        if (r != NULL)
            PyErr_SetString(PyExc_MemoryError, "allocation failed");
        return NULL;
    }
    return data;
}

static PyObject *empty_make(Empty *self, PyObject *shape, PyObject *dtype, PyObject *alignobj)
{
    npy_intp dims[NPY_MAXDIMS];
    int nd;
    size_t nbytes, align;
    if (self->closed)
        return PyErr_Format(StateError, "%s is closed",
                            self->kind == KIND_POOL ? "pool" : "arena");
    PyArray_Descr *descr = empty_dtype(self, dtype);
    if (descr == NULL)
        return NULL;
    if (parse_shape(shape, dims, &nd) < 0 || shape_bytes(shape, descr, dims, nd, &nbytes) < 0 ||
        parse_align(alignobj, &align) < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    PyObject *base = NULL;
    void *data = empty_block(self, nbytes, align, &base);
    if (data == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    if (self->zero)
        memset(data, 0, nbytes);
    /* steals the descr reference */
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, data,
                                         NPY_ARRAY_CARRAY, NULL);
    if (arr == NULL) {
        Py_DECREF(base); /* frees a pool block */
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, base) < 0) { /* steals base */
        Py_DECREF(arr);
        return NULL;
    }
    if (self->records != NULL && PyList_Append(self->records, arr) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* empty(shape, dtype=None, align=None): a METH_FASTCALL | METH_KEYWORDS
 * function bound to the Empty object -- a builtin method, which CPython's
 * adaptive interpreter calls faster than an object with tp_vectorcall. */
static PyObject *Empty_call(PyObject *op, PyObject *const *args, Py_ssize_t nargsf,
                            PyObject *kwnames)
{
    static const char *names[] = {"shape", "dtype", "align"};
    PyObject *a[3] = {NULL, NULL, NULL};
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && nargs >= 1 && nargs <= 3)  /* the common case */
        return empty_make((Empty *)op, args[0], nargs > 1 ? args[1] : NULL,
                          nargs > 2 ? args[2] : NULL);
    if (nargs > 3)
        return PyErr_Format(PyExc_TypeError, "empty() takes at most 3 arguments (%zd given)",
                            nargs);
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        int j = 0;
        while (j < 3 && PyUnicode_CompareWithASCIIString(k, names[j]) != 0)
            j++;
        if (j == 3)
            return PyErr_Format(PyExc_TypeError, "empty() got an unexpected keyword "
                                "argument %R", k);
        if (a[j] != NULL)
            return PyErr_Format(PyExc_TypeError, "empty() got multiple values for "
                                "argument '%s'", names[j]);
        a[j] = args[nargs + i];
    }
    if (a[0] == NULL)
        return PyErr_Format(PyExc_TypeError, "empty() missing required argument 'shape'");
    return empty_make((Empty *)op, a[0], a[1], a[2]);
}

static int Empty_traverse(Empty *self, visitproc visit, void *arg)
{
    Py_VISIT(self->records);
    Py_VISIT(self->dtypes);
    Py_VISIT(self->resolve);
    Py_VISIT(self->failed);
    return 0;
}

static int Empty_clear(Empty *self)
{
    Py_CLEAR(self->records);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->resolve);
    Py_CLEAR(self->failed);
    return 0;
}

static void Empty_dealloc(Empty *self)
{
    PyObject_GC_UnTrack(self);
    Empty_clear(self);
    Py_CLEAR(self->default_descr);
    Py_CLEAR(self->hcap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* close(): every later call raises StateError; arrays keep their memory. */
static PyObject *Empty_close(Empty *self, PyObject *unused)
{
    self->closed = 1;
    Py_RETURN_NONE;
}

static PyMethodDef Empty_methods[] = {
    {"close", (PyCFunction)Empty_close, METH_NOARGS, "refuse every later call"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef empty_def = {
    "empty", (PyCFunction)(void (*)(void))Empty_call, METH_FASTCALL | METH_KEYWORDS,
    "empty(shape, dtype=None, align=None): an array over a new block; "
    "__self__.close() refuses every later call"};

static PyTypeObject EmptyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyarena._native._glue.Empty",
    .tp_basicsize = sizeof(Empty),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)Empty_dealloc,
    .tp_traverse = (traverseproc)Empty_traverse,
    .tp_clear = (inquiry)Empty_clear,
    .tp_methods = Empty_methods,
    .tp_doc = "The state behind a native empty() (pyarena._native._glue; internal).",
};

/* empty_function(handle, granularity, records, dtypes, resolve, failed, zero)
 * -> a builtin empty(shape, dtype=None, align=None) bound to a new Empty
 * for the handle (records: a list for an arena, None for a pool). */
static PyObject *g_empty_function(PyObject *self, PyObject *args)
{
    PyObject *hcap, *records, *dtypes, *resolve, *failed;
    Py_ssize_t gran;
    int zero;
    if (!PyArg_ParseTuple(args, "OnOO!OOp:empty_function", &hcap, &gran, &records,
                          &PyDict_Type, &dtypes, &resolve, &failed, &zero))
        return NULL;
    handle_t *h = handle_from(hcap, -1);
    if (h == NULL)
        return NULL;
    if (records != Py_None && !PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "records must be a list or None");
        return NULL;
    }
    if (!PyCallable_Check(resolve) || !PyCallable_Check(failed) || gran < 1) {
        PyErr_SetString(PyExc_TypeError, "resolve and failed must be callables");
        return NULL;
    }
    Empty *e = PyObject_GC_New(Empty, &EmptyType);
    if (e == NULL)
        return NULL;
    e->hcap = Py_NewRef(hcap);
    e->h = h;
    e->kind = h->kind;
    e->c = h->c;
    e->zero = zero;
    e->closed = 0;
    e->granularity = (size_t)gran;
    e->records = records == Py_None ? NULL : Py_NewRef(records);
    e->dtypes = Py_NewRef(dtypes);
    e->resolve = Py_NewRef(resolve);
    e->failed = Py_NewRef(failed);
    e->default_descr = PyArray_DescrFromType(NPY_DOUBLE);
    PyObject_GC_Track(e);
    PyObject *fn = PyCFunction_NewEx(&empty_def, (PyObject *)e, NULL);
    Py_DECREF(e);
    return fn;
}

/* ------------------------------------------------------------------ */
/* NEP 49 handler                                                      */
/* ------------------------------------------------------------------ */

typedef struct glue_handler {
    PyDataMem_Handler handler; /* what NumPy sees (capsule pointer)     */
    handle_t *h;               /* the pool (kept alive by hcap)         */
    PyObject *hcap;            /* strong reference                      */
    uint64_t allocs;           /* successful malloc/calloc/realloc(NULL) */
    uint64_t bytes;            /* bytes asked for by those              */
    uint64_t reallocs;         /* successful realloc of a block         */
    uint64_t frees;            /* blocks given back                     */
    uint64_t failures;         /* requests answered with NULL           */
} glue_handler_t;

static void *h_malloc(void *ctx, size_t size)
{
    glue_handler_t *gh = (glue_handler_t *)ctx;
    void *p = size > (size_t)NPY_MAX_INTP ? NULL : pool_realloc(gh->h, NULL, size, NULL);
    if (p == NULL) {
        counter_add(&gh->failures, 1);
        return NULL;
    }
    counter_add(&gh->allocs, 1);
    counter_add(&gh->bytes, size);
    return p;
}

static void *h_calloc(void *ctx, size_t nelem, size_t elsize)
{
    glue_handler_t *gh = (glue_handler_t *)ctx;
    size_t size;
    if (__builtin_mul_overflow(nelem, elsize, &size) || size > (size_t)NPY_MAX_INTP) {
        counter_add(&gh->failures, 1);
        return NULL;
    }
    void *p = h_malloc(ctx, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

static void *h_realloc(void *ctx, void *ptr, size_t new_size)
{
    glue_handler_t *gh = (glue_handler_t *)ctx;
    if (ptr == NULL)
        return h_malloc(ctx, new_size);
    void *p = new_size > (size_t)NPY_MAX_INTP ? NULL : pool_realloc(gh->h, ptr, new_size, NULL);
    if (p == NULL) {
        counter_add(&gh->failures, 1);
        return NULL;
    }
    counter_add(&gh->reallocs, 1);
    return p;
}

static void h_free(void *ctx, void *ptr, size_t size)
{
    glue_handler_t *gh = (glue_handler_t *)ctx;
    (void)size;
    if (ptr != NULL && api.pool_free((pa_pool_t *)gh->h->c, ptr) == PA_OK)
        counter_add(&gh->frees, 1);
}

static void handler_destroy(PyObject *cap)
{
    glue_handler_t *gh = (glue_handler_t *)PyCapsule_GetPointer(cap, "mem_handler");
    if (gh == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    PyObject *hcap = gh->hcap;
    PyMem_Free(gh);
    Py_DECREF(hcap);
}

/* handler_new(pool handle) -> a "mem_handler" capsule for the pool */
static PyObject *g_handler_new(PyObject *self, PyObject *hcap)
{
    handle_t *h = handle_from(hcap, KIND_POOL);
    if (h == NULL)
        return NULL;
    glue_handler_t *gh = (glue_handler_t *)PyMem_Calloc(1, sizeof *gh);
    if (gh == NULL)
        return PyErr_NoMemory();
    strncpy(gh->handler.name, HANDLER_NAME, sizeof gh->handler.name - 1);
    gh->handler.version = 1;
    gh->handler.allocator.ctx = gh;
    gh->handler.allocator.malloc = h_malloc;
    gh->handler.allocator.calloc = h_calloc;
    gh->handler.allocator.realloc = h_realloc;
    gh->handler.allocator.free = h_free;
    gh->h = h;
    gh->hcap = hcap;
    PyObject *cap = PyCapsule_New(&gh->handler, "mem_handler", NULL);
    if (cap == NULL) {
        PyMem_Free(gh);
        return NULL;
    }
    Py_INCREF(hcap);
    PyCapsule_SetDestructor(cap, handler_destroy);
    return cap;
}

static glue_handler_t *ours(PyObject *cap)
{
    if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, "mem_handler"))
        return NULL;
    PyDataMem_Handler *hd = (PyDataMem_Handler *)PyCapsule_GetPointer(cap, "mem_handler");
    if (hd == NULL || hd->allocator.malloc != h_malloc) {
        PyErr_Clear();
        return NULL;
    }
    return (glue_handler_t *)hd->allocator.ctx;
}

/* handler_counts(cap) -> (allocs, bytes, reallocs, frees, failures) */
static PyObject *g_handler_counts(PyObject *self, PyObject *cap)
{
    glue_handler_t *gh = ours(cap);
    if (gh == NULL) {
        PyErr_SetString(PyExc_TypeError, "not a pyarena mem_handler");
        return NULL;
    }
    return Py_BuildValue("(KKKKK)", (unsigned long long)counter_get(&gh->allocs),
                         (unsigned long long)counter_get(&gh->bytes),
                         (unsigned long long)counter_get(&gh->reallocs),
                         (unsigned long long)counter_get(&gh->frees),
                         (unsigned long long)counter_get(&gh->failures));
}

/* set_handler(cap) -> the previous handler capsule (new reference) */
static PyObject *g_set_handler(PyObject *self, PyObject *cap)
{
    if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, "mem_handler")) {
        PyErr_SetString(PyExc_TypeError, "expected a mem_handler capsule");
        return NULL;
    }
    return PyDataMem_SetHandler(cap);
}

/* owner(obj) -> (pool handle, kind) or None
 *   kind 1: an array of Pool.empty() (its base is a block capsule)
 *   kind 2: an array whose data NumPy allocated through a pyarena handler */
static PyObject *g_owner(PyObject *self, PyObject *obj)
{
    if (!PyArray_Check(obj))
        Py_RETURN_NONE;
    PyArrayObject *arr = (PyArrayObject *)obj;
    PyObject *base = PyArray_BASE(arr);
    if (base != NULL && PyCapsule_CheckExact(base) && PyCapsule_IsValid(base, BLOCK_CAPSULE)) {
        PyObject *hcap = (PyObject *)PyCapsule_GetContext(base);
        if (hcap == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return Py_BuildValue("(Oi)", hcap, 1);
    }
    if (PyArray_CHKFLAGS(arr, NPY_ARRAY_OWNDATA)) {
        PyObject *hd = PyArray_HANDLER(arr);
        glue_handler_t *gh = hd != NULL ? ours(hd) : NULL;
        if (gh != NULL)
            return Py_BuildValue("(Oi)", gh->hcap, 2);
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* The module                                                          */
/* ------------------------------------------------------------------ */

/* bind(functions): a dict name -> address of the C core's functions in
 * the cffi module: pa_arena_alloc, pa_arena_destroy, pa_pool_alloc,
 * pa_pool_realloc, pa_pool_free, pa_pool_free_all, pa_pool_destroy. */
static PyObject *g_bind(PyObject *self, PyObject *fns)
{
    static const char *names[] = {"pa_arena_alloc", "pa_arena_destroy", "pa_pool_alloc",
                                  "pa_pool_realloc", "pa_pool_free", "pa_pool_free_all",
                                  "pa_pool_destroy"};
    void *f[7];
    if (!PyDict_Check(fns)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a dict name -> address");
        return NULL;
    }
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyDict_GetItemString(fns, names[i]);
        f[i] = v ? PyLong_AsVoidPtr(v) : NULL;
        if (f[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "bind(): no address for %s", names[i]);
            return NULL;
        }
    }
    api.arena_alloc = (void *(*)(pa_arena_t *, size_t, size_t, pa_status_t *))f[0];
    api.arena_destroy = (pa_status_t (*)(pa_arena_t *))f[1];
    api.pool_alloc = (void *(*)(pa_pool_t *, size_t, pa_status_t *))f[2];
    api.pool_realloc = (void *(*)(pa_pool_t *, void *, size_t, pa_status_t *))f[3];
    api.pool_free = (pa_status_t (*)(pa_pool_t *, void *))f[4];
    api.pool_free_all = (pa_status_t (*)(pa_pool_t *))f[5];
    api.pool_destroy = (pa_status_t (*)(pa_pool_t *))f[6];
    Py_RETURN_NONE;
}

/* configure(InvalidArgumentError, AlignmentError, StateError) */
static PyObject *g_configure(PyObject *self, PyObject *args)
{
    PyObject *inv, *al, *st;
    if (!PyArg_ParseTuple(args, "OOO:configure", &inv, &al, &st))
        return NULL;
    Py_XSETREF(InvalidArgumentError, Py_NewRef(inv));
    Py_XSETREF(AlignmentError, Py_NewRef(al));
    Py_XSETREF(StateError, Py_NewRef(st));
    Py_RETURN_NONE;
}

static PyMethodDef glue_methods[] = {
    {"bind", (PyCFunction)g_bind, METH_O, NULL},
    {"configure", (PyCFunction)g_configure, METH_VARARGS, NULL},
    {"handle", (PyCFunction)g_handle, METH_VARARGS, NULL},
    {"live_handles", (PyCFunction)g_live_handles, METH_O, NULL},
    {"pool_counters", (PyCFunction)g_pool_counters, METH_O, NULL},
    {"empty_function", (PyCFunction)g_empty_function, METH_VARARGS, NULL},
    {"handler_new", (PyCFunction)g_handler_new, METH_O, NULL},
    {"handler_counts", (PyCFunction)g_handler_counts, METH_O, NULL},
    {"set_handler", (PyCFunction)g_set_handler, METH_O, NULL},
    {"owner", (PyCFunction)g_owner, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef glue_module = {
    PyModuleDef_HEAD_INIT, "_glue",
    "CPython/NumPy glue of pyarena's arena and pool (see glue.c).", -1, glue_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__glue(void);

PyMODINIT_FUNC PyInit__glue(void)
{
    import_array();
    InvalidArgumentError = Py_NewRef(PyExc_ValueError);
    AlignmentError = Py_NewRef(PyExc_ValueError);
    StateError = Py_NewRef(PyExc_RuntimeError);
    if (PyType_Ready(&EmptyType) < 0)
        return NULL;
    return PyModule_Create(&glue_module);
}
