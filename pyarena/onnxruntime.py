"""onnxruntime's Python surface, run by pyarena.

Code written for onnxruntime runs on pyarena unchanged::

    import pyarena
    pyarena.patch_onnxruntime()     # before the library imports onnxruntime
    import rapidocr_onnxruntime     # its onnxruntime.InferenceSession is pyarena's

or, in code of your own, ``import pyarena.onnxruntime as ort``.  What is
honoured, what is accepted and ignored, and what is missing: the section
"Drop-in for onnxruntime" of docs/models.md.

This module is a facade above the layers (like ``pyarena/__init__.py``):
the implementation is in ``importers/ort_capi.py`` (options, enums,
exceptions, module functions), ``importers/ort_session.py`` (the session,
NodeArg, ModelMetadata) and ``importers/ort_values.py`` (OrtValue,
IOBinding).  ``capi``, ``capi.onnxruntime_pybind11_state`` (also as
``capi._pybind_state``) and ``capi.onnxruntime_inference_collection``
hold the same names where onnxruntime keeps them, for code that imports
its exceptions from there.
"""
import sys
import types

from .importers import ort_capi as _capi
from .importers import ort_session as _session
from .importers import ort_values as _values
from .importers.ort_capi import (ORT_VERSION, DeviceReset, EngineError, EPFail,
                                 ExecutionMode, ExecutionOrder, Fail, GraphOptimizationLevel,
                                 InvalidArgument, InvalidGraph, InvalidProtobuf,
                                 ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation,
                                 NoModel, NoSuchFile, NotFound, NotImplemented, OrtMemType,
                                 RunOptions, RuntimeException, SessionOptions,
                                 disable_telemetry_events, enable_telemetry_events,
                                 get_all_providers, get_available_providers, get_build_info,
                                 get_device, get_version_string,
                                 set_default_logger_severity, set_default_logger_verbosity,
                                 set_seed)
from .importers.ort_session import InferenceSession, ModelMetadata, NodeArg
from .importers.ort_values import IOBinding, OrtDevice, OrtValue

__version__ = ORT_VERSION       # the onnxruntime API followed: version checks see it
version = ORT_VERSION

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata",
    "OrtValue", "IOBinding", "OrtDevice", "GraphOptimizationLevel", "ExecutionMode",
    "ExecutionOrder", "OrtMemType", "get_available_providers", "get_all_providers",
    "get_device", "set_default_logger_severity", "set_default_logger_verbosity",
    "set_seed", "get_version_string", "get_build_info", "disable_telemetry_events",
    "enable_telemetry_events", "Fail", "InvalidArgument", "NoSuchFile", "NoModel",
    "EngineError", "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented",
    "InvalidGraph", "EPFail", "NotFound", "ModelLoadCanceled", "ModelRequiresCompilation",
    "DeviceReset", "capi", "patch",
]


def _module(name, doc, sources):
    m = types.ModuleType(name, doc)
    for src in sources:
        for attr in src.__all__:
            setattr(m, attr, getattr(src, attr))
    return m


#: onnxruntime.capi.onnxruntime_pybind11_state: the classes, enums, errors
_pybind_state = _module("onnxruntime.capi.onnxruntime_pybind11_state", _capi.__doc__,
                        [_capi, _values])
_pybind_state.InferenceSession = InferenceSession
_pybind_state.NodeArg, _pybind_state.ModelMetadata = NodeArg, ModelMetadata
#: onnxruntime.capi.onnxruntime_inference_collection: the session, values, binding
_collection = _module("onnxruntime.capi.onnxruntime_inference_collection", _session.__doc__,
                      [_session, _values])
_collection.Session = InferenceSession
_collection.check_and_normalize_provider_args = _capi.normalize_providers
capi = types.ModuleType("onnxruntime.capi", "onnxruntime's capi package, as pyarena has it")
capi.onnxruntime_pybind11_state = capi._pybind_state = _pybind_state
capi.onnxruntime_inference_collection = _collection

#: module name -> module, as patch() installs them
MODULES = {
    "onnxruntime": sys.modules[__name__],
    "onnxruntime.capi": capi,
    "onnxruntime.capi.onnxruntime_pybind11_state": _pybind_state,
    "onnxruntime.capi._pybind_state": _pybind_state,
    "onnxruntime.capi.onnxruntime_inference_collection": _collection,
}


def patch():
    """Install this module as ``onnxruntime`` (and its ``capi`` modules) in
    ``sys.modules``, whether onnxruntime is installed or not: a library
    imported afterwards gets pyarena's.  Any ``onnxruntime`` module
    imported before is taken out of ``sys.modules`` (code that already
    holds it keeps it).  Returns this module; ``pyarena.patch_onnxruntime``."""
    for name in [n for n in sys.modules if n == "onnxruntime" or
                 n.startswith("onnxruntime.")]:
        del sys.modules[name]
    sys.modules.update(MODULES)
    return MODULES["onnxruntime"]
