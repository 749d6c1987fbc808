"""NumPy operator kernels that write into memory they are given.

Importing this package registers every kernel family; the registry
(:mod:`.registry`) is the API: :func:`make_kernel`, :func:`set_scratch`,
:data:`KERNELS` (op type -> class), :data:`TFLITE_OPS` (TFLite builtin ->
op type and fixed attributes), and the operators' facts every pass reads
(:func:`op_fact`, :func:`op_table`, :func:`ops_where`; :mod:`.facts`).
To add an operator, write one :class:`Kernel` subclass with ``@register``
in the family file it belongs to, its facts on the class
(docs/architecture.md).

Layouts: ONNX is NCHW.  TFLite graphs keep NHWC (attribute
``layout="NHWC"``) and TFLite weight layouts (conv ``OHWI``, depthwise
``1HWC``); the conv/pool/resize kernels handle both, so no weight or
activation is transposed at import time.
"""
from ...errors import UnsupportedOpError
from . import (attention_contrib, attention_gqa, batch_norm, branching, cast, contrib_activations, contrib_norms,  # noqa: F401
               attention_fused, control, conv, deform_conv, detection, elementwise, fold_only, matmul_nbits,
               held_loop, indexing, kv_cache, linalg, logic, ml, movement, normalization, patched, pooling,
               ort_exact, quantized, quantized_binary, quantized_contrib, quantized_conv, quantized_matmul,
               quantized_pool, recurrent, recurrent_quant, resize, rows, sampling, sequences, spectral, strings, tfidf, tflite)  # (register)
from .registry import (KERNELS, OPS, SCRATCH_BUDGET, TFLITE_INT8, TFLITE_OPS, Kernel,
                       graph_kernel, make_kernel, op_fact, op_table, ops_where, register,
                       scratch_bytes_for, set_scratch, supported_ops)

__all__ = ["Kernel", "register", "KERNELS", "OPS", "TFLITE_OPS", "TFLITE_INT8",
           "SCRATCH_BUDGET", "make_kernel", "graph_kernel", "scratch_bytes_for", "set_scratch",
           "supported_ops", "op_fact", "op_table", "ops_where", "UnsupportedOpError"]
