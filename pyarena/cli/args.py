"""Argument parsing shared by the commands: ``--input NAME=D0,D1,...``
shapes and ``--feed NAME=FILE.npy`` arrays."""
import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["parse_inputs", "parse_feeds"]


def parse_inputs(specs):
    """``["x=1,3,224,224"]`` -> ``{"x": (1, 3, 224, 224)}``;
    InvalidArgumentError naming the bad spec."""
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        if not sep or not name:
            raise InvalidArgumentError(f"--input {spec!r}: expected NAME=D0,D1,...")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            raise InvalidArgumentError(f"--input {spec!r}: dimensions must be "
                                       "integers separated by commas") from None
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"--input {spec!r}: negative dimension")
        if name in shapes:
            raise InvalidArgumentError(f"--input {name!r} given twice")
        shapes[name] = shape
    return shapes


def parse_feeds(specs):
    """``["x=in.npy"]`` -> ``{"x": array}``; InvalidArgumentError naming
    the bad spec or file."""
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise InvalidArgumentError(f"--feed {spec!r}: expected NAME=FILE.npy")
        if name in feeds:
            raise InvalidArgumentError(f"--feed {name!r} given twice")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"--feed {name}: cannot read {path!r}: {exc}") from None
    return feeds
