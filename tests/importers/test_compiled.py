"""Compiled models (importers/compiled.py): a model compiled once runs from
its file bit for bit as the model file runs; damaged files are clear
errors; the file loads without the model-format packages; two processes
share its mapped constants."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarena
from pyarena._native.checksum import crc32c
from pyarena.errors import InvalidArgumentError, ModelImportError, PyArenaError
from pyarena.importers import load_model, sniff_format
from pyarena.importers.compiled import CompiledModel
from pyarena.importers.compiler import CompileError, compile_model
from pyarena.importers.compiled_codec import decode_value, encode_value
from pyarena.importers.compiled_format import BLOB_ALIGN, FORMAT_VERSION, HEADER_BYTES, Blob
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.models import mobilenet_v2

from helpers.model_zoo import randomized_light_model
from helpers.onnx_util import make_model
from helpers.tflite_util import small_cnn

HERE = os.path.dirname(os.path.abspath(__file__))
FACE = os.path.join(HERE, "..", "data", "face_detection_short_range.tflite")


def _same_outputs(src, compiled, feeds):
    """Outputs of a session of ``src`` and one of ``compiled``, for ``feeds``."""
    a = pyarena.InferenceSession(src).run(None, feeds)
    b = pyarena.InferenceSession(compiled).run(None, feeds)
    return a, b


def _feeds(path, shapes=None, seed=0):
    s = pyarena.InferenceSession(path)
    rng = np.random.default_rng(seed)
    return {a.name: rng.standard_normal((shapes or {}).get(a.name, a.shape)).astype(np.float32)
            for a in s.get_inputs()}


# -- round trips ---------------------------------------------------------------
def test_a_model_without_weights_round_trips(tmp_path):
    """No arrays at all: the blob is empty, and the file still opens (it
    once ended before the blob's stated start and was refused)."""
    from onnx import helper
    path = tmp_path / "w.onnx"
    make_model([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
               {"x": ([2, 3], np.float32)}, {"y": (None, np.float32)}, path=path)
    pyarena.compile(str(path), str(tmp_path / "w.pa"))
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 3}
    a, b = _same_outputs(str(path), str(tmp_path / "w.pa"), feeds)
    assert np.array_equal(a[0], b[0]) and np.array_equal(b[0], -np.maximum(feeds["x"], 0))
    assert os.path.getsize(tmp_path / "w.pa") % BLOB_ALIGN == 0     # ends where its blob starts


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_a_real_onnx_architecture_runs_bit_for_bit_from_its_compiled_file(tmp_path, name):
    src = str(tmp_path / f"{name}.onnx")
    randomized_light_model(name, src, seed=1)
    out = str(tmp_path / f"{name}.pa")
    r = compile_model(src, out)
    assert os.path.getsize(out) == r["file_bytes"]
    assert sniff_format(out) == "compiled"
    feeds = _feeds(src)
    a, b = _same_outputs(src, out, feeds)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and np.array_equal(u, v)
    # and pyarena's outputs are onnxruntime's (the compiled path runs the model)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(b[0], ref[0], rtol=1e-3, atol=1e-4)


def test_a_real_tflite_model_runs_bit_for_bit_from_its_compiled_file(tmp_path):
    out = str(tmp_path / "face.pa")
    compile_model(FACE, out)
    a, b = _same_outputs(FACE, out, _feeds(FACE))
    for u, v in zip(a, b):
        assert np.array_equal(u, v)


def test_a_built_tflite_model_with_fp16_weights_round_trips(tmp_path):
    src = str(tmp_path / "cnn.tflite")
    small_cnn(src, fp16=True)
    out = str(tmp_path / "cnn.pa")
    compile_model(src, out)
    a, b = _same_outputs(src, out, _feeds(src, seed=3))
    for u, v in zip(a, b):
        assert np.array_equal(u, v)


def test_the_built_in_mobilenet_graph_compiles_and_runs_as_its_executor(tmp_path):
    g = mobilenet_v2(resolution=64, width=0.5, classes=10)
    feeds = random_feeds(g, seed=2)
    want = {k: np.array(v) for k, v in Executor(g).run(feeds).items()}
    out = str(tmp_path / "mnv2.pa")
    compile_model(g, out)
    got = pyarena.InferenceSession(out).run(None, feeds)
    assert list(want) == [o.name for o in pyarena.InferenceSession(out).get_outputs()]
    for (name, w), v in zip(want.items(), got):
        assert np.array_equal(w, v), name


def test_every_compiled_signature_runs_and_others_are_refused_by_name(tmp_path):
    src = str(tmp_path / "conv.onnx")
    rng = np.random.default_rng(0)
    from onnx import helper
    make_model([helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["h"], ["y"])],
               {"x": (["N", 3, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}, path=src)
    out = str(tmp_path / "conv.pa")
    with pytest.raises(InvalidArgumentError, match="symbolic"):
        compile_model(src, out)
    sigs = [{"x": (1, 3, 8, 8)}, {"x": (2, 3, 16, 12)}]
    assert compile_model(src, out, sigs)["signatures"] == 2
    s_src, s_out = pyarena.InferenceSession(src), pyarena.InferenceSession(out)
    assert [a.shape for a in s_out.get_inputs()] == [a.shape for a in s_src.get_inputs()]
    for sig in sigs:
        x = rng.standard_normal(sig["x"]).astype(np.float32)
        assert np.array_equal(s_src.run(None, {"x": x})[0], s_out.run(None, {"x": x})[0])
    with pytest.raises(InvalidArgumentError, match=r"compiled for the input shapes"):
        s_out.run(None, {"x": np.zeros((1, 3, 9, 9), np.float32)})
    # the second signature read the first's constants: one copy
    assert s_out.memory_info()["plans"] == 2
    # load_model takes the signature its inputs name, with its stored plan
    g = load_model(out, inputs={"x": (2, 3, 16, 12)})
    assert g.tensors["x"].shape == (2, 3, 16, 12) and g.stored_plan is not None


def test_a_memory_budget_is_compiled_into_the_plans_and_another_is_refused(tmp_path):
    g = mobilenet_v2(resolution=64, width=0.5, classes=10)
    free = pyarena.plan(g).arena_bytes
    out = str(tmp_path / "budget.pa")
    budget = int(free * 0.9)
    compile_model(g, out, memory_budget=budget)
    m = CompiledModel(out)
    assert m.memory_budget == budget
    _, p = m.load(0)
    assert p.arena_bytes <= budget and p.budget["memory_budget"] == budget
    with pytest.raises(InvalidArgumentError, match="compiled with memory_budget"):
        pyarena.InferenceSession(out, memory_budget=budget // 2)
    pyarena.InferenceSession(out, memory_budget=budget)     # the same one: fine


def test_threads_compiled_are_the_sessions_default(tmp_path):
    g = mobilenet_v2(resolution=32, width=0.35, classes=4)
    out = str(tmp_path / "t.pa")
    compile_model(g, out, threads=2)
    assert pyarena.InferenceSession(out).threads == 2
    assert pyarena.InferenceSession(out, threads=1).threads == 1


# -- what is not compiled -------------------------------------------------------
def test_control_flow_is_refused_naming_the_op(tmp_path):
    from onnx import TensorProto, helper
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [],
                             [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    src = str(tmp_path / "if.onnx")
    make_model([helper.make_node("Greater", ["x", "x"], ["c0"]),
                helper.make_node("ReduceMax", ["c0f"], ["c1"], keepdims=0),
                helper.make_node("Cast", ["c0"], ["c0f"], to=TensorProto.FLOAT),
                helper.make_node("Cast", ["c1"], ["c"], to=TensorProto.BOOL),
                helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)],
               {"x": ([2], np.float32)}, {"y": (None, np.float32)}, path=src)
    # the condition is data: the If stays an op with its branch graphs
    assert "If" in [op.op_type for op in load_model(src).ops]
    pyarena.InferenceSession(src).run(None, {"x": np.ones(2, np.float32)})
    with pytest.raises(CompileError, match="If"):
        compile_model(src, str(tmp_path / "if.pa"))


def test_a_compiled_file_is_not_compiled_again(tmp_path):
    g = mobilenet_v2(resolution=32, width=0.35, classes=4)
    out = str(tmp_path / "m.pa")
    compile_model(g, out)
    with pytest.raises(InvalidArgumentError, match="already a compiled"):
        compile_model(out, str(tmp_path / "again.pa"))


# -- the codec ------------------------------------------------------------------
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62),
                  st.floats(allow_nan=False), st.text(max_size=8), st.binary(max_size=8))
_value = st.recursive(_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.tuples(kids, kids),
    st.frozensets(st.integers(-5, 5), max_size=4),
    st.dictionaries(st.text(max_size=4), kids, max_size=4),
    st.dictionaries(st.integers(-3, 3), kids, max_size=3)), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_value)
