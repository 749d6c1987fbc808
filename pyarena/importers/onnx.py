"""ONNX importer: an ``.onnx`` file -> a validated :class:`pyarena.Graph`.

:func:`load_onnx` runs the import's steps in order, each in a module of
its own, on one :class:`_OnnxImport` (the state the steps share: the
model, the tensors' shapes, types and folded values, the bodies of the
Loops, Scans and Ifs):

1. parse (clear error for a truncated or non-ONNX file; ``onnx_data.py``)
   and the shape-independent rewrites (QDQ chains fused, ``onnx_qdq.py``);
2. bind the values and the input shapes given, on a copy of the model
   (``onnx_binding.py``);
3. shape inference with value propagation (``onnx_inference.py``:
   pyarena's own rules, ``onnx_shapes.py``; ONNX's for a model with an op
   they do not cover);
4. fold every node that computes only from constants (``onnx_constants.py``;
   one node evaluated by ``onnx_fold.py``) -- folded values become
   ``role="constant"`` tensors with ``Tensor.data``, for the weights arena,
   never the work arena -- and infer and fold again while folding fixes
   more shapes (up to ``MAX_FOLD_ROUNDS``), importing the Loop / Scan / If
   bodies once the shapes they need are known (``onnx_control.py``);
5. emit one ``Op`` per remaining node with its attributes
   (``onnx_build.py``; ``load_model`` then fills ``scratch_bytes`` from the
   kernels' rules).  A tensor whose size still cannot be known is reported
   by name together with the graph inputs whose shapes would fix it
   (``GraphError.unbound_inputs``).

Folding never amplifies (see ``onnx_constants.py``) unless the result is
a weight: a large constant (a ConstantOfShape, Tile or Expand of a small
one) is folded once into the weights arena within a cap and the memory
limit, and past them stays a run-time op planned like any tensor (one
warning says so), so the import never materialises more than the limit.
With an :class:`~.import_cache.ImportCache` the parse and the static folds
are done once for the imports of one file at other input shapes.
"""
from ..errors import ModelImportError
from . import require_extra
from .onnx_binding import bind_inputs, fix_values
from .onnx_build import GraphBuild
from .onnx_constants import ConstantFolding, warn_over_cap
from .onnx_contrib import name_contrib_ops
from .onnx_control import resolve_bodies
from .onnx_data import check_initializer_data, parse_model
from .onnx_dynamic import deciding_inputs
from .onnx_fold import _attrs, _check_dims  # noqa: F401 (_attrs: resize.py reads it here)
from .onnx_inference import ShapeInference
from .onnx_qdq import fuse_qdq
# session.py and resize.py read these from here too
from .onnx_types import _collect, _dims, _input_dims, _np_dtype  # noqa: F401

__all__ = ["load_onnx", "ModelImportError"]


#: rounds of shape inference + folding after the first (each may fix
#: shapes that let more fold)
MAX_FOLD_ROUNDS = 8


def _onnx():
    return require_extra("onnx", "onnx", ".onnx files")


def load_onnx(path, inputs=None, fold=True, values=None, cache=None, max_memory=None):
    """Import ``path``.  ``inputs``: dict graph-input name -> dims that fix
    its symbolic dimensions; ``values``: dict graph-input name -> a value
    the input takes (it becomes a constant: conditions and shapes computed
    from it fold, an ``If`` on it takes its branch); ``cache``: an
    :class:`~.import_cache.ImportCache` shared by the imports of this file
    for other input shapes (the parse, the static folds); ``max_memory``:
    the memory limit (bytes; None: the physical memory), which bounds the
    weights folded at load (``onnx_constants.py``).  Raises
    ModelImportError / UnsupportedOpError (both GraphErrors) with the
    tensor or operator at fault."""
    if cache is None:
        imp = _OnnxImport(path)
        imp.max_memory = max_memory
        fix_values(imp, values)
        bind_inputs(imp, inputs)
        imp.rewrite()
    else:
        if cache.parsed is None:        # the first import: parse and rewrite once
            first = _OnnxImport(path)
            first.rewrite()
            cache.parsed = (first.model, first.mapped,
                            frozenset(i.name for i in first.model.graph.initializer))
        imp = _OnnxImport(path, cache=cache)
        imp.max_memory = max_memory
        fix_values(imp, values)
        bind_inputs(imp, inputs)
        if cache.reduced is None:
            g = imp.run(fold)
            cache.reduce(imp.onnx, imp.model)   # the next imports skip the static nodes
            return g
    return imp.run(fold)


