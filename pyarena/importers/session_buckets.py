"""Bucketed plans: one plan per bucket of input lengths, not one per length.

``InferenceSession(path, buckets="pow2")`` is for a model whose dynamic
input dimensions are a sequence length (or batch x sequence): fed lengths
1..512 in any order, a plain session imports, plans and binds every new
length (and, past ``max_plans``, evicts).  With buckets, each length is
rounded up to its bucket and the model is planned once per bucket, with
the bucket's shapes (at most :data:`MAX_BUCKET_PLANS` kept; the session's
``max_shapes`` bounds the input shapes kept bound, each some 300 KiB of
graph, kernels and views for a 4-layer encoder); a run of length L keeps what it needs per shape --
the model's graph at L (retargeted, :mod:`.retarget`: shape arithmetic
folded at L) and its kernels -- but takes its offsets from the bucket's
plan (:func:`pyarena.planning.buckets.rebind`), so the kernels run at the
real shapes and the outputs are those of an unbucketed run, bit for bit.
The session's one activation block grows to the largest bucket seen.

The option (:func:`bucket_policy`):

* ``None`` (the default): off -- one plan per input shape, as before.
  Buckets cost memory (a length just past a power of two runs in an arena
  planned for nearly twice its tensors), so they are asked for;
* ``"pow2"``: every dimension the model declares symbolic (a name or
  unknown) is rounded up to a power of two: lengths 1..512 make 10
  buckets per symbolic dimension;
* ``"pow2/N"`` (N a power of two, 2 or more): N buckets per octave, evenly
  spaced (``"pow2/4"``: 8 10 12 14 16 20 24 28 32 40 ...; lengths up to 2N
  are their own): a tensor quadratic in the length (attention scores) is
  then at most 1.25^2 times its size at L, not 4 times as with ``"pow2"``,
  for four times as many buckets;
* a sequence of increasing positive ints, the bucket bounds: a length is
  rounded up to the first bound not below it; a length past the last
  bound is planned exactly.

Anything else is refused (InvalidArgumentError), as are buckets on a
compiled model (its plans are made) or with a ``memory_budget`` (the
budget search may rewrite the graph, which then differs at each length).

Where a bucket's plan does not hold at L -- a tensor or scratch larger at
L than at the bucket, as for an op whose size is not monotone in the
length; a bucket the model cannot be imported at -- L is planned exactly,
as without buckets, and counted (``memory_info()["exact_plans"]``).  A
bucket plan keeps Concat inputs out of their slices of the output
(``inplace_concat=False``): where a slice starts depends on the length.
An op whose scratch the bucket plan narrowed to fit its slack
(:func:`~pyarena.runtime.slack.plan_in_slack`) gets at L the bucket's
scratch buffer as its budget.  Its kernel then works in bands of another
width than an unbucketed session's (whose plan narrows at L's own
slack), and where the band width changes the blocking of a sum (an
im2col Conv) the outputs may differ from that session's in float
rounding; they are bit for bit the same where no scratch was narrowed
(the encoders of the tests: MatMul, Softmax, LayerNormalization).
"""
from collections import OrderedDict
from collections.abc import Sequence

from ..errors import InvalidArgumentError, PyArenaError
from ..planning.buckets import rebind
from ..runtime.kernels.registry import scratch_bytes_for

__all__ = ["bucket_policy", "BucketPlans", "MAX_BUCKET_PLANS"]

#: bucket plans a session keeps (least recently used first): "pow2/4" over
#: lengths 1..512 makes 32 buckets
MAX_BUCKET_PLANS = 64


