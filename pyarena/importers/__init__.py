"""The importers layer: model files -> validated :class:`~pyarena.Graph`.

``load_model(path, inputs=None, scratch_budget=None, max_memory=None)`` is
the one loader:
it picks the format from the file (``.onnx`` / ``.tflite`` / ``.json``
extension, else the TFLite magic ``TFL3`` at byte 4, else ``{`` for JSON,
else ONNX), binds the input shapes given (one binder:
:func:`pyarena.graph.bind_shapes`), and returns a validated graph whose ops
carry ``scratch_bytes`` from the kernels' rules (a JSON graph keeps its
own).  ONNX needs the ``onnx``
extra, TFLite the ``tflite`` extra; both are imported lazily.
:mod:`.reference` runs the reference runtimes (onnxruntime, the TFLite
interpreter) on the same file.

Imports the runtime (for the kernel registry), planning, graph and the
layers below.
"""
import os

from ..errors import InvalidArgumentError, ModelImportError, PyArenaError, UnsupportedOpError
from ..graph import Graph, GraphError
from ..memory.heap import trim_heap
from ..memory.mapped import release_files
from ..planning import check_graph_limit, resolve_max_memory
from ..runtime.fusion import fuse
from ..runtime.nhwc import RULES as LAYOUT_RULES
from ..runtime.nhwc import to_nhwc
from ..runtime.kernels import set_scratch
from .import_cache import ImportCache

__all__ = ["load_model", "ModelImportError", "UnsupportedOpError", "sniff_format",
           "require_extra", "ImportCache"]

_EXTENSIONS = (".onnx", ".tflite", ".json")
_COMPILED_EXTENSION = ".pa"


def require_extra(module, extra, what):
    """The optional dependency ``module``, imported; a ModelImportError
    naming the extra that installs it if it is missing."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelImportError(f"reading {what} needs the {module!r} package: "
                               f"pip install pyarena[{extra}]") from None


def sniff_format(path):
    """'onnx', 'tflite', 'json' or 'compiled' (a compiled pyarena model,
    :mod:`.compiled`) from the extension or the file's magic; a file with
    neither is taken for ONNX (protobuf has no magic)."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext in _EXTENSIONS:
        return ext[1:]
    if ext == _COMPILED_EXTENSION:
        return "compiled"
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    from .compiled_format import is_compiled
    if is_compiled(head):
        return "compiled"
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "tflite"
    if head[:1] in (b"{", b"["):
        return "json"
    return "onnx"


def load_model(path, inputs=None, scratch_budget=None, max_memory=None, native=True,
               values=None, cache=None, layout="auto"):
    """A validated :class:`Graph` for the model at ``path``.

    ``inputs`` maps graph-input names to the shapes that fix their unknown
    dimensions; ``scratch_budget`` bounds each op's workspace (bytes; None:
    the kernels' default); ``native`` False keeps every op on its NumPy /
    BLAS path and the graph as imported (otherwise the C core's native
    kernels run the float32 ops they cover, and :func:`pyarena.runtime.fuse`
    first folds batch norms and activations into the convolutions).
    ``layout`` (ONNX, with ``native``): which NCHW regions run in NHWC
    (:func:`pyarena.runtime.to_nhwc`): ``"auto"`` where it is measured
    faster, ``"nhwc"`` every region with a convolution, ``"keep"`` none
    (the graph's ``relaid`` says what was converted).  Raises
    :class:`ModelImportError` for a missing, corrupt or unknown file, :class:`UnsupportedOpError` naming every
    operator the executor cannot run (both are GraphErrors), and
    :class:`MemoryLimitError` when the weights plus the largest tensor
    exceed ``max_memory`` (bytes; None: the physical memory).  ``values``
    (ONNX): graph inputs fixed to a value -- e.g. a sample rate -- become
    constants, so what is computed from them folds and an ``If`` on them
    takes its branch.  ``cache`` (ONNX): an :class:`ImportCache` kept across
    imports of the same file for other input shapes (what does not depend
    on the shapes is done once; :class:`InferenceSession` keeps one)."""
    budget = resolve_max_memory(max_memory)
    path = os.fspath(path)
    if layout not in LAYOUT_RULES:
        raise InvalidArgumentError(f"layout must be one of {LAYOUT_RULES}, not {layout!r}")
    try:
        g = _load(path, inputs, scratch_budget, native, values, cache, layout, budget)
    except GraphError as exc:
        raise _naming_file(exc, path) from None
    except PyArenaError:
        raise
    except RecursionError:
        raise ModelImportError(f"{path}: the model is nested too deeply to read") from None
    except MemoryError:
        raise ModelImportError(f"{path}: reading the model ran out of memory (a corrupt "
                               "size?)") from None
    except Exception as exc:   # a dependency choking on a corrupt file
        raise ModelImportError(f"{path}: cannot read the model ({type(exc).__name__}: "
                               f"{str(exc)[:200]})") from None
    check_graph_limit(g, budget)
    return g