def _unknown_shapes(shapes, nodes):
    return any(s is None or any(not isinstance(d, int) for d in s)
               for n in nodes for s in (shapes.get(o) for o in n.output if o))


class _OnnxImport:
    """The state of one import, which its steps share (see the module
    docstring), and the order of the steps after binding (:meth:`run`)."""

    def __init__(self, path, model=None, cache=None):
        self.onnx = _onnx()
        self.path = path
        self.cache = cache
        self.unstable = set()   # outputs of inlined If branches: never cached
        self.static = set()     # tensors whose value is the same for every shape
        if cache is not None:   # a copy of the model parsed and rewritten once
            model, self.mapped, static = cache.parsed
            self.model = self.onnx.ModelProto()
            self.model.CopyFrom(model if cache.reduced is None else cache.reduced)
            self.static = set(static) | set(self.mapped)
            self.subgraph = False
        else:   # a body subgraph (onnx_loop.py) comes as a model already built
            self.model, self.mapped = (parse_model(self.onnx, path) if model is None
                                       else (model, {}))
            self.subgraph = model is not None
        self.opset = 1
        for o in self.model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        self.init_names = {i.name for i in self.model.graph.initializer}
        self.sym_inputs = {}    # inputs left with unknown dims (onnx_binding.py)
        self.vals = {}          # tensor name -> its value, once known (folded)
        self.shapes = {}        # tensor name -> dims (shape inference, folding)
        self.types = {}         # tensor name -> ONNX element type
        self.used_onnx_inference = False
        self.bodies = {}        # Loop / Scan / If node name -> (outer inputs, attrs)
        self.forced = {}        # output shapes set from a body: kept for inference
        self.wanted = set()     # values shape rules asked for and lacked (onnx_shapes.py)
        self.max_memory = None  # the memory limit weight folding keeps within
        self.over_cap = {}      # node name -> bytes of a constant result left to run time
        self.weight_views = set()   # weights folded as broadcast views (kept as such)

    def rewrite(self):
        """The shape-independent rewrites of the model."""
        fuse_qdq(self.onnx, self.model, self.mapped)   # QDQ chains -> integer operators
        name_contrib_ops(self.onnx, self.model.graph)  # com.microsoft.Attention ...

    def run(self, fold):
        """Everything after binding: infer, fold, import the Loop / Scan
        bodies, infer and fold again while it helps, build the Graph.  The
        steps are locals: none of them outlives the import."""
        self.check_initializers()
        inference = ShapeInference(self)
        self.shapes, self.types = inference.infer(self.model, first=True)
        folding = ConstantFolding(self, fold)
        remaining = self.fold_rounds(inference, folding, folding.first_pass())
        for _ in range(MAX_FOLD_ROUNDS):
            if not resolve_bodies(self, remaining, strict=False):
                break
            remaining = self.fold_rounds(inference, folding, remaining, force=True)
        resolve_bodies(self, remaining, strict=True)
        self.over_cap = folding.over_cap
        try:
            g = GraphBuild(self).build(remaining)
        except ModelImportError as exc:     # a session retries with these fixed
            exc.deciding_inputs = deciding_inputs(self)
            raise
        g.deciding_inputs = deciding_inputs(self)
        if not self.subgraph:       # the ops still there (a Conv weight may be a broadcast)
            warn_over_cap({op.name: op.notes.over_fold_cap for op in g.ops
                           if op.notes.over_fold_cap})
        if self.cache is not None:      # what a retargeted graph must compute again
            self.cache.derived = frozenset(n for n, t in g.tensors.items()
                                           if t.role == "constant" and n not in self.static)
        return g

    def fold_rounds(self, inference, folding, remaining, force=False):
        """Folding may fix shapes (a Reshape target), which lets more fold
        (a Shape of that Reshape's output ...): infer and fold again while
        it helps (``force``: infer at least once)."""
        for _ in range(MAX_FOLD_ROUNDS):
            if not force and not (folding.fold and _unknown_shapes(self.shapes, remaining)):
                break
            force = False
            inference.reinfer(remaining)
            before = folding.changes
            remaining = folding.fold_pass(remaining)
            if folding.changes == before:
                break
        return remaining

    def check_initializers(self):
        """A quick size check on the initializers before anything is decoded."""
        for init in self.model.graph.initializer:
            dt = _np_dtype(self.onnx, init.data_type, f"initializer {init.name!r}")
            _check_dims(init.name, list(init.dims), dt.itemsize)
            check_initializer_data(self.onnx, init, dt)
