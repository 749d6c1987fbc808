"""onnxruntime's ``InferenceSession`` over pyarena's, for
``pyarena.onnxruntime``.

:class:`InferenceSession` is :class:`pyarena.InferenceSession` (one plan
per input-shape signature, one shared arena) with onnxruntime's face:

* the model described as onnxruntime describes it: :class:`NodeArg` shapes
  are lists, a symbolic dimension is its name, an unknown one None, types
  are ``"tensor(float)"``; :class:`ModelMetadata` from the model's fields
  and ``metadata_props``; the overridable initializers;
* feeds checked before anything runs, with onnxruntime's errors and
  messages: a missing input is a ValueError, an unknown input or output
  name, another element type (float64 for a float input) or rank, or a
  fixed dimension of another size an ``InvalidArgument``; lists are
  converted to the input's type, as onnxruntime does;
* ``run_options`` (``terminate`` honoured), ``run_with_ort_values``,
  ``io_binding`` / ``run_with_iobinding`` (CPU :class:`OrtValue`),
  ``run_async``, ``get_providers`` (``["CPUExecutionProvider"]``),
  ``get_provider_options``, ``get_session_options``, ``set_providers``,
  ``enable_fallback`` / ``disable_fallback``, ``end_profiling``;
* pyarena's errors while importing or running under onnxruntime's names
  (each also still the pyarena error it was: :mod:`.ort_capi`).
"""
import os
import shutil
import threading
import time

import numpy as np

from ..errors import GraphError, InvalidArgumentError, ModelImportError, UnsupportedOpError
from . import sniff_format
from .ort_capi import (CPU_PROVIDER, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                       NoSuchFile, NotImplemented, RuntimeException,
                       SessionOptions, _OrtError, normalize_providers)
from .onnx_types import type_string
from .ort_values import IOBinding, OrtValue, onnx_type_of
from .session import InferenceSession as _PyArenaSession

__all__ = ["InferenceSession", "NodeArg", "ModelMetadata"]

#: keyword arguments that are pyarena's own (the others onnxruntime's)
PYARENA_ARGUMENTS = ("max_plans", "native", "memory_budget", "layout", "threads",
                     "blas_threads")


class NodeArg:
    """An input or output as onnxruntime describes it: ``name``, ``shape``
    (a list: ints, symbol names, None for unknown; None when the rank is
    unknown) and ``type`` (``"tensor(float)"``)."""
    __slots__ = ("name", "shape", "type")

    def __init__(self, name, shape, type):     # noqa: A002 (onnxruntime's name)
        self.name, self.shape, self.type = name, shape, type

    def __eq__(self, other):
        return isinstance(other, NodeArg) and (self.name, self.shape, self.type) == \
            (other.name, other.shape, other.type)

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class ModelMetadata:
    """What the model says about itself: ``custom_metadata_map`` (its
    ``metadata_props``), ``description`` (the model's doc string),
    ``domain``, ``graph_description``, ``graph_name``, ``producer_name``,
    ``version`` (``model_version``; INT64_MAX when the model has none, as
    onnxruntime reports it)."""

    def __init__(self, custom_metadata_map=None, description="", domain="",
                 graph_description="", graph_name="", producer_name="",
                 version=(1 << 63) - 1):
        self.custom_metadata_map = dict(custom_metadata_map or {})
        self.description, self.domain = description, domain
        self.graph_description, self.graph_name = graph_description, graph_name
        self.producer_name, self.version = producer_name, version

    def __repr__(self):
        return (f"ModelMetadata(producer_name={self.producer_name!r}, "
                f"graph_name={self.graph_name!r}, version={self.version}, "
                f"custom_metadata_map={self.custom_metadata_map!r})")


_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64,
           "tensor(float16)": np.float16, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
           "tensor(int16)": np.int16, "tensor(uint16)": np.uint16, "tensor(int32)": np.int32,
           "tensor(uint32)": np.uint32, "tensor(int64)": np.int64, "tensor(uint64)": np.uint64,
           "tensor(bool)": np.bool_}


def describe_onnx(path):
    """``(inputs, outputs, overridable initializers, metadata)`` of an
    ONNX file as onnxruntime reports them (outputs: :func:`_infer_outputs`)."""
    from .onnx import _dims, _onnx, parse_model
    onnx = _onnx()
    model, _ = parse_model(onnx, path)
    g = model.graph
    _refuse_unknown_domains(path, g)
    inits = {i.name for i in g.initializer}

    def arg(vi):
        return NodeArg(vi.name, _dims(vi), type_string(onnx, vi.type))
    inputs = [arg(vi) for vi in g.input if vi.name not in inits]
    overridable = [arg(vi) for vi in g.input if vi.name in inits]
    outputs = [arg(vi) for vi in g.output]
    if any(a.shape is None or a.type == "unknown" or not all(isinstance(d, int)
                                                              for d in a.shape)
           for a in outputs):
        _infer_outputs(onnx, model, outputs)
    props = {p.key: p.value for p in model.metadata_props}
    meta = ModelMetadata(props, model.doc_string, model.domain, g.doc_string, g.name,
                         model.producer_name,
                         model.model_version if model.HasField("model_version")
                         else (1 << 63) - 1)
    return inputs, outputs, overridable, meta


