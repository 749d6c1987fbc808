"""ONNX ``SequenceMap`` at import: its body as a model of its own.

SequenceMap runs its body once per position of its sequence inputs (the
other inputs given whole every time) and collects each body output into a
sequence.  The tensors of one position may each have a shape of their
own, so the body cannot be planned once at import, as a Loop body is
(``onnx_loop.py``): it becomes a model of its own, run by an
:class:`pyarena.InferenceSession` made on first use, which plans it once
per shape signature (its cache of plans).  The kernel
(``runtime/kernels/sequences.py``) calls :class:`BodyRunner` with the
body's feeds; the runtime layer never imports this one, nor this one the
session (:data:`SESSION`).

A body reading names of the enclosing graph (outer scope) is refused by
name: the conformance cases' bodies read their formal inputs only.
"""
import threading

from ..errors import UnsupportedOpError
from .onnx_loop import outer_names, subgraph_attr

__all__ = ["BodyRunner", "import_sequence_map", "SESSION"]

#: the session class that runs a body: ``InferenceSession``, put here by
#: importers/session.py (which imports the ONNX importer: this module cannot
#: import it back)
SESSION = []


class BodyRunner:
    """``runner(feeds)`` -> the body's outputs, in order: the body model run
    by an InferenceSession made on first use (``path``: the model's bytes).
    One run at a time per runner (the session allows more, the order of
    sequence positions does not need them)."""

    def __init__(self, model_bytes, name, by_value=True):
        self.model_bytes, self.name = model_bytes, name
        #: False: no 0-d input is taken by value (a Loop's iteration number
        #: would make every iteration a signature of its own)
        self.by_value = by_value
        self._session = None
        self._lock = threading.Lock()

    def __call__(self, feeds):
        with self._lock:
            if self._session is None:
                self._session = SESSION[0](self.model_bytes, blas_threads=None,
                                           by_value=self.by_value)
            return self._session.run(None, feeds)

    def __repr__(self):
        return f"<SequenceMap body of {self.name!r}>"


def import_sequence_map(imp, node):
    """(outer inputs, attrs) of SequenceMap ``node``: no outer inputs, and
    ``run_body`` (a :class:`BodyRunner`), ``body_inputs`` (the body's input
    names, by the op's inputs)."""
    onnx, helper = imp.onnx, imp.onnx.helper
    body = subgraph_attr(node, "body")
    outer = outer_names(onnx, body)
    if outer:
        raise UnsupportedOpError(f"operator {node.name!r} (SequenceMap): its body reads "
                                 f"{outer[:4]} of the enclosing graph; a SequenceMap body "
                                 f"reading its own inputs only is supported")
    if len(body.input) != len(node.input) or len(body.output) != len(node.output):
        raise UnsupportedOpError(f"operator {node.name!r} (SequenceMap): a body of "
                                 f"{len(body.input)} inputs and {len(body.output)} outputs "
                                 f"for an op of {len(node.input)} and {len(node.output)}")
    m = helper.make_model(body, opset_imports=list(imp.model.opset_import),
                          ir_version=imp.model.ir_version)
    runner = BodyRunner(m.SerializeToString(), node.name)
    return [], {"run_body": runner, "body_inputs": [vi.name for vi in body.input]}