def test_the_codec_gives_back_every_attribute_value_exactly(v):
    blob = Blob()
    doc = json.loads(json.dumps(encode_value(v, blob, "test")))
    assert decode_value(doc, [a for a in blob.arrays]) == v


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["float32", "float16", "int8", "uint8", "int64", "bool", "<f8"]),
       st.lists(st.integers(0, 4), max_size=3))
def test_the_codec_gives_back_arrays_and_scalars_with_their_dtype(dt, shape):
    a = (np.arange(int(np.prod(shape)) if shape else 1) % 3).astype(dt).reshape(shape)
    blob = Blob()
    doc = json.loads(json.dumps(encode_value({"a": a, "s": a.reshape(-1)[:1].sum()
                                              if a.size else np.float32(1)}, blob, "t")))
    back = decode_value(doc, list(blob.arrays))
    assert back["a"].dtype == a.dtype and back["a"].shape == a.shape
    assert np.array_equal(back["a"], a)
    assert type(back["s"]) is type(a.reshape(-1)[:1].sum() if a.size else np.float32(1))


def test_equal_constants_are_stored_once():
    blob = Blob()
    x = np.arange(100, dtype=np.float32)
    r1, r2 = blob.add(x), blob.add(x.copy())
    r3 = blob.add(x + 1)
    assert r1 == r2 != r3 and len(blob.arrays) == 2


