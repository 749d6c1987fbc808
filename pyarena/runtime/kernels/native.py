"""What the kernel families share to call the C core's native kernels.

Not a family: ``conv.py``, ``pooling.py``, ``elementwise.py`` and
``resize.py`` use it to decide whether an operator runs natively and to
call it.  The native kernels are float32 only; every other dtype, and
whatever geometry they do not cover, keeps the NumPy path.

* :func:`fused_activation` -- the op's ``activation`` attribute as the
  C core's (kind, alpha, beta), or None when it has no native form.
* :func:`unary` -- the native run of a float32 element-wise activation.
* :class:`Pointers` -- the ``float *`` of the arrays of a call.  Once the
  Executor has bound planned views that never change (``kernel.stable``)
  they are kept and reused while the same array objects come back, so a
  steady-state call costs one identity check per array; otherwise (the
  dynamic allocation modes) they are made per call and nothing holds on to
  the arrays, which go back to their allocator after the call.
"""
import math

import numpy as np

from ..._native import check, lib
from ..._native.kernels import NULL, act_params, fptr, pool2d

__all__ = ["NATIVE_DTYPE", "fused_activation", "native_act", "Pointers", "NULL", "unary",
           "plane_mean", "ordered_mean"]

NATIVE_DTYPE = np.dtype(np.float32)

#: activation attribute -> (native kind, alpha, beta); TANH has no native form
_ACT = {"RELU": ("RELU", 0.0, 0.0), "RELU6": ("CLIP", 0.0, 6.0),
        "RELU_N1_TO_1": ("CLIP", -1.0, 1.0), "RELU1": ("CLIP", -1.0, 1.0),
        "SIGMOID": ("SIGMOID", 0.0, 0.0), "SILU": ("SILU", 0.0, 0.0),
        "HARDSWISH": ("HARDSWISH", 0.0, 0.0), "GELU": ("GELU", 0.0, 0.0)}


def fused_activation(attrs):
    """(kind, alpha, beta) of ``attrs["activation"]``: ``NONE`` when there
    is none, None when it has no native form.  ``CLIP`` reads
    ``activation_min`` / ``activation_max``, ``HARDSIGMOID``
    ``activation_alpha`` / ``activation_beta`` (set by the graph rewrite
    that fuses Clip / HardSigmoid into the op before it)."""
    act = attrs.get("activation")
    if act in (None, "", "NONE"):
        return ("NONE", 0.0, 0.0)
    act = str(act).upper()
    if act == "CLIP":
        return ("CLIP", float(attrs.get("activation_min", -np.inf)),
                float(attrs.get("activation_max", np.inf)))
    if act == "HARDSIGMOID":
        return ("HARDSIGMOID", float(attrs.get("activation_alpha", 0.2)),
                float(attrs.get("activation_beta", 0.5)))
    return _ACT.get(act)


def native_act(attrs):
    """A ``pa_act_params_t *`` for the op's activation, or None."""
    spec = fused_activation(attrs)
    return None if spec is None else act_params(*spec)


class Pointers:
    """``ptrs(a, b, ...)``: the ``float *`` of each array; cached for the
    same array objects as the previous call when ``owner.stable``."""

    __slots__ = ("key", "vals", "owner")

    def __init__(self, owner):
        self.owner = owner
        self.key = ()
        self.vals = ()

    def __call__(self, *arrays):
        if not self.owner.stable:
            self.key = self.vals = ()
            return tuple(NULL if a is None else fptr(a) for a in arrays)
        key = self.key
        if len(key) == len(arrays):
            for a, b in zip(key, arrays):
                if a is not b:
                    break
            else:
                return self.vals
        self.key = arrays
        self.vals = tuple(NULL if a is None else fptr(a) for a in arrays)
        return self.vals


