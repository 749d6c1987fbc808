"""The kernel registry: where each operator is declared, once.

A kernel class carries every fact about the operators it runs (the list,
with the vocabulary of each fact, is in :mod:`.facts`): its ONNX op types
and TFLite builtins, its family, its in-place kind, its shape rule, how it
folds, its NHWC form, how a patched stage bands it, its QDQ form, the
activation a convolution absorbs it as -- and its scratch rule: ``setup()``
works out the workspace it will touch (``self.scratch``: a list of
``(shape, dtype)``, 64-byte aligned parts) from the tensor shapes, within
the op's scratch budget.

:func:`register` checks the class's facts, files it under its names and
pushes the facts the planner reads (in-place kind, row kind, the scratch
rule) down into :mod:`pyarena.planning.op_facts` (the planning layer never
imports the runtime).  Every pass builds its table of operators from here
(:func:`op_table`, :func:`ops_where`), never from a list of its own.
:func:`set_scratch` copies each kernel's workspace into
``Op.scratch_bytes``, so the planner reserves exactly what the executor
touches.

At run time ``kernel(xs, ys, scratch)`` gets the input arrays, the output
arrays and a ``uint8`` scratch array and writes its results into ``ys``
with ``out=`` arguments, ``np.copyto`` and views, so a steady-state
inference performs no NumPy data allocation.  The kernel families
(elementwise, logic, indexing, movement, linalg, conv, pooling,
normalization, recurrent, resize, tflite, quantized*) import only this
module and the shared declarations (:mod:`.shape_rules`,
:mod:`.evaluators`, :mod:`.tflite_attrs`, :mod:`.erf`; conv and pooling also share the
spatial geometry in ``spatial.py``, the quantized families the integer
helpers in ``quantization.py``), never each other.
"""
import math

import numpy as np

from ...errors import (GraphError, InvalidArgumentError, NeedsValueError, PyArenaError,
                       UnsupportedOpError)
from ..._native import lib
from ..._native.kernels import NULL
from ...planning import op_facts
from ...planning.inplace import declare
from . import facts
from .native import NATIVE_DTYPE, Pointers, native_act

__all__ = ["Kernel", "register", "fold_only", "held_form", "held_form_of", "HELD_FORMS", "KERNELS", "OPS", "TFLITE_OPS", "TFLITE_INT8", "SCRATCH_BUDGET",
           "MIN_STEP_ELEMENTS", "items_per_step", "make_kernel", "graph_kernel", "scratch_bytes_for", "set_scratch",
           "supported_ops", "const", "op_fact", "op_table", "ops_where", "TfliteOp"]

_ALIGN = 64

#: Workspace one op may use by default.  Conv / pool / ConvTranspose work
#: in bands of rows and the element-wise ops with temporaries in flat
#: chunks so their scratch fits it; a larger budget means fewer
#: Python-level steps, a smaller one a smaller arena.  1 MiB keeps
#: MobileNet-class nets' scratch below their activations.  A graph planned
#: with another budget records it (``Graph.scratch_budget``).
SCRATCH_BUDGET = 1 << 20

#: The least work one Python-level step of a kernel covers when it works
#: in chunks, rows, bands or column blocks to keep its scratch within its
#: budget: however small that budget (the slack planner may leave an op a
#: few bytes), each step takes at least this many elements, so no kernel
#: loops per element or per short row and the interpreter's cost per step
#: (a few microseconds) stays small beside the step's arithmetic.  Its
#: scratch may then exceed the budget (by at most this many elements per
#: buffer): a budget is what an op is asked to keep within, not a limit.
MIN_STEP_ELEMENTS = 1 << 12

#: op type -> kernel class (the operators the executor runs)
KERNELS = {}
#: op type -> the class holding its facts: the kernels, and the operators
#: that only ever fold (:func:`fold_only`)
OPS = {}
#: op type -> the kernel class that runs it on sequences or optionals (values
#: held outside the arena: Identity of a sequence), registered with
#: :func:`held_form`; the op's own kernel runs its tensors
HELD_FORMS = {}


class TfliteOp(tuple):
    """A float TFLite builtin as a kernel declares it: ``op_type``, the
    fixed ``attrs``, and ``options`` (a function reading the builtin's
    options into attributes, None) or ``lowering`` (the name of one of the
    importer's converters, None).  Unpacks as ``(op_type, attrs)``."""

    def __new__(cls, op_type, attrs, extra=None):
        self = super().__new__(cls, (op_type, dict(attrs)))
        self.options = extra if callable(extra) else None
        self.lowering = extra if isinstance(extra, str) else None
        return self

    @property
    def op_type(self):
        return self[0]

    @property
    def attrs(self):
        return self[1]


