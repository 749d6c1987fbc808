"""One operator touching pool tensors (sizes that depend on data), as
:mod:`pyarena.runtime.dynamic` runs it: in the outer graph or in a Loop,
Scan or If body (:mod:`.subgraph`).  Its kernel is built when it first
runs with given input shapes (and the values of its small integer inputs
computed at run time -- a shape, a K -- and of its float scalars: a Clip
bound, a OneHot depth), and kept for those; its outputs'
shapes come from the kernel's ``produce`` (NonZero, Loop: only running
tells) or from the op's shape rule ``notes.infer`` (set by the
importer), its scratch from the pool too.
"""
from collections import OrderedDict

import numpy as np

from ...errors import GraphError, UnsupportedOpError
from ...graph import Tensor
from .registry import KERNELS, _carve, held_form_of, make_kernel

__all__ = ["PoolOp", "pool_frees"]

#: kernels kept per operator, one per input signature
MAX_SIGNATURES = 16
#: a run-time integer input up to this many elements is read as a value when
#: the kernel is built (a shape, a K, a Slice bound); the inputs the importer
#: names (``notes.value_inputs``: a scale, a weight fed as an input) whatever
#: their type and size
VALUE_ELEMENTS = 64
#: a sequence's place in a kernel's signature: built for any sequence
_HELD = ("sequence",)


def pool_frees(graph):
    """op name -> the pool tensors whose last reader it is (graph outputs
    stay until the next run)."""
    last = {}
    for op in graph.ops:
        for n in op.inputs:
            if n and graph.tensors[n].dynamic and graph.tensors[n].role != "output":
                last[n] = op.name
    out = {}
    for n, name in last.items():
        out.setdefault(name, []).append(n)
    return out


def _value(a):
    """The bytes of a run-time input read as a value (a small integer
    tensor: a K, an axis, a shape; or a single float: a Clip bound, a
    OneHot depth, a quantization scale), else None."""
    if a is not None and (a.dtype.kind in "iub" and a.size <= VALUE_ELEMENTS or
                          a.dtype.kind == "f" and a.size == 1):
        return a.tobytes()
    return None


class PoolOp:
    """One operator touching pool tensors.  ``pooled``: the run's pool
    tensors by name (shared by every step); ``frees``: the pool tensors
    whose last reader this op is."""

    path = "pool"
    scratch_bytes = 0
    runtime = None
    stable = False
    idle = False            # always called: its kernels are built at run time

    def bind(self, xs, ys):
        """The executor's planned views (the Kernel interface): this step
        builds its kernels per shape at run time, so it keeps nothing."""
        self.stable = True

    def __init__(self, graph, op, keep, pool, pooled, frees):
        if op.op_type not in KERNELS:
            raise UnsupportedOpError(f"operator {op.name!r}: op type {op.op_type!r} is not "
                                     f"supported by the executor")
        self.graph, self.op, self.keep = graph, op, keep
        self.pool, self.pooled = pool, pooled
        # (a value held outside the arena -- strings -- is only dropped)
        self.frees = [(n, graph.tensors[n].host is None) for n in frees]
        self.cache = OrderedDict()

    def __call__(self, xs, ys, sc=None):
        g, op, pooled = self.graph, self.op, self.pooled
        ins = [pooled[n] if n and g.tensors[n].dynamic else x for n, x in zip(op.inputs, xs)]
        named = op.notes.value_inputs
        sig = tuple(None if a is None else _HELD if type(a) is list else
                    (a.shape, a.dtype.str, a.tobytes() if n in named else _value(a))
                    for n, a in zip(op.inputs, ins))
        k = self.cache.get(sig)
        if k is None:
            k = self.cache[sig] = self.build(ins)
            while len(self.cache) > MAX_SIGNATURES:
                self.cache.popitem(last=False)
        self.cache.move_to_end(sig)
        names = [n for n in op.outputs if n]
        outs = [None if g.tensors[n].dynamic else y for n, y in zip(names, ys)]
        scratch = self.pool.empty((k.scratch_bytes,), np.uint8) if k.scratch_bytes else None
        carved = ()
        try:
            if hasattr(k, "produce"):
                carved = _carve(scratch, k.scratch) if k.scratch else ()
                outs = k.produce(ins, outs, carved, self.pool)
            else:
                for i, n in enumerate(names):
                    if outs[i] is None:
                        t = k.outs[i]
                        outs[i] = self.pool.empty(t.shape, t.dtype)
                k(ins, outs, scratch)
        finally:
            if scratch is not None:
                del carved
                self.pool.free(scratch)
        for n, a in zip(names, outs):
            if g.tensors[n].dynamic:
                pooled[n] = a
        del ins, outs
        for n, pool_owned in self.frees:
            a = pooled.pop(n, None)
            if a is not None and pool_owned:
                self.pool.free(a)

    def build(self, ins):
        """The kernel for these inputs: their shapes, and the values of the
        small integer ones computed at run time and of those the importer
        named (``notes.value_inputs``)."""
        op, g = self.op, self.graph
        tins = []
        for n, a in zip(op.inputs, ins):
            t = g.tensors[n] if n else None
            if t is None or t.role == "constant" or (t.host and t.host != "string"):
                tins.append(t)      # (a sequence or an optional: as declared)
                continue
            data = a.copy() if n in op.notes.value_inputs or _value(a) is not None else None
            tins.append(Tensor(n, a.shape, a.dtype.name, role="activation", data=data,
                               host=t.host))
        touts = [Tensor(n, None if g.tensors[n].dynamic else g.tensors[n].shape,
                        g.tensors[n].dtype, nbytes_given=0, host=g.tensors[n].host)
                 for n in op.outputs if n]
        cls = held_form_of(op, tins, touts) or KERNELS[op.op_type]    # (Identity of a sequence)
        if not hasattr(cls, "produce"):
            infer = op.notes.infer
            if infer is None:
                raise GraphError(f"operator {op.name!r} ({op.op_type}) reads a pool tensor "
                                 f"but has no shape rule")
            shapes = infer(ins, {i for i, t in enumerate(tins)
                                 if t is not None and t.data is not None})
            for t, s in zip(touts, shapes):
                t.shape = tuple(int(d) for d in s)
        # a kernel built per value of a named input (a weight fed at run time)
        # keeps what it derives in its own arrays, not the weights arena: they
        # go when the kernel leaves the cache, where the arena would only grow
        keep = None if op.notes.value_inputs else self.keep
        return make_kernel(op, tins, touts, keep, g.scratch_budget,
                           getattr(g, "native", True), cls=cls)
