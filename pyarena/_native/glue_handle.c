/* glue_handle.c -- handles and pool blocks of pyarena._native._glue.
 *
 * A C arena or pool is owned by a *handle* capsule ("pyarena.handle") that
 * destroys it when the last reference is gone; every array handed out
 * keeps the handle alive through its base (the handle itself for an arena
 * array; for a pool array a *block* capsule, "pyarena.block", that frees
 * its block when it dies and holds the handle).  Nothing the handle
 * reaches refers back to an array, so the owners form no reference cycle.
 *
 * The ONE retry policy of the pool lives here, in glue_pool_realloc(): on
 * PA_ERR_NOMEM the pool's cached blocks and fully free chunks are released
 * (pa_pool_free_all) and the allocation retried once; a second failure is
 * final (counted as an OOM).  The module's functions handle(),
 * live_handles() and pool_counters() are defined here too.
 */
#include "glue.h"

/* ------------------------------------------------------------------ */
/* Handles: one capsule owns one C arena or pool                       */
/* ------------------------------------------------------------------ */

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
        (void)glue_api.pool_destroy((pa_pool_t *)h->c);
    else
        (void)glue_api.arena_destroy((pa_arena_t *)h->c);
    Py_XDECREF(h->keep);
    __atomic_fetch_sub(&live[h->kind], 1, __ATOMIC_RELAXED);
    PyMem_Free(h);
}

handle_t *glue_handle_from(PyObject *cap, int kind)
{
    if (glue_api.arena_alloc == NULL) {
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
PyObject *glue_handle(PyObject *self, PyObject *args)
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
PyObject *glue_live_handles(PyObject *self, PyObject *arg)
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
PyObject *glue_pool_counters(PyObject *self, PyObject *cap)
{
    handle_t *h = glue_handle_from(cap, KIND_POOL);
    if (h == NULL)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)counter_get(&h->retries),
                         (unsigned long long)counter_get(&h->ooms));
}

/* The one retry policy (CuPy's): on PA_ERR_NOMEM give every cached and
 * fully free chunk back (pa_pool_free_all: reclaim + release), then retry
 * once.  A second NOMEM is final and counted as an OOM.  ptr NULL = alloc. */
void *glue_pool_realloc(handle_t *h, void *ptr, size_t size, pa_status_t *status)
{
    pa_pool_t *pool = (pa_pool_t *)h->c;
    pa_status_t st = PA_OK;
    void *p = ptr ? glue_api.pool_realloc(pool, ptr, size, &st)
                  : glue_api.pool_alloc(pool, size, &st);
    if (p == NULL && st == PA_ERR_NOMEM) {
        counter_add(&h->retries, 1);
        (void)glue_api.pool_free_all(pool);
        p = ptr ? glue_api.pool_realloc(pool, ptr, size, &st)
                : glue_api.pool_alloc(pool, size, &st);
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
        (void)glue_api.pool_free((pa_pool_t *)h->c, ptr);
    Py_DECREF(hcap);
}

/* A capsule that frees pool block `ptr` when it dies and holds `hcap`;
 * NULL (the block freed) on a Python error. */
PyObject *glue_block_owner(PyObject *hcap, handle_t *h, void *ptr)
{
    PyObject *owner = PyCapsule_New(ptr, BLOCK_CAPSULE, NULL);
    if (owner == NULL) {
        (void)glue_api.pool_free((pa_pool_t *)h->c, ptr);
        return NULL;
    }
    /* context = a strong reference to the handle; only then the destructor,
     * so that it always finds both */
    Py_INCREF(hcap);
    PyCapsule_SetContext(owner, hcap);
    PyCapsule_SetDestructor(owner, block_destroy);
    return owner;
}

