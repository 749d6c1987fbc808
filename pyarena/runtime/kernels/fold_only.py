"""Operators no kernel runs that the ONNX importer still knows: their
facts, declared once like a kernel's (:mod:`.facts`).

* ``Constant`` -- always folded (its value is the attribute);
* the random generators, which must never fold (each run draws anew).
"""
import numpy as np

from . import shape_rules_movement as moves
from .facts import Operator
from .registry import fold_only


def _constant(n):
    a = n.a
    if "value" in a:
        return [np.asarray(a["value"])]
    for k, dt in (("value_float", np.float32), ("value_floats", np.float32),
                  ("value_int", np.int64), ("value_ints", np.int64)):
        if k in a:
            return [np.asarray(a[k], dtype=dt)]
    return None


@fold_only
class Constant(Operator):
    op_types = ("Constant",)
    family = "movement"
    evaluate = _constant
    fold = "free"
    needs_values = False


@fold_only
class Random(Operator):
    """Not deterministic: never folded."""

    op_types = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                "Multinomial", "Bernoulli")
    fold = "never"
