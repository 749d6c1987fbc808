"""Built-in networks, made in code (no download, no optional dependency)
with :class:`~pyarena.graph.GraphBuilder` and seeded random weights, every
op's scratch filled from the kernels' rules -- ready for ``plan`` and
:class:`~pyarena.runtime.Executor`:

* ``mobilenet_v2`` -- inverted residual blocks, depthwise convolutions,
  ReLU6, BatchNorm, residual adds (``pyarena demo`` runs it);
* ``resnet(18 | 34 | 50)`` -- BatchNorm folded into biased convolutions,
  bottlenecks from 50 on;
* ``densenet121`` -- dense blocks of pre-activation BN + concatenations;
* ``unet`` -- long-lived skip connections concatenated on the way up;
* ``randwire`` -- randomly wired stages (Xie et al. 2019): an irregular
  graph, the kind memory-aware scheduling is for.

:data:`MODELS` maps names to builders (the tests and benchmarks use it).
"""
from ..errors import InvalidArgumentError
from ..graph import GraphBuilder
from .kernels import set_scratch

__all__ = ["mobilenet_v2", "resnet", "densenet121", "unet", "randwire", "ws_dag", "MODELS",
           "MOBILENET_V2_BLOCKS"]

# (expansion t, output channels c, repeats n, first stride s)
MOBILENET_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _div8(v):
    return max(8, int(v + 4) // 8 * 8)


def mobilenet_v2(resolution=224, width=1.0, classes=1000, batch=1, seed=0,
                 scratch_budget=None):
    """MobileNetV2 (Sandler et al. 2018) as a Graph with seeded random
    weights: 3x3 stem, 17 inverted residual blocks, 1x1 head, global
    average pool, classifier, softmax.  Every op carries the kernels'
    scratch sizes, so the graph is ready for ``plan`` and ``Executor``."""
    b = GraphBuilder(f"mobilenet_v2_{resolution}", seed)
    x = b.input((batch, 3, resolution, resolution))
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
    b.classifier(h, classes)
    return set_scratch(b.finish(), scratch_budget)


def resnet(depth=50, resolution=224, classes=1000, seed=0, scratch_budget=None):
    """ResNet-18/34/50 (He et al. 2016) with BatchNorm folded into the
    convolutions (what ONNX exports of inference models look like)."""
    blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3]}
    if depth not in blocks:
        raise InvalidArgumentError(f"depth must be one of {sorted(blocks)}, not {depth!r}")
    b = GraphBuilder(f"resnet{depth}", seed)
    x = b.relu(b.conv(b.input((1, 3, resolution, resolution)), 64, 7, 2, bias=True))
    x = b.pool(x, 3, 2)
    bottleneck = depth >= 50
    cin = 64
    for stage, n in enumerate(blocks[depth]):
        width = 64 << stage
        cout = width * 4 if bottleneck else width
        for i in range(n):
            s = 2 if i == 0 and stage > 0 else 1
            if bottleneck:
                h = b.relu(b.conv(x, width, 1, bias=True))
                h = b.relu(b.conv(h, width, 3, s, bias=True))
                h = b.conv(h, cout, 1, bias=True)
            else:
                h = b.relu(b.conv(x, width, 3, s, bias=True))
                h = b.conv(h, cout, 3, bias=True)
            sc = b.conv(x, cout, 1, s, bias=True) if (s != 1 or cin != cout) else x
            x = b.relu(b.add(h, sc))
            cin = cout
    b.classifier(x, classes, softmax=False, output="logits")
    return set_scratch(b.finish(), scratch_budget)