# -- damaged files --------------------------------------------------------------
@pytest.fixture(scope="module")
def small_compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("compiled")
    g = mobilenet_v2(resolution=32, width=0.35, classes=4)
    out = str(d / "small.pa")
    compile_model(g, out)
    with open(out, "rb") as f:
        data = f.read()
    return out, data, random_feeds(g, seed=0)


def _write(tmp_path, data, name="bad.pa"):
    p = str(tmp_path / name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def _open_and_run(path, feeds):
    s = pyarena.InferenceSession(path)
    return s.run(None, feeds)


def test_the_blob_is_aligned_and_the_header_says_where(small_compiled):
    path, data, _ = small_compiled
    meta_off, meta_len, blob_off, blob_len = struct.unpack_from("<QQQQ", data, 24)
    assert meta_off == HEADER_BYTES and blob_off % BLOB_ALIGN == 0
    assert blob_off >= meta_off + meta_len and blob_off + blob_len == len(data)
    doc = json.loads(data[meta_off:meta_off + meta_len])
    for off, n, crc in doc["arrays"]:
        assert off % BLOB_ALIGN == 0
        assert crc32c(data[blob_off + off:blob_off + off + n]) == crc


@pytest.mark.parametrize("cut", [0, 10, 63, 64, 200, -1, -100])
def test_a_truncated_file_is_a_clear_error(tmp_path, small_compiled, cut):
    _, data, feeds = small_compiled
    n = cut if cut >= 0 else len(data) + cut
    with pytest.raises(ModelImportError, match="compiled|no such"):
        _open_and_run(_write(tmp_path, data[:n]), feeds)


def test_another_format_version_is_named(tmp_path, small_compiled):
    _, data, feeds = small_compiled
    b = bytearray(data)
    struct.pack_into("<I", b, 16, FORMAT_VERSION + 1)
    struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    with pytest.raises(ModelImportError, match=f"format version {FORMAT_VERSION + 1}"):
        _open_and_run(_write(tmp_path, bytes(b)), feeds)


@pytest.mark.parametrize("where", ["header", "meta", "blob"])
def test_a_flipped_byte_is_found_by_its_checksum(tmp_path, small_compiled, where):
    _, data, feeds = small_compiled
    meta_len, blob_off = struct.unpack_from("<Q", data, 32)[0], \
        struct.unpack_from("<Q", data, 40)[0]
    pos = {"header": 30, "meta": HEADER_BYTES + meta_len // 2, "blob": blob_off + 5}[where]
    b = bytearray(data)
    b[pos] ^= 0x10
    with pytest.raises(ModelImportError, match="checksum|damaged"):
        _open_and_run(_write(tmp_path, bytes(b)), feeds)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1,
                max_size=4))
