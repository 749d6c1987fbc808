"""The graph layer: the model graph the planner, the runtime and the
importers share (:class:`Graph`, :class:`Tensor`, :class:`Op`), and one
builder for graphs made in code (:class:`GraphBuilder`).

Imports only the errors below it (and NumPy).
"""
from ..errors import GraphError
from .binding import bind_shapes
from .builder import GraphBuilder
from .graph import (CONV_OIHW, MAX_TENSOR_BYTES, ROLES, Graph, Op, Tensor, conv_weight_shape,
                    stable_toposort)

__all__ = ["Graph", "Tensor", "Op", "GraphError", "GraphBuilder", "bind_shapes", "ROLES",
           "MAX_TENSOR_BYTES", "stable_toposort", "CONV_OIHW", "conv_weight_shape"]
