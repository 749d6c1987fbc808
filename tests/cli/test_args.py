"""The command line's shared argument parsers (pyarena/cli/args.py): every
error names the spec the user typed."""
import numpy as np
import pytest

from pyarena.cli.args import parse_feeds, parse_inputs, parse_values
from pyarena.errors import InvalidArgumentError


def test_parse_inputs():
    assert parse_inputs(["x=1,3,224,224", "mask=7", "s="]) == \
        {"x": (1, 3, 224, 224), "mask": (7,), "s": ()}
    assert parse_inputs([]) == {}


@pytest.mark.parametrize("parse, specs, needle", [
    (parse_inputs, ["x1,3"], "--input 'x1,3': expected NAME=D0"),
    (parse_inputs, ["=1,3"], "--input '=1,3': expected NAME=D0"),
    (parse_inputs, ["x=1,a"], "--input 'x=1,a': dimensions must be integers"),
    (parse_inputs, ["x=1,-3"], "--input 'x=1,-3': negative dimension"),
    (parse_inputs, ["x=1", "x=2"], "--input 'x' given twice"),
    (parse_values, ["sr"], "--value 'sr': expected NAME=NUMBER"),
    (parse_values, ["sr= "], "--value 'sr= ': expected NAME=NUMBER"),
    (parse_values, ["=3"], "--value '=3': expected NAME=NUMBER"),
    (parse_values, ["sr=fast"], "--value 'sr=fast': 'fast' is not a number"),
    (parse_values, ["sr=1", "sr=2"], "--value 'sr' given twice"),
])
def test_parsers_name_the_bad_spec(parse, specs, needle):
    with pytest.raises(InvalidArgumentError) as ei:
        parse(specs)
    assert str(ei.value).startswith(needle)


def test_parse_feeds(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(6).reshape(2, 3))
    got = parse_feeds([f"x={tmp_path / 'a.npy'}"])
    assert list(got) == ["x"] and got["x"].tolist() == [[0, 1, 2], [3, 4, 5]]
    for specs, needle in ((["x"], "expected NAME=FILE.npy"),
                          ([f"x={tmp_path / 'a.npy'}"] * 2, "'x' given twice"),
                          ([f"x={tmp_path / 'none.npy'}"], "cannot read")):
        with pytest.raises(InvalidArgumentError, match=needle):
            parse_feeds(specs)


def test_parse_values():
    got = parse_values(["sr=16000", "t=0.5", "k=-2"])
    assert got == {"sr": 16000, "t": 0.5, "k": -2}
    assert isinstance(got["sr"], int) and isinstance(got["t"], float)
