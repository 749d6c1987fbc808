"""What the passes record about an operator for the passes and kernels
after them: :class:`OpNotes`, ``Op.notes``.

An op's ``attrs`` are its own attributes, as the model file states them
(ONNX's, or a TFLite builtin's options in ONNX's words); a note is a fact
one pass learnt and a later one reads -- never written into ``attrs``:

===================  ============================  ==========================
note                 written by                    read by
===================  ============================  ==========================
``opset``            the ONNX importer             Resize / Upsample (the
                                                   coordinate rules of opsets
                                                   before 11), Loop / Scan
                                                   bodies
``weights_oihw``     the NHWC NHWC pass          the NHWC Conv kernel (reads
                                                   OIHW weights as OHWI / 1HWC
                                                   when it lays them out),
                                                   ``conv_weight_shape``
``weight_scales``    fusion (batch norms, scales   the Conv kernel: folded in
                     folded into a Conv)           where it lays its weights
                                                   out
``scratch_budget``   the slack planner             the kernel's workspace rule
                                                   (this op's, not the
                                                   graph's)
``kernel_path``      callers forcing a path        Conv ("native" / "numpy")
                     (tests, benchmarks)
``band``             a patched stage, per band     Resize: the band's source
                                                   coordinates (axis, coords)
``reads_values``     the ONNX importer             the executor: a small
                                                   run-time input is needed
                                                   as a constant (built per
                                                   value); a pool op
``value_inputs``     the ONNX importer             that pool op: the run-time
                                                   inputs read as values
                                                   whatever their size (a
                                                   weight, a scale fed as an
                                                   input)
``infer``            the ONNX importer             pool steps: output shapes
                                                   for given inputs
``over_fold_cap``    the ONNX importer             the user: a constant
                                                   result over the weight-
                                                   folding cap, computed at
                                                   every run (its bytes)
``tied_weight``      the kernels' build            MatMul / Gemm (no packed
                     (runtime/tied.py)             copy), the executor (the
                                                   weight placed as a view
                                                   of the table's copy)
===================  ============================  ==========================
"""
from dataclasses import dataclass, field, fields, replace

__all__ = ["OpNotes", "JSON_NOTES"]


@dataclass
class OpNotes:
    """The notes of one op (module docstring); every field is optional."""

    #: the ONNX opset the op was imported at (None: current semantics)
    opset: int = None
    #: an NHWC Conv whose weights constant is still ONNX's OIHW
    weights_oihw: bool = False
    #: per-output-channel scales folded into the weights, in order (float64 bytes)
    weight_scales: tuple = ()
    #: this op's own workspace budget (bytes), else the graph's
    scratch_budget: int = None
    #: the kernel path forced ("native" / "numpy"), else the kernel's rule
    kernel_path: str = None
    #: (axis, source coordinates) of one band of a patched stage
    band: tuple = None
    #: the kernel needs small run-time inputs as values (built per value)
    reads_values: bool = False
    #: names of the run-time inputs its kernel reads as values, any size
    value_inputs: frozenset = frozenset()
    #: ``infer(arrays, use_values) -> output shapes``, for pool tensors
    infer: object = None
    #: bytes of this op's constant result, left to run time: over the
    #: weight-folding cap (importers/onnx_constants.py)
    over_fold_cap: int = None
    #: (input index, constant, perm): this linear op's weight is that
    #: constant's memory (a tied embedding, runtime/tied.py), read where
    #: it lies instead of packed into a second copy
    tied_weight: tuple = None
    #: bytes its kernel lays out beyond the constants it reads (packed
    #: weights of every band geometry of a patched stage, tables): set
    #: with ``scratch_bytes`` from the kernel's rules, None until then (a
    #: derived size, like ``scratch_bytes``: not part of what the op is)
    state_bytes: int = field(default=None, compare=False, repr=False)

    def copy(self):
        return replace(self)

    def to_json(self):
        """The JSON-able notes that differ from the defaults (a saved graph
        keeps them; a callable such as ``infer`` is not data)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in JSON_NOTES and v != f.default:
                out[f.name] = v
        return out

    @classmethod
    def from_json(cls, d):
        """Notes from :meth:`to_json` output (unknown keys refused)."""
        if not isinstance(d, dict) or any(k not in JSON_NOTES for k in d):
            raise ValueError(f"notes must be an object with keys among {JSON_NOTES}, "
                             f"not {d!r:.80}")
        return cls(**d)


#: the notes a JSON graph keeps
JSON_NOTES = ("opset", "weights_oihw", "scratch_budget", "kernel_path")
