"""Built-in networks, made in code as :class:`pyarena.Graph` (no download,
no optional dependency): ``mobilenet_v2`` -- the MobileNetV2 architecture
(inverted residual blocks, depthwise convolutions, ReLU6, BatchNorm,
residual adds) with seeded random weights.  Used by ``pyarena demo``, the
tests and the benchmarks."""
import numpy as np

from .graph import Graph
from .kernels import set_scratch

__all__ = ["mobilenet_v2", "MOBILENET_V2_BLOCKS"]

# (expansion t, output channels c, repeats n, first stride s)
MOBILENET_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _div8(v):
    return max(8, int(v + 4) // 8 * 8)


class _Builder:
    def __init__(self, name, seed):
        self.g = Graph(name)
        self.rng = np.random.default_rng(seed)
        self.shapes = {}
        self.n = 0

    def _name(self, kind):
        self.n += 1
        return f"{kind}_{self.n}"

    def const(self, name, arr):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        self.g.add_tensor(name, arr.shape, "float32", role="constant", data=arr)
        return name

    def tensor(self, shape, role="activation", name=None):
        name = name or self._name("t")
        self.g.add_tensor(name, shape, "float32", role=role)
        self.shapes[name] = tuple(shape)
        return name

    def conv(self, x, cout, k, stride=1, group=1):
        n, c, h, w = self.shapes[x]
        pad = k // 2
        ho = (h + 2 * pad - k) // stride + 1
        wo = (w + 2 * pad - k) // stride + 1
        op = self._name("conv")
        fan = c // group * k * k
        wt = self.rng.standard_normal((cout, c // group, k, k)) * np.sqrt(2.0 / fan)
        self.const(f"{op}.weight", wt)
        y = self.tensor((n, cout, ho, wo))
        self.g.add_op("Conv", [x, f"{op}.weight"], [y], name=op, kernel_shape=[k, k],
                      strides=[stride, stride], pads=[pad] * 4, group=group)
        return y

    def bn(self, x):
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

    def relu6(self, x):
        y = self.tensor(self.shapes[x])
        self.g.add_op("Clip", [x], [y], name=self._name("relu6"), min=0.0, max=6.0)
        return y

    def add(self, a, b):
        y = self.tensor(self.shapes[a])
        self.g.add_op("Add", [a, b], [y], name=self._name("add"))
        return y


def mobilenet_v2(resolution=224, width=1.0, classes=1000, batch=1, seed=0):
    """MobileNetV2 (Sandler et al. 2018) as a Graph with seeded random
    weights: 3x3 stem, 17 inverted residual blocks, 1x1 head, global
    average pool, classifier, softmax.  Every op carries the kernels'
    scratch sizes, so the graph is ready for ``plan`` and ``Executor``."""
    b = _Builder(f"mobilenet_v2_{resolution}", seed)
    x = b.tensor((batch, 3, resolution, resolution), role="input", name="input")
    c = _div8(32 * width)
    h = b.relu6(b.bn(b.conv(x, c, 3, stride=2)))
    for t, co, n, s in MOBILENET_V2_BLOCKS:
        co = _div8(co * width)
        for i in range(n):
            stride = s if i == 0 else 1
            inp = h
            ci = b.shapes[h][1]
            if t != 1:
                h = b.relu6(b.bn(b.conv(h, ci * t, 1)))
            h = b.relu6(b.bn(b.conv(h, b.shapes[h][1], 3, stride=stride,
                                    group=b.shapes[h][1])))
            h = b.bn(b.conv(h, co, 1))
            if stride == 1 and ci == co:
                h = b.add(h, inp)
    last = _div8(1280 * max(1.0, width))
    h = b.relu6(b.bn(b.conv(h, last, 1)))
    n_, c_, _, _ = b.shapes[h]
    pooled = b.tensor((n_, c_, 1, 1))
    b.g.add_op("GlobalAveragePool", [h], [pooled], name="pool")
    flat = b.tensor((n_, c_))
    b.g.add_op("Flatten", [pooled], [flat], name="flatten", axis=1)
    w = b.const("classifier.weight", b.rng.standard_normal((classes, c_)) / np.sqrt(c_))
    bias = b.const("classifier.bias", np.zeros(classes))
    logits = b.tensor((n_, classes))
    b.g.add_op("Gemm", [flat, w, bias], [logits], name="classifier", transB=1)
    prob = b.tensor((n_, classes), role="output", name="prob")
    b.g.add_op("Softmax", [logits], [prob], name="softmax", axis=1)
    g = b.g.validate()
    return set_scratch(g)
