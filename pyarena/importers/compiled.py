"""Compiled models, loaded: a file from :func:`~.compiler.compile_model`
opened by ``mmap`` in milliseconds, without onnx, tflite or onnxruntime.

:class:`CompiledModel` opens such a file: the checksums are verified, and
each signature's graph and plan are decoded (:mod:`.compiled_codec`) and
validated when first asked for.  Its constants are read-only views of the
mapped file: resident only once touched, shared by every process that
maps the same file, and read by the kernels where they lie (no copy into
the weights arena).  What the kernels lay out of them (a convolution's
packed filter) is laid out again at load, per process, as for a model file.

An :class:`~pyarena.InferenceSession` of the file runs the signatures
compiled and refuses others by name; ``load_model`` gives a signature's
graph with its plan (``graph.stored_plan``).
"""
import os

from ..errors import ModelImportError, PyArenaError
from ..memory.heap import trim_heap
from ..planning.result import Plan
from . import compiled_format
from .compiled_codec import ArrayViews, blob_array, decode_graph, decode_value

__all__ = ["CompiledModel", "KIND"]

#: the document's ``kind``
KIND = "pyarena-compiled-model"


class CompiledModel:
    """A compiled model file, opened (see the module docstring).
    ``inputs`` / ``outputs``: ``(name, shape, type)`` as the source model
    declares them; ``signatures``: the input shapes compiled, one dict per
    signature; :meth:`load` a signature's (graph, plan); ``threads`` and
    ``memory_budget`` as compiled.  ``verify``: check every array's
    checksum when opening (the pages read are given back)."""

    def __init__(self, path, verify=True):
        self.path = os.fspath(path)
        doc, arrays = compiled_format.read(self.path, verify)
        self._arrays = ArrayViews(arrays)
        try:
            if doc.get("kind") != KIND:
                raise ValueError(f"kind {doc.get('kind')!r}")
            self.inputs = [_triple(a) for a in doc["inputs"]]
            self.outputs = [_triple(a) for a in doc["outputs"]]
            self._sigs = list(doc["signatures"])
            self.signatures = [{str(k): tuple(int(d) for d in v)
                                for k, v in s["shapes"].items()} for s in self._sigs]
            self.threads, self.memory_budget = doc.get("threads"), doc.get("memory_budget")
            self.source, self.compiled_by = doc.get("source"), doc.get("pyarena")
            self._core = doc.get("core")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._bad(exc) from None
        self._loaded = {}

    def _bad(self, exc):
        return ModelImportError(f"{self.path}: not a usable compiled pyarena model: "
                                f"{type(exc).__name__}: {str(exc)[:200]}")

    def index(self, shapes):
        """The index of the signature compiled for ``shapes`` (name ->
        shape; inputs not named take any), or None."""
        want = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
        for i, s in enumerate(self.signatures):
            if all(s.get(k) == v for k, v in want.items()):
                return i
        return None

    def load(self, i):
        """(graph, plan) of signature ``i``: decoded and validated once;
        ModelImportError when the file does not hold a valid one."""
        got = self._loaded.get(i)
        if got is None:
            try:
                d = self._sigs[i]
                g = decode_graph(d["graph"], self._arrays)
                p = Plan.from_json(decode_value(d["plan"], self._arrays), graph=g)
                layouts = [blob_array(self._arrays, ref, dt, shape)
                           for dt, shape, ref in d.get("layouts", ())]
            except PyArenaError as exc:
                raise ModelImportError(f"{self.path}: signature {i}: {exc}") from None
            except (KeyError, TypeError, ValueError, IndexError, RecursionError) as exc:
                raise self._bad(exc) from None
            required = bool(d.get("layouts_required", False))
            if not self._same_build():
                if required:
                    raise ModelImportError(
                        f"{self.path}: compiled by pyarena {self.compiled_by} with its kernels' "
                        f"layouts but not the weights they are made of; this pyarena or its "
                        f"C core is another build: compile the model again")
                layouts = None      # the kernels lay their weights out again
            g.stored_plan, g.stored_layouts, g.layouts_required = p, layouts, required
            got = self._loaded[i] = (g, p)
            self._sigs[i] = None        # its document decoded: not held twice
            trim_heap()                 # ...and what decoding it freed goes back
        return got

    def _same_build(self):
        """Whether this pyarena and its C core compiled the file (then its
        layouts are the ones the kernels would make)."""
        from .. import __version__
        from .._native.paths import core_digest
        return self.compiled_by == __version__ and self._core == core_digest()

    def layouts(self, i):
        """The stored layouts of signature ``i`` (views of the file, in the
        order the kernels keep them), or None when the file was compiled
        by another pyarena or another build of the C core (the kernels
        then lay their weights out again)."""
        return self.load(i)[0].stored_layouts

    @property
    def weights_bytes(self):
        return sum(int(a.size) for a in self._arrays)


def _triple(a):
    name, shape, type_ = a
    if not isinstance(name, str) or not isinstance(type_, str):
        raise TypeError(f"bad input/output {a!r:.60}")
    return name, None if shape is None else tuple(shape), type_
