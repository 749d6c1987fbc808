"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM and WHILE next to the TFLite
interpreter on the same files.

Two models made in code by the tests' builders (nothing downloaded):

* ``lstm``  -- one sequence LSTM, time-major, seq S, batch 16, input 128,
  hidden 256 (weights scaled 1/16: the outputs stay out of saturation);
* ``lstm-pln`` -- the same with peepholes, a projection to 128 (with bias)
  and layer normalisation;
* ``lstm-int8`` -- the first with int8 weights (TFLite's hybrid kernel;
  pyarena dequantizes them at import, so max diff is the interpreter's
  rounding of x and h to int8);
* ``bilstm`` -- a bidirectional LSTM, hidden 128 each way, merged outputs;
* ``rnn``   -- a sequence RNN, hidden 256, tanh (all weights scaled 1/16).
* ``while`` -- a WHILE counting to N, its body an int ADD, a MUL and an
  ADD on 2x3 floats (zeros: 1.5^N would overflow), a value passed through.

For each: pyarena's median inference (planned Executor), the
interpreter's (``num_threads=1``; the LSTM's variable state reset before
each invoke, as a fresh interpreter starts), their ratio (same run,
interleaved rounds), the largest |difference| and the planned arena.
One thread everywhere (BLAS too).

    python benchmarks/bench_tflite_control.py [--steps 64] [--count 1000] [--repeat 15]
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")


def _models(d, steps, count):
    sys.path[:0] = [_TESTS, os.path.join(_TESTS, "importers")]
    from test_tflite_control import _while_model
    from test_tflite_sequence_lstm import _bilstm_model, _lstm_model
    from test_tflite_sequence_rnn import _rnn_model
    x = np.random.default_rng(0).standard_normal((steps, 16, 128)).astype(np.float32)
    p = lambda n: os.path.join(d, n + ".tflite")    # noqa: E731
    kw = dict(S=steps, N=16, I=128, H=256, scale=1 / 16)
    wl = _while_model(p("while"), limit=count)
    return {"lstm": (_lstm_model(p("lstm"), **kw), {"x": x}),
            "lstm-pln": (_lstm_model(p("pln"), peephole=True, projection=True, P=128,
                                     proj_bias=True, layer_norm=True, **kw), {"x": x}),
            "lstm-int8": (_lstm_model(p("int8"), hybrid="int8", **kw), {"x": x}),
            "bilstm": (_bilstm_model(p("bi"), **dict(kw, H=128)), {"x": x}),
            "rnn": (_rnn_model(p("rnn"), **kw), {"x": x}),
            "while": (wl, {"i": np.array([0], np.int32), "x": np.zeros((2, 3), np.float32),
                           "k": np.zeros((2, 3), np.float32)})}


def _interpreter(path, feeds):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=1)
    it.allocate_tensors()
    ins = [(d["index"], feeds[d["name"]]) for d in it.get_input_details()]

    def run():
        it.reset_all_variables()
        for i, v in ins:
            it.set_tensor(i, v)
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args(argv)
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    print(f"{'model':10} {'pyarena ms':>11} {'TFLite ms':>10} {'ratio':>6} {'max diff':>9} "
          f"{'arena B':>9}")
    with tempfile.TemporaryDirectory() as d:
        for name, (path, feeds) in _models(d, a.steps, a.count).items():
            g = load_model(path)
            p = plan(g)
            ex = Executor(g, p)
            ref = _interpreter(path, feeds)
            out, want = ex.run(feeds), ref()
            diff = max(float(np.abs(out[k] - want[k]).max()) for k in out)
            ta, tb = [], []
            for _ in range(a.repeat):
                t = time.perf_counter()
                ex.run(feeds)
                ta.append(time.perf_counter() - t)
                t = time.perf_counter()
                ref()
                tb.append(time.perf_counter() - t)
            ma, mb = statistics.median(ta) * 1e3, statistics.median(tb) * 1e3
            print(f"{name:10} {ma:11.2f} {mb:10.2f} {ma / mb:6.2f} {diff:9.1e} "
                  f"{p.arena_bytes:9,}")


if __name__ == "__main__":
    main()
