/* _poolglue.c -- CPython/NumPy glue of the work pool (module pyarena._poolglue).
 *
 * Compiled as its own extension module, never into the embeddable C library
 * (csrc/).  Like _fastpath.c it calls the C core through function pointers
 * taken from the cffi module (bind(), once at import), so there is one copy
 * of the core.  It does three things the cffi layer cannot:
 *
 *  1. Ownership by Python reference counts.  A pool is wrapped in a capsule
 *     ("pyarena.pool") that destroys the C pool when the last reference is
 *     gone.  Every block handed out by Pool.empty() is owned by a capsule
 *     ("pyarena.block") that is the array's base and holds a strong reference
 *     to the pool capsule; every NumPy allocator capsule ("mem_handler")
 *     holds one too.  So arrays keep their block, blocks keep the pool, and
 *     dropping the Pool object first is fine.
 *  2. A fast Pool.empty(): shape parsing, the allocation and the ndarray are
 *     made in one C call (PyArray_NewFromDescr over the block).
 *  3. NEP 49: a PyDataMem_Handler whose ctx is the pool, installed with
 *     PyDataMem_SetHandler (a context variable inside NumPy: per thread and
 *     per asyncio context).
 *
 * The ONE retry policy lives here, in glue_realloc(): on PA_ERR_NOMEM the
 * pool's cached blocks and fully free chunks are released
 * (pa_pool_free_all) and the allocation retried once; a second failure is
 * final (counted as an OOM).  The Python layer only turns the final failure
 * into OutOfMemoryError.
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

#include <string.h>

#include "pyarena.h"

#if PY_VERSION_HEX >= 0x030D0000
#define PA_FINALIZING() Py_IsFinalizing()
#else
#define PA_FINALIZING() _Py_IsFinalizing()
#endif

/* The C core, through pointers from the cffi module (see bind()). */
static struct {
    void *(*alloc)(pa_pool_t *, size_t, pa_status_t *);
    void *(*realloc)(pa_pool_t *, void *, size_t, pa_status_t *);
    pa_status_t (*free)(pa_pool_t *, void *);
    pa_status_t (*free_all)(pa_pool_t *);
    pa_status_t (*destroy)(pa_pool_t *);
} api;

#define POOL_CAPSULE "pyarena.pool"
#define BLOCK_CAPSULE "pyarena.block"
#define HANDLER_NAME "pyarena_pool"

/* ------------------------------------------------------------------ */
/* The pool capsule                                                    */
/* ------------------------------------------------------------------ */

typedef struct glue_pool {
    pa_pool_t *pool;
    /* retry-policy counters (atomic: the handler may run in any thread) */
    uint64_t retries; /* allocations retried after a reclaim           */
    uint64_t ooms;    /* allocations that failed after the retry       */
} glue_pool_t;

/* pool capsules made minus destroyed: lets tests see the lifetime chain */
static uint64_t live_pools;

static void counter_add(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static uint64_t counter_get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* The one retry policy (CuPy's): on PA_ERR_NOMEM give every cached and
 * fully free chunk back (pa_pool_free_all: reclaim + release), then retry
 * once.  A second NOMEM is final and counted as an OOM.  realloc == NULL
 * for ptr means alloc. */
static void *glue_realloc(glue_pool_t *gp, void *ptr, size_t size,
                          pa_status_t *status)
{
    pa_status_t st = PA_OK;
    void *p = ptr ? api.realloc(gp->pool, ptr, size, &st)
                  : api.alloc(gp->pool, size, &st);
    if (p != NULL || st != PA_ERR_NOMEM) {
        if (status != NULL)
            *status = st;
        return p;
    }
    counter_add(&gp->retries, 1);
    (void)api.free_all(gp->pool);
    p = ptr ? api.realloc(gp->pool, ptr, size, &st)
            : api.alloc(gp->pool, size, &st);
    if (p == NULL && st == PA_ERR_NOMEM)
        counter_add(&gp->ooms, 1);
    if (status != NULL)
        *status = st;
    return p;
}

static void *glue_alloc(glue_pool_t *gp, size_t size, pa_status_t *status)
{
    return glue_realloc(gp, NULL, size, status);
}

static void pool_capsule_destroy(PyObject *cap)
{
    glue_pool_t *gp = (glue_pool_t *)PyCapsule_GetPointer(cap, POOL_CAPSULE);
    if (gp == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    (void)api.destroy(gp->pool);
    PyMem_Free(gp);
    __atomic_fetch_sub(&live_pools, 1, __ATOMIC_RELAXED);
}

static glue_pool_t *pool_from(PyObject *cap)
{
    if (api.alloc == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pyarena._poolglue.bind() was not called");
        return NULL;
    }
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_SetString(PyExc_TypeError, "expected a pyarena pool capsule");
        return NULL;
    }
    return (glue_pool_t *)PyCapsule_GetPointer(cap, POOL_CAPSULE);
}

/* pool_capsule(address) -> capsule owning the pa_pool_t at address */
static PyObject *g_pool_capsule(PyObject *self, PyObject *arg)
{
    void *addr = PyLong_AsVoidPtr(arg);
    if (addr == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "NULL pool");
        return NULL;
    }
    glue_pool_t *gp = (glue_pool_t *)PyMem_Calloc(1, sizeof *gp);
    if (gp == NULL)
        return PyErr_NoMemory();
    gp->pool = (pa_pool_t *)addr;
    PyObject *cap = PyCapsule_New(gp, POOL_CAPSULE, pool_capsule_destroy);
    if (cap == NULL)
        PyMem_Free(gp);
    else
        counter_add(&live_pools, 1);
    return cap;
}

/* live_pools() -> C pools owned by capsules and not yet destroyed */
static PyObject *g_live_pools(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(counter_get(&live_pools));
}

/* pool_counters(cap) -> (retries, ooms) */
static PyObject *g_pool_counters(PyObject *self, PyObject *cap)
{
    glue_pool_t *gp = pool_from(cap);
    if (gp == NULL)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)counter_get(&gp->retries),
                         (unsigned long long)counter_get(&gp->ooms));
}