#: TFLite builtin name -> :class:`TfliteOp`
TFLITE_OPS = {}
#: full-integer TFLite builtin -> (op type, wiring) (``Kernel.tflite_int8``)
TFLITE_INT8 = {}


def register(cls):
    """Class decorator: check ``cls``'s facts (:func:`.facts.check`), file
    it under its ``op_types`` and TFLite builtins, and push the facts the
    planner reads down to it (in-place kind, row kind)."""
    if not cls.op_types:
        raise TypeError(f"kernel {cls.__name__} declares no op_types")
    _file(cls)
    for name in cls.op_types:
        KERNELS[name] = cls
        declare(name, cls.inplace)
        rows = facts.fact(cls, "rows", name)
        if rows is not None:
            op_facts.declare_rows(name, rows)
    for builtin, rec in cls.tflite.items():
        if rec[0] not in cls.op_types:
            raise TypeError(f"kernel {cls.__name__}: TFLite {builtin} maps to "
                            f"{rec[0]!r}, which it does not run")
        TFLITE_OPS[builtin] = TfliteOp(*rec)
    for builtin, wiring in cls.tflite_int8.items():
        TFLITE_INT8[builtin] = (cls.op_types[0], wiring)
    facts.clear()
    return cls


def held_form(cls):
    """Class decorator: ``cls`` runs its ``op_types`` when they read or
    write a sequence or an optional (:data:`HELD_FORMS`); their facts stay
    their own kernel's."""
    for name in cls.op_types:
        HELD_FORMS[name] = cls
    return cls


def fold_only(cls):
    """Class decorator for the record of operators no kernel runs but the
    importer knows (a shape rule, an evaluator, its fold kind): an op that
    only ever folds, or one that must never fold.  Files its facts only."""
    _file(cls)
    facts.clear()
    return cls


def _file(cls):
    facts.check(cls)
    for name in cls.op_types:
        if name in OPS:
            raise TypeError(f"op type {name!r} is declared by both "
                            f"{OPS[name].__name__} and {cls.__name__}")
        OPS[name] = cls


def op_fact(op_type, name):
    """Fact ``name`` (:mod:`.facts`) of ``op_type``; None for an op type
    nothing declares."""
    cls = OPS.get(op_type)
    return None if cls is None else facts.fact(cls, name, op_type)


def op_table(name):
    """``{op_type: value}`` of fact ``name`` for every declared op type
    that has one."""
    return facts.table(name, OPS)


def ops_where(name, value):
    """The op types whose fact ``name`` is ``value`` (or one of a tuple of
    values), as a frozenset."""
    return facts.ops_where(name, value, OPS)


def supported_ops():
    return sorted(KERNELS)