def _pow2(n):
    """The power of two not below ``n`` (0 stays 0: an empty length)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def _octave_steps(steps):
    """``n`` rounded up to one of ``steps`` (a power of two) evenly spaced
    bounds between consecutive powers of two: with 4, 8 10 12 14 16 20 24
    28 32 40 ...; lengths up to ``2 * steps`` stay as they are."""
    shift = steps.bit_length() - 1

    def round_up(n):
        if n <= 2 * steps:
            return n
        step = 1 << ((n - 1).bit_length() - 1 - shift)    # the octave's length / steps
        return -(-n // step) * step
    return round_up


_HOW = "None, 'pow2', 'pow2/N' (N a power of two) or increasing lengths such as [16, 64, 256]"


def bucket_policy(buckets):
    """The rounding of ``buckets`` (a function of one length, None for a
    length planned exactly), or None when bucketing is off (module
    docstring); InvalidArgumentError for anything else."""
    if buckets is None:
        return None
    if isinstance(buckets, str):
        if buckets == "pow2":
            return _pow2
        head, _, steps = buckets.partition("/")
        if head == "pow2" and steps.isdigit() and int(steps) >= 2 and \
                int(steps) & (int(steps) - 1) == 0:
            return _octave_steps(int(steps))
        raise InvalidArgumentError(f"buckets must be {_HOW}, not {buckets!r}")
    if not isinstance(buckets, Sequence) or isinstance(buckets, bytes):
        raise InvalidArgumentError(f"buckets must be {_HOW}, not {type(buckets).__name__} "
                                   f"{buckets!r:.60}")
    bounds = list(buckets)
    if not bounds or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                         for b in bounds):
        raise InvalidArgumentError(f"buckets must list positive int lengths, not {bounds!r:.60}")
    if any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise InvalidArgumentError(f"buckets must be increasing, not {bounds!r:.60}")

    def round_up(n):
        return next((b for b in bounds if b >= n), None)
    return round_up


class BucketPlans:
    """One session's bucket plans (least recently used first, at most
    ``max_plans``) and what became of the lengths planned through them."""

    def __init__(self, policy, inputs, max_plans=MAX_BUCKET_PLANS):
        self.policy, self.max_plans = policy, max_plans
        # input name -> (its declared rank, the axes it declares symbolic)
        self.axes = {a.name: (len(a.shape), tuple(i for i, d in enumerate(a.shape)
                                                  if not isinstance(d, int)))
                     for a in inputs if a.shape is not None}
        self.plans = OrderedDict()  # bucket key -> its Plan, or None (cannot be planned)
        self.rebound = 0            # lengths run with a bucket's offsets
        self.exact = 0              # lengths a bucket's plan did not hold for

    def bucket(self, shapes):
        """The bucket of ``shapes`` (input name -> dims) as input name ->
        dims, or None when one of its lengths is past the bounds."""
        out = {}
        for name, dims in shapes.items():
            rank, axes = self.axes.get(name, (None, ()))
            dims = list(dims)
            if rank != len(dims):
                axes = ()           # not the rank declared: fed as it is
            for i in axes:
                b = self.policy(int(dims[i]))
                if b is None:
                    return None
                dims[i] = b
            out[name] = tuple(dims)
        return out

    def plan(self, graph, shapes, plan_at):
        """The plan of ``graph`` (the model at ``shapes``) from its bucket's
        plan, or None when it must be planned exactly.  ``plan_at(bucket,
        same)`` plans the model at the ``bucket``'s shapes (``same``: they
        are ``shapes``, plan ``graph`` itself), once per bucket; its
        errors (a bucket the model cannot take) make that bucket exact."""
        bucket = self.bucket(shapes)
        if bucket is None:
            self.exact += 1
            return None
        key = tuple(sorted(bucket.items()))
        if key in self.plans:
            self.plans.move_to_end(key)
            base = self.plans[key]
        else:
            try:
                base = plan_at(bucket, bucket == {k: tuple(v) for k, v in shapes.items()})
            except PyArenaError:
                base = None
            self.plans[key] = base
            while len(self.plans) > self.max_plans:
                self.plans.popitem(last=False)
        if base is None:
            self.exact += 1
            return None
        if base.graph is graph:
            self.rebound += 1
            return base
        # an op the bucket's plan narrowed gets, at L, its scratch buffer there
        # as budget (the bucket's own budget could pick wider bands at L)
        narrowed = (getattr(base, "slack", None) or {}).get("narrowed", {})
        kept = _narrow(graph, {op: base.scratch[op].size for op in narrowed
                               if op in base.scratch})
        p, _ = rebind(base, graph)
        if p is None:
            _narrow(graph, kept)        # as planned without the bucket
            self.exact += 1
            return None
        self.rebound += 1
        return p

    def info(self):
        """What ``memory_info()`` adds: ``bucket_plans`` (cached),
        ``rebound`` (lengths run with a bucket's offsets) and
        ``exact_plans`` (lengths planned exactly instead)."""
        return {"bucket_plans": sum(p is not None for p in self.plans.values()),
                "rebound": self.rebound, "exact_plans": self.exact}


def _narrow(graph, budgets):
    """Give ``graph``'s ops the scratch budgets ``budgets`` (op name ->
    bytes or None) and their scratch sizes for them; returns the budgets
    they had."""
    had = {}
    if not budgets:
        return had
    for op in graph.ops:
        if op.name in budgets:
            had[op.name] = op.notes.scratch_budget
            op.notes.scratch_budget = budgets[op.name]
            op.scratch_bytes = scratch_bytes_for(graph, op)
    return had
