"""String kernels: StringConcat, StringSplit, StringNormalizer,
RegexFullMatch, and ai.onnx.ml's LabelEncoder.

A string tensor lives outside the arena (``Tensor.host == "string"``): a
NumPy object array of Python ``str``, held aside by the executor with the
pool tensors (runtime/dynamic.py).  Every op reading one is a pool op: its
kernel is built at run time, and ``produce`` returns its string outputs as
new object arrays and writes its numeric ones (StringSplit's lengths,
RegexFullMatch's matches, LabelEncoder's codes) into their planned views,
or into pool arrays when their size follows the data.  Equal on strings is
the numeric Compare kernel: ``np.equal`` compares object arrays too.

What NumPy does element-wise it does here: the concatenation is one
``np.add`` over broadcast object arrays, case changes ``np.strings``,
stopwords ``np.isin``, LabelEncoder a ``searchsorted`` into its sorted keys.
Splitting and matching a regular expression have no vectorised form in
NumPy: they loop over the strings in Python (tests/runtime/test_kernel_cliffs.py
declares them).  RegexFullMatch uses Python's ``re`` where onnxruntime uses
RE2: the two agree on the common syntax (classes, groups, alternation,
anchors, counted repetition); RE2 has no backreferences or lookarounds.
"""
import re

import numpy as np

from .held import HeldValues
from .registry import register

__all__ = ["StringConcat", "StringSplit", "StringNormalizer", "RegexFullMatch",
           "LabelEncoder"]


def _strings(shape, values=None):
    """An object array of ``shape`` (of ``values``, flat, when given)."""
    out = np.empty(shape, object)
    if values is not None:
        out.reshape(-1)[:] = values
    return out


class _Strings(HeldValues):
    """An op reading or writing strings (kernels/held.py)."""


@register
class StringConcat(_Strings):
    """The two inputs' strings joined element by element, broadcast."""

    op_types = ("StringConcat",)

    def compute(self, xs):
        x, y = xs
        out = _strings(np.broadcast_shapes(x.shape, y.shape))
        np.add(x, y, out=out)        # str + str, element by element
        return [out]


@register
class StringSplit(_Strings):
    """Each string split on ``delimiter`` (unset or empty: runs of
    whitespace, leading and trailing ones dropped), at most ``maxsplit``
    times: Y the parts, padded with "" to the longest, Z their counts."""

    op_types = ("StringSplit",)

    def setup(self):
        sep = self.attrs.get("delimiter")
        self.sep = sep if sep else None         # "" splits on whitespace, as unset
        maxsplit = self.attrs.get("maxsplit")
        if maxsplit is not None and int(maxsplit) < 0:
            self.fail(f"maxsplit {maxsplit} is negative")
        self.maxsplit = -1 if maxsplit is None else int(maxsplit)

    def compute(self, xs):
        x = xs[0]
        sep, maxsplit = self.sep, self.maxsplit
        parts = [s.split(sep, maxsplit) for s in x.reshape(-1)]
        counts = np.fromiter(map(len, parts), np.int64, len(parts))
        width = int(counts.max()) if counts.size else 0
        y = _strings((len(parts), width))
        y[...] = ""
        for i, p in enumerate(parts):
            y[i, :len(p)] = p
        return [y.reshape(x.shape + (width,)), counts.reshape(x.shape)]


@register
class RegexFullMatch(_Strings):
    """Whether each string matches ``pattern`` whole (Python's ``re``)."""

    op_types = ("RegexFullMatch",)

    def setup(self):
        pattern = self.attrs.get("pattern")
        if pattern is None:
            self.malformed("the pattern attribute is missing")
        try:
            self.match = re.compile(pattern).fullmatch
        except re.error as exc:
            self.fail(f"pattern {pattern!r} is not a regular expression pyarena reads ({exc})")

    def compute(self, xs):
        x = xs[0]
        match = self.match
        hits = np.fromiter((match(s) is not None for s in x.reshape(-1)), bool, x.size)
        return [hits.reshape(x.shape)]


