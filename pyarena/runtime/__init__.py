"""The runtime layer: run planned graphs.

* :class:`Executor` -- every tensor in planned memory, one NumPy kernel
  per operator (:mod:`.kernels`: the registry where each operator is
  declared once), weights in an :class:`~pyarena.Arena`.
* :func:`fuse` -- the graph rewrite folding batch norms and activations
  into convolutions (:mod:`.fusion`), run by ``load_model``;
  :func:`to_nhwc` -- the NHWC pass that runs an ONNX graph's NCHW
  regions in NHWC (:mod:`.layout`), run by ``load_model`` after it.
* :mod:`.models` -- built-in networks made in code.
* :func:`time_calls` -- the one timing loop (:mod:`.timing`);
  :func:`set_blas_threads` (:mod:`.blas`).

Imports the planning, graph and memory layers below it.
"""
from ..errors import UnsupportedOpError
from .blas import set_blas_threads
from .executor import Executor, random_feeds
from .fusion import fuse
from .kernels import make_kernel, set_scratch
from .nhwc import to_nhwc
from .timing import median, time_calls

__all__ = ["Executor", "random_feeds", "UnsupportedOpError", "make_kernel", "set_scratch",
           "time_calls", "median", "set_blas_threads", "fuse",
           "to_nhwc"]
