"""Test helper: mutate model files and feed them to helpers.fuzz_worker
processes under an address-space limit and a per-case time limit (not a
test module).

:func:`mutations` makes the hostile files (bit flips, byte overwrites,
truncations, seeded); :func:`run_cases` runs them and returns a
:class:`Report`: per-case outcome ``ok`` / ``clean`` (a pyarena error) /
``foreign`` (another exception) / ``signal`` (the worker died) / ``hang``
(no answer within the time limit) / ``over`` (the worker's peak resident
set rose above its start-up level by more than the memory limit given to
pyarena + :data:`RSS_SLACK`: something allocated before it checked).  A worker that dies or hangs is
replaced and the run goes on with the next case.
"""
import os
import select
import subprocess
import sys
from dataclasses import dataclass, field

import numpy as np

AS_LIMIT = 4 << 30          # address space of a worker
BUDGET = 1 << 30            # max_memory the worker passes to pyarena
RSS_SLACK = 64 << 20        # what a case may hold above the memory limit


def mutations(blob, n, seed):
    """``n`` mutated copies of ``blob``: (kind, bytes)."""
    rng = np.random.default_rng(seed)
    size = len(blob)
    out = []
    for i in range(n):
        b = bytearray(blob)
        kind = ("flip", "flips", "byte", "truncate")[i % 4]
        if kind == "flip":
            pos = int(rng.integers(0, size))
            b[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == "flips":
            for pos in rng.integers(0, size, size=int(rng.integers(2, 9))):
                b[int(pos)] ^= 1 << int(rng.integers(0, 8))
        elif kind == "byte":
            pos = int(rng.integers(0, size))
            b[pos] = int(rng.choice([0x00, 0x7F, 0x80, 0xFF, int(rng.integers(0, 256))]))
        else:
            b = b[:int(rng.integers(0, size))]
        out.append((kind, bytes(b)))
    return out


def reseal(blob):
    """A compiled model's bytes (``.pa``) with every checksum made right
    again over what they cover -- the header, the document, each array --
    so that damage reaches the decoder and the validators behind them (a
    hostile file, not an accident).  Bytes that do not parse that far are
    returned as they are."""
    import json
    import struct
    from pyarena._native.checksum import crc32c
    if len(blob) < 64:
        return blob
    b = bytearray(blob)
    meta_len, blob_off, blob_len = struct.unpack_from("<QQQ", b, 32)
    if 64 + meta_len > len(b) or blob_off > len(b) or blob_off < 64 + meta_len:
        return blob
    try:
        doc = json.loads(bytes(b[64:64 + meta_len]))
        for row in doc["arrays"]:
            off, n = int(row[0]), int(row[1])
            row[2] = crc32c(bytes(b[blob_off + off:blob_off + off + n]))
        meta = json.dumps(doc, separators=(",", ":")).encode()
    except Exception:       # not JSON any more, or no array table: the document as is
        meta = bytes(b[64:64 + meta_len])
    if len(meta) > blob_off - 64:
        return blob
    b[64:blob_off] = meta + b" " * (blob_off - 64 - len(meta))
    struct.pack_into("<Q", b, 32, blob_off - 64)
    struct.pack_into("<I", b, 56, crc32c(bytes(b[64:blob_off])))
    struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    return bytes(b)


@dataclass
class Report:
    outcomes: dict = field(default_factory=dict)    # path -> (outcome, detail)
    peak_rss: int = 0       # bytes: the most a worker's peak rose above its start-up

    def count(self, outcome):
        return sum(1 for o, _ in self.outcomes.values() if o == outcome)

    def bad(self):
        return {p: v for p, v in self.outcomes.items()
                if v[0] in ("foreign", "signal", "hang", "over")}

    def summary(self):
        return ", ".join([f"{k} {self.count(k)}" for k in
                          ("ok", "clean", "foreign", "signal", "hang", "over")] +
                         [f"peak RSS +{self.peak_rss / 2**20:.1f} MiB"])


def _start(tests_dir, budget):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONPATH=tests_dir + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "helpers.fuzz_worker", str(budget),
                             str(AS_LIMIT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=tests_dir)


def _readline(proc, timeout):
    r, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if r else None


def run_cases(paths, case_seconds=60.0, start_seconds=120.0, budget=BUDGET):
    """Run every path through a worker whose pyarena calls get
    ``max_memory=budget``; returns a :class:`Report`."""
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = Report()
    todo = list(paths)
    while todo:
        proc = _start(tests_dir, budget)
        batch, todo = todo, []
        proc.stdin.write("".join(p + "\n" for p in batch))
        proc.stdin.close()
        ready = _readline(proc, start_seconds)      # start-up: not a case's time
        if not ready or not ready.startswith("ready "):
            proc.kill()
            proc.wait()
            raise RuntimeError("a fuzz worker did not start")
        base = int(ready.split()[1]) << 10
        for i, path in enumerate(batch):
            line = _readline(proc, case_seconds)
            if line and line.startswith("start"):
                line = _readline(proc, case_seconds)
                if line and line.startswith("done"):
                    _, _, outcome, hwm, *detail = line.rstrip("\n").split(" ", 4)
                    rise = (int(hwm) << 10) - base
                    if rise > report.peak_rss:
                        report.peak_rss = rise
                        if rise > budget + RSS_SLACK:   # the first case to go over
                            outcome = "over"
                            detail = [f"peak RSS +{rise >> 20} MiB above start-up"] + detail
                    report.outcomes[path] = (outcome, " ".join(detail))
                    continue
            if line is None:                # no answer in time
                proc.kill()
                proc.wait()
                report.outcomes[path] = ("hang", "")
            else:                            # EOF: the worker died
                rc = proc.wait()
                report.outcomes[path] = ("signal" if rc < 0 else "foreign",
                                         f"worker exit status {rc}")
            todo = batch[i + 1:]
            break
        else:
            proc.wait()
    return report