def test_random_damage_is_an_error_or_the_same_outputs(tmp_path, small_compiled, flips):
    """Bytes flipped anywhere: a clear pyarena error, or -- when only
    padding was hit -- the same outputs; never another exception."""
    path, data, feeds = small_compiled
    want = _open_and_run(path, feeds)
    b = bytearray(data)
    for pos, x in flips:
        b[pos % len(b)] ^= x
    p = _write(tmp_path, bytes(b), "fuzz.pa")
    try:
        got = _open_and_run(p, feeds)
    except PyArenaError:
        return
    for u, v in zip(want, got):
        assert np.array_equal(u, v)


def test_a_valid_checksum_over_a_hostile_document_is_still_refused(tmp_path, small_compiled):
    """The checksum only finds accidents: a document edited with its
    checksum recomputed is validated like any graph and plan."""
    _, data, feeds = small_compiled
    meta_len, blob_off = struct.unpack_from("<QQ", data, 32)
    doc = json.loads(data[HEADER_BYTES:HEADER_BYTES + meta_len])
    sig = doc["signatures"][0]
    sig["plan"]["arena_bytes"] = 64                          # a plan that cannot hold it
    meta = json.dumps(doc, separators=(",", ":")).encode()
    assert len(meta) <= blob_off - HEADER_BYTES
    b = bytearray(data)
    b[HEADER_BYTES:HEADER_BYTES + len(meta)] = meta
    b[HEADER_BYTES + len(meta):blob_off] = b" " * (blob_off - HEADER_BYTES - len(meta))
    struct.pack_into("<Q", b, 32, blob_off - HEADER_BYTES)
    struct.pack_into("<I", b, 56, crc32c(bytes(b[HEADER_BYTES:blob_off])))
    struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    with pytest.raises(PyArenaError):
        _open_and_run(_write(tmp_path, bytes(b)), feeds)


# -- processes ------------------------------------------------------------------
_NO_FORMAT_PACKAGES = r"""
import sys, numpy as np, pyarena
s = pyarena.InferenceSession(sys.argv[1])
a = s.get_inputs()[0]
y = s.run(None, {a.name: np.zeros(a.shape, np.float32)})
print(sorted(m for m in ("onnx", "tflite", "onnxruntime", "ai_edge_litert")
             if m in sys.modules), y[0].shape)
"""


