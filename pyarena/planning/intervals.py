"""Bare intervals as CSV: MiniMalloc's ``id,lower,upper,size[,offset]``.

``load_intervals_csv`` reads an instance (``upper`` exclusive) into
:class:`~pyarena.planning.result.Buffer` objects with inclusive lifetimes,
for :func:`~pyarena.planning.plan_intervals`; ``write_intervals_csv``
writes a plan back in the solution format.
"""
import csv

from ..errors import InvalidArgumentError
from .result import Buffer

__all__ = ["load_intervals_csv", "write_intervals_csv"]


def load_intervals_csv(path):
    """Read a MiniMalloc-style CSV (``id,lower,upper,size`` with ``upper``
    exclusive; an ``offset`` column is read if present) into a list of
    :class:`Buffer` with inclusive lifetimes ``[lower, upper - 1]``."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{path}: not a UTF-8 text file ({exc.reason} at byte "
                                   f"{exc.start})") from None
    except csv.Error as exc:
        raise InvalidArgumentError(f"{path}: not a readable CSV ({exc})") from None
    except OSError as exc:
        raise InvalidArgumentError(f"{path}: {exc.strerror or exc}") from None
    if not rows:
        raise InvalidArgumentError(f"{path}: empty CSV (expected a header "
                                   "id,lower,upper,size)")
    header = [h.strip().lower() for h in rows[0]]
    need = ("id", "lower", "upper", "size")
    missing = [h for h in need if h not in header]
    if missing:
        raise InvalidArgumentError(f"{path}: CSV header {rows[0]} lacks column(s) "
                                   f"{missing} (expected id,lower,upper,size)")
    col = {h: header.index(h) for h in header}
    out = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        try:
            vals = {h: row[col[h]].strip() for h in need}
            lower, upper, size = (int(vals["lower"]), int(vals["upper"]),
                                  int(vals["size"]))
            offset = None
            if "offset" in col and col["offset"] < len(row) and row[col["offset"]].strip():
                offset = int(row[col["offset"]])
        except (IndexError, ValueError):
            raise InvalidArgumentError(f"{path}:{lineno}: bad row {row!r} (need "
                                       "integers lower, upper, size)") from None
        if max(lower, upper, size, offset or 0) >= 1 << 63 or (offset or 0) < 0:
            raise InvalidArgumentError(f"{path}:{lineno}: buffer {vals['id']!r}: a value "
                                       f"is out of range [0, 2**63) in {row!r}")
        if lower < 0 or size < 0 or upper <= lower:
            raise InvalidArgumentError(
                f"{path}:{lineno}: buffer {vals['id']!r} has lower={lower}, "
                f"upper={upper}, size={size} (need 0 <= lower < upper, size >= 0)")
        out.append(Buffer(vals["id"], size, lower, upper - 1, offset, [vals["id"]]))
    return out


def write_intervals_csv(p, path):
    """Write a plan's buffers as ``id,lower,upper,size,offset`` (upper
    exclusive), the MiniMalloc solution format."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "lower", "upper", "size", "offset"])
        for b in p.buffers:
            w.writerow([b.name, b.first, b.last + 1, b.size, b.offset])
