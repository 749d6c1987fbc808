"""Each operator's facts live on its kernel class (pyarena/runtime/kernels/),
checked from the source of the whole package:

* no literal list, tuple, set or dict keys of four or more operator names
  outside the kernel package -- a pass asks the registry (``op_table``,
  ``ops_where``, ``op_fact``) instead of keeping a list of its own;
* no ``attrs`` key starting with ``_`` anywhere: what one pass tells
  another goes in ``Op.notes`` (pyarena/graph/notes.py), never in the
  operator's attribute dict.
"""
import ast
import pathlib
import re

import pyarena
from pyarena.runtime.kernels import OPS, TFLITE_INT8, TFLITE_OPS

PKG = pathlib.Path(pyarena.__file__).resolve().parent
KERNELS_DIR = PKG / "runtime" / "kernels"
#: a list of this many operator names is a table of operator facts
MAX_NAMES = 3
_PRIVATE_ATTR = re.compile(r"""attrs(?:\[|\.get\(|\.setdefault\(|\.pop\(|\.update\()\s*["'](_\w+)""")


def op_names():
    """Every operator name the package knows: ONNX op types (all of ONNX's
    when the onnx package is there) and TFLite builtins."""
    names = set(OPS) | set(TFLITE_OPS) | set(TFLITE_INT8)
    try:
        import onnx.defs
        names |= {s.name for s in onnx.defs.get_all_schemas_with_history()}
    except ImportError:
        pass
    return names


def name_lists(path, text=None, names=None):
    """(line, names) of every literal collection in the file holding more
    than MAX_NAMES operator names."""
    names = op_names() if names is None else names
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        else:
            continue
        ops = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
        if len(ops) > MAX_NAMES:
            found.append((node.lineno, ops))
    return found


def private_attrs(text):
    """(line, key) of every ``attrs`` key starting with ``_`` in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1))
            for m in _PRIVATE_ATTR.finditer(text)]


def test_no_list_of_operator_names_outside_the_kernel_package():
    names = op_names()
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if KERNELS_DIR in path.parents:
            continue
        for line, ops in name_lists(path, names=names):
            found.append(f"{path.relative_to(PKG)}:{line}: {ops}")
    assert found == [], "operator facts kept outside their kernels:\n" + "\n".join(found)


def test_no_private_key_in_an_operators_attributes():
    found = [f"{p.relative_to(PKG)}:{line}: {key}" for p in sorted(PKG.rglob("*.py"))
             for line, key in private_attrs(p.read_text())]
    assert found == [], "side channels in attrs (use Op.notes):\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for():
    """The scanners themselves, on planted code: a list of five op names
    and a private attrs key are found, a list of three and a plain key not."""
    path = PKG / "runtime" / "nhwc.py"
    text = path.read_text() + ('\n\n_X = ("Relu", "Sigmoid", "Tanh", "Exp", "Log")\n'
                               '_Y = {"Add", "Sub", "Mul"}\n'
                               'def _z(op):\n    return op.attrs.get("_hidden"), '
                               'op.attrs["axis"]\n')
    lists = name_lists(path, text)
    assert [ops for _, ops in lists] == [["Relu", "Sigmoid", "Tanh", "Exp", "Log"]]
    assert [key for _, key in private_attrs(text)] == ["_hidden"]
