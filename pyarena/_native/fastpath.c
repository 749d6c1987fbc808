/* _fastpath.c -- the native hot path of Arena.empty.
 *
 * A cffi call plus np.ndarray(shape, dtype, buffer, offset) costs several
 * hundred nanoseconds of Python-level work per array, 3-6x np.empty.  This
 * module does the common case in one C call: parse a tuple of ints, look up
 * a cached dtype, call the C arena through a function pointer taken from
 * the cffi module (so there is one copy of the C core), wrap the block in
 * an ndarray whose base is the chunk's buffer object, and record it.
 *
 * Anything unusual -- keyword arguments, an explicit alignment, a dtype not
 * yet resolved, a shape that needs validation, an allocation failure -- is
 * handed unchanged to the Python slow path, which owns every error message.
 * The only state kept here is what Python gives it (set_chunk), so the two
 * paths cannot disagree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>

/* pa_arena_alloc(); the status out-parameter (a pa_status_t *) is always
 * NULL here: on failure the slow path allocates again and reports. */
typedef void *(*alloc_fn)(void *handle, size_t size, size_t align, void *status);

typedef struct {
    PyObject_HEAD
    alloc_fn alloc;
    void *handle;
    uintptr_t base, end;       /* the current chunk                        */
    PyObject *buf;             /* its buffer object: every array's base    */
    PyObject *records;         /* list of handed-out arrays                */
    PyObject *dtypes;          /* dict: dtype spec -> np.dtype             */
    PyObject *slow;            /* slow(shape, dtype=..., align=...)        */
    PyObject *refresh;         /* refresh(addr): calls set_chunk           */
    PyObject *owner;           /* the Arena: `Arena().empty` keeps it (and
                                  so the C arena) alive while the bound
                                  method lives; a cycle the GC collects    */
    PyArray_Descr *default_descr;
} FastArena;

static void FastArena_dealloc(FastArena *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->buf);
    Py_CLEAR(self->records);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->refresh);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->default_descr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int FastArena_traverse(FastArena *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    Py_VISIT(self->records);
    Py_VISIT(self->dtypes);
    Py_VISIT(self->slow);
    Py_VISIT(self->refresh);
    Py_VISIT(self->owner);
    return 0;
}

static int FastArena_clear(FastArena *self) {
    Py_CLEAR(self->buf);
    Py_CLEAR(self->records);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->refresh);
    Py_CLEAR(self->owner);
    return 0;
}

/* FastArena(alloc_addr, handle_addr, records, dtypes, slow, refresh, owner) */
static int FastArena_init(FastArena *self, PyObject *args, PyObject *kw) {
    PyObject *fn, *h, *records, *dtypes, *slow, *refresh, *owner;
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(PyExc_TypeError, "FastArena takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOO!O!OOO", &fn, &h, &PyList_Type, &records,
                          &PyDict_Type, &dtypes, &slow, &refresh, &owner))
        return -1;
    self->alloc = (alloc_fn)PyLong_AsVoidPtr(fn);
    if (!self->alloc) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "NULL allocator");
        return -1;
    }
    self->handle = PyLong_AsVoidPtr(h);
    if (!self->handle) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "NULL handle");
        return -1;
    }
    Py_INCREF(records);
    Py_XSETREF(self->records, records);
    Py_INCREF(dtypes);
    Py_XSETREF(self->dtypes, dtypes);
    Py_INCREF(slow);
    Py_XSETREF(self->slow, slow);
    Py_INCREF(refresh);
    Py_XSETREF(self->refresh, refresh);
    Py_INCREF(owner);
    Py_XSETREF(self->owner, owner);
    Py_XSETREF(self->default_descr, PyArray_DescrFromType(NPY_DOUBLE));
    self->base = self->end = 0;
    return 0;
}

static PyObject *FastArena_set_chunk(FastArena *self, PyObject *args) {
    PyObject *b, *e, *buf;
    if (!PyArg_ParseTuple(args, "OOO", &b, &e, &buf)) return NULL;
    uintptr_t base = (uintptr_t)PyLong_AsVoidPtr(b);
    if (PyErr_Occurred()) return NULL;
    uintptr_t end = (uintptr_t)PyLong_AsVoidPtr(e);
    if (PyErr_Occurred()) return NULL;
    Py_INCREF(buf);
    Py_XSETREF(self->buf, buf);
    self->base = base;
    self->end = end;
    Py_RETURN_NONE;
}

/* Detach: every later call goes to the slow path (used by close()). */
static PyObject *FastArena_detach(FastArena *self, PyObject *unused) {
    (void)unused;
    self->alloc = NULL;
    self->handle = NULL;
    self->base = self->end = 0;
    Py_CLEAR(self->buf);
    Py_CLEAR(self->owner);
    Py_RETURN_NONE;
}

