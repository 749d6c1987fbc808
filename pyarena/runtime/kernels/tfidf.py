"""TfIdfVectorizer on integer tokens (string tokens are refused here).

Each row's n-grams -- ``n`` tokens ``skip + 1`` apart, for every length
``min_gram_length .. max_gram_length`` and every skip ``0 ..
max_skip_count`` (a 1-gram counted once, whatever the skip), as ONNX's
reference and onnxruntime count them -- that are in the pool are counted
into the output slot ``ngram_indexes`` gives them; TF mode keeps the counts,
IDF the weight where the count is not 0, TFIDF the count times the weight.

Vectorised per (length, skip) pair -- a handful -- never per token: the
tokens become ids in the pool's vocabulary (``searchsorted``; an unknown
token gets an id no pool n-gram holds), an n-gram becomes one integer
``sum id_j * V**j``, and the row's n-gram keys are looked up among the
pool's sorted keys at once; the hits are counted by one ``bincount``.
"""
import numpy as np

from . import shape_rules as rules
from .registry import Kernel, register

__all__ = ["TfIdfVectorizer"]

MODES = ("TF", "IDF", "TFIDF")


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def tfidf_shape(n):
    x = n.s(0)
    idx = n.ints("ngram_indexes") or []
    width = max(idx) + 1 if idx else 0
    if x is None:
        return [(None, rules.FLOAT)]
    if len(x) not in (1, 2):
        raise ValueError(f"input of rank {len(x)}: TfIdfVectorizer takes [C] or [N, C]")
    return [((list(x[:1]) if len(x) == 2 else []) + [width], rules.FLOAT)]


@register
class TfIdfVectorizer(Kernel):
    op_types = ("TfIdfVectorizer",)
    family = "indexing"
    inplace = "none"
    shape_rule = tfidf_shape

    def setup(self):
        a = self.attrs
        x = self.ins[0]
        if np.dtype(x.dtype).kind not in "iu":
            self.fail(f"tokens of type {np.dtype(x.dtype).name} are not supported "
                      f"(int32 or int64)")
        if a.get("pool_strings") is not None and a.get("pool_int64s") is None:
            self.fail("pool_strings is not supported (pool_int64s)")
        self.mode = _text(a.get("mode", "TF"))
        if self.mode not in MODES:
            self.malformed(f"mode {self.mode!r} is not one of {MODES}")
        lo, hi = int(a.get("min_gram_length", 1)), int(a.get("max_gram_length", 1))
        skip = int(a.get("max_skip_count", 0))
        if not 1 <= lo <= hi or skip < 0:
            self.malformed(f"min_gram_length {lo}, max_gram_length {hi} and max_skip_count "
                           f"{skip} must satisfy 1 <= min <= max and skip >= 0")
        pool = np.asarray(a.get("pool_int64s", []), np.int64).reshape(-1)
        counts = [int(c) for c in a.get("ngram_counts", [])]
        index = np.asarray(a.get("ngram_indexes", []), np.int64).reshape(-1)
        # the pool's n-grams of each length: pool[counts[n-1]:counts[n]] in n-token rows
        bounds = counts + [pool.size]
        if counts and counts[0] != 0 or any(b1 < b0 for b0, b1 in zip(bounds, bounds[1:])) \
                or bounds[-1] > pool.size:
            self.malformed(f"ngram_counts {counts} are not ascending offsets into the pool of "
                           f"{pool.size} tokens starting at 0")
        grams, first = {}, 0
        for n in range(1, len(counts) + 1):
            seg = pool[bounds[n - 1]:bounds[n]]
            if seg.size % n:
                self.malformed(f"the pool's {n}-grams take {seg.size} tokens, not a multiple "
                               f"of {n}")
            grams[n] = (seg.reshape(-1, n), first)
            first += seg.size // n
        if first != index.size:
            self.malformed(f"the pool holds {first} n-grams but ngram_indexes has "
                           f"{index.size} entries")
        width = self.oshape()[-1] if self.outs[0].shape else 0
        if index.size and (index.min() < 0 or index.max() >= width):
            self.malformed(f"ngram_indexes {index.tolist()} reach outside the output's "
                           f"{width} values")
        w = a.get("weights")
        self.weights = None
        if w is not None:
            w = np.asarray(w, np.float32).reshape(-1)
            if w.size != index.size:
                self.malformed(f"{w.size} weights for {index.size} n-grams")
            # per output slot (slots are one n-gram each)
            slot = np.zeros(width, np.float32)
            slot[index] = w
            self.weights = self.keep(slot)
        self.vocab = np.unique(pool)
        base = self.vocab.size + 1           # ids 0 .. V-1, V: not in the pool
        # per length present: the pool's sorted n-gram keys and their slots
        self.tables = {}
        for n in range(lo, min(hi, len(counts)) + 1):
            rows, f = grams[n]
            if not rows.size:
                continue
            if base ** n >= 1 << 62:
                self.fail(f"{n}-grams over a vocabulary of {base - 1} tokens do not fit "
                          f"a 64-bit key")
            key = self._keys(np.searchsorted(self.vocab, rows), base)
            order = np.argsort(key, kind="stable")
            self.tables[n] = (key[order], index[f:f + rows.shape[0]][order])
        self.skips, self.base, self.width = skip, base, width
        xs = self.shape(0)
        if len(xs) not in (1, 2):
            self.malformed(f"input {list(xs)}: TfIdfVectorizer takes [C] or [N, C]")
        self.rows, self.cols = (1, xs[0]) if len(xs) == 1 else xs

    @staticmethod
    def _keys(ids, base):
        """One int64 per n-gram (the last axis of ``ids``)."""
        key = np.zeros(ids.shape[:-1], np.int64)
        for j in range(ids.shape[-1] - 1, -1, -1):     # (over the n-gram's tokens)
            key *= base
            key += ids[..., j]
        return key

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.rows, self.cols).astype(np.int64)
        y = ys[0].reshape(self.rows, self.width)
        v = self.vocab
        if v.size:
            ids = np.searchsorted(v, x)
            np.minimum(ids, v.size - 1, out=ids)
            ids[v[ids] != x] = v.size
        else:
            ids = np.full(x.shape, 0, np.int64)
        hits = []
        for n, (keys, slots) in self.tables.items():
            for d in range(1, (self.skips + 2) if n > 1 else 2):   # a 1-gram: once
                span = (n - 1) * d
                if span >= self.cols:
                    break
                starts = self.cols - span
                grams = np.stack([ids[:, j * d:j * d + starts] for j in range(n)], axis=-1)
                k = self._keys(grams, self.base)
                at = np.searchsorted(keys, k)
                np.minimum(at, keys.size - 1, out=at)
                found = keys[at] == k
                row = np.broadcast_to(np.arange(self.rows)[:, None], k.shape)[found]
                hits.append(row * self.width + slots[at[found]])
        flat = np.concatenate(hits) if hits else np.zeros(0, np.int64)
        counts = np.bincount(flat, minlength=self.rows * self.width)
        y.reshape(-1)[:] = counts[:self.rows * self.width]
        if self.mode == "IDF":
            np.minimum(y, 1, out=y)
        if self.mode != "TF" and self.weights is not None:
            np.multiply(y, self.weights, out=y)
