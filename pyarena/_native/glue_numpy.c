/* glue_numpy.c -- NumPy's allocator routed to a pool (NEP 49), in
 * pyarena._native._glue.
 *
 * A PyDataMem_Handler whose context holds the pool's handle: every array
 * NumPy allocates through it keeps the pool alive, and its data goes back
 * to the pool (under the one retry policy of glue_handle.c) when it dies.  NumPy
 * keeps the handler in a context variable, so installing it affects the
 * current thread / asyncio task only.  The hooks may run in any thread:
 * they touch only the C pool (thread-safe) and atomic counters.
 */
#include "glue.h"

#define HANDLER_NAME "pyarena_pool"

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
    void *p = size > (size_t)NPY_MAX_INTP ? NULL : glue_pool_realloc(gh->h, NULL, size, NULL);
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
    void *p = new_size > (size_t)NPY_MAX_INTP ? NULL : glue_pool_realloc(gh->h, ptr, new_size, NULL);
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
    if (ptr != NULL && glue_api.pool_free((pa_pool_t *)gh->h->c, ptr) == PA_OK)
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
PyObject *glue_handler_new(PyObject *self, PyObject *hcap)
{
    handle_t *h = glue_handle_from(hcap, KIND_POOL);
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
PyObject *glue_handler_counts(PyObject *self, PyObject *cap)
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
PyObject *glue_set_handler(PyObject *self, PyObject *cap)
{
    if (!PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, "mem_handler")) {
        PyErr_SetString(PyExc_TypeError, "expected a mem_handler capsule");
        return NULL;
    }
    return PyDataMem_SetHandler(cap);
}

/* get_handler() -> the current handler capsule (new reference) */
PyObject *glue_get_handler(PyObject *self, PyObject *unused)
{
    return PyDataMem_GetHandler();
}

/* owner(obj) -> (pool handle, kind) or None
 *   kind 1: an array of Pool.empty() (its base is a block capsule)
 *   kind 2: an array whose data NumPy allocated through a pyarena handler */
PyObject *glue_owner(PyObject *self, PyObject *obj)
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