static PyObject *go_slow(FastArena *self, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames) {
    if (!self->slow) {
        PyErr_SetString(PyExc_RuntimeError, "arena is closed");
        return NULL;
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *FastArena_empty(FastArena *self, PyObject *const *args,
                                 Py_ssize_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames || nargs < 1 || nargs > 2 || !self->alloc)
        return go_slow(self, args, (size_t)nargsf, kwnames);
    PyObject *shape = args[0];
    PyArray_Descr *descr;
    if (nargs == 1) {
        descr = self->default_descr;
    } else if (PyArray_DescrCheck(args[1])) {
        descr = (PyArray_Descr *)args[1];
    } else {
        PyObject *d = PyDict_GetItemWithError(self->dtypes, args[1]);
        if (!d) {
            PyErr_Clear(); /* unhashable or unknown: the slow path explains */
            return go_slow(self, args, (size_t)nargsf, kwnames);
        }
        descr = (PyArray_Descr *)d;
    }
    if (PyDataType_REFCHK(descr)) return go_slow(self, args, (size_t)nargsf, kwnames);

    npy_intp dims[NPY_MAXDIMS];
    int nd;
    if (PyLong_CheckExact(shape)) {
        nd = 1;
        dims[0] = PyLong_AsSsize_t(shape);
        if (dims[0] < 0) {
            PyErr_Clear();
            return go_slow(self, args, (size_t)nargsf, kwnames);
        }
    } else if (PyTuple_CheckExact(shape) && PyTuple_GET_SIZE(shape) <= NPY_MAXDIMS) {
        nd = (int)PyTuple_GET_SIZE(shape);
        for (int i = 0; i < nd; i++) {
            PyObject *d = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(d)) return go_slow(self, args, (size_t)nargsf, kwnames);
            dims[i] = PyLong_AsSsize_t(d);
            if (dims[i] < 0) {
                PyErr_Clear();
                return go_slow(self, args, (size_t)nargsf, kwnames);
            }
        }
    } else {
        return go_slow(self, args, (size_t)nargsf, kwnames);
    }
    size_t nbytes = (size_t)PyDataType_ELSIZE(descr);
    for (int i = 0; i < nd; i++) {
        if (__builtin_mul_overflow(nbytes, (size_t)dims[i], &nbytes))
            return go_slow(self, args, (size_t)nargsf, kwnames);
    }
    if (nbytes > (size_t)PY_SSIZE_T_MAX) return go_slow(self, args, (size_t)nargsf, kwnames);

    void *p = self->alloc(self->handle, nbytes, 0, NULL);
    if (!p) return go_slow(self, args, (size_t)nargsf, kwnames); /* slow path raises */
    uintptr_t a = (uintptr_t)p;
    if (a < self->base || a >= self->end || !self->buf) {
        /* A new chunk: Python looks it up and calls set_chunk. */
        PyObject *addr = PyLong_FromVoidPtr(p);
        if (!addr) return NULL;
        PyObject *r = PyObject_CallOneArg(self->refresh, addr);
        Py_DECREF(addr);
        if (!r) return NULL;
        Py_DECREF(r);
        if (a < self->base || a >= self->end || !self->buf) {
            PyErr_SetString(PyExc_RuntimeError, "arena chunk lookup failed");
            return NULL;
        }
    }
    Py_INCREF(descr);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, p,
                                         NPY_ARRAY_CARRAY, NULL);
    if (!arr) return NULL;
    Py_INCREF(self->buf);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, self->buf) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    if (PyList_Append(self->records, arr) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyMethodDef FastArena_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))FastArena_empty,
     METH_FASTCALL | METH_KEYWORDS, "empty(shape, dtype=float64)"},
    {"set_chunk", (PyCFunction)FastArena_set_chunk, METH_VARARGS,
     "set_chunk(base, end, buffer)"},
    {"detach", (PyCFunction)FastArena_detach, METH_NOARGS,
     "route every call to the slow path"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FastArenaType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyarena._fastpath.FastArena",
    .tp_basicsize = sizeof(FastArena),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)FastArena_init,
    .tp_dealloc = (destructor)FastArena_dealloc,
    .tp_traverse = (traverseproc)FastArena_traverse,
    .tp_clear = (inquiry)FastArena_clear,
    .tp_methods = FastArena_methods,
    .tp_doc = "Native hot path of pyarena.Arena.empty (internal).",
};

static struct PyModuleDef fastpath_module = {
    PyModuleDef_HEAD_INIT, "_fastpath",
    "Native hot paths for pyarena (internal).", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    import_array();
    if (PyType_Ready(&FastArenaType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fastpath_module);
    if (!m) return NULL;
    Py_INCREF(&FastArenaType);
    if (PyModule_AddObject(m, "FastArena", (PyObject *)&FastArenaType) < 0) {
        Py_DECREF(&FastArenaType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
