"""Output shapes of onnxruntime's ``com.microsoft`` transformer operators
(same conventions as :mod:`.shape_rules`): the fused norms, the
embedding, the attentions and MatMulNBits.  They size every output from
fully known input shapes (the importer hands contrib rules no symbolic
dims) and leave an output unknown otherwise."""
from .shape_rules import FLOAT, INT32

__all__ = ["skip_layer_norm", "embed_layer_norm", "ms_attention", "multi_head_attention",
           "group_query_attention", "matmul_nbits"]


def _unknown(n):
    return [(None, None)] * n.nout


def skip_layer_norm(n):
    """(Skip)(Simplified)LayerNormalization: y, mean, inv_std_var (the
    rows' statistics, float32) and input + skip + bias."""
    x = n.s(0)
    if x is None:
        return _unknown(n)
    stat = list(x[:-1]) + [1]
    return [(x, n.t(0)), (stat, FLOAT), (stat, FLOAT), (x, n.t(0))][:n.nout]


def embed_layer_norm(n):
    """EmbedLayerNormalization: y (batch, seq, hidden), mask_index (batch)
    int32, the embeddings' sum before the norm."""
    ids, word = n.s(0), n.s(2)
    if ids is None or word is None or len(ids) != 2 or len(word) != 2:
        return _unknown(n)
    y = [ids[0], ids[1], word[1]]
    return [(y, n.t(2)), ([ids[0]], INT32), (y, n.t(2))][:n.nout]


def _qkv_sizes(n, total):
    sizes = list(n.a.get("qkv_hidden_sizes", []) or [])
    return sizes if len(sizes) == 3 else [total // 3] * 3


def ms_attention(n):
    """com.microsoft Attention: output (batch, seq, v hidden), present (2,
    batch, heads, past + seq, head size)."""
    x, w = n.s(0), n.s(1)
    if x is None or w is None or len(x) != 3 or len(w) != 2:
        return _unknown(n)
    hq, hk, hv = _qkv_sizes(n, w[1])
    heads = int(n.a["num_heads"])
    past = n.s(4) if n.has(4) else None
    total = x[1] + (past[3] if past is not None and len(past) == 5 else 0)
    present = [2, x[0], heads, total, hk // heads]
    return [([x[0], x[1], hv], n.t(0)), (present, n.t(0))][:n.nout]


def _mha_geometry(n):
    """(batch, seq, heads, key length, key head size, value head size) of a
    MultiHeadAttention node, or None."""
    q, k, v = n.s(0), n.s(1) if n.has(1) else None, n.s(2) if n.has(2) else None
    heads = int(n.a["num_heads"])
    if q is None:
        return None
    if len(q) == 5:         # packed (batch, seq, heads, 3, size)
        return q[0], q[1], heads, q[1], q[4], q[4]
    if k is not None and len(k) == 5:       # packed key and value
        return q[0], q[1], heads, k[1], k[4], k[4]
    if len(q) != 3 or k is None or v is None:
        return None
    if len(k) == 4:         # (batch, heads, len, size)
        return q[0], q[1], heads, k[2], k[3], v[3]
    return q[0], q[1], heads, k[1], k[2] // heads, v[2] // heads


def multi_head_attention(n):
    """MultiHeadAttention: output (batch, seq, heads * v size), present key
    and value (batch, heads, past + len, size), and the scores (batch,
    heads, seq, past + len)."""
    g = _mha_geometry(n)
    if g is None:
        return _unknown(n)
    b, s, heads, kl, dk, dv = g
    past = n.s(6) if n.has(6) else None
    k4 = n.has(1) and n.s(1) is not None and len(n.s(1)) == 4
    total = kl + (past[2] if past is not None and not k4 else 0)
    t = n.t(0)
    return [([b, s, heads * dv], t), ([b, heads, total, dk], t), ([b, heads, total, dv], t),
            ([b, heads, s, total], t)][:n.nout]


def group_query_attention(n):
    """GroupQueryAttention: output (batch, seq, heads * size), present key
    and value (batch, kv heads, max(past, total), size)."""
    q = n.s(0)
    heads, kv = int(n.a["num_heads"]), int(n.a["kv_num_heads"])
    if q is None or len(q) != 3:
        return _unknown(n)
    packed = not n.has(1)
    size = q[2] // (heads + 2 * kv) if packed else q[2] // heads
    past = n.s(3) if n.has(3) else None
    p = past[2] if past is not None and len(past) == 4 else 0
    total = n.v(6)
    total = int(total.reshape(-1)[0]) if total is not None else p + q[1]
    present = [q[0], kv, max(p, total), size]
    t = n.t(0)
    return [([q[0], q[1], heads * size], t), (present, t), (present, t),
            ([q[0], heads, q[1], max(p, total)], t)][:n.nout]


def matmul_nbits(n):
    """MatMulNBits: A (..., K) times the (N, K) blocked weight -> (..., N)."""
    a = n.s(0)
    if a is None:
        return _unknown(n)
    return [(list(a[:-1]) + [int(n.a["N"])], n.t(0))]