def densenet121(resolution=224, growth=32, classes=1000, seed=0, scratch_budget=None):
    """DenseNet-121 (Huang et al. 2017): every layer reads the concatenation
    of all earlier ones in its block."""
    b = GraphBuilder("densenet121", seed)
    x = b.relu(b.conv(b.input((1, 3, resolution, resolution)), 64, 7, 2, bias=True))
    x = b.pool(x, 3, 2)
    for bi, n in enumerate([6, 12, 24, 16]):
        feats = [x]
        for _ in range(n):
            cat = b.concat(feats) if len(feats) > 1 else feats[0]
            h = b.conv(b.relu(b.bn(cat)), 4 * growth, 1)
            h = b.conv(b.relu(b.bn(h)), growth, 3)
            feats.append(h)
        x = b.concat(feats)
        if bi < 3:
            x = b.conv(b.relu(b.bn(x)), b.shapes[x][1] // 2, 1)
            x = b.pool(x, 2, 2, kind="AveragePool", pad=0)
    b.classifier(b.relu(b.bn(x)), classes, softmax=False, output="logits")
    return set_scratch(b.finish(), scratch_budget)


def unet(resolution=256, base=32, levels=4, seed=0, scratch_budget=None):
    """A U-Net (Ronneberger et al. 2015): skip connections that live across
    the whole network, concatenated on the way up."""
    b = GraphBuilder("unet", seed)
    x = b.input((1, 3, resolution, resolution))
    skips = []
    c = base
    for _ in range(levels):
        x = b.relu(b.conv(b.relu(b.conv(x, c, 3, bias=True)), c, 3, bias=True))
        skips.append(x)
        x = b.pool(x, 2, 2, pad=0)
        c *= 2
    x = b.relu(b.conv(b.relu(b.conv(x, c, 3, bias=True)), c, 3, bias=True))
    for skip in reversed(skips):
        c //= 2
        x = b.concat([b.conv_transpose(x, c), skip])
        x = b.relu(b.conv(b.relu(b.conv(x, c, 3, bias=True)), c, 3, bias=True))
    y = b.conv(x, 2, 1, bias=True)
    return set_scratch(b.finish([y]), scratch_budget)


def ws_dag(n, k, p, rng):
    """A Watts-Strogatz graph WS(n, k, p) as a DAG (Xie et al. 2019): a ring
    of ``n`` nodes each joined to its ``k / 2`` next neighbours, each such
    edge rewired with probability ``p`` to a random node not yet joined,
    every edge pointing from the lower index to the higher.  Returns the
    sorted edge list."""
    edges = {(i, (i + j) % n) for i in range(n) for j in range(1, k // 2 + 1)}
    for j in range(1, k // 2 + 1):
        for i in range(n):
            e = (i, (i + j) % n)
            if e not in edges or rng.random() >= p:
                continue
            free = [m for m in range(n)
                    if m != i and (i, m) not in edges and (m, i) not in edges]
            if free:
                edges.discard(e)
                edges.add((i, free[int(rng.integers(len(free)))]))
    return sorted({(min(a, b), max(a, b)) for a, b in edges})


def _randwire_stage(b, x, c, nodes, k, p):
    """One randomly wired stage: each node sums its predecessors' outputs
    (the stage input, at stride 2, for a node without any), then ReLU, a
    3x3 depthwise and a 1x1 convolution to ``c`` channels and BatchNorm;
    the stage output sums the nodes without successors."""
    edges = ws_dag(nodes, k, p, b.rng)
    preds = {i: [a for a, z in edges if z == i] for i in range(nodes)}
    has_succ = {a for a, _ in edges}
    out = {}
    for i in range(nodes):
        if preds[i]:
            h = out[preds[i][0]]
            for a in preds[i][1:]:
                h = b.add(h, out[a])
            stride = 1
        else:
            h, stride = x, 2
        h = b.relu(h)
        h = b.conv(h, b.shapes[h][1], 3, stride, group=b.shapes[h][1])
        out[i] = b.bn(b.conv(h, c, 1))
    ends = [out[i] for i in range(nodes) if i not in has_succ]
    y = ends[0]
    for e in ends[1:]:
        y = b.add(y, e)
    return y


def randwire(resolution=224, channels=78, nodes=32, k=4, p=0.75, classes=1000, seed=0,
             scratch_budget=None):
    """RandWire-WS, the small regime of Xie et al. 2019 (the irregular
    networks Serenity schedules): a 3x3 stride-2 stem, then four randomly
    wired stages of ``nodes`` nodes (the first with half as many) at
    ``channels`` x 1, 2, 4, 8, each halving the resolution, and a
    classifier.  Each stage draws its own WS(nodes, k, p) graph."""
    b = GraphBuilder("randwire", seed)
    x = b.bn(b.conv(b.input((1, 3, resolution, resolution)), channels // 2, 3, 2))
    for i, mult in enumerate([1, 2, 4, 8]):
        x = _randwire_stage(b, x, channels * mult, nodes // 2 if i == 0 else nodes, k, p)
    x = b.relu(b.bn(b.conv(b.relu(x), 1280, 1)))
    b.classifier(x, classes, softmax=False, output="logits")
    return set_scratch(b.finish(), scratch_budget)


#: name -> builder with default arguments
MODELS = {
    "mobilenet_v2": mobilenet_v2,
    "resnet18": lambda **kw: resnet(18, **kw),
    "resnet50": lambda **kw: resnet(50, **kw),
    "densenet121": densenet121,
    "unet": unet,
    "randwire": randwire,
}
