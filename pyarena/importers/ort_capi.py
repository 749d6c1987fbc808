"""onnxruntime's option objects, enums, exceptions and module functions,
as ``pyarena.onnxruntime`` exposes them (onnxruntime's own are in its
``capi.onnxruntime_pybind11_state``, a C++ extension).

Names, defaults and the kinds of errors follow onnxruntime 1.32, so that
code written for it -- ``except InvalidArgument``, ``so.intra_op_num_threads
= 1``, ``GraphOptimizationLevel.ORT_ENABLE_ALL`` -- keeps working.  What the
options mean to pyarena is decided by :func:`session_settings` (used by
:class:`pyarena.InferenceSession`); the table in docs/models.md ("Drop-in
for onnxruntime") says which are honoured and which are accepted only.

The exception classes carry onnxruntime's names and are also pyarena's
matching error (``InvalidArgument`` is an ``InvalidArgumentError``, hence
a ValueError), so both kinds of ``except`` clause catch them.
"""
import collections.abc
import enum
import warnings

from ..errors import (GraphError, InvalidArgumentError, ModelImportError, PyArenaError,
                      UnsupportedOpError)

__all__ = [
    "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
    "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail",
    "NotFound", "ModelLoadCanceled", "ModelRequiresCompilation", "DeviceReset",
    "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "OrtMemType",
    "SessionOptions", "RunOptions", "get_available_providers", "get_all_providers",
    "get_device", "set_default_logger_severity", "set_default_logger_verbosity",
    "set_seed", "get_version_string", "get_build_info", "disable_telemetry_events",
    "enable_telemetry_events", "normalize_providers", "session_settings", "CPU_PROVIDER",
    "ORT_VERSION",
]

#: the onnxruntime release whose Python API this module follows
ORT_VERSION = "1.32.0"
CPU_PROVIDER = "CPUExecutionProvider"


# -- exceptions: onnxruntime's names, pyarena's kinds ---------------------------
class _OrtError(PyArenaError):
    """An error under one of onnxruntime's names.  ``code`` and ``kind`` are
    onnxruntime's status (the message starts ``[ONNXRuntimeError] : code :
    KIND :`` as onnxruntime's does)."""
    code, kind = 1, "FAIL"

    @classmethod
    def make(cls, message):
        return cls(f"[ONNXRuntimeError] : {cls.code} : {cls.kind} : {message}")


class Fail(_OrtError):
    code, kind = 1, "FAIL"


class InvalidArgument(_OrtError, InvalidArgumentError):
    code, kind = 2, "INVALID_ARGUMENT"


class NoSuchFile(_OrtError, ModelImportError):
    code, kind = 3, "NO_SUCHFILE"


class NoModel(_OrtError):
    code, kind = 4, "NO_MODEL"


class EngineError(_OrtError):
    code, kind = 5, "ENGINE_ERROR"


class RuntimeException(_OrtError, RuntimeError):
    code, kind = 6, "RUNTIME_EXCEPTION"


class InvalidProtobuf(_OrtError, ModelImportError):
    code, kind = 7, "INVALID_PROTOBUF"


class ModelLoaded(_OrtError):
    code, kind = 8, "MODEL_LOADED"


class NotImplemented(_OrtError, UnsupportedOpError):   # noqa: A001 (onnxruntime's name)
    code, kind = 9, "NOT_IMPLEMENTED"


class InvalidGraph(_OrtError, GraphError):
    code, kind = 10, "INVALID_GRAPH"


class EPFail(_OrtError):
    code, kind = 11, "EP_FAIL"


class ModelLoadCanceled(_OrtError):
    code, kind = 12, "MODEL_LOAD_CANCELED"


class ModelRequiresCompilation(_OrtError):
    code, kind = 13, "MODEL_REQUIRES_COMPILATION"


class NotFound(_OrtError):
    code, kind = 14, "NOT_FOUND"


class DeviceReset(_OrtError):
    code, kind = 15, "DEVICE_RESET"


# -- enums ------------------------------------------------------------------------
class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


