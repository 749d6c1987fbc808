"""Survivors of generated mutants (generate.py), looked at one by one.

``EQUIVALENT``: id -> why the mutant cannot change behaviour (the score
leaves them out).  A survivor not listed here is a test to write: the run
reports it as such.  Ids name the file and line, so an entry goes stale as
the code moves; the runner says which entries no longer match a candidate.
"""

EQUIVALENT = {
    "gen:pyarena/runtime/kernels/linalg.py:45:rel":
        "the prior's packed weights are reused only if their size matches; the same "
        "weights always pack to the same size, so the flip only repacks (memory, not "
        "results)",
}
