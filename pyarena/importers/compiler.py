"""Compiling a model: ``compile_model`` once, then load the file by
``mmap`` in milliseconds (:mod:`.compiled`), without onnx, tflite or
onnxruntime.

:func:`compile_model` imports a model for each input-shape signature asked
for, exactly as an :class:`~pyarena.InferenceSession` does (the parse,
shape inference, constant folding, fusion, the NHWC layout, the plan --
under a memory budget if one is given), and writes one file
(:mod:`.compiled_format`): the graphs as they run (:mod:`.compiled_codec`),
their plans, and the constants once, aligned, in a blob the loader maps.
What the kernels lay out of the constants (a convolution's packed filter,
tables) is stored too, in the order they keep it: a session of the file
hands those layouts out again, read where they lie (nothing packed, no
copy), when the file was compiled by the same pyarena and C core.

What is not compiled yet, refused with :class:`CompileError` naming it:
control flow (Loop / If / Scan bodies), ops whose output shapes depend on
data, values held outside the arena (strings, sequences), inputs taken by
value (a 0-d integer input, an input that decides shapes), and state kept
from one run to the next (a TFLite model's variables).
"""
import os
import time

import numpy as np

from ..errors import InvalidArgumentError, ModelImportError
from ..graph import Graph
from ..planning import PlanOptions
from . import compiled_format
from .compiled import KIND
from .compiled_codec import CompileError, encode_graph, encode_value

__all__ = ["compile_model", "CompileError", "COMPILED_SUFFIX"]

COMPILED_SUFFIX = ".pa"


def _signatures(inputs):
    """``inputs`` as a list of {name: shape} (None: one, the declared shapes)."""
    if inputs is None:
        return [{}]
    if isinstance(inputs, dict):
        return [inputs]
    if isinstance(inputs, (list, tuple)) and all(isinstance(s, dict) for s in inputs) \
            and inputs:
        return list(inputs)
    raise InvalidArgumentError(f"inputs must be a dict of input name -> shape or a list of "
                               f"them (one per signature), not {inputs!r:.80}")


def _concrete(args, given):
    """Every input's shape for one signature: ``given``, else the declared
    one when it has no symbolic dimension."""
    known = {a.name for a in args}
    for name in given:
        if name not in known:
            raise InvalidArgumentError(f"{name!r} is not an input; inputs: {sorted(known)}")
    shapes, open_ = {}, []
    for a in args:
        if a.shape is None:
            raise CompileError(f"input {a.name!r} is a {a.type}: values held outside the "
                               f"arena are not compiled yet")
        if len(a.shape) == 0 and a.type in ("tensor(int32)", "tensor(int64)", "tensor(bool)"):
            raise CompileError(f"input {a.name!r} is a 0-d {a.type}, taken by value: such "
                               f"models are not compiled yet")
        s = given.get(a.name, a.shape)
        if any(not isinstance(d, (int, np.integer)) for d in s):
            open_.append(f"{a.name} {list(s)}")
        shapes[a.name] = tuple(int(d) if isinstance(d, (int, np.integer)) else d for d in s)
    if open_:
        raise InvalidArgumentError(f"input shapes with symbolic dimensions: {'; '.join(open_)}: "
                                   f"give them (inputs={{name: shape}})")
    return shapes


def _arg(a):
    return [a.name, None if a.shape is None else list(a.shape), a.type]


def compile_model(model, path, inputs=None, *, memory_budget=None, threads=None,
                  native=True, layout="auto", portable=False):
    """Compile ``model`` (an .onnx / .tflite file, a JSON graph, or a
    :class:`~pyarena.Graph` with its constants) to ``path``.

    ``inputs``: the input shapes of one signature (name -> shape), or a
    list of them, one per signature to compile (None: the declared shapes,
    which must then have no symbolic dimension); ``memory_budget``: bytes
    each signature's plan must fit (the fastest plan that fits, as
    ``InferenceSession(memory_budget=)``); ``threads``: the native kernels'
    threads a session of the file uses unless told otherwise; ``native`` /
    ``layout``: as for :func:`~pyarena.importers.load_model`; ``portable``:
    keep every constant, also those only read to make the kernels' stored
    layouts, so that another pyarena or build of the C core (which lays
    them out again) runs the file too -- by default those constants are
    left out and such a build refuses the file.  Returns a
    dict: ``path``, ``file_bytes``, ``weights_bytes`` (the constants' bytes
    in the blob), ``document_bytes``, ``signatures`` and ``seconds``."""
    from .session import InferenceSession
    t0 = time.perf_counter()
    if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
        raise InvalidArgumentError(f"threads must be >= 1, not {threads!r}")
    blob = compiled_format.Blob()
    sigs = []
    if isinstance(model, Graph):
        from ..runtime.slack import plan_to_run
        g = model.validate()
        if g.variables:
            raise CompileError(f"graph {g.name!r} keeps state from one run to the next "
                               f"(variables): such graphs are not compiled yet")
        source, fmt = g.name, "graph"
        args = [_Arg(n, g.tensors[n].shape, f"tensor({g.tensors[n].dtype})") for n in g.inputs]
        outs = [_Arg(n, g.tensors[n].shape, f"tensor({g.tensors[n].dtype})") for n in g.outputs]
        for given in _signatures(inputs):
            if given:
                raise InvalidArgumentError("a Graph is compiled for the shapes it has: "
                                           "inputs= is for model files")
            p = plan_to_run(g, PlanOptions(memory_budget=memory_budget))
            sigs.append(_signature(_concrete(args, {}), g, p, blob, portable))
    else:
        from . import sniff_format
        source, fmt = os.path.basename(os.fspath(model)), sniff_format(model)
        if fmt == "compiled":
            raise InvalidArgumentError(f"{model}: already a compiled model")
        sess = InferenceSession(model, native=native, layout=layout,
                                memory_budget=memory_budget, blas_threads=None)
        if sess._io.state is not None:
            raise CompileError(f"{model}: the model keeps state from one run to the next "
                               f"(variables): such models are not compiled yet")
        args, outs = sess.get_inputs(), sess.get_outputs()
        for given in _signatures(inputs):
            shapes = _concrete(args, given)
            try:
                entry = sess._prepare(shapes, {})
            except ModelImportError as exc:
                if getattr(exc, "deciding_inputs", ()):
                    raise CompileError(f"{model}: input(s) {sorted(exc.deciding_inputs)} "
                                       f"decide tensor shapes by value: such models are not "
                                       f"compiled yet") from None
                raise
            if entry.graph.deciding_inputs:
                raise CompileError(f"{model}: input(s) {sorted(entry.graph.deciding_inputs)} "
                                   f"decide tensor shapes by value: such models are not "
                                   f"compiled yet")
            sigs.append(_signature(shapes, entry.graph, entry.plan, blob, portable))
    from .._native.paths import core_digest
    doc = {"kind": KIND, "pyarena": _version(), "core": core_digest(),
           "source": source, "source_format": fmt,
           "inputs": [_arg(a) for a in args], "outputs": [_arg(a) for a in outs],
           "threads": None if threads is None else int(threads),
           "memory_budget": None if memory_budget is None else int(memory_budget),
           "signatures": sigs}
    size = compiled_format.write(path, doc, blob)
    return {"path": os.fspath(path), "file_bytes": size, "weights_bytes": blob.nbytes,
            "document_bytes": size - blob.nbytes, "signatures": len(sigs),
            "seconds": time.perf_counter() - t0}


