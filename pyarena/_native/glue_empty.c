/* glue_empty.c -- the native empty() of Arena and Pool (pyarena._native._glue).
 *
 * An Empty holds what one allocation needs: the handle, the dtype cache,
 * the arena's record list, the zero flag.  The function handed to Python
 * is a builtin bound to it (METH_FASTCALL | METH_KEYWORDS), which CPython's
 * adaptive interpreter calls faster than an object with tp_vectorcall
 * (measured: 8-14 ns of a 130 ns Arena.empty).  One call parses the shape
 * (glue_shape.c), looks the dtype up, allocates (the pool under its retry
 * policy), wraps the block in an ndarray whose base holds the handle, and
 * for an arena records the array.  A failed allocation calls back into
 * Python once, to explain it with the allocator's statistics.
 */
#include "glue.h"

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
    if (PyDataType_ELSIZE((PyArray_Descr *)d) == 0) {
        PyErr_Format(glue_InvalidArgumentError, "dtype %S has no size; give a sized dtype "
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
        p = data = glue_api.arena_alloc((pa_arena_t *)self->c, nbytes, align, &st);
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
        p = glue_pool_realloc(self->h, NULL, n, &st);
        data = p;
        if (p != NULL) {
            data = (void *)(((uintptr_t)p + extra) & ~(uintptr_t)(extra ? align - 1 : 0));
            *base = glue_block_owner(self->hcap, self->h, p);
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
        return PyErr_Format(glue_StateError, "%s is closed",
                            self->kind == KIND_POOL ? "pool" : "arena");
    PyArray_Descr *descr = empty_dtype(self, dtype);
    if (descr == NULL)
        return NULL;
    if (glue_parse_shape(shape, dims, &nd) < 0 || glue_shape_bytes(shape, descr, dims, nd, &nbytes) < 0 ||
        glue_parse_align(alignobj, &align) < 0) {
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

/* close(): every later call raises glue_StateError; arrays keep their memory. */
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
PyObject *glue_empty_function(PyObject *self, PyObject *args)
{
    PyObject *hcap, *records, *dtypes, *resolve, *failed;
    Py_ssize_t gran;
    int zero;
    if (!PyArg_ParseTuple(args, "OnOO!OOp:empty_function", &hcap, &gran, &records,
                          &PyDict_Type, &dtypes, &resolve, &failed, &zero))
        return NULL;
    handle_t *h = glue_handle_from(hcap, -1);
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

int glue_empty_ready(void)
{
    return PyType_Ready(&EmptyType);
}