def items_per_step(budget, item_bytes, total, item_elements=1, least=None):
    """How many items (elements, rows, columns: ``item_bytes`` of scratch
    and ``item_elements`` elements of work each) one step of a kernel that
    works in pieces takes: as many as ``budget`` bytes hold, but at least
    enough for ``least`` elements (None: :data:`MIN_STEP_ELEMENTS`); at
    least 1, at most ``total``."""
    fit = int(budget) // max(1, int(item_bytes))
    least = MIN_STEP_ELEMENTS if least is None else least
    floor = -(-least // max(1, int(item_elements)))
    return int(max(1, min(int(total), max(fit, floor))))


def const(value, dtype=np.float32):
    """A 0-d array: a ufunc operand that converts nothing at run time."""
    return np.array(value, dtype=dtype)


def _parts_size(specs):
    off = 0
    for shape, dtype in specs:
        off = -(-off // _ALIGN) * _ALIGN
        off += math.prod(shape) * np.dtype(dtype).itemsize
    return off


#: the scratch of a kernel whose parts are all empty (an operand with a
#: dimension of 0): the executor plans no buffer for 0 bytes and passes None
_NO_SCRATCH = np.empty(0, np.uint8)


def _carve(scratch, specs):
    """Views of ``scratch`` for each (shape, dtype), 64-byte aligned."""
    if scratch is None:
        scratch = _NO_SCRATCH
    out = []
    off = 0
    for shape, dtype in specs:
        off = -(-off // _ALIGN) * _ALIGN
        n = math.prod(shape) * np.dtype(dtype).itemsize
        out.append(scratch[off:off + n].view(dtype).reshape(shape))
        off += n
    return out


class _Counted:
    """A kernel's ``keep``: the keeper's (or :func:`sizing_only`), counting
    the bytes of the layouts the kernel's setup keeps (``kept``) -- the
    same count whether the arrays are stored or the kernel is only sized,
    so the budget search and the bound executor agree on it."""

    __slots__ = ("raw", "kept")

    def __init__(self, raw):
        self.raw, self.kept = raw, 0

    def __call__(self, arr):
        self.kept += int(np.asarray(arr).nbytes)
        return self.raw(arr)

    def count(self, nbytes):
        """``nbytes`` the kernel would keep, counted where sizing skips
        laying them out (a convolution's packing)."""
        self.kept += int(nbytes)


def _raw_keep(keep):
    return keep.raw if isinstance(keep, _Counted) else keep


class Kernel(facts.Operator):
    """Base class: ``self.op``, ``self.ins`` / ``self.outs`` (graph Tensors,
    None for an omitted optional input), ``self.attrs``,
    ``self.scratch_budget``; subclasses set ``self.scratch`` (list of
    (shape, dtype)) in ``setup`` and implement ``run(xs, ys, sc)`` where
    ``sc`` is the list of scratch views.  ``self.runtime`` lists the input
    indices read at run time (None: all); the others are folded at build
    time and need not be in the weights arena."""

    #: the C core's thread pool handle for native kernels (a ``pa_workers_t
    #: *``); NULL runs them on the calling thread.  Set by the Executor.
    workers = NULL
    #: True once the Executor bound planned views that stay the same every
    #: run: native calls may keep their pointers (kernels/native.py).
    stable = False
    #: (scratch, its carved parts) of the last run, kept while ``stable``
    _carved = None
    #: True when the kernel finds its outputs by position in ``op.outputs``,
    #: so any of them may be omitted (""), the first too: the importer then
    #: leaves out an output nothing reads (an LSTM's Y) instead of planning it
    outputs_by_position = False

    #: while ``setup`` runs: a kernel of the same op built for other shapes
    #: (the last signature's, when an InferenceSession retargets a graph), or
    #: None; ``setup`` may take from it what does not depend on the shapes
    #: (Conv: its weights as laid out), after checking that it still holds
    prior = None

    def __init__(self, op, ins, outs, keep=None, scratch_budget=None, native=True,
                 prior=None):
        self.op = op
        self.ins = ins
        self.outs = outs
        self.attrs = op.attrs
        keep = _raw_keep(keep)      # a kernel built inside another counts its own
        # puts derived constants in the weights arena, counting their bytes
        self.keep = _Counted(keep or (lambda a: a))
        #: built only for its scratch size (scratch_bytes_for): setup may
        #: skip laying out weights when that does not change the size
        self.sizing = keep is sizing_only
        # the op's own budget (runtime/slack.py sets it) before the graph's
        self.scratch_budget = kernel_budget(op, scratch_budget)
        #: False: NumPy / BLAS paths only (Graph.native)
        self.use_native = bool(native)
        self.scratch = []
        self.runtime = None
        self.dtype = np.dtype(outs[0].dtype) if outs else np.dtype(np.float32)
        #: setup() sets it when its native path applies the op's
        #: ``activation`` attribute itself
        self.act_fused = False
        self.prior = prior
        self.setup()
        self.prior = None       # (kernels never hold on to the ones before them)
        act = self.attrs.get("activation")
        self._act = None
        if act not in (None, "", "NONE") and not self.act_fused:
            self._act = _fused_activation(self, self.attrs, self.dtype)

    @property
    def path(self):
        """Which implementation runs this op: "native" (a C kernel of the
        core) or "numpy" (NumPy / BLAS); ``pyarena run --profile`` shows it."""
        return "numpy" if getattr(self, "native", None) is None else "native"

    # helpers -----------------------------------------------------------
    def fail(self, why):
        raise UnsupportedOpError(f"operator {self.op.name!r} ({self.op.op_type}): {why}")

    def malformed(self, why):
        """The graph contradicts itself at this op (shapes that cannot go
        together): GraphError naming the op."""
        raise GraphError(f"operator {self.op.name!r} ({self.op.op_type}): {why}")

    def check_indices(self, idx, n, what="axis", constant=False):
        """Refuse an index of ``idx`` outside [-n, n-1] (onnxruntime refuses
        them too; ONNX leaves them undefined): InvalidArgumentError naming
        the op, for run-time indices; GraphError for constant ones (the
        model contradicts itself).  Before any offset is computed from
        them: an index of -2**62 would otherwise be wrapped one ``n`` at a
        time by ``numpy.take(mode="wrap")``."""
        idx = np.asarray(idx)
        if not idx.size:
            return
        ends = self.__dict__.get("_index_ends")
        if ends is None:        # made once: later runs allocate nothing here
            ends = self._index_ends = (np.empty((), np.int64), np.empty((), np.int64))
        np.min(idx, out=ends[0])
        np.max(idx, out=ends[1])
        lo, hi = int(ends[0]), int(ends[1])
        if lo >= -n and hi < n:
            return
        why = (f"index {lo if lo < -n else hi} is out of range [{-n}, {n - 1}] of its "
               f"{what} (size {n})")
        if constant:
            self.malformed(why)
        raise InvalidArgumentError(f"operator {self.op.name!r} ({self.op.op_type}): {why}")

    def shape(self, i):
        t = self.ins[i]
        return tuple(int(d) for d in t.shape)

    def oshape(self, i=0):
        return tuple(int(d) for d in self.outs[i].shape)

    def const(self, i, what="input"):
        """The constant value of input ``i`` in its declared dtype
        (UnsupportedOpError if it is computed at run time).  A value held
        in another dtype -- a TFLite float16 weight declared float32, still
        a view of the file -- is converted here (a temporary: what setup
        keeps of it is the kernel's own layout)."""
        if i >= len(self.ins) or self.ins[i] is None:
            return None
        t = self.ins[i]
        if t.data is None:
            raise NeedsValueError(f"operator {self.op.name!r} ({self.op.op_type}): {what} "
                                  f"{t.name!r} must be a constant", tensor=t.name)
        d = np.asarray(t.data)
        return d if d.dtype == t.dtype else d.astype(t.dtype)

    def kept_layout(self, shape, dtype, make):
        """A layout of ``shape`` and ``dtype`` that ``make()`` computes, kept:
        a compiled model's stored copy when its keeper hands one out (then
        ``make`` is not called: the weights are neither read nor packed
        again), else ``keep(make())``."""
        stored = getattr(getattr(self.keep.raw, "__self__", None), "stored_layout", None)
        got = stored(shape, dtype) if stored is not None and not self.sizing else None
        if got is None:
            return self.keep(make())
        self.keep.count(got.nbytes)
        return got

    def kept_empty(self, n, dtype=np.float32):
        """``n`` elements for setup to fill and then :meth:`keep`: in the
        weights arena when the keeper has one (``WeightKeeper.empty``:
        ``keep`` then takes them as they are, or gives them back for an
        equal copy an earlier executor kept), so a layout computed there is
        not first built in a temporary and copied (a 16 MiB packed weight
        was held three times during bind: the file's pages, the temporary,
        the arena copy)."""
        keeper = getattr(self.keep.raw, "__self__", None)
        if getattr(keeper, "weights", None) is None or self.sizing:
            return np.empty(n, dtype)
        return keeper.empty(n, dtype)

    def has(self, i):
        return i < len(self.ins) and self.ins[i] is not None

    @property
    def scratch_bytes(self):
        return _parts_size(self.scratch) if self.scratch else 0

    @property
    def state_bytes(self):
        """Bytes this kernel lays out beyond the constants it reads: what
        its setup kept (packed weights, tables, copies) less the bytes of
        its constant inputs, which those layouts stand for (the file's
        pages are given back once the kernels are built); never below 0.
        The same whether built to run or only sized."""
        return max(0, self.keep.kept - self._const_bytes())

    def _const_bytes(self):
        seen, n = set(), 0
        for t in self.ins:
            if t is not None and t.role == "constant" and t.name not in seen:
                seen.add(t.name)
                n += math.prod(int(d) for d in t.shape) * np.dtype(t.dtype).itemsize
        return n

    def setup(self):
        pass

    def discard(self):
        """Drop what this kernel holds, now: one built only for its sizes
        is done with.  Its native parts refer back to it (a cycle), so it
        would otherwise wait for the cycle collector -- and a budget
        search sizes thousands, whose heap then outlives the search."""
        self.__dict__.clear()

    def bind(self, xs, ys):
        """The executor hands over the planned views it will pass every run
        (``stable`` from now on); a kernel may decide here what depends only
        on where its arrays live (Concat: which inputs already sit in their
        slices of the output).  The scratch parts carved at a run are kept
        for the next while its scratch is the same array (the executor's
        bound view): 8 views of an LSTM's scratch were a fifth of a
        one-step run."""
        self.stable = True
        self._carved = None

    @property
    def idle(self):
        """True when, with the views bound, a run would do nothing (a
        Concat whose inputs all sit in their slices): the executor skips it."""
        return False

    def __call__(self, xs, ys, scratch=None):
        if not self.scratch:
            sc = ()
        elif not self.stable:
            sc = _carve(scratch, self.scratch)
        else:
            c = self._carved
            if c is None or c[0] is not scratch:
                c = self._carved = (scratch, tuple(_carve(scratch, self.scratch)))
            sc = c[1]
        self.run(xs, ys, sc)
        if self._act is not None:
            self._act(ys[0])

    def run(self, xs, ys, sc):
        raise NotImplementedError

    #: ``native_call_scratch(xs, ys, sc)``: the record of a call that takes
    #: its scratch view ``sc`` as its workspace (an 8-bit convolution), or
    #: None
    native_call_scratch = None

    def native_call(self, xs, ys):
        """This call as one C kernel call, a ``pa_call_t`` record (see
        ``pyarena._native.kernels.CallList``), or None when it is not one (a
        NumPy path, scratch, an activation applied after).  A patched
        stage runs the records of its bands in one ``pa_calls_run``.  Here:
        an element-wise activation's native run (``native.unary``)."""
        call = getattr(getattr(self, "native", None), "call", None)
        return None if call is None or self._act is not None else call(xs, ys)

    def native_calls(self, xs, ys):
        """This call as a list of ``pa_call_t`` records run in order (the
        executor batches them with its neighbours' records), or None:
        :meth:`native_call`'s one record here; a movement op's copies
        (Concat, Split) are several."""
        rec = self.native_call(xs, ys)
        return None if rec is None else [rec]


def _fused_activation(kernel, attrs, dtype):
    """y -> act(y) in place, for an op whose kernel does not fuse it."""
    op = kernel.op
    act = str(attrs["activation"]).upper()
    if act in ("SIGMOID", "SILU", "HARDSWISH", "HARDSIGMOID", "CLIP", "GELU"):
        # set by the graph rewrite (runtime/fusion.py), float32 only
        params = native_act(attrs)
        if np.dtype(dtype) != NATIVE_DTYPE or params is None:
            raise UnsupportedOpError(f"operator {op.name!r}: fused activation {act!r} "
                                     f"needs float32")
        ptrs = Pointers(kernel)

        def run_native(y):
            p, = ptrs(y)
            lib.pa_act(params, p, p, y.size, NULL)
        return run_native
    zero, six, one, mone = const(0, dtype), const(6, dtype), const(1, dtype), const(-1, dtype)
    if act == "RELU":
        return lambda y: np.maximum(y, zero, out=y)
    if act == "RELU6":
        return lambda y: (np.maximum(y, zero, out=y), np.minimum(y, six, out=y))
    if act in ("RELU_N1_TO_1", "RELU1"):
        return lambda y: (np.maximum(y, mone, out=y), np.minimum(y, one, out=y))
    if act == "TANH":
        return lambda y: np.tanh(y, out=y)
    raise UnsupportedOpError(f"operator {op.name!r}: fused activation {act!r} is not supported")


def kernel_budget(op, scratch_budget=None):
    """The workspace budget ``op``'s kernel is built with: the op's own
    (``notes.scratch_budget``, set by the slack planner), else
    ``scratch_budget`` (the graph's), else :data:`SCRATCH_BUDGET`."""
    own = op.notes.scratch_budget
    return int(own if own else SCRATCH_BUDGET if scratch_budget is None else scratch_budget)


def held_form_of(op, ins, outs):
    """The :data:`HELD_FORMS` class of ``op`` when it reads or writes a
    sequence or an optional, or the importer gave it a body run as a model
    of its own (``run_body``, ``then_run``); else None."""
    cls = HELD_FORMS.get(op.op_type)
    if cls is None:
        return None
    if "run_body" in op.attrs or "then_run" in op.attrs or \
            any(t is not None and t.host in ("sequence", "optional") for t in list(ins) + outs):
        return cls
    return None


def make_kernel(op, ins, outs, keep=None, scratch_budget=None, native=True, prior=None,
                cls=None):
    """The kernel object for ``op`` given its input and output Tensors;
    UnsupportedOpError if the op type or one of its attributes is not
    supported.  ``native`` False keeps every op on its NumPy path;
    ``prior``: see :attr:`Kernel.prior`; ``cls``: the kernel class, when not
    the op type's own (a :data:`HELD_FORMS` one)."""
    cls = cls or held_form_of(op, ins, outs) or KERNELS.get(op.op_type)
    if cls is None:
        raise UnsupportedOpError(f"operator {op.name!r}: op type {op.op_type!r} is not "
                                 f"supported by the executor")
    if _writes_nothing(cls, op, outs):
        cls = NothingToWrite
    try:
        return cls(op, ins, outs, keep, scratch_budget, native, prior)
    except (PyArenaError, MemoryError):
        raise
    except Exception as exc:        # attributes of the wrong type or shape
        raise GraphError(f"operator {op.name!r} ({op.op_type}): malformed attributes or "
                         f"operands ({type(exc).__name__}: {str(exc)[:160]})") from None


def _writes_nothing(cls, op, outs):
    """Whether every output of ``op`` is an arena tensor of known shape
    with no element (a batch of 0 -- no detections to classify): then no
    kernel has anything to compute, whatever its inputs, and none is set
    up (a native geometry of 0 rows is refused).  Not for ops that run a
    body or hold values outside the arena."""
    if not outs or cls in HELD_FORMS.values() or any(
            k in op.attrs for k in ("run_body", "then_run", "body", "then_branch")):
        return False
    for t in outs:
        if t.host is not None or t.dynamic or t.shape is None or t.is_symbolic or \
                0 not in tuple(t.shape):
            return False
    return True


class NothingToWrite(Kernel):
    """The kernel of an op whose outputs all have no element: nothing to
    set up, read or write (onnxruntime returns the empty outputs too)."""

    op_types = ()
    family = "movement"
    inplace = "none"

    def setup(self):
        self.runtime = ()

    def run(self, xs, ys, sc):
        return None


def graph_kernel(graph, op, keep=None):
    """The kernel of ``op`` in ``graph``, with the graph's scratch budget
    and native setting."""
    ins = [graph.tensors[t] if t else None for t in op.inputs]
    outs = [graph.tensors[t] for t in op.outputs if t]
    return make_kernel(op, ins, outs, keep, graph.scratch_budget,
                       getattr(graph, "native", True))


def scratch_bytes_for(graph, op):
    """Workspace bytes ``op`` needs while it runs (0 if none); raises
    UnsupportedOpError for an op the executor cannot run.  Sets
    ``op.notes.state_bytes`` (:attr:`Kernel.state_bytes`) on the way."""
    k = graph_kernel(graph, op, keep=sizing_only)
    op.notes.state_bytes, n = k.state_bytes, k.scratch_bytes
    k.discard()
    return n


def sizing_only(arr):
    """The ``keep`` of a kernel built for its scratch size alone: keeps
    nothing (Kernel.sizing is then True)."""
    return arr


def set_scratch(graph, scratch_budget=None, native=None):
    """Fill ``Op.scratch_bytes`` for every op of ``graph`` from the kernels'
    own workspace rules, each op's within ``scratch_budget`` bytes (None:
    :data:`SCRATCH_BUDGET`); the budget is recorded as
    ``graph.scratch_budget`` so the executor builds the same kernels.
    ``native`` (None: keep ``graph.native``) False plans the NumPy / BLAS
    paths only, recorded as ``graph.native``.
    Raises UnsupportedOpError listing every op (by name and type) the
    executor cannot run.  Returns the graph."""
    if scratch_budget is not None:
        scratch_budget = int(scratch_budget)
        if scratch_budget < 1:
            raise InvalidArgumentError(f"scratch_budget must be a positive number of bytes, "
                             f"not {scratch_budget!r}")
    graph.scratch_budget = scratch_budget
    if native is not None:
        graph.native = bool(native)
    bad = []
    pool_ops = graph.pool_ops()
    for op in graph.ops:
        if op.name in pool_ops:     # shapes known at run time: scratch from the pool
            op.scratch_bytes = 0
            if op.op_type not in KERNELS:
                bad.append(f"operator {op.name!r}: op type {op.op_type!r} is not supported "
                           f"by the executor")
            continue
        try:
            op.scratch_bytes = scratch_bytes_for(graph, op)
        except UnsupportedOpError as exc:
            bad.append(str(exc))
    if bad:
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise UnsupportedOpError("unsupported operator(s): " + "; ".join(bad[:10]) + more)
    return graph


# the planner narrows operator scratch through the kernels' rules (fit.py)
op_facts.declare_scratch(set_scratch, SCRATCH_BUDGET)
