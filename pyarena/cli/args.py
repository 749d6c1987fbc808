"""Argument parsing shared by the commands: ``--input NAME=D0,D1,...``
shapes, ``--feed NAME=FILE.npy`` arrays and byte counts (``--capacity``,
``--max-memory``)."""
import re

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["parse_inputs", "parse_feeds", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_MAX_BYTES = (1 << 63) - 1


def parse_bytes(text, flag):
    """``"4096"``, ``"512M"``, ``"4GiB"``, ``"8GB"`` -> bytes (K/M/G/T and
    KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000); None passes.
    InvalidArgumentError naming ``flag`` for anything else or a value
    outside [1, 2**63)."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m and _UNITS.get(m.group(2).lower())
    if not m or unit is None:
        raise InvalidArgumentError(f"{flag} {text!r}: expected a byte count such as "
                                   "1048576, 512M or 4GiB")
    num = m.group(1)
    value = int(num) * unit if "." not in num else int(float(num) * unit)
    if not 1 <= value <= _MAX_BYTES:
        raise InvalidArgumentError(f"{flag} {text!r}: must be between 1 byte and "
                                   f"2**63 - 1 bytes")
    return value


def _named(specs, flag, form, parse, empty_ok=False):
    """Each ``NAME=TEXT`` of ``specs`` -> ``{NAME: parse(spec, name, text)}``;
    InvalidArgumentError for a spec without ``=``, a name or (unless
    ``empty_ok``) a text, and for a name given twice."""
    out = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name or not (empty_ok or text.strip()):
            raise InvalidArgumentError(f"{flag} {spec!r}: expected {form}")
        if name in out:
            raise InvalidArgumentError(f"{flag} {name!r} given twice")
        out[name] = parse(spec, name, text)
    return out


def _shape(spec, name, dims):
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    except ValueError:
        raise InvalidArgumentError(f"--input {spec!r}: dimensions must be "
                                   "integers separated by commas") from None
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"--input {spec!r}: negative dimension")
    return shape


def _number(spec, name, text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    raise InvalidArgumentError(f"--value {spec!r}: {text!r} is not a number")


def _npy(spec, name, path):
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InvalidArgumentError(f"--feed {name}: cannot read {path!r}: {exc}") from None
    if not isinstance(a, np.ndarray):
        raise InvalidArgumentError(f"--feed {name}: {path!r} is not a .npy array")
    return a


def parse_inputs(specs):
    """``["x=1,3,224,224"]`` -> ``{"x": (1, 3, 224, 224)}``;
    InvalidArgumentError naming the bad spec."""
    return _named(specs, "--input", "NAME=D0,D1,...", _shape, empty_ok=True)


def parse_values(specs):
    """``["sr=16000"]`` -> ``{"sr": 16000}`` (a number each: an input the
    model is specialised on); InvalidArgumentError naming the bad spec."""
    return _named(specs, "--value", "NAME=NUMBER", _number)


def parse_feeds(specs):
    """``["x=in.npy"]`` -> ``{"x": array}``; InvalidArgumentError naming
    the bad spec or file."""
    return _named(specs, "--feed", "NAME=FILE.npy", _npy)