def plane_mean(kernel, n, h, w, c):
    """``run(xs, ys)`` averaging each channel of a float32 NHWC tensor
    (n, h, w, c) over its h x w plane with the C core's average pooling
    (one window the size of the plane: 2-20x NumPy's reduce there, which
    sums a few channels per inner loop), or None when the op stays on
    NumPy.  Not for NCHW planes: the pooling kernel's per-row path is
    slower than NumPy's contiguous reduce.  ``run.call(xs, ys)`` is the
    same call as a call record."""
    if not kernel.use_native or kernel.dtype != NATIVE_DTYPE or min(n, h, w, c) < 1:
        return None
    if math.prod(kernel.oshape()) != n * c:     # the C call writes n * c means
        kernel.malformed(f"output {list(kernel.oshape())} does not hold the {n} x {c} "
                         f"means of its input")
    desc = pool2d(nhwc=True, n=n, c=c, h=h, w=w, h_out=1, w_out=1, kh=h, kw=w, sh=1, sw=1,
                  pads=(0, 0, 0, 0), count_include_pad=0)
    ptrs = Pointers(kernel)

    def run(xs, ys):
        x, y = ptrs(xs[0], ys[0])
        st = lib.pa_avgpool2d(desc, x, y, kernel.workers)
        if st:
            check(st, f"{kernel.op.op_type} {kernel.op.name!r}")
    run.call = lambda xs, ys: ("avgpool", desc, None, fptr(xs[0]), None, fptr(ys[0]), ())
    return run


def ordered_mean(kernel, nhwc, n, c, sp):
    """``run(xs, ys)`` averaging each channel of a float32 tensor over its
    ``sp`` values in onnxruntime MLAS's global-pool order
    (``pa_avgpool2d_ordered``'s LANES: the plane as one row of ``sp``), or
    None when the op stays on NumPy.  ``run.call``: its call record."""
    if not kernel.use_native or kernel.dtype != NATIVE_DTYPE or min(n, c, sp) < 1:
        return None
    if math.prod(kernel.oshape()) != n * c:
        kernel.malformed(f"output {list(kernel.oshape())} does not hold the {n} x {c} "
                         f"means of its input")
    desc = pool2d(nhwc=nhwc, n=n, c=c, h=1, w=sp, h_out=1, w_out=1, kh=1, kw=sp, sh=1, sw=1,
                  pads=(0, 0, 0, 0), count_include_pad=0)
    order = lib.PA_POOL_ORDER_LANES
    ptrs = Pointers(kernel)

    def run(xs, ys):
        x, y = ptrs(xs[0], ys[0])
        st = lib.pa_avgpool2d_ordered(desc, order, x, y, kernel.workers)
        if st:
            check(st, f"{kernel.op.op_type} {kernel.op.name!r}")
    run.call = lambda xs, ys: ("avgpool_ordered", desc, None, fptr(xs[0]), None, fptr(ys[0]),
                               (order,))
    return run


def unary(kernel, kind, alpha=0.0, beta=0.0):
    """``run(xs, ys)`` computing ``ys[0] = act(xs[0])`` natively for a
    float32 element-wise kernel (``pa_act``; the output may be the input's
    memory), or None when the op stays on NumPy (another dtype, or
    ``Graph.native`` off).  ``run.call(xs, ys)`` is the same call as a
    call record."""
    if not kernel.use_native or kernel.dtype != NATIVE_DTYPE:
        return None
    params = act_params(kind, alpha, beta)
    ptrs = Pointers(kernel)
    n = math.prod(kernel.oshape())
    if math.prod(kernel.shape(0)) != n:        # the C call reads n values of the input
        kernel.malformed(f"input {list(kernel.shape(0))} and output "
                         f"{list(kernel.oshape())} differ in size")

    def run(xs, ys):
        x, y = ptrs(xs[0], ys[0])
        st = lib.pa_act(params, x, y, n, kernel.workers)
        if st:
            check(st, f"{kernel.op.op_type} {kernel.op.name!r}")
    # the same call as a pa_call_t record (Kernel.native_call)
    run.call = lambda xs, ys: ("act", params, None, fptr(xs[0]), None, fptr(ys[0]), (n,))
    return run
