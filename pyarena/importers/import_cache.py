"""What the imports of one ONNX file for different input shapes share.

An :class:`~pyarena.InferenceSession` imports its model once per
input-shape signature.  Most of that work does not depend on the shapes,
so an :class:`ImportCache` (``load_model(..., cache=...)``) keeps it from
the first import for the next ones:

* the **parsed model**, after the shape-independent rewrites (QDQ chains
  fused, quantized LSTMs dequantized): each import works on a protobuf
  copy of it, never parses the file again, and reads the same mapped
  weight views;
* the **static values**: initializers decoded, and every node folded
  from them alone (a weight transposed, cast or dequantized, a constant
  reshape) -- not ``Shape`` / ``Size`` nor anything read from them, nor a
  node of an ``If`` branch (which branch is taken may depend on a value
  input), nor a graph input fixed by ``values=``.  A node whose inputs are
  all static is folded once and its result reused by name;
* the **fused biases** (:func:`pyarena.runtime.fuse`'s ``memo``): a batch
  norm folded into the same arrays is not computed again (the weights
  themselves stay the file's: their kernels fold them as they lay them out).

After the first signature's executor has put the constants in the shared
weights arena, :meth:`ImportCache.remember` swaps the cached values for
those arena copies, so later imports hand the very same arrays to their
graphs: no weight is copied, compared or stored again for a new shape.
"""

__all__ = ["ImportCache"]


class ImportCache:
    """See the module docstring.  Built empty; filled by the first import."""

    def __init__(self):
        self.parsed = None      # (rewritten ModelProto, mapped views, initializer names)
        self.reduced = None     # the same model without its static nodes
        self.values = {}        # static tensor name -> value
        self.folded = set()     # first output of each static node folded
        self.fused = {}         # fuse()'s memo
        self._kept = {}         # id -> array: values already in the shared arena
        self._attrs = {}        # (op type, outputs) -> attributes decoded
        #: the last import's constants that are not static (computed from
        #: the input shapes or values): a retargeted graph computes them again
        self.derived = frozenset()

    def static_node(self, n, static, unstable):
        """Whether node ``n`` computes from static values only (its result
        is the same for every input shape)."""
        if n.op_type in ("Shape", "Size") or any(o in unstable for o in n.output):
            return False
        return all(i in static for i in n.input if i)

    def lookup(self, n):
        """The cached outputs of static node ``n``, or None."""
        if not n.output or n.output[0] not in self.folded:
            return None
        return [self.values.get(o) if o else None for o in n.output]

    def store(self, n, res):
        for name, v in zip(n.output, res):
            if name:
                self.values[name] = v
        if n.output:
            self.folded.add(n.output[0])

    def reduce(self, onnx, named):
        """After the first import: the parsed model without the nodes folded
        as static (their values are in ``values``), for the next imports.
        ``named``: the first import's copy of the model, whose nodes the
        import named (``Conv_12``): the kept nodes keep those names."""
        model = onnx.ModelProto()
        model.CopyFrom(self.parsed[0])
        nodes, done = model.graph.node, named.graph.node
        if len(nodes) == len(done) and all(a.op_type == b.op_type and a.output == b.output
                                           for a, b in zip(nodes, done)):
            for a, b in zip(nodes, done):
                a.name = b.name
        keep = [n for n in nodes if not (n.output and n.output[0] in self.folded)]
        del model.graph.node[:]
        model.graph.node.extend(keep)
        self.reduced = model

    def attrs(self, decode, node, outputs=None):
        """``decode(node)`` (a fresh dict), decoded once per node of the
        model (by type and outputs: unique in a graph; ``outputs``:
        ``node.output`` read already, if given)."""
        key = (node.op_type, tuple(node.output if outputs is None else outputs))
        a = self._attrs.get(key)
        if a is None:
            a = self._attrs[key] = decode(node)
        return dict(a)

    def is_kept(self, v):
        """Whether ``v`` is one of the shared arena's arrays (given as is)."""
        return self._kept.get(id(v)) is v

    def remember(self, graph, owns):
        """After the first executor: the cached values of ``graph``'s
        constants become the arrays it placed (``owns(array)``: in the
        shared weights arena)."""
        for name, t in graph.tensors.items():
            old = self.values.get(name)
            if t.role != "constant" or old is None or t.data is old or t.data is None:
                continue
            if getattr(t.data, "shape", None) == getattr(old, "shape", None) and owns(t.data):
                self.values[name] = t.data
                self._kept[id(t.data)] = t.data
