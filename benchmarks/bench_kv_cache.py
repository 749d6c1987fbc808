"""A decode loop fed the onnxruntime way (past keys / values in, present
out), three ways, on one seeded decoder built in code
(tests/helpers/kv_decoder.py; default 4 layers, hidden 256, 4 heads,
vocab 4096, feed-forward 1024, tied LM head):

* ``kv``: pyarena's ``InferenceSession(kv_cache=MaxContext(prompt +
  tokens))``, each step's presents (views of the caches) fed back as the
  next pasts;
* ``plain``: pyarena's InferenceSession without it (a new input shape per
  token: a retarget and a plan each step, the past copied every step);
* ``ort``: onnxruntime, its presents fed back (one intra-op thread).

Each runs in a fresh process: the prompt (``--prompt`` tokens), then
``--tokens`` tokens generated greedily; printed per mode: the median and
the mean time per generated token (the prompt's call left out), the
first call (the prompt: import, plan and run), the process's peak RSS
(``VmHWM``) and its baseline (after the imports, before the session is
made), so the difference is what the model and its run added; pyarena's
modes also after importing the ``onnx`` package its ONNX import needs
(about 14 MiB; onnxruntime's baseline holds its own package), and what
was added above that; then whether the modes generated the same tokens,
and the kv session's counters (plans made, past copies, cache bytes).

    python benchmarks/bench_kv_cache.py [--tokens 256] [--prompt 16] [--rounds 1]

``--rounds N`` runs every mode's process N times, the modes alternating,
and shows per mode the round of median time per token, then the kv / ort
ratio of each round (on a shared machine: ratios of neighbouring runs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _peak_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _session(mode, path, context):
    if mode == "ort":
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    import pyarena
    kw = {"kv_cache": pyarena.MaxContext(context)} if mode == "kv" else {}
    return pyarena.InferenceSession(path, threads=1, **kw)


def child(mode, path, prompt, tokens, heads, size, layers):
    """One mode's loop, in this process; prints a JSON line."""
    if mode == "ort":
        import onnxruntime  # noqa: F401
    else:
        import pyarena  # noqa: F401
        import pyarena.importers.session  # noqa: F401
    base = _peak_kib()
    if mode != "ort":
        import onnx  # noqa: F401  (what a pyarena session over an .onnx file imports)
    with_format = _peak_kib()
    s = _session(mode, path, prompt + tokens)
    names = [o.name for o in s.get_outputs()]
    past = {f"past_key_values.{i}.{p}": np.zeros((1, heads, 0, size), np.float32)
            for i in range(layers) for p in ("key", "value")}
    ids = np.arange(1, prompt + 1, dtype=np.int64)[None]
    start, times, out_ids = 0, [], []
    for _ in range(tokens + 1):
        feeds = dict(input_ids=ids, position_ids=np.arange(start, start + ids.shape[1],
                                                           dtype=np.int64)[None], **past)
        t0 = time.perf_counter()
        outs = dict(zip(names, s.run(None, feeds)))
        times.append(time.perf_counter() - t0)
        start += ids.shape[1]
        nxt = int(outs["logits"][0, -1].argmax())
        out_ids.append(nxt)
        ids = np.array([[nxt]], np.int64)
        past = {k.replace("present", "past_key_values"): v for k, v in outs.items()
                if k.startswith("present")}
    info = s.memory_info() if mode == "kv" else {}
    print(json.dumps({"mode": mode, "first_s": times[0],
                      "median_ms": 1e3 * float(np.median(times[1:])),
                      "mean_ms": 1e3 * float(np.mean(times[1:])),
                      "peak_kib": _peak_kib(), "base_kib": base, "onnx_kib": with_format,
                      "tokens": out_ids,
                      "info": {k: v for k, v in info.items() if k.startswith("kv_")}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--modes", default="kv,plain,ort")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the modes' processes this many times, alternating; "
                         "per mode the round with the median time per token is shown")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "MODEL"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    size = a.hidden // a.heads
    if a.child:
        child(a.child[0], a.child[1], a.prompt, a.tokens, a.heads, size, a.layers)
        return
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from helpers.kv_decoder import decoder_model
    model = decoder_model(layers=a.layers, hidden=a.hidden, heads=a.heads, vocab=a.vocab,
                          ffn=4 * a.hidden, max_positions=a.prompt + a.tokens, seed=0)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONPATH=ROOT)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "decoder.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        weights = os.path.getsize(path)
        rounds = {}
        for i in range(max(1, a.rounds)):
            for mode in a.modes.split(","):
                cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, path,
                       "--tokens", str(a.tokens), "--prompt", str(a.prompt),
                       "--layers", str(a.layers), "--hidden", str(a.hidden),
                       "--heads", str(a.heads), "--vocab", str(a.vocab)]
                line = subprocess.run(cmd, env=env, check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1]
                rounds.setdefault(mode, []).append(dict(json.loads(line), round=i))
        for mode, rs in rounds.items():
            rs.sort(key=lambda r: r["median_ms"])
            results[mode] = rs[len(rs) // 2]
    kv_bytes = 2 * a.layers * a.heads * (a.prompt + a.tokens) * size * 4
    print(f"decoder: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, vocab {a.vocab}; "
          f"model file {weights / 2**20:.1f} MiB, KV at max context {kv_bytes / 2**20:.2f} MiB; "
          f"prompt {a.prompt}, {a.tokens} tokens, one thread")
    print(f"{'mode':8s} {'median ms/token':>16s} {'mean ms/token':>14s} {'first call s':>13s} "
          f"{'peak RSS MiB':>13s} {'baseline MiB':>13s} {'added MiB':>10s} "
          f"{'added over onnx MiB':>20s}")
    for mode, r in results.items():
        print(f"{mode:8s} {r['median_ms']:16.3f} {r['mean_ms']:14.3f} {r['first_s']:13.3f} "
              f"{r['peak_kib'] / 1024:13.1f} {r['base_kib'] / 1024:13.1f} "
              f"{(r['peak_kib'] - r['base_kib']) / 1024:10.1f} "
              f"{(r['peak_kib'] - r['onnx_kib']) / 1024:20.1f}")
    seqs = {m: r["tokens"] for m, r in results.items()}
    first = next(iter(seqs.values()))
    print("same tokens in every mode:", all(s == first for s in seqs.values()))
    if "kv" in results:
        info = results["kv"]["info"]
        print("kv session:", info)
        bound = weights + info["kv_arena_bytes"] + info["kv_cache_bytes"] + (8 << 20)
        added = (results["kv"]["peak_kib"] - results["kv"]["onnx_kib"]) * 1024
        print(f"kv peak RSS added over onnx {added / 2**20:.1f} MiB; bound: model file + "
              f"arena + KV at max context + 8 MiB = {bound / 2**20:.1f} MiB "
              f"({'within' if added <= bound else 'OVER'})")
    if "kv" in results and "ort" in results:
        print(f"kv / ort per token (median): {results['kv']['median_ms'] / results['ort']['median_ms']:.2f}")
        if a.rounds > 1:
            per = [k["median_ms"] / o["median_ms"] for k, o in zip(
                sorted(rounds["kv"], key=lambda r: r["round"]),
                sorted(rounds["ort"], key=lambda r: r["round"]))]
            print("kv / ort per round:", " ".join(f"{r:.2f}" for r in per))


if __name__ == "__main__":
    main()
