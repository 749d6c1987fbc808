"""Random graphs for the planner tests, and a tiny NumPy executor.

``random_graph(rng)`` builds small CNN-like graphs mixing chains,
branches, residual adds, concats, scratch, reshape/transpose views,
broadcast binaries, multi-output ops and dead-end tensors.
``run_reference(graph, feeds)`` evaluates it with fresh arrays;
``run_planned(plan, feeds)`` evaluates it with every tensor living in the
plan's arena views (scratch filled with garbage while its op runs), so a
plan that lets a tensor be overwritten too early gives different outputs.
``branches()``: two wide branches concatenated (the budget tests' graph).
"""
import numpy as np

from pyarena.graph import Graph


def random_graph(rng, max_ops=14, dtype_mix=False):
    """A valid random Graph (constants carry data)."""
    specs = {}            # name -> (shape, dtype, role, data)
    ops = []              # (type, inputs, outputs, scratch, attrs)
    avail = []            # activation/input names that ops may read
    counter = [0]

    def new(shape, dtype="float32", role="activation", data=None):
        counter[0] += 1
        name = f"t{counter[0]}"
        specs[name] = [tuple(shape), dtype, role, data]
        return name

    def const(shape):
        counter[0] += 1
        name = f"k{counter[0]}"
        specs[name] = [tuple(shape), "float32", "constant",
                       (rng.random() + 0.5) * np.ones(shape, np.float32)]
        return name

    for _ in range(rng.randint(1, 2)):
        c = rng.choice([1, 2, 3])
        avail.append(new((1, c, rng.choice([1, 2, 4]), rng.choice([2, 3])), role="input"))
    n_ops = rng.randint(1, max_ops)
    for _ in range(n_ops):
        x = rng.choice(avail)
        shape, dt = specs[x][0], specs[x][1]
        kind = rng.choice(["conv", "relu", "sigmoid", "add", "add", "bcast", "concat",
                           "reshape", "transpose", "identity", "bn", "split", "cast",
                           "mulself", "conv"])
        if len(shape) != 4 and kind in ("conv", "bcast", "concat", "bn", "split"):
            kind = "relu"
        if dt != "float32" and kind not in ("relu", "identity", "reshape", "cast"):
            kind = "cast"
        if kind == "conv":
            co = rng.choice([1, 2, 3, 4])
            w = const((co, shape[1]))
            y = new((shape[0], co) + shape[2:])
            ops.append(("Conv", [x, w], [y], rng.choice([0, 0, 16, 100]), {}))
        elif kind in ("relu", "sigmoid", "identity"):
            y = new(shape, dt)
            ops.append(({"relu": "Relu", "sigmoid": "Sigmoid",
                         "identity": "Identity"}[kind], [x], [y], 0, {}))
        elif kind == "add":
            same = [a for a in avail if specs[a][0] == shape and specs[a][1] == dt]
            other = rng.choice(same)
            y = new(shape, dt)
            ops.append(("Add", [x, other] if rng.random() < 0.5 else [other, x], [y], 0, {}))
        elif kind == "mulself":
            y = new(shape, dt)
            ops.append(("Mul", [x, x], [y], 0, {}))
        elif kind == "bcast":
            small = [a for a in avail if specs[a][0] == (1, shape[1], 1, 1)]
            b = rng.choice(small) if small and rng.random() < 0.7 else const((1, shape[1], 1, 1))
            y = new(shape, dt)
            ops.append(("Add" if rng.random() < 0.5 else "Mul",
                        [b, x] if rng.random() < 0.5 else [x, b], [y], 0, {}))
        elif kind == "concat":
            same = [a for a in avail if len(specs[a][0]) == 4 and specs[a][0][0] == shape[0]
                    and specs[a][0][2:] == shape[2:] and specs[a][1] == dt]
            parts = [x] + [rng.choice(same) for _ in range(rng.randint(1, 2))]
            y = new((shape[0], sum(specs[p][0][1] for p in parts)) + shape[2:])
            ops.append(("Concat", parts, [y], 0, {"axis": 1}))
        elif kind == "reshape":
            y = new((1, int(np.prod(shape))), dt)
            ops.append(("Reshape" if rng.random() < 0.5 else "Flatten", [x], [y], 0, {}))
        elif kind == "transpose":
            perm = list(range(len(shape)))
            rng.shuffle(perm)
            y = new(tuple(shape[p] for p in perm), dt)
            ops.append(("Transpose", [x], [y], 0, {"perm": perm}))
        elif kind == "bn":
            c = shape[1]
            y = new(shape)
            ops.append(("BatchNormalization", [x, const((c,)), const((c,))], [y], 0, {}))
        elif kind == "split":
            c = shape[1]
            if c < 2:
                y = new(shape)
                ops.append(("Relu", [x], [y], 0, {}))
            else:
                a = new((shape[0], c // 2) + shape[2:])
                b = new((shape[0], c - c // 2) + shape[2:])
                ops.append(("Split", [x], [a, b], 0, {"split_at": c // 2}))
                avail.append(a)
                avail.append(b)
                continue
        elif kind == "cast":
            to = "float32" if dt != "float32" else ("float64" if dtype_mix else "float32")
            y = new(shape, to)
            ops.append(("Cast", [x], [y], 0, {"to": to}))
        avail.append(y)
        if rng.random() < 0.15 and len(avail) > 2:
            avail.remove(rng.choice(avail[:-1]))   # a dead end or a finished branch
    # outputs: the last tensor produced, maybe one more
    produced = [o for op in ops for o in op[2]]
    outs = {produced[-1]}
    if len(produced) > 2 and rng.random() < 0.5:
        outs.add(rng.choice(produced[:-1]))
    for o in outs:
        specs[o][2] = "output"
    g = Graph(f"rand{rng.randint(0, 10**6)}")
    for name, (shape, dtype, role, data) in specs.items():
        g.add_tensor(name, shape, dtype, role=role, data=data)
    for i, (t, ins, outs_, scratch, attrs) in enumerate(ops):
        g.add_op(t, ins, outs_, name=f"op{i}_{t}", scratch_bytes=scratch, **attrs)
    return g.validate()


def _eval(op, args, g):
    t = op.op_type
    if t == "Conv":
        return [np.einsum("oc,nchw->nohw", args[1], args[0])]
    if t == "Relu":
        return [np.maximum(args[0], 0)]
    if t == "Sigmoid":
        return [1 / (1 + np.exp(-args[0]))]
    if t == "Identity":
        return [args[0].copy()]
    if t == "Add":
        return [args[0] + args[1]]
    if t == "Mul":
        return [args[0] * args[1]]
    if t == "Concat":
        return [np.concatenate(args, axis=op.attrs["axis"])]
    if t in ("Reshape", "Flatten"):
        return [args[0].reshape(g.tensors[op.outputs[0]].shape)]
    if t == "Transpose":
        return [np.transpose(args[0], op.attrs["perm"])]
    if t == "BatchNormalization":
        s = args[1].reshape(1, -1, 1, 1)
        b = args[2].reshape(1, -1, 1, 1)
        return [args[0] * s + b]
    if t == "Split":
        k = op.attrs["split_at"]
        return [args[0][:, :k], args[0][:, k:]]
    if t == "Cast":
        return [args[0].astype(op.attrs["to"])]
    raise AssertionError(f"no reference for {t}")


def feeds_for(graph, seed=0):
    r = np.random.default_rng(seed)
    return {n: r.standard_normal(graph.tensors[n].shape).astype(graph.tensors[n].dtype)
            for n in graph.inputs}


def run_reference(graph, feeds):
    env = dict(feeds)
    for name, t in graph.tensors.items():
        if t.role == "constant":
            env[name] = t.data
    for op in graph.ops:
        res = _eval(op, [env[i] for i in op.inputs], graph)
        for name, r in zip(op.outputs, res):
            env[name] = r
    return {o: env[o] for o in graph.outputs}


def run_planned(plan, feeds, seed=1):
    """Evaluate the plan's graph with every tensor in the arena views."""
    graph = plan.graph
    views = plan.bind(np.zeros(plan.arena_bytes + plan.alignment, np.uint8))
    junk = np.random.default_rng(seed)
    for name, v in feeds.items():
        views[name][...] = v
    consts = {n: t.data for n, t in graph.tensors.items() if t.role == "constant"}
    for op in graph.ops:
        args = [consts[i] if i in consts else views[i] for i in op.inputs]
        res = _eval(op, args, graph)
        if op.name in plan.scratch:     # an op may scribble over its scratch
            s = views[op.name + "::scratch"]
            s[...] = junk.integers(0, 256, s.shape, dtype=np.uint8)
        for name, r in zip(op.outputs, res):
            views[name][...] = r
    return {o: views[o].copy() for o in graph.outputs}


def branches(scratch_budget=None):
    """x -> wide a -> narrow a2 and x -> wide b -> narrow b2, concatenated;
    built so that both wide tensors are live at once in the given order
    (scheduling one branch first helps), NumPy paths only (the 3x3 convs'
    im2col scratch follows the scratch budget)."""
    from pyarena import GraphBuilder
    from pyarena.runtime import set_scratch
    b = GraphBuilder("branches", seed=1)
    x = b.input((1, 4, 16, 16))
    a, c = b.conv(x, 64, 1), b.conv(x, 64, 1)
    a2, c2 = b.conv(a, 4, 3), b.conv(c, 4, 3)
    return set_scratch(b.finish([b.concat([a2, c2])]), scratch_budget, native=False)