/* ------------------------------------------------------------------ */
/* Blocks owned by capsules: the fast Pool.empty()                     */
/* ------------------------------------------------------------------ */

static void block_capsule_destroy(PyObject *cap)
{
    void *ptr = PyCapsule_GetPointer(cap, BLOCK_CAPSULE);
    PyObject *pcap = (PyObject *)PyCapsule_GetContext(cap);
    if (ptr == NULL || pcap == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    glue_pool_t *gp = (glue_pool_t *)PyCapsule_GetPointer(pcap, POOL_CAPSULE);
    if (gp == NULL)
        PyErr_Clear();
    else
        (void)api.free(gp->pool, ptr);
    Py_DECREF(pcap);
}

/* The array over a new block: NotImplemented when the arguments are not
 * the fast kind (shape a tuple of non-negative ints or an int, dtype an
 * np.dtype without objects, size without overflow; the Python caller then
 * validates and explains), an int status when the allocation failed after
 * the retry, NULL with an exception set on a Python error.  `zero` fills
 * the block with zeros. */
static PyObject *empty_core(PyObject *pool_cap, PyObject *shape, PyObject *dtype,
                            int zero)
{
    npy_intp dims[NPY_MAXDIMS];
    int nd;
    glue_pool_t *gp = pool_from(pool_cap);
    if (gp == NULL)
        return NULL;
    if (!PyArray_DescrCheck(dtype))
        Py_RETURN_NOTIMPLEMENTED;
    PyArray_Descr *descr = (PyArray_Descr *)dtype;
    size_t nbytes = (size_t)PyDataType_ELSIZE(descr);
    if (nbytes == 0 || PyDataType_REFCHK(descr))
        Py_RETURN_NOTIMPLEMENTED;
    if (PyTuple_CheckExact(shape)) {
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        if (n > NPY_MAXDIMS)
            Py_RETURN_NOTIMPLEMENTED;
        nd = (int)n;
        for (int i = 0; i < nd; i++) {
            PyObject *d = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(d))
                Py_RETURN_NOTIMPLEMENTED;
            Py_ssize_t v = PyLong_AsSsize_t(d);
            if (v < 0) {
                PyErr_Clear();
                Py_RETURN_NOTIMPLEMENTED;
            }
            dims[i] = (npy_intp)v;
        }
    } else if (PyLong_CheckExact(shape)) {
        Py_ssize_t v = PyLong_AsSsize_t(shape);
        if (v < 0) {
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
        nd = 1;
        dims[0] = (npy_intp)v;
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    for (int i = 0; i < nd; i++) {
        if (__builtin_mul_overflow(nbytes, (size_t)dims[i], &nbytes))
            Py_RETURN_NOTIMPLEMENTED;
    }
    if (nbytes > (size_t)NPY_MAX_INTP)
        Py_RETURN_NOTIMPLEMENTED;

    pa_status_t st = PA_OK;
    void *p = glue_alloc(gp, nbytes, &st);
    if (p == NULL)
        return PyLong_FromLong((long)st);
    if (zero)
        memset(p, 0, nbytes);
    PyObject *owner = PyCapsule_New(p, BLOCK_CAPSULE, NULL);
    if (owner == NULL) {
        (void)api.free(gp->pool, p);
        return NULL;
    }
    /* context = a strong reference to the pool capsule; only then the
     * destructor, so that it always finds both */
    Py_INCREF(pool_cap);
    PyCapsule_SetContext(owner, pool_cap);
    PyCapsule_SetDestructor(owner, block_capsule_destroy);
    Py_INCREF(descr);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, p,
                                         NPY_ARRAY_CARRAY, NULL);
    if (arr == NULL) {
        Py_DECREF(owner); /* frees the block */
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) { /* steals */
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* empty(pool_cap, shape, dtype[, zero]) -> see empty_core */
static PyObject *g_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "empty(pool, shape, dtype[, zero])");
        return NULL;
    }
    int zero = nargs == 4 ? PyObject_IsTrue(args[3]) : 0;
    if (zero < 0)
        return NULL;
    return empty_core(args[0], args[1], args[2], zero);
}