# -- option objects ---------------------------------------------------------------
class _Options:
    """Attributes of fixed names and types, as onnxruntime's pybind11
    objects have: an unknown name is an AttributeError, a value of the
    wrong type a TypeError (an enum field takes only its enum)."""
    _FIELDS = {}

    def __init__(self):
        for name, (kind, default) in self._FIELDS.items():
            object.__setattr__(self, name, default)
        object.__setattr__(self, "_config", {})

    def __setattr__(self, name, value):
        field = self._FIELDS.get(name)
        if field is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        kind = field[0]
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif issubclass(kind, enum.Enum):
            ok = isinstance(value, kind)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise TypeError(f"{type(self).__name__}.{name} takes a {kind.__name__}, "
                            f"not {value!r}")
        object.__setattr__(self, name, value)

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS)
        return f"{type(self).__name__}({fields})"


class SessionOptions(_Options):
    """onnxruntime's ``SessionOptions``: the fields and defaults of
    onnxruntime 1.32.  pyarena honours ``intra_op_num_threads`` (the
    native kernels' threads; 0 = pyarena's default, 1) and
    ``graph_optimization_level`` (ORT_DISABLE_ALL: the graph as imported,
    NumPy kernels; ORT_ENABLE_BASIC / _EXTENDED: fusion without the NHWC
    pass; ORT_ENABLE_LAYOUT / _ALL: both) and ``optimized_model_filepath``
    (the model is written there as given); the others are accepted and
    kept (see docs/models.md)."""
    _FIELDS = {
        "intra_op_num_threads": (int, 0),
        "inter_op_num_threads": (int, 0),
        "graph_optimization_level": (GraphOptimizationLevel,
                                     GraphOptimizationLevel.ORT_ENABLE_ALL),
        "execution_mode": (ExecutionMode, ExecutionMode.ORT_SEQUENTIAL),
        "execution_order": (ExecutionOrder, ExecutionOrder.DEFAULT),
        "log_severity_level": (int, -1),
        "log_verbosity_level": (int, 0),
        "logid": (str, ""),
        "enable_cpu_mem_arena": (bool, True),
        "enable_mem_pattern": (bool, True),
        "enable_mem_reuse": (bool, True),
        "enable_profiling": (bool, False),
        "profile_file_prefix": (str, "onnxruntime_profile_"),
        "optimized_model_filepath": (str, ""),
        "use_deterministic_compute": (bool, False),
        "use_per_session_threads": (bool, True),
    }

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeException(f"SessionOptions does not have configuration with "
                                   f"key: {key}") from None

    def add_free_dimension_override_by_name(self, name, value):
        self._config[f"pyarena.free_dimension.{name}"] = str(int(value))

    def add_free_dimension_override_by_denotation(self, denotation, value):
        self._config[f"pyarena.free_dimension_denotation.{denotation}"] = str(int(value))

    def add_initializer(self, name, value):
        raise Fail.make("pyarena.onnxruntime: SessionOptions.add_initializer is not "
                        f"supported (initializer {name!r})")

    def add_external_initializers(self, names, values):
        raise Fail.make("pyarena.onnxruntime: external initializers given in memory are "
                        "not supported")

    def register_custom_ops_library(self, path):
        """Recorded only: pyarena runs no custom-op library (a model that
        needs one is refused by name when its ops are imported)."""
        self._config.setdefault("pyarena.custom_ops_libraries", "")
        self._config["pyarena.custom_ops_libraries"] += f"{path};"

    def has_providers(self):
        return False


class RunOptions(_Options):
    """onnxruntime's ``RunOptions``.  ``terminate`` is honoured (a run
    started with it set fails with ``Fail``, as in onnxruntime); the
    logging fields and ``only_execute_path_to_fetches`` are accepted."""
    _FIELDS = {
        "log_severity_level": (int, -1),
        "log_verbosity_level": (int, 0),
        "logid": (str, ""),
        "only_execute_path_to_fetches": (bool, False),
        "terminate": (bool, False),
    }

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeException(f"RunOptions does not have configuration with "
                                   f"key: {key}") from None

    def add_active_adapter(self, adapter):
        raise Fail.make("pyarena.onnxruntime: LoRA adapters are not supported")


# -- module functions -------------------------------------------------------------
_LOGGING = {"severity": 2, "verbosity": 0}

