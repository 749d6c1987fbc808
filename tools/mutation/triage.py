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
    "gen:csrc/alloc/page_heap.h:51:rel":
        "the line is the middle of a /* */ comment (the generator knows C comments only by "
        "how a line starts); the compiler never sees the operator",
    "gen:csrc/kernels/resize.c:89:rel":
        "the larger of h and h_out: when they are equal both arms of the ?: are the same "
        "number, so > and >= pick the same value",
    "gen:csrc/kernels/qconv.c:517:rel":
        "the smaller of hwo - p0 and mb: when they are equal both arms of the ?: are the "
        "same number, so < and <= pick the same value",
    "gen:csrc/alloc/buddy.c:333:rel":
        "the walk's guard against a cyclic free list (both versions return broken + 1 on "
        "a cycle); a sound list of exactly 2^30 blocks of one order would tell them apart, "
        "but it needs 2^31 blocks (each free block's buddy not free) of at least 16 bytes: "
        "32 GiB committed and 2^30 live blocks -- unreachable by any test, not a proof of "
        "equivalence",
    "gen:csrc/alloc/pool_learn.c:286:off":
        "slot[] gets at most two entries per lifetime (slot[nb++] runs once, or twice for "
        "a carried block), so 2n entries are enough; the + 1 only keeps malloc from "
        "seeing 0 when n = 0, and then nb = 0 sends both versions to fail (a NULL from "
        "malloc(0) goes to the same label)",
    "gen:csrc/kernels/elementwise.c:117:rel":
        "only n = 2^50 tells them apart: the mutant refuses it, the original accepts it and "
        "reads 2^50 floats (4 PiB) from x -- no buffer of that size can exist, so every "
        "valid call behaves the same",
    "gen:csrc/plan/exact.c:213:rel":
        "no section is ever marked affected, so apply() never raises a section's floor "
        "from its unplaced buffers' minimum offsets; floor[] is read only by check(), a "
        "pruning bound, so the solver explores more nodes but proves the same feasibility "
        "and arena size (which of several equally good assignments the node-limited round "
        "robin reaches first may change; no test may pin one of them)",
    "gen:csrc/plan/exact.c:264:rel":
        "the roll-back of cuts[] when the split stack cannot grow: R_NOMEM ends the whole "
        "solve (PA_ERR_NOMEM, every array freed), so the cuts of the last section are "
        "never read again",
    "gen:csrc/plan/exact.c:480:rel":
        "cuts[s] also counts a buffer's last section, as if it crossed into the next: "
        "boundaries where a buffer ends look crossed, so the solver splits less often "
        "(top-level partitions and decompose); a split is only an optimisation -- the "
        "unsplit search is complete -- so feasibility and arena size are the same, at "
        "the cost of more nodes",
    "gen:pyarena/importers/onnx_shapes.py:163:off":
        "a contrib op's outputs get one (None, None) pair too many; the one caller reads "
        "them only through zip(outs, res) with outs = node.output, which stops at the "
        "node's last output",
    "gen:pyarena/planning/result.py:327:rel":
        "a 1-D buffer of 1-byte items takes the other branch, np.asarray(target)."
        "reshape(-1).view(np.uint8): for a C-contiguous writable buffer (the only kind that "
        "gets here) both wrap its memory without a copy, at the same address, size and "
        "writability (checked for bytearray, mmap, array.array, ctypes arrays, memoryview "
        "slices and NumPy arrays)",
    "gen:pyarena/runtime/fusion.py:468:rel":
        "r produced by the conv itself (index == here) would be the conv's own output, "
        "which needs Add(x, x) or Pad(x) beside the Add as x's readers; _fuse_residual "
        "has already returned 0 for both (identical Add inputs; x not read by the Add "
        "alone), so the equal case never reaches this line",
    "gen:pyarena/runtime/kernels/elementwise.py:419:rel":
        "when n == ch the loop runs once, on x[0:n], y[0:n] and scratch[:n] -- the whole "
        "arrays (the scratch holds ch = n items) -- the same call as the shortcut",
    "gen:pyarena/runtime/kernels/movement.py:501:rel":
        "when the target size equals the input's, the pad branch writes dst[a] = "
        "slice(0, d), the whole axis of d items: the same as the slice(None) it replaces",
    "gen:pyarena/runtime/kernels/normalization.py:172:rel":
        "dead store: setup() sets self.empty again (self.empty = None, then the "
        "max/min identity over an empty axis) before anything reads it, so the value "
        "assigned on this line is never used",
    "gen:pyarena/runtime/kernels/resize.py:56:swap":
        "d = np.abs((t - i) * s) is np.abs(-((i - t) * s)): the absolute value of a "
        "negated number, the same in floating point (negation is exact)",
}
