"""``GraphBuilder``: CNN graphs made in code, the one builder of pyarena.

The built-in networks (:mod:`pyarena.runtime.models`), the tests and the
benchmarks build their graphs with it.  It tracks shapes (NCHW, float32,
no padding surprises: "same" padding for odd kernels), names everything
in order -- operators ``conv_1``, ``bn_2`` ...; activations ``t_3``;
constants ``<op>.weight``, ``<op>.bias`` ... -- and gives every constant
seeded random data (He-scaled convolution weights), so the graph can be
executed as well as planned.

Scratch sizes are not this layer's business: the kernels own those rules
(``pyarena.runtime.kernels.set_scratch``).
"""
import numpy as np

from .graph import Graph

__all__ = ["GraphBuilder"]


class GraphBuilder:
    """Builds a :class:`Graph` op by op.  ``seed`` seeds the weights.

    Every method takes tensor names and returns the name of its output;
    ``shapes`` maps each activation to its shape.  ``finish(outputs)``
    marks the outputs and returns the validated graph.
    """

    def __init__(self, name, seed=0):
        self.g = Graph(name)
        self.rng = np.random.default_rng(seed)
        self.shapes = {}
        self.n = 0

    # -- names and tensors -------------------------------------------------
    def _name(self, kind):
        self.n += 1
        return f"{kind}_{self.n}"

    def input(self, shape, name="input"):
        return self.tensor(shape, role="input", name=name)

    def const(self, name, arr):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        self.g.add_tensor(name, arr.shape, "float32", role="constant", data=arr)
        return name

    def tensor(self, shape, role="activation", name=None):
        name = name or self._name("t")
        self.g.add_tensor(name, shape, "float32", role=role)
        self.shapes[name] = tuple(shape)
        return name

    def _op(self, op_type, kind, inputs, shape, name=None, **attrs):
        """One op writing a new activation of ``shape``."""
        y = self.tensor(shape)
        self.g.add_op(op_type, inputs, [y], name=name or self._name(kind), **attrs)
        return y

    # -- layers ----------------------------------------------------------------
    def conv(self, x, cout, k, stride=1, group=1, bias=False, pad=None):
        """k x k convolution, padding ``k // 2`` unless given."""
        n, c, h, w = self.shapes[x]
        pad = k // 2 if pad is None else pad
        ho = (h + 2 * pad - k) // stride + 1
        wo = (w + 2 * pad - k) // stride + 1
        op = self._name("conv")
        fan = c // group * k * k
        wt = self.rng.standard_normal((cout, c // group, k, k)) * np.sqrt(2.0 / fan)
        ins = [x, self.const(f"{op}.weight", wt)]
        if bias:
            ins.append(self.const(f"{op}.bias", self.rng.uniform(-0.1, 0.1, cout)))
        y = self.tensor((n, cout, ho, wo))
        self.g.add_op("Conv", ins, [y], name=op, kernel_shape=[k, k],
                      strides=[stride, stride], pads=[pad] * 4, group=group)
        return y

    def conv_transpose(self, x, cout, k=2, stride=2):
        """Transposed convolution that scales H and W by ``stride``."""
        n, c, h, w = self.shapes[x]
        op = self._name("deconv")
        wt = self.rng.standard_normal((c, cout, k, k)) * np.sqrt(2.0 / (c * k * k))
        y = self.tensor((n, cout, (h - 1) * stride + k, (w - 1) * stride + k))
        self.g.add_op("ConvTranspose", [x, self.const(f"{op}.weight", wt)], [y], name=op,
                      kernel_shape=[k, k], strides=[stride, stride])
        return y

    def bn(self, x):
        """Inference BatchNormalization with seeded statistics."""
        c = self.shapes[x][1]
        op = self._name("bn")
        r = self.rng
        ins = [x]
        for part, v in (("scale", r.uniform(0.5, 1.0, c)), ("bias", r.uniform(-0.1, 0.1, c)),
                        ("mean", r.uniform(-0.1, 0.1, c)), ("var", r.uniform(0.8, 1.2, c))):
            ins.append(self.const(f"{op}.{part}", v))
        y = self.tensor(self.shapes[x])
        self.g.add_op("BatchNormalization", ins, [y], name=op, epsilon=1e-5)
        return y

    def relu(self, x):
        return self._op("Relu", "relu", [x], self.shapes[x])

    def relu6(self, x):
        return self._op("Clip", "relu6", [x], self.shapes[x], min=0.0, max=6.0)

    def add(self, a, b):
        return self._op("Add", "add", [a, b], self.shapes[a])

    def pool(self, x, k, stride, kind="MaxPool", pad=None):
        """Max / average pooling, padding ``k // 2`` unless given."""
        n, c, h, w = self.shapes[x]
        pad = k // 2 if pad is None else pad
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        return self._op(kind, kind.lower(), [x], (n, c, ho, wo), kernel_shape=[k, k],
                        strides=[stride, stride], pads=[pad] * 4)

    def concat(self, xs):
        """Channel concatenation."""
        n, _, h, w = self.shapes[xs[0]]
        c = sum(self.shapes[t][1] for t in xs)
        return self._op("Concat", "concat", list(xs), (n, c, h, w), axis=1)

    def classifier(self, x, classes=1000, softmax=True, output="prob"):
        """Global average pool, flatten, fully connected (``Gemm``) and, if
        asked, a softmax; the last is the graph output ``output``."""
        n, c = self.shapes[x][:2]
        pooled = self.tensor((n, c, 1, 1))
        self.g.add_op("GlobalAveragePool", [x], [pooled], name="pool")
        flat = self.tensor((n, c))
        self.g.add_op("Flatten", [pooled], [flat], name="flatten", axis=1)
        w = self.const("classifier.weight",
                       self.rng.standard_normal((classes, c)) / np.sqrt(c))
        bias = self.const("classifier.bias", np.zeros(classes))
        role = "activation" if softmax else "output"
        logits = self.tensor((n, classes), role=role, name=None if softmax else output)
        self.g.add_op("Gemm", [flat, w, bias], [logits], name="classifier", transB=1)
        if not softmax:
            return logits
        prob = self.tensor((n, classes), role="output", name=output)
        self.g.add_op("Softmax", [logits], [prob], name="softmax", axis=1)
        return prob

    def finish(self, outputs=()):
        """Mark ``outputs`` as graph outputs; the validated graph."""
        for name in outputs:
            self.g.tensors[name].role = "output"
        return self.g.validate()
