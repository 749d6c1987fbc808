/* glue_shape.c -- the one shape parser of pyarena (module pyarena._native._glue).
 *
 * Arena.empty and Pool.empty / zeros take NumPy-style shapes: an int, or a
 * sequence of ints (NumPy integers and other __index__ objects included).
 * Every message about a bad shape or alignment is made here, the same for
 * both allocators; the common case (a tuple of Python ints) costs a loop
 * of PyLong_AsSsize_t.
 */
#include "glue.h"

#define MAX_ALIGN ((size_t)1 << 30)

/* ------------------------------------------------------------------ */
/* The one shape parser                                                */
/* ------------------------------------------------------------------ */

/* `shape` (an int or a sequence of ints) into dims / *nd.  0 on success;
 * -1 with TypeError (not a shape) or glue_InvalidArgumentError (negative, too
 * many dimensions, too large) set. */
/* Every other shape: an int or any sequence of ints (NumPy integers and
 * other __index__ objects too), with the errors. */
int glue_parse_shape_slow(PyObject *shape, npy_intp *dims, int *nd)
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
        PyErr_Format(glue_InvalidArgumentError, "shape %R has %zd dimensions, at most %d are "
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
            PyErr_Format(glue_InvalidArgumentError, "shape %R needs more bytes than a size "
                         "can hold", shape);
            return -1;
        }
    }
    Py_DECREF(seq);
    *nd = (int)n;
check_sign:
    for (int i = 0; i < *nd; i++) {
        if (dims[i] < 0) {
            PyErr_Format(glue_InvalidArgumentError, "negative dimension in shape %R", shape);
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

/* An alignment argument: None -> 0 (the allocator's granularity), else a
 * power of two in [1, 2**30]; -1 with the error set. */
int glue_parse_align_slow(PyObject *obj, size_t *out)
{
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
                PyErr_Format(glue_InvalidArgumentError, "align must be an integer, not %R", obj);
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
    /* the wording of pyarena/memory/args.py: pow2_range() */
    PyErr_Format(glue_AlignmentError, "align %R is not a power of two from 1 to 2**30", obj);
    return -1;
}