def _naming_file(exc, path):
    """``exc`` with the file named first (the same class and attributes)."""
    if str(exc).startswith(path):
        return exc
    new = type(exc)(f"{path}: {exc}", exc.unbound_inputs)
    new.__dict__.update({k: v for k, v in exc.__dict__.items() if k not in new.__dict__})
    return new


def _load(path, inputs, scratch_budget, native, values=None, cache=None, layout="auto",
          budget=None):
    if not os.path.exists(path):
        raise ModelImportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelImportError(f"{path}: is a directory, not a model file")
    if not os.path.isfile(path):     # reading a FIFO or a device would block
        raise ModelImportError(f"{path}: not a regular file (a FIFO, device or socket?)")
    fmt = sniff_format(path)
    if values and fmt != "onnx":
        raise ModelImportError(f"{path}: values= fixes inputs of ONNX models only")
    if fmt == "json":      # a JSON graph carries its own scratch sizes
        return _load_json(path, inputs)
    if fmt == "compiled":   # the graph as it runs, with its plan (g.stored_plan)
        return _load_compiled(path, inputs)
    if fmt == "onnx":
        from .onnx import load_onnx
        try:
            g = load_onnx(path, inputs, values=values, cache=cache, max_memory=budget)
        except ModelImportError as exc:
            if os.path.splitext(path)[1].lower() in _EXTENSIONS or exc.unbound_inputs:
                raise
            raise ModelImportError(f"{path}: unknown model format: not a TFLite flatbuffer, "
                                   f"a JSON graph or an ONNX model ({exc})") from None
    else:
        from .tflite import load_tflite
        g = load_tflite(path, inputs)
    # before the kernels are built: setting scratch sizes builds each op's
    # kernel, and some lay out constants as large as their tensors (a
    # Range's ramp, a Gather's offsets)
    check_graph_limit(g, budget)
    if native:
        fuse(g, memo=None if cache is None else cache.fused)
        if fmt == "onnx":
            to_nhwc(g, layout)
    g = set_scratch(g, scratch_budget, native)
    release_files(t.data for t in g.tensors.values() if t.role == "constant")
    trim_heap()         # what the parser and shape inference freed goes back
    return g


def _load_compiled(path, inputs):
    """The graph of the compiled signature for ``inputs`` (the first one
    without), its stored plan and layouts with it (``g.stored_plan``,
    ``g.stored_layouts``: an Executor of it takes them)."""
    from .compiled import CompiledModel
    m = CompiledModel(path)
    i = m.index(inputs or {})
    if i is None:
        raise ModelImportError(f"{path}: compiled for the input shapes {m.signatures}, not "
                               f"{dict(inputs)}: compile it for them (pyarena compile --input)")
    return m.load(i)[0]


def _load_json(path, inputs):
    try:
        g = Graph.load(path)
    except UnicodeDecodeError as exc:
        raise ModelImportError(f"{path}: not a text file ({exc.reason})") from None
    if inputs:
        g.bind_inputs(inputs)
    return g.validate()