def _refuse_unknown_domains(path, graph):
    """NotImplemented in the constructor, as onnxruntime, for an op of a
    non-standard domain no kernel runs (onnxruntime's own fused ops in a
    model it optimized, a custom op); other ops pyarena cannot run are
    named when a signature is first imported."""
    from .onnx_contrib import runs_in_domain
    bad = sorted({f"{n.op_type} ({n.domain})" for n in graph.node
                  if n.domain not in ("", "ai.onnx") and not runs_in_domain(n.op_type, n.domain)})
    if bad:
        raise NotImplemented.make(f"{path}: Could not find an implementation for the "
                                  f"op(s) {', '.join(bad)}")


def _infer_outputs(onnx, model, outputs):
    """Outputs as onnxruntime resolves them: the declared shape refined by
    ONNX's shape inference (a dimension the model leaves symbolic or
    unknown that inference finds fixed takes that size; an undeclared
    shape is the inferred one, ONNX's own ``unk__N`` names being unknown).
    Left as declared where inference fails."""
    from .onnx import _dims
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    for vi in bare.graph.output:     # what inference finds, not the declared shapes
        vi.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(bare, strict_mode=False)
    except Exception:
        return
    by_name = {vi.name: vi for vi in inferred.graph.output}
    for a in outputs:
        vi = by_name.get(a.name)
        if vi is None:
            continue
        dims = _dims(vi)
        if dims is not None:
            dims = [None if isinstance(d, str) and d.startswith("unk__") else d for d in dims]
            if a.shape is None:
                a.shape = dims
            elif len(dims) == len(a.shape):
                a.shape = [i if isinstance(i, int) else d for d, i in zip(a.shape, dims)]
        if a.type == "unknown":
            a.type = type_string(onnx, vi.type)


def _translated(exc):
    """The onnxruntime kind of a pyarena error (the same error if it has one)."""
    if isinstance(exc, _OrtError):
        return exc
    if isinstance(exc, UnsupportedOpError):
        kind = NotImplemented
    elif isinstance(exc, ModelImportError):
        kind = InvalidGraph
    elif isinstance(exc, (InvalidArgumentError, GraphError)):
        kind = InvalidArgument
    else:
        return exc
    new = kind.make(str(exc))
    new.__cause__ = exc
    return new


