"""The context a TFLite builtin's options are read in.

Which op type a builtin becomes, and the function that reads its options
into the op's attributes, are declared by its kernel
(``pyarena.runtime.kernels.TFLITE_OPS``; the readers live in
:mod:`pyarena.runtime.kernels.tflite_attrs`).  :class:`OpContext` is what
such a reader sees of one operator; :func:`convert_options` runs it.  A
value the kernels cannot run is refused through ``OpContext.fail`` with
the operator's name.
"""
from ..errors import ModelImportError
from ..runtime.kernels import TFLITE_OPS

__all__ = ["OpContext", "convert_options"]

_ACT = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def builtin_options(tflite, op, cls_name):
    """An operator's builtin options table as ``tflite.<cls_name>``, or None
    when the operator has none."""
    tab = op.BuiltinOptions()
    if tab is None:
        return None
    o = getattr(tflite, cls_name)()
    o.Init(tab.Bytes, tab.Pos)
    return o


class OpContext:
    """One operator being converted: its builtin ``code``, flatbuffer
    ``op``, input / output tensor indices, the subgraph's ``shapes`` and
    constant ``data``, the ``attrs`` being filled and ``fail(why)``
    (a value the kernels cannot run) or ``contradicts(why)`` (options that
    disagree with the file's own shapes)."""

    def __init__(self, tflite, code, op, ins, outs, shapes, data, attrs, fail, name=None):
        self.tflite, self.code, self.op, self.name = tflite, code, op, name
        self.ins, self.outs = list(ins), list(outs)
        self.shapes, self.data = shapes, data
        self.attrs = attrs
        self.fail = fail

    def options(self, cls_name):
        """The builtin options table as ``tflite.<cls_name>``, or None."""
        return builtin_options(self.tflite, self.op, cls_name)

    def activation(self, o):
        """A fused activation becomes the attribute ``activation``."""
        f = _ACT.get(int(o.FusedActivationFunction()), "?")
        if f == "SIGN_BIT" or f == "?":
            self.fail(f"fused activation {f} is not supported")
        if f:
            self.attrs["activation"] = f

    def contradicts(self, why):
        """Refuse a file whose options and stored shapes disagree: a
        ModelImportError (a GraphError) naming the operator, raised at
        import, before any kernel runs."""
        raise ModelImportError(f"operator {self.name!r} ({self.code}): {why}; the file "
                               f"contradicts itself, refusing it")

    def const(self, i, what):
        v = self.data[i]
        if v is None:
            self.fail(f"{what} must be constant")
        return v


def convert_options(c):
    """Fill ``c.attrs`` (and fix ``c.ins``) from the builtin's options, by
    the reader its kernel names (``Kernel.tflite``)."""
    rec = TFLITE_OPS.get(c.code)
    if rec is not None and rec.options is not None:
        rec.options(c)
