/* glue.c -- the CPython/NumPy glue of pyarena (module pyarena._native._glue):
 * the module, the C core's function table, handles and pool blocks.
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
 * The ONE retry policy of the pool lives here, in glue_pool_realloc(): on
 * PA_ERR_NOMEM the pool's cached blocks and fully free chunks are released
 * (pa_pool_free_all) and the allocation retried once; a second failure is
 * final (counted as an OOM).
 *
 * Destructors never raise and do nothing while the interpreter finalizes
 * (the process is exiting; the OS takes the memory back).
 *
 * Files: glue.c (this), glue_shape.c (2.), glue_empty.c (2.), glue_numpy.c
 * (3.), glue.h (what they share).
 */#define PYARENA_GLUE_MAIN /* this file calls import_array() */
#include "glue.h"

glue_api_t glue_api;
PyObject *glue_InvalidArgumentError, *glue_AlignmentError, *glue_StateError;

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
    glue_api.arena_alloc = (void *(*)(pa_arena_t *, size_t, size_t, pa_status_t *))f[0];
    glue_api.arena_destroy = (pa_status_t (*)(pa_arena_t *))f[1];
    glue_api.pool_alloc = (void *(*)(pa_pool_t *, size_t, pa_status_t *))f[2];
    glue_api.pool_realloc = (void *(*)(pa_pool_t *, void *, size_t, pa_status_t *))f[3];
    glue_api.pool_free = (pa_status_t (*)(pa_pool_t *, void *))f[4];
    glue_api.pool_free_all = (pa_status_t (*)(pa_pool_t *))f[5];
    glue_api.pool_destroy = (pa_status_t (*)(pa_pool_t *))f[6];
    Py_RETURN_NONE;
}

/* configure(glue_InvalidArgumentError, glue_AlignmentError, glue_StateError) */
static PyObject *g_configure(PyObject *self, PyObject *args)
{
    PyObject *inv, *al, *st;
    if (!PyArg_ParseTuple(args, "OOO:configure", &inv, &al, &st))
        return NULL;
    Py_XSETREF(glue_InvalidArgumentError, Py_NewRef(inv));
    Py_XSETREF(glue_AlignmentError, Py_NewRef(al));
    Py_XSETREF(glue_StateError, Py_NewRef(st));
    Py_RETURN_NONE;
}

static PyMethodDef glue_methods[] = {
    {"bind", (PyCFunction)g_bind, METH_O, NULL},
    {"configure", (PyCFunction)g_configure, METH_VARARGS, NULL},
    {"handle", (PyCFunction)g_handle, METH_VARARGS, NULL},
    {"live_handles", (PyCFunction)g_live_handles, METH_O, NULL},
    {"pool_counters", (PyCFunction)g_pool_counters, METH_O, NULL},
    {"empty_function", (PyCFunction)glue_empty_function, METH_VARARGS, NULL},
    {"handler_new", (PyCFunction)glue_handler_new, METH_O, NULL},
    {"handler_counts", (PyCFunction)glue_handler_counts, METH_O, NULL},
    {"set_handler", (PyCFunction)glue_set_handler, METH_O, NULL},
    {"owner", (PyCFunction)glue_owner, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef glue_module = {
    PyModuleDef_HEAD_INIT, "_glue",
    "CPython/NumPy glue of pyarena's arena and pool (see glue.c).", -1, glue_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__glue(void);

PyMODINIT_FUNC PyInit__glue(void)
{
    import_array();
    glue_InvalidArgumentError = Py_NewRef(PyExc_ValueError);
    glue_AlignmentError = Py_NewRef(PyExc_ValueError);
    glue_StateError = Py_NewRef(PyExc_RuntimeError);
    if (glue_empty_ready() < 0)
        return NULL;
    return PyModule_Create(&glue_module);
}