/* The bound fast entry point: bind_empty(pool_cap, dtypes, default,
 * slow, general, zero) returns a builtin f(shape, dtype=default) bound to
 * those (its `self` is the tuple).  dtypes maps dtype specs to np.dtype
 * (the Python layer's cache); on anything but the fast path it calls
 * slow(shape, dtype, result-of-empty_core), and for unusual argument
 * lists general(*args, **kwargs).  So Pool.empty costs one C call. */
enum { B_CAP, B_DTYPES, B_DEFAULT, B_SLOW, B_GENERAL, B_ZERO, B_N };

static PyObject *bound_empty(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *shape = NULL, *dtype = NULL;
    if (nargs > 2)
        goto general;
    if (nargs >= 1)
        shape = args[0];
    if (nargs >= 2)
        dtype = args[1];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (dtype == NULL && PyUnicode_CompareWithASCIIString(k, "dtype") == 0)
                dtype = args[nargs + i];
            else if (shape == NULL && PyUnicode_CompareWithASCIIString(k, "shape") == 0)
                shape = args[nargs + i];
            else
                goto general;
        }
    }
    if (shape == NULL)
        goto general;
    PyObject *descr;
    if (dtype == NULL) {
        descr = PyTuple_GET_ITEM(self, B_DEFAULT);
        dtype = descr;
    } else if (PyArray_DescrCheck(dtype)) {
        descr = dtype;
    } else {
        descr = PyDict_GetItemWithError(PyTuple_GET_ITEM(self, B_DTYPES), dtype);
        if (descr == NULL) {
            if (PyErr_Occurred()) /* unhashable: the slow path explains */
                PyErr_Clear();
            descr = Py_None; /* not a descr: empty_core says NotImplemented */
        }
    }
    PyObject *r = empty_core(PyTuple_GET_ITEM(self, B_CAP), shape, descr,
                             PyTuple_GET_ITEM(self, B_ZERO) == Py_True);
    if (r == NULL || PyArray_CheckExact(r))
        return r;
    PyObject *out = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(self, B_SLOW), shape,
                                                 dtype, r, NULL);
    Py_DECREF(r);
    return out;
general:
    return PyObject_Vectorcall(PyTuple_GET_ITEM(self, B_GENERAL), args, nargsf, kwnames);
}

static PyMethodDef bound_empty_def = {
    "empty", (PyCFunction)(void (*)(void))bound_empty, METH_FASTCALL | METH_KEYWORDS,
    "empty(shape, dtype=float64): an uninitialised array over a pool block"};

static PyObject *g_bind_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != B_N || !PyDict_Check(args[B_DTYPES]) ||
        !PyArray_DescrCheck(args[B_DEFAULT]) || !PyCallable_Check(args[B_SLOW]) ||
        !PyCallable_Check(args[B_GENERAL]) || !PyBool_Check(args[B_ZERO])) {
        PyErr_SetString(PyExc_TypeError, "bind_empty(pool, dtypes, default_dtype, "
                                         "slow, general, zero)");
        return NULL;
    }
    if (pool_from(args[B_CAP]) == NULL)
        return NULL;
    PyObject *tup = PyTuple_New(B_N);
    if (tup == NULL)
        return NULL;
    for (int i = 0; i < B_N; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tup, i, args[i]);
    }
    PyObject *f = PyCFunction_NewEx(&bound_empty_def, tup, NULL);
    Py_DECREF(tup);
    return f;
}

/* ------------------------------------------------------------------ */
/* NEP 49 handler                                                      */
/* ------------------------------------------------------------------ */