@register
class StringNormalizer(_Strings):
    """The strings of a [C] or [1, C] input without the ``stopwords``
    (compared case-blind unless ``is_case_sensitive``), then lower- or
    upper-cased (``case_change_action``); when none is left, one "".
    ``locale`` is not read: case changes are Unicode's."""

    op_types = ("StringNormalizer",)

    def setup(self):
        self.case = str(self.attrs.get("case_change_action", "NONE")).upper()
        if self.case not in ("NONE", "LOWER", "UPPER"):
            self.fail(f"case_change_action {self.case!r} is not NONE, LOWER or UPPER")
        self.sensitive = bool(self.attrs.get("is_case_sensitive", 0))
        stops = [str(s) for s in self.attrs.get("stopwords", ()) or ()]
        if not self.sensitive:
            stops = [s.lower() for s in stops]
        self.stops = np.array(stops, dtype=str) if stops else None

    def compute(self, xs):
        x = xs[0]
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            self.fail(f"its input must be [C] or [1, C], not {list(x.shape)}")
        words = x.reshape(-1).astype(str)
        if self.stops is not None and words.size:
            key = words if self.sensitive else np.strings.lower(words)
            words = words[~np.isin(key, self.stops)]
        if self.case == "LOWER":
            words = np.strings.lower(words)
        elif self.case == "UPPER":
            words = np.strings.upper(words)
        out = words.astype(object) if words.size else _strings(1, [""])
        return [out.reshape(out.size) if x.ndim == 1 else out.reshape(1, out.size)]


#: the defaults of LabelEncoder's values, by kind (ai.onnx.ml)
_DEFAULTS = {"O": "_Unused", "U": "_Unused", "i": -1, "u": -1, "f": -0.0, "b": False}


@register
class LabelEncoder(_Strings):
    """ai.onnx.ml LabelEncoder: each element mapped through the keys to the
    values (``keys_*`` / ``values_*`` or ``keys_tensor`` /
    ``values_tensor``), the default where no key matches.  A
    ``searchsorted`` into the sorted keys, then one ``where``: no loop
    over the elements.  A key given twice maps to its last value; a NaN
    key matches NaN."""

    op_types = ("LabelEncoder",)
    onnx_domain = "ai.onnx.ml"

    def setup(self):
        a = self.attrs
        keys = self._given(("keys_strings", "keys_int64s", "keys_floats", "keys_tensor"),
                           "keys")
        values = self._given(("values_strings", "values_int64s", "values_floats",
                              "values_tensor"), "values")
        if len(keys) != len(values):
            self.malformed(f"{len(keys)} keys and {len(values)} values")
        table = dict(zip(keys.tolist(), values.tolist()))     # the last value of a key
        self.nan = None
        if keys.dtype.kind == "f":
            nan = [k for k in table if k != k]
            self.nan = table.pop(nan[0]) if nan else None
        order = sorted(table)
        self.keys = np.array(order, dtype=keys.dtype)
        out_dt = object if self.outs[0].host else np.dtype(self.outs[0].dtype)
        self.values = np.array([table[k] for k in order], dtype=out_dt)
        d = a.get("default_tensor")
        if d is not None:
            d = _decoded(np.asarray(d)).reshape(-1)[0]
        else:
            kind = "O" if out_dt is object else np.dtype(out_dt).kind
            name = {"O": "default_string", "f": "default_float"}.get(kind, "default_int64")
            d = a.get(name, _DEFAULTS.get(kind, 0))
        self.default = np.array(d, dtype=out_dt)

    def _given(self, names, what):
        for n in names:
            v = self.attrs.get(n)
            if v is not None and (len(v) if isinstance(v, list) else np.size(v)):
                a = _decoded(np.asarray(v, dtype=object if n.endswith("strings") else None))
                if n.endswith("int64s"):
                    a = a.astype(np.int64)
                elif n.endswith("floats"):
                    a = a.astype(np.float32)
                return a.reshape(-1)
        self.malformed(f"no {what} (one of {', '.join(names)})")

    def compute(self, xs):
        x = xs[0]
        keys = self.keys
        if keys.dtype.kind != "O" and x.dtype.kind == "O":
            self.fail("its keys are numbers but its input holds strings")
        if x.size == 0 or keys.size == 0:
            out = np.empty(x.shape, self.values.dtype)
            out[...] = self.default
            return [out]
        idx = np.searchsorted(keys, x)
        np.minimum(idx, keys.size - 1, out=idx)
        found = keys[idx] == x
        out = np.where(found, self.values[idx], self.default)
        if self.nan is not None:
            out[np.isnan(x)] = self.nan
        return [out.astype(self.values.dtype, copy=False)]


def _decoded(a):
    """``a`` with UTF-8 bytes elements (a string tensor attribute) as str."""
    if a.dtype.kind == "S" or (a.dtype.kind == "O" and a.size and
                               isinstance(a.reshape(-1)[0], bytes)):
        return np.array([v.decode("utf-8") if isinstance(v, bytes) else v
                         for v in a.reshape(-1)], dtype=object).reshape(a.shape)
    if a.dtype.kind == "U":
        return a.astype(object)
    return a
