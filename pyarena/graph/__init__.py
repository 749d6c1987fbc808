"""The graph layer: the model graph the planner, the runtime and the
importers share (:class:`Graph`, :class:`Tensor`, :class:`Op` and what the
passes note about it, :class:`OpNotes`), and one builder for graphs made in
code (:class:`GraphBuilder`).

Imports only the errors below it (and NumPy).
"""
from ..errors import GraphError
from .binding import bind_shapes
from .builder import GraphBuilder
from .graph import (MAX_TENSOR_BYTES, ROLES, Graph, Op, Tensor, conv_weight_shape,
                    stable_toposort)
from .notes import OpNotes

__all__ = ["Graph", "Tensor", "Op", "OpNotes", "GraphError", "GraphBuilder", "bind_shapes",
           "ROLES", "MAX_TENSOR_BYTES", "stable_toposort", "conv_weight_shape"]