typedef struct glue_handler {
    PyDataMem_Handler handler; /* what NumPy sees (capsule pointer)     */
    glue_pool_t *gp;           /* the pool (kept alive by pool_cap)     */
    PyObject *pool_cap;        /* strong reference                      */
    uint64_t allocs;           /* successful malloc/calloc/realloc(NULL) */
    uint64_t bytes;            /* bytes asked for by those              */
    uint64_t reallocs;         /* successful realloc of a block         */
    uint64_t frees;            /* blocks given back                     */
    uint64_t failures;         /* requests answered with NULL           */
} glue_handler_t;

static void *h_malloc(void *ctx, size_t size)
{
    glue_handler_t *h = (glue_handler_t *)ctx;
    if (size > (size_t)NPY_MAX_INTP) {
        counter_add(&h->failures, 1);
        return NULL;
    }
    void *p = glue_alloc(h->gp, size, NULL);
    if (p == NULL) {
        counter_add(&h->failures, 1);
        return NULL;
    }
    counter_add(&h->allocs, 1);
    counter_add(&h->bytes, size);
    return p;
}

static void *h_calloc(void *ctx, size_t nelem, size_t elsize)
{
    glue_handler_t *h = (glue_handler_t *)ctx;
    size_t size;
    if (__builtin_mul_overflow(nelem, elsize, &size) || size > (size_t)NPY_MAX_INTP) {
        counter_add(&h->failures, 1);
        return NULL;
    }
    void *p = h_malloc(ctx, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

static void *h_realloc(void *ctx, void *ptr, size_t new_size)
{
    glue_handler_t *h = (glue_handler_t *)ctx;
    if (ptr == NULL)
        return h_malloc(ctx, new_size);
    if (new_size > (size_t)NPY_MAX_INTP) {
        counter_add(&h->failures, 1);
        return NULL;
    }
    void *p = glue_realloc(h->gp, ptr, new_size, NULL);
    if (p == NULL) {
        counter_add(&h->failures, 1);
        return NULL;
    }
    counter_add(&h->reallocs, 1);
    return p;
}

static void h_free(void *ctx, void *ptr, size_t size)
{
    glue_handler_t *h = (glue_handler_t *)ctx;
    (void)size;
    if (ptr == NULL)
        return;
    if (api.free(h->gp->pool, ptr) == PA_OK)
        counter_add(&h->frees, 1);
}

static void handler_capsule_destroy(PyObject *cap)
{
    glue_handler_t *h = (glue_handler_t *)PyCapsule_GetPointer(cap, "mem_handler");
    if (h == NULL) {
        PyErr_Clear();
        return;
    }
    if (PA_FINALIZING())
        return;
    PyObject *pcap = h->pool_cap;
    PyMem_Free(h);
    Py_DECREF(pcap);
}

/* handler_new(pool_cap) -> a "mem_handler" capsule for the pool */
static PyObject *g_handler_new(PyObject *self, PyObject *pool_cap)
{
    glue_pool_t *gp = pool_from(pool_cap);
    if (gp == NULL)
        return NULL;
    glue_handler_t *h = (glue_handler_t *)PyMem_Calloc(1, sizeof *h);
    if (h == NULL)
        return PyErr_NoMemory();
    strncpy(h->handler.name, HANDLER_NAME, sizeof h->handler.name - 1);
    h->handler.version = 1;
    h->handler.allocator.ctx = h;
    h->handler.allocator.malloc = h_malloc;
    h->handler.allocator.calloc = h_calloc;
    h->handler.allocator.realloc = h_realloc;
    h->handler.allocator.free = h_free;
    h->gp = gp;
    h->pool_cap = pool_cap;
    PyObject *cap = PyCapsule_New(&h->handler, "mem_handler", NULL);
    if (cap == NULL) {
        PyMem_Free(h);
        return NULL;
    }
    Py_INCREF(pool_cap);
    PyCapsule_SetDestructor(cap, handler_capsule_destroy);
    return cap;
}

static glue_handler_t *handler_from(PyObject *cap)
{
    if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, "mem_handler")) {
        PyErr_SetString(PyExc_TypeError, "expected a mem_handler capsule");
        return NULL;
    }
    PyDataMem_Handler *hd = (PyDataMem_Handler *)PyCapsule_GetPointer(cap, "mem_handler");
    if (hd == NULL)
        return NULL;
    if (hd->allocator.malloc != h_malloc) {
        PyErr_SetString(PyExc_TypeError, "not a pyarena mem_handler");
        return NULL;
    }
    return (glue_handler_t *)hd->allocator.ctx;
}

