"""ONNX's own operator conformance cases, run through pyarena and onnxruntime
in the same run.

    python benchmarks/bench_onnx_conformance.py [--cases REGEX] [--markdown FILE] [--no-ops]
                                                [--json FILE] [--batch 100]

The cases are the ones the ONNX authors wrote for every operator
(``onnx.backend.test.case.node``: a model, its inputs and the reference
outputs; onnxruntime runs them in its CI).  Each case runs as written --
every input a graph input, nothing made a constant -- through
``pyarena.InferenceSession`` and through onnxruntime (CPU provider, one
thread), and each runtime's outputs are compared with the reference ones:
the case's tolerances (rtol 1e-3, atol 1e-7 unless the case states wider),
NaNs equal, shapes and dtypes must match.  A case is, for each runtime:

``pass``     ran, every output matches the reference
``wrong``    ran, an output differs from the reference
``refused``  pyarena: an error of its own (``pyarena.errors``: an operator or
             an input it does not run, named); onnxruntime: any error
``raw``      pyarena raised an exception that is not one of its own
``crash``    the process died (or hung past ``--timeout``)

Two cases' reference outputs contradict the operator's specification, which
onnxruntime follows (:data:`ORT_INSTEAD`): pyarena is compared with
onnxruntime's outputs there.

Cases run in child processes, ``--batch`` at a time, one child after the
other; when a child dies, the cases it had not reported are run again one
per child, and a case that still kills its child runs once per runtime,
each in a child of its own, so a crash is pinned to its case and runtime.

Output: the summary (counts for both runtimes), a table per operator and
the list of pyarena's wrong / raw / crash cases with what was wrong.
``--markdown FILE`` writes the summary and pyarena's refused cases grouped
by reason (the error message's first clause, names and numbers replaced)
for docs/; ``--json FILE`` every case's outcome for both runtimes.  Exit
status 1 when pyarena gave a wrong result, raised a raw exception or
crashed on any case.
"""
import argparse
import collections
import json
import multiprocessing
import os
import re
import sys
import time
import traceback
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

STATUSES = ("pass", "wrong", "refused", "raw", "crash")
RUNTIMES = ("pyarena", "onnxruntime")

#: cases whose reference output contradicts the operator's specification,
#: which onnxruntime follows: pyarena is compared with onnxruntime's outputs
#: instead (and is wrong when onnxruntime does not run them)
ORT_INSTEAD = {
    # the spec maps align_corners through length_resized, the output's integer
    # length (3); the reference through scale * length (3.2)
    "test_resize_downsample_scales_cubic_align_corners": "align_corners: integer length",
    "test_resize_downsample_scales_linear_align_corners": "align_corners: integer length",
}


# -- the cases -------------------------------------------------------------------
def collect():
    """ONNX's node cases, in name order."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted(collect_testcases(None), key=lambda c: c.name)


_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


def op_of(case, by_name):
    """The operator a case tests: its node's op type; for a case written as
    the op's function body (``..._expanded``), its unexpanded twin's."""
    twin = _EXPANDED.sub("", case.name)
    if twin != case.name and twin in by_name:
        return op_of(by_name[twin], by_name)
    ops = [n.op_type for n in case.model.graph.node if n.op_type != "Constant"]
    if not ops:
        return "Constant"
    return ops[0] if len(set(ops)) == 1 else ops[-1]


def value(v):
    """A case's input or reference output as arrays: some are stored as
    protos (TensorProto, SequenceProto, OptionalProto)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.SequenceProto):
        return numpy_helper.to_list(v)
    if isinstance(v, onnx.OptionalProto):
        return numpy_helper.to_optional(v)
    if isinstance(v, np.generic):       # a NumPy scalar: a 0-d array (onnxruntime
        return np.asarray(v)            # takes no scalar)
    return v


def data_sets(case):
    """The case's [(inputs, reference outputs)], as arrays."""
    return [([value(v) for v in ins], [value(v) for v in outs]) for ins, outs in case.data_sets]


def feeds_of(case, inputs):
    """``{name: value}`` of a data set's inputs (a value None: an omitted
    optional input, not fed)."""
    names = [vi.name for vi in case.model.graph.input]
    return {n: v for n, v in zip(names, inputs) if v is not None}


