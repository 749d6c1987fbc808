"""Real CNN topologies built in code, with real shapes (batch 1, float32).

The op sequences follow what ONNX exports of the torchvision models look
like: BatchNormalization folded into the convolutions where the original
model allows it (MobileNetV2, ResNet), kept where it cannot be folded
(DenseNet's pre-activation BN), ``Clip`` for ReLU6, ``Flatten`` + ``Gemm``
heads.  Convolutions with kernels larger than 1x1 get im2col scratch
(``Cin*kh*kw*Hout*Wout*4`` bytes); depthwise ones none.

Functions: ``mobilenet_v2()``, ``resnet(18|50)``, ``densenet121()``,
``unet()``; ``ALL`` maps names to builders.
"""
from pyarena.graph import Graph


class _Builder:
    def __init__(self, name, shape):
        self.g = Graph(name)
        self.n = 0
        self.shapes = {}
        self.x = self.tensor(shape, role="input", name="input")

    def tensor(self, shape, role="activation", name=None):
        self.n += 1
        name = name or f"t{self.n}"
        self.g.add_tensor(name, tuple(shape), role=role)
        self.shapes[name] = tuple(shape)
        return name

    def const(self, shape):
        self.n += 1
        name = f"w{self.n}"
        self.g.add_tensor(name, tuple(shape), role="constant")
        return name

    def op(self, op_type, inputs, shape, scratch=0, **attrs):
        y = self.tensor(shape)
        self.g.add_op(op_type, inputs, [y], name=f"{op_type.lower()}_{self.n}",
                      scratch_bytes=scratch, **attrs)
        return y

    def conv(self, x, cout, k=1, s=1, groups=1, act=None, bias=True):
        n, cin, h, w = self.shapes[x]
        p = k // 2
        ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        ins = [x, self.const((cout, cin // groups, k, k))]
        if bias:
            ins.append(self.const((cout,)))
        scratch = 0
        if k > 1 and groups == 1:
            scratch = cin * k * k * ho * wo * 4
        y = self.op("Conv", ins, (n, cout, ho, wo), scratch=scratch,
                    kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=groups)
        if act == "relu":
            y = self.op("Relu", [y], self.shapes[y])
        elif act == "relu6":
            y = self.op("Clip", [y, self.const(()), self.const(())], self.shapes[y])
        return y

    def bn(self, x):
        c = self.shapes[x][1]
        return self.op("BatchNormalization",
                       [x] + [self.const((c,)) for _ in range(4)], self.shapes[x])

    def relu(self, x):
        return self.op("Relu", [x], self.shapes[x])

    def add(self, a, b):
        return self.op("Add", [a, b], self.shapes[a])

    def pool(self, x, k, s, kind="MaxPool", p=None):
        n, c, h, w = self.shapes[x]
        p = k // 2 if p is None else p
        ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return self.op(kind, [x], (n, c, ho, wo), kernel_shape=[k, k], strides=[s, s])

    def concat(self, xs):
        n, _, h, w = self.shapes[xs[0]]
        return self.op("Concat", xs, (n, sum(self.shapes[t][1] for t in xs), h, w), axis=1)

    def head(self, x, classes=1000):
        n, c, _, _ = self.shapes[x]
        x = self.op("GlobalAveragePool", [x], (n, c, 1, 1))
        x = self.op("Flatten", [x], (n, c), axis=1)
        y = self.op("Gemm", [x, self.const((classes, c)), self.const((classes,))],
                    (n, classes))
        self.g.tensors[y].role = "output"
        return self.g.validate()


def mobilenet_v2(size=224):
    b = _Builder("mobilenet_v2", (1, 3, size, size))
    x = b.conv(b.x, 32, 3, 2, act="relu6")
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            h = x
            if t != 1:
                h = b.conv(h, cin * t, 1, act="relu6")
            h = b.conv(h, cin * t, 3, stride, groups=cin * t, act="relu6")
            h = b.conv(h, c, 1)
            x = b.add(x, h) if stride == 1 and cin == c else h
            cin = c
    x = b.conv(x, 1280, 1, act="relu6")
    return b.head(x)


def resnet(depth=50, size=224):
    b = _Builder(f"resnet{depth}", (1, 3, size, size))
    x = b.conv(b.x, 64, 7, 2, act="relu")
    x = b.pool(x, 3, 2)
    blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3]}[depth]
    bottleneck = depth >= 50
    cin = 64
    for stage, n in enumerate(blocks):
        width = 64 << stage
        cout = width * 4 if bottleneck else width
        for i in range(n):
            s = 2 if i == 0 and stage > 0 else 1
            if bottleneck:
                h = b.conv(x, width, 1, act="relu")
                h = b.conv(h, width, 3, s, act="relu")
                h = b.conv(h, cout, 1)
            else:
                h = b.conv(x, width, 3, s, act="relu")
                h = b.conv(h, cout, 3)
            sc = b.conv(x, cout, 1, s) if (s != 1 or cin != cout) else x
            x = b.relu(b.add(h, sc))
            cin = cout
    return b.head(x)


def densenet121(size=224, growth=32):
    b = _Builder("densenet121", (1, 3, size, size))
    x = b.conv(b.x, 64, 7, 2, act="relu")
    x = b.pool(x, 3, 2)
    for bi, n in enumerate([6, 12, 24, 16]):
        feats = [x]
        for _ in range(n):
            cat = b.concat(feats) if len(feats) > 1 else feats[0]
            h = b.relu(b.bn(cat))
            h = b.conv(h, 4 * growth, 1, bias=False)
            h = b.relu(b.bn(h))
            h = b.conv(h, growth, 3, bias=False)
            feats.append(h)
        x = b.concat(feats)
        if bi < 3:
            x = b.relu(b.bn(x))
            x = b.conv(x, b.shapes[x][1] // 2, 1, bias=False)
            x = b.pool(x, 2, 2, kind="AveragePool", p=0)
    x = b.relu(b.bn(x))
    return b.head(x)


def unet(size=256, base=32, levels=4):
    """A U-Net: long-lived skip connections concatenated on the way up."""
    b = _Builder("unet", (1, 3, size, size))
    x = b.x
    skips = []
    c = base
    for _ in range(levels):
        x = b.conv(x, c, 3, act="relu")
        x = b.conv(x, c, 3, act="relu")
        skips.append(x)
        x = b.pool(x, 2, 2, p=0)
        c *= 2
    x = b.conv(x, c, 3, act="relu")
    x = b.conv(x, c, 3, act="relu")
    for skip in reversed(skips):
        c //= 2
        n, _, h, w = b.shapes[x]
        x = b.op("ConvTranspose", [x, b.const((c * 2, c, 2, 2))], (n, c, 2 * h, 2 * w))
        x = b.concat([x, skip])
        x = b.conv(x, c, 3, act="relu")
        x = b.conv(x, c, 3, act="relu")
    y = b.conv(x, 2, 1)
    b.g.tensors[y].role = "output"
    return b.g.validate()


ALL = {
    "mobilenet_v2": mobilenet_v2,
    "resnet18": lambda: resnet(18),
    "resnet50": lambda: resnet(50),
    "densenet121": densenet121,
    "unet": unet,
}
