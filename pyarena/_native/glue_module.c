/* glue_module.c -- the CPython/NumPy glue of pyarena (module
 * pyarena._native._glue): the module, its function table and the C core's.
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
 * Destructors never raise and do nothing while the interpreter finalizes
 * (the process is exiting; the OS takes the memory back).
 *
 * Files, one job each, bottom up: glue_handle.c (1. and the pool's one
 * retry policy), glue_shape.c (the shape parser of 2.), glue_empty.c (2.),
 * glue_numpy.c (3.), and this file on top: the module, bind() and
 * configure().  glue.h declares what they share.
 */
#define PYARENA_GLUE_MAIN /* this file calls import_array() */
#include "glue.h"

glue_api_t glue_api;
PyObject *glue_InvalidArgumentError, *glue_AlignmentError, *glue_StateError;

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
    {"handle", (PyCFunction)glue_handle, METH_VARARGS, NULL},
    {"live_handles", (PyCFunction)glue_live_handles, METH_O, NULL},
    {"pool_counters", (PyCFunction)glue_pool_counters, METH_O, NULL},
    {"empty_function", (PyCFunction)glue_empty_function, METH_VARARGS, NULL},
    {"handler_new", (PyCFunction)glue_handler_new, METH_O, NULL},
    {"handler_counts", (PyCFunction)glue_handler_counts, METH_O, NULL},
    {"set_handler", (PyCFunction)glue_set_handler, METH_O, NULL},
    {"owner", (PyCFunction)glue_owner, METH_O, NULL},
    {"get_handler", (PyCFunction)glue_get_handler, METH_NOARGS, NULL},
    {"trace_open", (PyCFunction)glue_trace_open, METH_VARARGS, NULL},
    {"trace_step", (PyCFunction)glue_trace_step, METH_O, NULL},
    {"trace_close", (PyCFunction)glue_trace_close, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef glue_module = {
    PyModuleDef_HEAD_INIT, "_glue",
    "CPython/NumPy glue of pyarena's arena and pool (see glue_module.c).", -1, glue_methods,
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