# -- comparing ---------------------------------------------------------------------
def mismatch(got, ref, rtol, atol):
    """None when ``got`` matches the reference ``ref``, else what differs.
    Sequences (lists) compare element by element; arrays by shape, dtype,
    then value (floats within rtol / atol, NaNs equal)."""
    import numpy as np
    if isinstance(ref, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"a sequence expected, got {type(got).__name__}"
        if len(got) != len(ref):
            return f"sequence length {len(got)}, expected {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            m = mismatch(g, r, rtol, atol)
            if m:
                return f"[{i}]: {m}"
        return None
    if ref is None:
        return None if got is None else f"an empty optional expected, got {type(got).__name__}"
    ref = np.asarray(ref)
    if not isinstance(got, np.ndarray) and not np.isscalar(got):
        return f"an array expected, got {type(got).__name__}"
    got = np.asarray(got)
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype}, expected {ref.dtype}"
    if ref.dtype.kind in "OUS":
        ok = got.tolist() == ref.tolist()
        return None if ok else "values differ"
    if ref.dtype.kind in "biu":
        if np.array_equal(got, ref):
            return None
        bad = int(np.count_nonzero(got != ref))
        return f"{bad} of {ref.size} values differ"
    if ref.dtype.kind not in "fc":      # float8 / bfloat16 (ml_dtypes): as float32
        got, ref = got.astype(np.float32), ref.astype(np.float32)
    with np.errstate(all="ignore"):
        close = np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            return None
        d = np.abs(got.astype(np.complex128 if ref.dtype.kind == "c" else np.float64)
                   - ref.astype(np.float64 if ref.dtype.kind != "c" else np.complex128))
        d = d[~close]
        worst = float(np.nanmax(d)) if np.isfinite(d).any() else float("nan")
    return f"{int((~close).sum())} of {ref.size} values differ, max |d| {worst:.3g}"


_PREFIX = re.compile(r"^(\S+\.onnx: |unsupported operator\(s\): |operator '[^']*'( \(\w+\))?: )")


def reason(message):
    """A refusal's reason: the message's first clause without the model's
    file and the operator's name, other quoted names and numbers replaced
    (an op type kept), so equal causes group."""
    m = message.strip().splitlines()[0] if message.strip() else ""
    while _PREFIX.match(m):
        m = _PREFIX.sub("", m, count=1)
    m = re.sub(r"op type '(\w+)'", r"op type \1", m)
    m = re.sub(r"'[^']*'", "'…'", m)
    m = re.sub(r"\b\d+(\.\d+)?\b(?!-D|-bit)", "N", m)     # (a "2-D" kept)
    m = m.split("; ")[0]
    return m.rstrip(" .:")


# -- running one case --------------------------------------------------------------
def run_pyarena(case, references=None):
    """pyarena's (status, detail); ``references``: outputs per data set to
    compare with instead of the case's."""
    import numpy as np
    import pyarena
    from pyarena.errors import PyArenaError
    try:
        sess = pyarena.InferenceSession(case.model.SerializeToString())
        for k, (ins, refs) in enumerate(data_sets(case)):
            if references is not None:
                refs = references[k]
            with np.errstate(all="ignore"):
                outs = sess.run(None, feeds_of(case, ins))
            for got, ref, vi in zip(outs, refs, case.model.graph.output):
                m = mismatch(got, ref, case.rtol, case.atol)
                if m:
                    return "wrong", f"{vi.name}: {m}"
    except PyArenaError as e:
        return "refused", f"{type(e).__name__}: {e}"
    except Exception as e:          # noqa: BLE001 -- a raw exception is an outcome
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{os.path.relpath(f.filename, ROOT)}:{f.lineno}" for f in reversed(tb)
                      if "pyarena" in f.filename), "")
        return "raw", f"{type(e).__name__}: {e} ({where})"
    return "pass", ""