def test_a_compiled_model_loads_without_the_model_format_packages(tmp_path):
    src = str(tmp_path / "sq.onnx")
    randomized_light_model("squeezenet", src)
    out = str(tmp_path / "sq.pa")
    compile_model(src, out)
    r = subprocess.run([sys.executable, "-c", _NO_FORMAT_PACKAGES, out], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[]"), r.stdout


_SHARER = r"""
import sys, numpy as np, pyarena
s = pyarena.InferenceSession(sys.argv[1])
x = np.ones((1, 1 << 18), np.float32)
y = s.run(None, {"x": x})[0]
assert float(y[0, 5]) == 6.0 * 1.0 + 0.0, y[0, :8]
print("ready", flush=True)
sys.stdin.readline()            # both processes hold the mapping now
rss = pss = 0
inside = False
import os
target = os.path.realpath(sys.argv[1])
for line in open("/proc/self/smaps"):
    head = line.split(None, 5)
    if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
        inside = len(head) == 6 and head[5].strip() == target
    elif inside and line.startswith("Rss:"):
        rss += int(line.split()[1])
    elif inside and line.startswith("Pss:"):
        pss += int(line.split()[1])
print(rss, pss, flush=True)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc smaps")
def test_two_processes_share_the_mapped_constants(tmp_path):
    """A 1 MiB constant read at run time (a Mul's operand) lies in the
    mapped file: both processes have it resident, each pays half (PSS)."""
    from onnx import helper
    src = str(tmp_path / "mul.onnx")
    w = np.tile(np.arange(1, 9, dtype=np.float32), 1 << 15).reshape(1, 1 << 18)
    make_model([helper.make_node("Mul", ["x", "w"], ["y"])],
               {"x": ([1, 1 << 18], np.float32)}, {"y": (None, np.float32)}, {"w": w},
               path=src)
    out = str(tmp_path / "mul.pa")
    compile_model(src, out)
    procs = [subprocess.Popen([sys.executable, "-c", _SHARER, out], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
        figures = [tuple(int(v) for v in p.stdout.readline().split()) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for rss, pss in figures:
        assert rss >= 1024, figures          # the constant's pages are resident (KiB)...
        assert pss <= 0.75 * rss, figures    # ...and shared: each process pays about half


# -- the command line -----------------------------------------------------------
def test_the_command_line_compiles_and_runs_a_model(tmp_path, capsys):
    from pyarena.cli import main
    src = str(tmp_path / "cnn.tflite")
    small_cnn(src)
    out = str(tmp_path / "cnn.pa")
    assert main(["compile", src, "-o", out]) == 0
    assert "compiled" in capsys.readouterr().out
    assert main(["run", out, "--repeat", "1"]) == 0
    text = capsys.readouterr().out
    assert "mapped weights" in text and "inference" in text
    assert main(["run", out, "--memory-budget", "1M"]) == 2
    assert "is compiled" in capsys.readouterr().err


def test_the_command_line_groups_repeated_inputs_into_signatures():
    from pyarena.cli.compile import signatures
    assert signatures(["x=1,3", "y=2", "x=4,3"]) == [{"x": (1, 3), "y": (2,)}, {"x": (4, 3)}]
    assert signatures([]) is None


def test_constants_read_at_run_time_are_not_copied_and_are_counted_as_mapped(tmp_path):
    from onnx import helper
    from pyarena.runtime.footprint import file_resident
    src = str(tmp_path / "mul.onnx")
    w = np.arange(1 << 16, dtype=np.float32).reshape(1, 1 << 16)
    make_model([helper.make_node("Mul", ["x", "w"], ["y"])],
               {"x": ([1, 1 << 16], np.float32)}, {"y": (None, np.float32)}, {"w": w},
               path=src)
    out = str(tmp_path / "mul.pa")
    compile_model(src, out)
    s = pyarena.InferenceSession(out)
    y = s.run(None, {"x": np.full((1, 1 << 16), 2, np.float32)})[0]
    assert np.array_equal(y, 2 * w)
    assert s.memory_info()["weights_bytes"] == 0     # read where it lies in the file
    held = file_resident(out)
    assert w.nbytes <= held <= os.path.getsize(out) + 4096
    assert file_resident(__file__) == 0              # a file this process has not mapped


# -- the kernels' layouts -------------------------------------------------------
def _other_core(core):
    """Another build's name of the same length (the document is laid out
    in place: a longer one may not fit its padded room)."""
    return core[:-1] + ("1" if core[-1] == "0" else "0")


def _rewrite_document(data, edit):
    """``data`` (a compiled file's bytes) with its document changed by
    ``edit(doc)``, laid out again with valid checksums."""
    meta_len, blob_off = struct.unpack_from("<QQ", data, 32)
    doc = json.loads(data[HEADER_BYTES:HEADER_BYTES + meta_len])
    edit(doc)
    meta = json.dumps(doc, separators=(",", ":")).encode()
    assert len(meta) <= blob_off - HEADER_BYTES
    b = bytearray(data)
    b[HEADER_BYTES:blob_off] = meta + b" " * (blob_off - HEADER_BYTES - len(meta))
    struct.pack_into("<Q", b, 32, blob_off - HEADER_BYTES)
    struct.pack_into("<I", b, 56, crc32c(bytes(b[HEADER_BYTES:blob_off])))
    struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    return bytes(b)


def test_the_kernels_take_their_packed_weights_from_the_file(tmp_path):
    """A conv net's packed filters are stored and the filters they are made
    of left out: a session of the file packs nothing (its weights arena
    stays empty), gives the same outputs, and the file is smaller than the
    constants + layouts; a file from another build of the C core is
    refused by name -- unless compiled portable (then packed again)."""
    src = str(tmp_path / "sq.onnx")
    randomized_light_model("squeezenet", src, seed=4)
    out, port = str(tmp_path / "sq.pa"), str(tmp_path / "sq_portable.pa")
    small = compile_model(src, out)
    big = compile_model(src, port, portable=True)
    assert small["file_bytes"] < big["file_bytes"]
    feeds = _feeds(src, seed=5)
    s_src = pyarena.InferenceSession(src)
    want = s_src.run(None, feeds)
    assert s_src.memory_info()["weights_bytes"] > 0      # the model file's kernels pack
    for path in (out, port):
        s = pyarena.InferenceSession(path)
        assert np.array_equal(want[0], s.run(None, feeds)[0])
        assert s.memory_info()["weights_bytes"] == 0
        assert CompiledModel(path).layouts(0)            # there were layouts to take
    for path, name in ((out, "other_core.pa"), (port, "other_core_portable.pa")):
        with open(path, "rb") as f:
            data = f.read()
        other = _write(tmp_path, _rewrite_document(data, lambda d: d.update(core=_other_core(d["core"]))),
                       name)
        if path == out:
            with pytest.raises(ModelImportError, match="compile the model again"):
                pyarena.InferenceSession(other).run(None, feeds)
            continue
        assert CompiledModel(other).layouts(0) is None
        s2 = pyarena.InferenceSession(other)
        assert np.array_equal(s2.run(None, feeds)[0], want[0])
        assert s2.memory_info()["weights_bytes"] > 0     # packed again, in this process


def test_a_graph_that_needs_every_layout_refuses_a_build_that_takes_fewer(tmp_path):
    """The guard behind leaving constants out: kernels that stop taking the
    stored layouts part way (another build laying out otherwise) would
    pack placeholders; the keeper refuses before anything runs."""
    src = str(tmp_path / "sq.onnx")
    randomized_light_model("squeezenet", src, seed=4)
    out = str(tmp_path / "sq.pa")
    compile_model(src, out)
    g = load_model(out)
    assert g.layouts_required and g.stored_layouts
    g.stored_layouts = g.stored_layouts[:-1] + [np.zeros(3, np.float32)]   # the last differs
    with pytest.raises(ModelImportError, match="compile the model again"):
        Executor(g, g.stored_plan)


def test_a_keeper_replays_layouts_in_order_and_stops_at_the_first_difference():
    from pyarena.memory import Arena
    from pyarena.runtime.keeper import WeightKeeper
    from pyarena.graph import Graph
    a = np.arange(64, dtype=np.float32)
    b = np.arange(64, 128, dtype=np.float32)
    stored = [a.copy(), b.copy(), np.zeros(8, np.float32)]
    k = WeightKeeper(Graph(), Arena(alignment=64), layouts=stored)
    assert k.keep(a) is stored[0]                        # the same content: the stored one
    assert k.stored_layout((64,), np.float32) is stored[1]   # taken without computing
    c = np.ones(8, np.float32)                           # differs from stored[2]...
    kept = k.keep(c)
    assert kept is not stored[2] and np.array_equal(kept, c)
    assert k.stored_layout((8,), np.float32) is None     # ...and the replay is over
    assert k.replayed == 2
    k2 = WeightKeeper(Graph(), Arena(alignment=64), layouts=[a.copy()])
    assert k2.stored_layout((32,), np.float32) is None   # another shape: not handed out
    assert k2.keep(a) is not None and k2.replayed == 0


def test_a_keeper_records_every_keep_in_order():
    from pyarena.memory import Arena
    from pyarena.runtime.keeper import WeightKeeper
    from pyarena.graph import Graph
    arena = Arena(alignment=64)
    k = WeightKeeper(Graph(), arena)
    k.journal = []
    x = np.arange(10, dtype=np.float32)
    first = k.keep(x)
    again = k.keep(first)                                # already in the arena: shared
    addr = lambda v: v.__array_interface__["data"][0]    # noqa: E731
    assert addr(again) == addr(first) and arena.owns(first) and len(k.journal) == 2
    assert [addr(v) for v in k.journal] == [addr(first)] * 2


def test_constants_stay_when_the_graph_without_them_computes_other_bits(tmp_path, monkeypatch):
    """Leaving a constant out is checked by running: a graph with
    placeholders for them that gives other outputs (here made so) keeps
    every constant."""
    import pyarena.runtime as rt
    src = str(tmp_path / "sq.onnx")
    randomized_light_model("squeezenet", src, seed=4)
    ref = compile_model(src, str(tmp_path / "ref.pa"), portable=True)["file_bytes"]
    real = rt.Executor

    class Perturbed(real):
        def run(self, feeds=None):
            out = super().run(feeds)
            if self.graph.layouts_required:         # the graph without the constants
                out = {k: np.asarray(v) + 1 for k, v in out.items()}
            return out

    monkeypatch.setattr(rt, "Executor", Perturbed)
    got = compile_model(src, str(tmp_path / "kept.pa"))
    assert got["file_bytes"] == ref
    assert not load_model(str(tmp_path / "kept.pa")).layouts_required
