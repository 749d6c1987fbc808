"""Densify constant sparse TFLite tensors (``SparsityParameters``) at import.

Sparse weights (``face_detection_full_range_sparse``, ``pose_detection`` ...)
store only the non-zeros of a tensor plus a per-dimension description; the
model then runs ``DENSIFY`` on the constant.  pyarena folds that at import
time: the importer reads the values and this module scatters them into the
dense array, so the graph sees an ordinary constant.

Format (TFLite schema, ``SparsityParameters``): the original dims
``d0..d(n-1)`` may be split into blocks -- ``block_map[i]`` names the
original dim that block dim ``n+i`` subdivides; its block size is the
``dense_size`` of ``dim_metadata[n+i]``.  ``traversal_order`` lists the
n + len(block_map) (expanded) dims in storage order, original dims first;
``dim_metadata[level]`` describes the dim visited at ``level``: ``DENSE``
(every index ``0..dense_size-1``) or ``SPARSE_CSR`` (for the parent
position ``p``, the indices ``array_indices[array_segments[p] :
array_segments[p+1]]``).  Values follow in that depth-first order.  This is
TFLite's ``FormatConverter::SparseToDense``, done level by level with NumPy
arrays instead of recursion.
"""
import math

import numpy as np

__all__ = ["densify", "read_sparsity"]

DENSE, SPARSE_CSR = 0, 1


def densify(values, shape, traversal_order, block_map, dims):
    """The dense array of ``shape`` holding ``values`` (1-D, storage order).

    ``dims``: one ``(format, dense_size, segments, indices)`` per traversal
    level (segments/indices None for DENSE).  ValueError naming the bad
    field if the description is inconsistent."""
    shape = [int(d) for d in shape]
    n = len(shape)
    order = [int(t) for t in traversal_order]
    bmap = [int(b) for b in block_map]
    if len(order) != n + len(bmap) or sorted(order) != list(range(n + len(bmap))):
        raise ValueError(f"traversal_order {order} is not a permutation of the {n} dims "
                         f"+ {len(bmap)} block dims")
    if any(t >= n for t in order[:n]):
        raise ValueError(f"traversal_order {order}: the original dims must come first")
    if len(dims) != len(order):
        raise ValueError(f"{len(dims)} dim_metadata entries for {len(order)} dims")
    if any(not 0 <= b < n for b in bmap):
        raise ValueError(f"block_map {bmap} names a dim outside rank {n}")
    bsize = [int(dims[order.index(n + i)][1]) for i in range(len(bmap))]
    if any(b < 1 for b in bsize):
        raise ValueError(f"block sizes {bsize} must be >= 1")
    # each expanded dim's size: an original dim divided by its block size,
    # a block dim its block size; a DENSE level must visit exactly that
    # many indices (checked before its paths are laid out: an edited
    # dense_size would otherwise expand into gigabytes of positions)
    expanded = list(shape) + bsize
    for i, d in enumerate(bmap):
        if shape[d] % bsize[i]:
            raise ValueError(f"block size {bsize[i]} does not divide dim {d} of size "
                             f"{shape[d]}")
        expanded[d] //= bsize[i]
    values = np.asarray(values).reshape(-1)
    pos = np.zeros(1, np.int64)     # position of each partial path at this level
    cols = []                       # index of each partial path, per level
    for level, (fmt, size, segs, inds) in enumerate(dims):
        if fmt == DENSE:
            size = int(size)
            if size != expanded[order[level]]:
                raise ValueError(f"dim_metadata[{level}]: dense_size {size}, the dim it "
                                 f"visits has size {expanded[order[level]]}")
            cols = [np.repeat(c, size) for c in cols]
            cols.append(np.tile(np.arange(size, dtype=np.int64), pos.size))
            pos = (pos[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
        elif fmt == SPARSE_CSR:
            segs = np.asarray(segs, np.int64)
            inds = np.asarray(inds, np.int64)
            if segs.size < 1 or (pos.size and pos.max() + 1 >= segs.size) or \
                    np.any(np.diff(segs) < 0) or segs[0] < 0 or segs[-1] > inds.size:
                raise ValueError(f"dim_metadata[{level}]: array_segments (size {segs.size}) "
                                 f"do not fit {pos.size} parent positions and "
                                 f"{inds.size} indices")
            counts = segs[pos + 1] - segs[pos]
            cols = [np.repeat(c, counts) for c in cols]
            starts = np.repeat(segs[pos] - np.concatenate(([0], np.cumsum(counts)[:-1])),
                               counts)
            pos = starts + np.arange(int(counts.sum()), dtype=np.int64)
            cols.append(inds[pos])
        else:
            raise ValueError(f"dim_metadata[{level}]: unknown format {fmt}")
    if pos.size != values.size:
        raise ValueError(f"the sparsity description addresses {pos.size} values, the "
                         f"buffer holds {values.size}")
    orig = [None] * n
    for level in range(n):
        orig[order[level]] = cols[level]
    for level in range(n, len(order)):
        b = order[level] - n
        orig[bmap[b]] = orig[bmap[b]] * bsize[b] + cols[level]
    for d, (ix, s) in enumerate(zip(orig, shape)):
        if ix.size and (ix.min() < 0 or ix.max() >= s):
            raise ValueError(f"an index of dim {d} falls outside its size {s}")
    out = np.zeros(math.prod(shape), dtype=values.dtype)
    if values.size:
        out[np.ravel_multi_index(tuple(orig), shape)] = values
    return out.reshape(shape)


def _vector(tflite, kind, table):
    if table is None or kind == 0:
        return None
    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(int(kind))
    if cls is None:
        raise ValueError(f"unknown sparse index vector type {kind}")
    v = cls()
    v.Init(table.Bytes, table.Pos)
    return v.ValuesAsNumpy() if v.ValuesLength() else np.zeros(0, np.int64)


def read_sparsity(tflite, sp):
    """(traversal_order, block_map, dims) of a flatbuffer SparsityParameters."""
    order = sp.TraversalOrderAsNumpy() if sp.TraversalOrderLength() else []
    bmap = sp.BlockMapAsNumpy() if sp.BlockMapLength() else []
    dims = []
    for i in range(sp.DimMetadataLength()):
        m = sp.DimMetadata(i)
        dims.append((int(m.Format()), int(m.DenseSize()),
                     _vector(tflite, m.ArraySegmentsType(), m.ArraySegments()),
                     _vector(tflite, m.ArrayIndicesType(), m.ArrayIndices())))
    return list(order), list(bmap), dims
