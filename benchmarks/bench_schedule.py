"""Memory-aware scheduling on real architectures: the fixed-order bound and
the planned arena with the given op order and with the scheduled one.

    python benchmarks/bench_schedule.py [--models inception_v1,densenet121,...]

The models are the ``light_*`` files of the ``onnx`` package (real
layer graphs, weights made by ConstantOfShape: replaced by seeded random
ones, see tests/helpers/model_zoo.py) and the built-in networks named in
``pyarena.runtime.models.MODELS`` (``randwire``: randomly wired stages, the
irregular graphs of the Serenity paper; ``randwire@3``: its seed 3).
``--time-limit`` is ``plan``'s (the scheduler gets at most 5 s of it).  Columns: ops, segments between
articulation ops, the fixed-order bound (largest bytes live at one step,
64-byte padding, no in-place) of the given and the scheduled order, their
ratio, the floor no order goes below (bytes live at the fullest
articulation op: every other op runs before or after it, so its step is
the same in every order), the planner's arena (in-place on) for both
orders, and the scheduler's time.
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

MODELS = "bvlc_alexnet,densenet121,inception_v1,inception_v2,resnet50,shufflenet,squeezenet," \
         "vgg19,zfnet512"


def main():
    from helpers.model_zoo import randomized_light_model
    from pyarena import plan
    from pyarena.importers import load_model
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--time-limit", type=float, default=None)
    args = ap.parse_args()
    from pyarena.runtime.models import MODELS as BUILTIN
    opts = {} if args.time_limit is None else {"time_limit": args.time_limit}
    print(f"{'model':<14}{'ops':>5}{'segs':>6}{'bound MiB':>11}{'sched MiB':>11}{'ratio':>7}"
          f"{'floor MiB':>11}{'arena MiB':>11}{'sched MiB':>11}{'ratio':>7}{'ms':>8}")
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            base, _, seed = name.partition("@")
            if base in BUILTIN:
                def load(base=base, seed=seed):
                    return BUILTIN[base](**({"seed": int(seed)} if seed else {}))
            else:
                path = randomized_light_model(name, os.path.join(d, name + ".onnx"))

                def load(path=path):
                    return load_model(path)
            p0 = plan(load())
            p1 = plan(load(), schedule=True, **opts)
            s = p1.schedule
            print(f"{name:<14}{len(p1.graph.ops):>5}{s.segments:>6}"
                  f"{s.peak_before / 2**20:>11.2f}{s.peak_after / 2**20:>11.2f}"
                  f"{s.peak_after / s.peak_before:>7.3f}{s.floor / 2**20:>11.2f}"
                  f"{p0.arena_bytes / 2**20:>11.2f}"
                  f"{p1.arena_bytes / 2**20:>11.2f}{p1.arena_bytes / p0.arena_bytes:>7.3f}"
                  f"{s.seconds * 1e3:>8.0f}")


if __name__ == "__main__":
    main()