#: onnxruntime.get_all_providers() as onnxruntime 1.32 answers it (execution
#: providers, not operators: the names a library may ask about)
_ALL_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "OpenVINOExecutionProvider", "DnnlExecutionProvider", "VitisAIExecutionProvider",
    "QNNExecutionProvider", "NnapiExecutionProvider", "VSINPUExecutionProvider",
    "JsExecutionProvider", "CoreMLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider",
    "XnnpackExecutionProvider", "CANNExecutionProvider", "AzureExecutionProvider",
    CPU_PROVIDER]


def get_available_providers():
    """What runs here: pyarena's CPU kernels, under onnxruntime's name."""
    return [CPU_PROVIDER]


def get_all_providers():
    return list(_ALL_PROVIDERS)


def get_device():
    return "CPU"


def set_default_logger_severity(severity):
    """Accepted (0..4, else RuntimeError as onnxruntime): pyarena never logs."""
    if not isinstance(severity, int) or not 0 <= severity <= 4:
        raise RuntimeException(f"Invalid logging severity {severity!r}. 0:Verbose, 1:Info, "
                               "2:Warning, 3:Error, 4:Fatal")
    _LOGGING["severity"] = severity


def set_default_logger_verbosity(verbosity):
    _LOGGING["verbosity"] = int(verbosity)


def set_seed(seed):
    """Accepted: pyarena's kernels draw no random numbers at run time."""
    int(seed)


def get_version_string():
    return ORT_VERSION


def get_build_info():
    from .. import __version__
    return f"pyarena {__version__} (onnxruntime {ORT_VERSION} API)"


def disable_telemetry_events():
    """Accepted: pyarena sends nothing."""


def enable_telemetry_events():
    """Accepted: pyarena sends nothing."""


# -- what the options mean to pyarena ---------------------------------------------
def normalize_providers(providers, provider_options):
    """onnxruntime's check of ``providers`` / ``provider_options``
    (``check_and_normalize_provider_args``): (names, options dicts with
    string keys and values).  A provider other than the CPU one is warned
    about, as onnxruntime does for one it does not have, and CPU runs."""
    if providers is None:
        return [], []
    if not isinstance(providers, collections.abc.Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length "
                             "if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if "
                             "'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        pairs = list(zip(providers, provider_options))
    else:
        pairs = []
        for p in providers:
            if isinstance(p, str):
                pairs.append((p, {}))
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) \
                    and isinstance(p[1], dict):
                pairs.append(p)
            else:
                raise ValueError("'providers' values must be either strings or "
                                 "(string, dict) tuples.")
    out = {}
    for name, options in pairs:
        if name not in get_available_providers():
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(get_available_providers())}'",
                          stacklevel=3)
        if name in out:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=3)
            continue
        out[name] = {str(k): str(v) for k, v in options.items()}
    return list(out), list(out.values())


#: graph_optimization_level -> (native, layout) when not given explicitly
_LEVELS = {0: (False, "keep"), 1: (True, "keep"), 2: (True, "keep"), 3: (True, "auto"),
           99: (True, "auto")}


def session_settings(sess_options, providers=None, provider_options=None, native=None,
                     layout=None, threads=None):
    """``(native, layout, threads)`` for a session from onnxruntime-style
    arguments: ``sess_options`` (this module's :class:`SessionOptions`,
    onnxruntime's own, or None) and pyarena's explicit ``native`` /
    ``layout`` / ``threads``, which win.  ``providers`` are checked as
    onnxruntime checks them."""
    if sess_options is not None and not hasattr(sess_options, "graph_optimization_level"):
        hint = " (max_plans is a keyword argument: max_plans=N)" \
            if isinstance(sess_options, int) else ""
        raise TypeError(f"sess_options must be a SessionOptions, not "
                        f"{type(sess_options).__name__}{hint}")
    normalize_providers(providers, provider_options)
    level = int(getattr(sess_options, "graph_optimization_level", 99))
    level_native, level_layout = _LEVELS.get(level, (True, "auto"))
    if threads is None:
        intra = int(getattr(sess_options, "intra_op_num_threads", 0))
        threads = intra if intra > 0 else 1
    if int(threads) < 1:
        raise InvalidArgumentError(f"threads must be >= 1, not {threads!r}")
    return (level_native if native is None else native,
            level_layout if layout is None else layout, int(threads))
