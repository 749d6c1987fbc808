"""TfIdfVectorizer on integer tokens (string tokens are refused here).

Each row's n-grams -- ``n`` tokens ``skip + 1`` apart, for every length
``min_gram_length .. max_gram_length`` and every skip ``0 ..
max_skip_count`` (a 1-gram counted once, whatever the skip), as ONNX's
reference and onnxruntime count them -- that are in the pool are counted
into the output slot ``ngram_indexes`` gives them; TF mode keeps the counts,
IDF the weight where the count is not 0, TFIDF the count times the weight.

Vectorised per (length, skip) pair -- a handful -- never per token: the
tokens become ids in the pool's vocabulary (an unknown token gets an id no
pool n-gram holds), an n-gram becomes one integer ``sum id_j * V**j``, and
the n-gram keys of every row are looked up at once -- in dense tables
when the pool's token range and key count are small, else by
``searchsorted`` among the sorted ones; the hits are counted by one
``bincount`` per pair.
"""
import numpy as np

from . import shape_rules as rules
from .registry import Kernel, register

__all__ = ["TfIdfVectorizer"]

MODES = ("TF", "IDF", "TFIDF")
#: the largest token range / n-gram key count looked up in a dense table
#: (an array index); beyond it, ``searchsorted`` over the sorted pool
DENSE = 1 << 16


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
        grams, width = self._pool(pool, counts, index)
        self._lookups(pool, grams, index, range(lo, min(hi, len(counts)) + 1), width)
        self.skips, self.width = skip, width
        xs = self.shape(0)
        if len(xs) not in (1, 2):
            self.malformed(f"input {list(xs)}: TfIdfVectorizer takes [C] or [N, C]")
        self.rows, self.cols = (1, xs[0]) if len(xs) == 1 else xs

    def _pool(self, pool, counts, index):
        """The pool's n-grams per length, {n: (rows of n tokens, the index
        of the first in ngram_indexes)}, checked against the indexes and
        the weights (kept per output slot), and the output's width."""
        a = self.attrs
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
        return grams, width

    def _lookups(self, pool, grams, index, lengths, width):
        """Token -> id, and per n-gram length asked for, key -> slot."""
        self.vocab = np.unique(pool)
        base = self.vocab.size + 1           # ids 0 .. V-1, V: not in the pool
        # token -> id: a dense table over the pool's range when it is small
        self.lut = None
        if self.vocab.size and int(self.vocab[-1]) - int(self.vocab[0]) < DENSE:
            # entry t - lo + 1 for token t; the first and the last: below
            # and above the pool's range (a token is clipped onto them)
            self.lo = int(self.vocab[0])
            self.lut = np.full(int(self.vocab[-1]) - self.lo + 3, self.vocab.size, np.int64)
            self.lut[self.vocab - self.lo + 1] = np.arange(self.vocab.size)
        # per length present: n-gram key -> output slot, a dense table (slot
        # ``width``, one past the output's: not in the pool) when the keys
        # are few, else sorted keys and slots
        self.tables = {}
        for n in lengths:
            rows, f = grams[n]
            if not rows.size:
                continue
            if base ** n >= 1 << 62:
                self.fail(f"{n}-grams over a vocabulary of {base - 1} tokens do not fit "
                          f"a 64-bit key")
            key = self._keys(np.searchsorted(self.vocab, rows), base)
            slots = index[f:f + rows.shape[0]]
            if base ** n <= DENSE:
                dense = np.full(base ** n, width, np.int64)     # width: no slot
                dense[key] = slots
                self.tables[n] = (dense, None)
            else:
                order = np.argsort(key, kind="stable")
                self.tables[n] = (key[order], slots[order])
        self.base = base

    @staticmethod
    def _keys(ids, base):
        """One int64 per n-gram (the last axis of ``ids``)."""
        key = np.zeros(ids.shape[:-1], np.int64)
        for j in range(ids.shape[-1] - 1, -1, -1):     # (over the n-gram's tokens)
            key *= base
            key += ids[..., j]
        return key

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.rows, self.cols)
        y = ys[0].reshape(self.rows, self.width)
        v = self.vocab
        if self.lut is not None:
            at = x.astype(np.int64)
            at -= self.lo - 1
            np.clip(at, 0, self.lut.size - 1, out=at)
            ids = np.take(self.lut, at)
        elif v.size:
            ids = np.searchsorted(v, x)
            np.minimum(ids, v.size - 1, out=ids)
            ids[v[ids] != x] = v.size
        else:
            ids = np.zeros(x.shape, np.int64)
        # each (row, slot) counted at row * (width + 1) + slot; slot width:
        # an n-gram not in the pool, dropped at the end
        wide = self.width + 1
        first = (np.arange(self.rows) * wide)[:, None]
        counts = np.zeros(self.rows * wide, np.int64)
        for n, (keys, slots) in self.tables.items():
            for d in range(1, (self.skips + 2) if n > 1 else 2):   # a 1-gram: once
                span = (n - 1) * d
                if span >= self.cols:
                    break
                starts = self.cols - span
                k = ids[:, :starts].copy()
                for j in range(1, n):                   # (the n-gram's tokens)
                    k += ids[:, j * d:j * d + starts] * self.base ** j
                if slots is None:                       # a dense table
                    s = np.take(keys, k)
                else:
                    at = np.searchsorted(keys, k)
                    np.minimum(at, keys.size - 1, out=at)
                    s = np.where(keys[at] == k, slots[at], self.width)
                if self.rows > 1:
                    s += first
                counts += np.bincount(s.reshape(-1), minlength=counts.size)
        np.copyto(y, counts.reshape(self.rows, wide)[:, :self.width], casting="unsafe")
        if self.mode == "IDF":
            np.minimum(y, 1, out=y)
        if self.mode != "TF" and self.weights is not None:
            np.multiply(y, self.weights, out=y)
