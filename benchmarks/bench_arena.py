"""Arena.empty against np.empty (pytest-benchmark).

    pytest benchmarks/bench_arena.py

Each round allocates N arrays (the arena is rewound between rounds, outside
the timing); the table at the end gives the median time per array and the
ratio against np.empty measured in the same run.
"""
import numpy as np
import pytest

from pyarena import Arena

SHAPES = {
    "(64,)": ((64,), 1000),
    "(1,64,56,56)": ((1, 64, 56, 56), 1000),
    "(1,256,28,28)": ((1, 256, 28, 28), 1000),
    "16 MiB": ((4 << 20,), 50),
}


@pytest.mark.parametrize("case", list(SHAPES))
@pytest.mark.parametrize("impl", ["np.empty", "Arena.empty"])
def test_empty(benchmark, recorder, case, impl):
    shape, n = SHAPES[case]
    f32 = np.float32
    if impl == "np.empty":
        def run():
            e = np.empty
            for _ in range(n):
                e(shape, f32)
        benchmark.pedantic(run, rounds=100, warmup_rounds=5)
    else:
        arena = Arena(chunk_size=1 << 20)
        mark = arena.mark()

        def run():
            e = arena.empty
            for _ in range(n):
                e(shape, f32)

        benchmark.pedantic(run, setup=lambda: arena.rewind(mark), rounds=100,
                           warmup_rounds=5)
        assert arena.stats().count == n
    recorder(benchmark, "Arena.empty vs np.empty", case, impl, "np.empty", per_call=n)