class _Arg:
    """An input / output as ``compile_model`` reads it from a Graph."""

    def __init__(self, name, shape, type_):
        self.name, self.shape, self.type = name, tuple(shape), type_.replace("float32", "float")


def _signature(shapes, g, p, blob, portable=False):
    """One signature's document: its graph and plan, and what its kernels
    lay out of the constants (packed weights, tables), in the order they
    keep them (``WeightKeeper``: a session of the file hands them out again
    instead of packing).  The constants read only to make those layouts
    are left out (:func:`_left_out`) unless ``portable``."""
    from ..memory import Arena
    from ..runtime.keeper import build_kernels
    if p.graph is not None and p.graph is not g:
        g = p.graph
    journal = []
    prepared = build_kernels(g, Arena(alignment=64), journal=journal)
    left_out = set() if portable else _left_out(g, p, prepared, journal)
    return {"shapes": {k: list(v) for k, v in shapes.items()},
            "graph": encode_graph(g, blob, left_out),
            "plan": encode_value(p.to_json(), blob, "the plan"),
            "layouts": [[a.dtype.str, list(a.shape), blob.add(a)] for a in journal],
            "layouts_required": bool(left_out)}


#: a constant smaller than this is stored even when only its layout is read
LEAVE_OUT_MIN_BYTES = 4096


def _left_out(g, p, prepared, journal, seeds=(0, 1)):
    """The constants the file need not hold: those only kernel setup reads
    (not at run time) to make the layouts stored beside them -- when a
    graph with every one of them replaced by a poison placeholder
    (``compiled_codec.placeholder``), its kernels handed the stored layouts,
    gives the same bits as ``g`` on seeded random inputs.  Else none (the
    file then keeps every constant and runs on another build too)."""
    from ..errors import PyArenaError
    from ..planning.result import Plan
    from ..runtime import Executor, random_feeds
    from .compiled_codec import ArrayViews, decode_graph
    read_at_run, read_at_setup = set(), set()
    for op, k in zip(g.ops, prepared.kernels):
        for i, name in enumerate(op.inputs):
            if name and g.tensors[name].role == "constant":
                (read_at_run if k.runtime is None or i in k.runtime else read_at_setup).add(name)
    candidates = {n for n in read_at_setup - read_at_run
                  if np.asarray(g.tensors[n].data).nbytes >= LEAVE_OUT_MIN_BYTES}
    if not candidates or not journal:
        return set()
    scratch = compiled_format.Blob()
    try:
        poisoned = decode_graph(encode_graph(g, scratch, candidates),
                                ArrayViews([a for a in scratch.arrays]))
        poisoned.stored_layouts, poisoned.layouts_required = list(journal), True
        ex2 = Executor(poisoned, Plan.from_json(p.to_json(), graph=poisoned),
                       plan_checked=True)
        ex1 = Executor(g, p, kernels=prepared, weights=prepared.keeper.weights,
                       plan_checked=True)
        for seed in seeds:
            feeds = random_feeds(g, seed=seed)
            want = {k: np.array(v) for k, v in ex1.run(feeds).items()}
            got = ex2.run(feeds)
            if any(want[k].tobytes() != np.ascontiguousarray(got[k]).tobytes() for k in want):
                return set()
    except PyArenaError:        # the kernels did not take every layout: keep them all
        return set()
    return candidates


def _version():
    from .. import __version__
    return __version__


