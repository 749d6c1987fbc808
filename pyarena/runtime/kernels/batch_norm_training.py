"""BatchNormalization in training mode (``training_mode=1``): Y normalised
by the batch's own mean and (population) variance per channel, and the
optional running mean / variance outputs ``input * momentum + batch * (1 -
momentum)``, as ONNX's reference computes them.  The statistics are taken
in float64 into the scratch; Y is then one multiply and one add, as the
inference form (in-place safe: the statistics are read before Y is
written).  Used by :class:`.batch_norm.BatchNorm`, which keeps the op's
facts."""
import numpy as np

__all__ = ["setup_training", "run_training"]


def setup_training(k):
    """Geometry and scratch of kernel ``k`` in training mode."""
    xs = k.shape(0)
    if len(xs) < 2:
        k.malformed(f"input {list(xs)} has no channel axis")
    c = xs[1]
    for i, what in ((1, "scale"), (2, "bias"), (3, "input_mean"), (4, "input_var")):
        if k.shape(i) != (c,):
            k.malformed(f"{what} {list(k.shape(i))} is not one value per channel ({c})")
    k.runtime = None
    k.training = True
    k.axes = (0,) + tuple(range(2, len(xs)))
    k.bshape = (-1,) + (1,) * (len(xs) - 2)
    k.eps = float(k.attrs.get("epsilon", 1e-5))
    k.momentum = float(k.attrs.get("momentum", 0.9))
    #: output index -> its position among the op's outputs
    k.where = [i for i, o in enumerate(k.op.outputs) if o]
    # batch mean, batch variance, then the scale and the shift Y uses
    k.scratch = [((c,), np.float64)] * 2 + [((c,), k.dtype)] * 2


def run_training(k, xs, ys, sc):
    x = xs[0]
    mean, var, scale, shift = sc
    np.mean(x, axis=k.axes, dtype=np.float64, out=mean)
    np.var(x, axis=k.axes, dtype=np.float64, out=var)
    inv = 1.0 / np.sqrt(var + k.eps)
    np.multiply(xs[1], inv, out=scale, casting="unsafe")
    np.subtract(xs[2], mean * scale, out=shift, casting="unsafe")
    for y, pos in zip(ys, k.where):
        if pos == 1:
            np.add(xs[3] * k.momentum, mean * (1.0 - k.momentum), out=y, casting="unsafe")
        elif pos == 2:
            np.add(xs[4] * k.momentum, var * (1.0 - k.momentum), out=y, casting="unsafe")
    if k.where[0] == 0:
        y = ys[0]
        np.multiply(x, scale.reshape(k.bshape), out=y)
        np.add(y, shift.reshape(k.bshape), out=y)