def run_onnxruntime(case, outputs=None):
    """onnxruntime's (status, detail); its outputs per data set appended to
    ``outputs`` when given."""
    import onnxruntime as ort
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.log_severity_level = 4
        sess = ort.InferenceSession(case.model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        for ins, refs in data_sets(case):
            outs = sess.run(None, feeds_of(case, ins))
            if outputs is not None:
                outputs.append(outs)
                continue
            for got, ref, vi in zip(outs, refs, case.model.graph.output):
                m = mismatch(got, ref, case.rtol, case.atol)
                if m:
                    return "wrong", f"{vi.name}: {m}"
    except Exception as e:          # noqa: BLE001 -- any error: refused
        return "refused", f"{type(e).__name__}: {e}"
    return "pass", ""


def run_case(case, abort_on=None):
    """{runtime: (status, detail)} of one case (in the child)."""
    if case.name == abort_on:
        os.abort()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ort = run_onnxruntime(case)
        references = None
        if case.name in ORT_INSTEAD:
            references = []
            if run_onnxruntime(case, references)[0] != "pass":
                return {"pyarena": ("wrong", "onnxruntime does not run it to compare with"),
                        "onnxruntime": ort}
        return {"pyarena": run_pyarena(case, references), "onnxruntime": ort}


# -- child processes -----------------------------------------------------------------
def _child(cases, indices, conn, abort_on):
    for i in indices:
        conn.send((i, run_case(cases[i], abort_on)))
    conn.send(None)
    conn.close()


def _run_child(cases, indices, timeout, abort_on, done):
    """Run ``indices`` in one child; their outcomes go into ``done``.
    Returns the indices the child did not report (it died or hung), and
    the way it ended."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(cases, indices, send, abort_on), daemon=True)
    p.start()
    send.close()
    left = list(indices)
    ended = None
    while left:
        if recv.poll(timeout):
            try:
                msg = recv.recv()
            except EOFError:
                break
            if msg is None:
                break
            i, outcome = msg
            done[i] = outcome
            left.remove(i)
        else:
            ended = f"no answer within {timeout:g} s (killed)"
            p.kill()
            break
    p.join()
    if left and ended is None:
        code = p.exitcode
        ended = f"killed by signal {-code}" if code is not None and code < 0 \
            else f"exit status {code}"
    recv.close()
    return left, ended


def run_all(cases, batch=100, timeout=120.0, abort_on=None, progress=None):
    """Every case's outcome, ``[{runtime: (status, detail)}]`` in case order."""
    done = {}
    for start in range(0, len(cases), batch):
        indices = list(range(start, min(start + batch, len(cases))))
        left, _ = _run_child(cases, indices, timeout, abort_on, done)
        for i in left:      # the child died: one child per case left
            still, _ = _run_child(cases, [i], timeout, abort_on, done)
            if still:       # each runtime alone, so the crash is pinned to its runtime
                done[i] = {rt: run_alone(cases, i, rt, timeout, abort_on) for rt in RUNTIMES}
        if progress:
            progress(len(done), len(cases))
    return [done[i] for i in range(len(cases))]


def _child_alone(cases, i, runtime, conn, abort_on):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = cases[i]
        if runtime == "onnxruntime":
            out = run_onnxruntime(case)
        elif case.name in ORT_INSTEAD:
            out = run_case(case, abort_on)["pyarena"]
        else:
            if case.name == abort_on:
                os.abort()
            out = run_pyarena(case)
        conn.send(out)
    conn.close()


def run_alone(cases, i, runtime, timeout, abort_on=None):
    """One runtime's outcome of a case whose child died, in a child of its own."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child_alone, args=(cases, i, runtime, send, abort_on), daemon=True)
    p.start()
    send.close()
    out = None
    if recv.poll(timeout):
        try:
            out = tuple(recv.recv())
        except EOFError:
            pass
    else:
        p.kill()
        out = ("crash", f"no answer within {timeout:g} s (killed)")
    p.join()
    if out is None:
        code = p.exitcode
        out = ("crash", f"killed by signal {-code}" if code is not None and code < 0
               else f"exit status {code}")
    return out


# -- reports -------------------------------------------------------------------------
def summary(results):
    return {rt: collections.Counter(r[rt][0] for r in results) for rt in RUNTIMES}


def summary_table(results, label):
    counts = summary(results)
    lines = ["| | cases | " + " | ".join(STATUSES) + " |",
             "|---|---|" + "---|" * len(STATUSES)]
    for rt in RUNTIMES:
        name = label.get(rt, rt)
        lines.append(f"| {name} | {len(results)} | "
                     + " | ".join(str(counts[rt][s]) for s in STATUSES) + " |")
    return lines


def by_op(cases, results, ops):
    table = collections.defaultdict(lambda: {rt: collections.Counter() for rt in RUNTIMES})
    for c, r in zip(cases, results):
        for rt in RUNTIMES:
            table[ops[c.name]][rt][r[rt][0]] += 1
    return table


def refused_by_reason(cases, results, ops):
    """reason -> [(case name, op, onnxruntime's status)], most cases first."""
    groups = collections.defaultdict(list)
    for c, r in zip(cases, results):
        status, detail = r["pyarena"]
        if status == "refused":
            groups[reason(detail.split(": ", 1)[-1])].append(
                (c.name, ops[c.name], r["onnxruntime"][0]))
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def markdown(cases, results, ops, label):
    lines = summary_table(results, label)
    lines += ["", "pyarena's refused cases by reason (the error's first clause); "
              "\"ort passes\": how many of them onnxruntime passes.", "",
              "| reason | cases | ort passes | operators (cases) |", "|---|---|---|---|"]
    for why, items in refused_by_reason(cases, results, ops):
        per_op = collections.Counter(op for _, op, _ in items)
        ort_ok = sum(1 for *_, s in items if s == "pass")
        names = ", ".join(f"{op} ({n})" for op, n in sorted(per_op.items()))
        why = why.replace("|", "\\|")
        lines.append(f"| {why} | {len(items)} | {ort_ok} | {names} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", help="only the cases whose name matches this regex")
    ap.add_argument("--batch", type=int, default=100, help="cases per child process")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a case may run before its child is killed")
    ap.add_argument("--markdown", help="write the summary and the refused list here")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--no-ops", action="store_true", help="leave out the table per operator")
    ap.add_argument("--abort-on", help=argparse.SUPPRESS)  # tests: the child aborts on it
    args = ap.parse_args(argv)

    import onnx
    import onnxruntime
    t0 = time.perf_counter()
    every = collect()
    by_name = {c.name: c for c in every}
    rx = re.compile(args.cases) if args.cases else None
    cases = [c for c in every if rx is None or rx.search(c.name)]
    if not cases:
        print(f"no case matches {args.cases!r}", file=sys.stderr)
        return 2
    ops = {c.name: op_of(c, by_name) for c in cases}

    def progress(n, total):
        print(f"  {n}/{total} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    results = run_all(cases, args.batch, args.timeout, args.abort_on, progress)
    took = time.perf_counter() - t0
    label = {"pyarena": f"pyarena {_version()}",
             "onnxruntime": f"onnxruntime {onnxruntime.__version__}"}

    print(f"{len(cases)} ONNX node cases (onnx {onnx.__version__}), {took:.0f} s")
    print("\n".join(summary_table(results, label)))
    if not args.no_ops:
        print("\n| operator | cases | pyarena " + " / ".join(STATUSES)
              + " | onnxruntime " + " / ".join(STATUSES) + " |")
        print("|---|---|---|---|")
        table = by_op(cases, results, ops)
        for op in sorted(table):
            row = table[op]
            n = sum(row["pyarena"].values())
            print(f"| {op} | {n} | " + " / ".join(str(row['pyarena'][s]) for s in STATUSES)
                  + " | " + " / ".join(str(row['onnxruntime'][s]) for s in STATUSES) + " |")
    bad = [(c, r) for c, r in zip(cases, results) if r["pyarena"][0] in ("wrong", "raw", "crash")]
    if bad:
        print("\npyarena's wrong results, raw exceptions and crashes:")
        for c, r in bad:
            status, detail = r["pyarena"]
            print(f"  {status:6} {c.name} [{ops[c.name]}] {detail[:300]} "
                  f"(onnxruntime: {r['onnxruntime'][0]})")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(cases, results, ops, label))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": took, "cases": {
                c.name: {"op": ops[c.name], **{rt: list(r[rt]) for rt in RUNTIMES}}
                for c, r in zip(cases, results)}}, f, indent=1)
    return 1 if bad else 0


def _version():
    """The checkout's commit, or the package version outside a checkout."""
    import subprocess
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0:
            return out.stdout.strip()
    except OSError:
        pass
    import pyarena
    return getattr(pyarena, "__version__", "")


if __name__ == "__main__":
    sys.exit(main())