/* handler_counts(cap) -> (allocs, bytes, reallocs, frees, failures) */
static PyObject *g_handler_counts(PyObject *self, PyObject *cap)
{
    glue_handler_t *h = handler_from(cap);
    if (h == NULL)
        return NULL;
    return Py_BuildValue("(KKKKK)", (unsigned long long)counter_get(&h->allocs),
                         (unsigned long long)counter_get(&h->bytes),
                         (unsigned long long)counter_get(&h->reallocs),
                         (unsigned long long)counter_get(&h->frees),
                         (unsigned long long)counter_get(&h->failures));
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

/* get_handler() -> the current handler capsule (new reference) */
static PyObject *g_get_handler(PyObject *self, PyObject *unused)
{
    return PyDataMem_GetHandler();
}

/* owner(obj) -> (pool_cap, kind) or None
 *   kind 1: a Pool.empty() array (its base is a block capsule)
 *   kind 2: an array whose data NumPy allocated through a pyarena handler */
static PyObject *g_owner(PyObject *self, PyObject *obj)
{
    if (!PyArray_Check(obj))
        Py_RETURN_NONE;
    PyArrayObject *arr = (PyArrayObject *)obj;
    PyObject *base = PyArray_BASE(arr);
    if (base != NULL && PyCapsule_CheckExact(base) &&
        PyCapsule_IsValid(base, BLOCK_CAPSULE)) {
        PyObject *pcap = (PyObject *)PyCapsule_GetContext(base);
        if (pcap == NULL) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return Py_BuildValue("(Oi)", pcap, 1);
    }
    if (PyArray_CHKFLAGS(arr, NPY_ARRAY_OWNDATA)) {
        PyObject *hcap = PyArray_HANDLER(arr);
        if (hcap != NULL && PyCapsule_CheckExact(hcap) &&
            PyCapsule_IsValid(hcap, "mem_handler")) {
            PyDataMem_Handler *hd =
                (PyDataMem_Handler *)PyCapsule_GetPointer(hcap, "mem_handler");
            if (hd != NULL && hd->allocator.malloc == h_malloc)
                return Py_BuildValue("(Oi)",
                                     ((glue_handler_t *)hd->allocator.ctx)->pool_cap, 2);
        }
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* The module                                                          */
/* ------------------------------------------------------------------ */

/* bind(alloc, realloc, free, free_all, destroy): the addresses of
 * pa_pool_alloc, pa_pool_realloc, pa_pool_free, pa_pool_free_all and
 * pa_pool_destroy in the cffi module. */
static PyObject *g_bind(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    void *f[5];
    if (!PyArg_ParseTuple(args, "OOOOO:bind", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    for (int i = 0; i < 5; i++) {
        f[i] = PyLong_AsVoidPtr(o[i]);
        if (f[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind(): NULL function pointer");
            return NULL;
        }
    }
    api.alloc = (void *(*)(pa_pool_t *, size_t, pa_status_t *))f[0];
    api.realloc = (void *(*)(pa_pool_t *, void *, size_t, pa_status_t *))f[1];
    api.free = (pa_status_t (*)(pa_pool_t *, void *))f[2];
    api.free_all = (pa_status_t (*)(pa_pool_t *))f[3];
    api.destroy = (pa_status_t (*)(pa_pool_t *))f[4];
    Py_RETURN_NONE;
}

static PyMethodDef glue_methods[] = {
    {"bind", (PyCFunction)g_bind, METH_VARARGS, NULL},
    {"pool_capsule", (PyCFunction)g_pool_capsule, METH_O, NULL},
    {"pool_counters", (PyCFunction)g_pool_counters, METH_O, NULL},
    {"live_pools", (PyCFunction)g_live_pools, METH_NOARGS, NULL},
    {"empty", (PyCFunction)(void (*)(void))g_empty, METH_FASTCALL, NULL},
    {"bind_empty", (PyCFunction)(void (*)(void))g_bind_empty, METH_FASTCALL, NULL},
    {"handler_new", (PyCFunction)g_handler_new, METH_O, NULL},
    {"handler_counts", (PyCFunction)g_handler_counts, METH_O, NULL},
    {"set_handler", (PyCFunction)g_set_handler, METH_O, NULL},
    {"get_handler", (PyCFunction)g_get_handler, METH_NOARGS, NULL},
    {"owner", (PyCFunction)g_owner, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef glue_module = {
    PyModuleDef_HEAD_INIT, "_poolglue",
    "CPython/NumPy glue of pyarena's work pool (see _poolglue.c).", -1, glue_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__poolglue(void);

PyMODINIT_FUNC PyInit__poolglue(void)
{
    import_array();
    return PyModule_Create(&glue_module);
}