class InferenceSession(_PyArenaSession):
    """``onnxruntime.InferenceSession(path_or_bytes, sess_options=None,
    providers=None, provider_options=None, **kwargs)`` run by pyarena.
    ``kwargs``: pyarena's own session arguments (``max_plans``,
    ``native``, ``layout``, ``memory_budget``, ``threads``,
    ``blas_threads``) and onnxruntime's (``enable_fallback`` ...), accepted;
    others are ignored, as onnxruntime ignores them.  See the module
    docstring."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None,
                 provider_options=None, **kwargs):
        own = {k: kwargs[k] for k in PYARENA_ARGUMENTS if k in kwargs}
        self._enable_fallback = int(kwargs.get("enable_fallback", 1)) == 1
        normalize_providers(providers, provider_options)
        if isinstance(path_or_bytes, (str, os.PathLike)) and \
                not os.path.exists(path_or_bytes):
            p = os.fspath(path_or_bytes)
            raise NoSuchFile.make(f"Load model from {p} failed:Load model {p} failed. File "
                                  f"doesn't exist")
        try:
            super().__init__(path_or_bytes, sess_options, **own)
            if sniff_format(self.path) == "onnx":
                described = describe_onnx(self.path)
            else:
                described = ([_node_arg(a) for a in super().get_inputs()],
                             [_node_arg(a) for a in super().get_outputs()], [],
                             ModelMetadata())
        except ModelImportError as exc:
            raise InvalidProtobuf.make(str(exc)) from exc
        self._ort_inputs, self._ort_outputs, self._overridable, self._meta = described
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        _write_model(self.path, getattr(sess_options, "optimized_model_filepath", ""))
        self._profiling_start = time.monotonic_ns()

    # -- the model as onnxruntime describes it ---------------------------------
    def get_inputs(self):
        return list(self._ort_inputs)

    def get_outputs(self):
        return list(self._ort_outputs)

    def get_overridable_initializers(self):
        return list(self._overridable)

    def get_modelmeta(self):
        return self._meta

    def get_session_options(self):
        return self._sess_options

    def get_providers(self):
        return [CPU_PROVIDER]

    def get_provider_options(self):
        """``{"CPUExecutionProvider": {}}``, as onnxruntime reports its CPU
        provider whatever options it was given."""
        return {CPU_PROVIDER: {}}

    def set_providers(self, providers=None, provider_options=None):
        """Checked as onnxruntime checks them; the CPU kernels keep running."""
        normalize_providers(providers, provider_options)

    def disable_fallback(self):
        self._enable_fallback = False

    def enable_fallback(self):
        self._enable_fallback = True

    def end_profiling(self):
        """"": pyarena writes no onnxruntime profile (``pyarena run --profile``
        and ``Executor.profile`` report time per op)."""
        return ""

    def get_profiling_start_time_ns(self):
        return self._profiling_start

    # -- running ---------------------------------------------------------------
    def run(self, output_names, input_feed, run_options=None):
        """onnxruntime's ``run``: the outputs named (None or empty: all) as
        new arrays."""
        return self._run_arrays(output_names, input_feed, run_options)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        return [OrtValue(a) for a in
                self._run_arrays(output_names, input_dict_ort_values, run_options)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """``callback(results, user_data, error_message)`` from another thread."""
        def work():
            try:
                results = self.run(output_names, input_feed, run_options)
            except Exception as exc:
                callback(None, user_data, str(exc))
                return
            callback(results, user_data, "")
        threading.Thread(target=work, daemon=True).start()

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        if iobinding._session is not self:
            raise ValueError("IOBinding must be used with the session that created it.")
        iobinding._run(self, run_options)

    def _run_arrays(self, output_names, input_feed, run_options):
        if run_options is not None and getattr(run_options, "terminate", False):
            raise Fail.make("Exiting due to terminate flag being set to true.")
        feeds = self._checked_feeds(input_feed)
        known = [a.name for a in self._ort_outputs]
        names = list(output_names) if output_names else known
        for n in names:
            if n not in known:
                raise InvalidArgument.make(f"Invalid output name:{n}")
        try:
            return super().run(names, feeds, run_options)
        except Exception as exc:
            new = _translated(exc)
            if new is exc:
                raise
            raise new from exc

    def _checked_feeds(self, input_feed):
        """The feeds as arrays, after onnxruntime's checks (see the module
        docstring)."""
        known = {a.name: a for a in self._ort_inputs}
        missing = [a.name for a in self._ort_inputs if a.name not in input_feed
                   and not a.type.startswith("optional")]
        if missing:
            raise InvalidArgumentError(f"Required inputs ({missing}) are missing from input "
                                       f"feed ({list(input_feed)}).")
        feeds = {}
        for name, value in input_feed.items():
            arg = known.get(name)
            if arg is None:
                raise InvalidArgument.make(f"Invalid input name: {name}")
            feeds[name] = _checked_feed(arg, value)
        return feeds


def _checked_feed(arg, value):
    if arg.type.startswith(("seq(", "optional(")):      # a list / None: as it is
        return value
    want = _DTYPES.get(arg.type)
    if isinstance(value, OrtValue):
        value = value.numpy()
    if isinstance(value, (list, tuple)):
        value = np.asarray(value, dtype=want)
    elif isinstance(value, np.generic):
        value = np.asarray(value)
    elif not isinstance(value, np.ndarray):
        raise RuntimeException(f"Unable to handle object of type {type(value)}")
    if (want is not None and value.dtype != want) or \
            (arg.type == "tensor(string)" and value.dtype.kind not in "OUS"):
        raise InvalidArgument.make(f"Unexpected input data type. Actual: "
                                   f"({onnx_type_of(value.dtype)}) , expected: ({arg.type})")
    shape = arg.shape
    if shape is None:
        return value
    if value.ndim != len(shape):
        raise InvalidArgument.make(f"Invalid rank for input: {arg.name} Got: {value.ndim} "
                                   f"Expected: {len(shape)} Please fix either the "
                                   f"inputs/outputs or the model.")
    bad = [f" index: {i} Got: {g} Expected: {e}\n" for i, (g, e)
           in enumerate(zip(value.shape, shape)) if isinstance(e, int) and g != e]
    if bad:
        raise InvalidArgument.make(f"Got invalid dimensions for input: {arg.name} for the "
                                   f"following indices\n{''.join(bad)} Please fix either "
                                   f"the inputs/outputs or the model.")
    return value


def _write_model(path, target):
    """``SessionOptions.optimized_model_filepath``: the model is written there
    as it was given (pyarena's rewrites are its own graph, not ONNX), so code
    that caches the file and loads it next time finds it; the ORT format
    (a ``.ort`` name) is not written."""
    if target and not str(target).lower().endswith(".ort") and \
            os.path.abspath(target) != os.path.abspath(path):
        shutil.copyfile(path, target)


def _node_arg(arg):
    """onnxruntime's NodeArg of a pyarena one (a TFLite or JSON model's)."""
    return NodeArg(arg.name, list(arg.shape), arg.type)
