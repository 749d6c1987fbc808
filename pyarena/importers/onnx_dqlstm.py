"""onnxruntime's ``com.microsoft`` DynamicQuantizeLSTM, imported as an LSTM.

onnxruntime's dynamic quantizer turns an LSTM into DynamicQuantizeLSTM:
W and R stored as 8-bit integers, laid out [dirs, input, 4H] (transposed
against the ONNX LSTM's [dirs, 4H, input]), with a scale and zero point
per direction or per direction and column; at run time onnxruntime also
rounds X and h to 8 bits before each product.  This rewrite dequantizes
W and R once, at import, into a standard LSTM's layout and replaces the
node with that LSTM (same inputs otherwise, same attributes and outputs).
The weights are exactly onnxruntime's; the activations are not rounded,
so the outputs differ from onnxruntime's by that rounding alone.  The
float weights take 4x the bytes of the 8-bit ones.

A node whose W, R, scales or zero points are not initializers is left
alone: the executor then names it as an unsupported op.
"""
import numpy as np

__all__ = ["dequantize_lstms"]

_OP, _DOMAIN = "DynamicQuantizeLSTM", "com.microsoft"


def rewrites(op_type, domain):
    """Whether the import runs ``op_type`` of ``domain`` as an LSTM."""
    return op_type == _OP and domain == _DOMAIN


def _float_weight(q, scale, zero):
    """[dirs, in, 4H] integers, per-direction or per-column scale and zero
    point -> [dirs, 4H, in] float32."""
    d = q.shape[0]
    scale = np.asarray(scale, np.float32).reshape(d, 1, -1)
    zero = np.asarray(zero).astype(np.float32).reshape(d, 1, -1)
    w = (np.asarray(q).astype(np.float32) - zero) * scale
    return np.ascontiguousarray(w.transpose(0, 2, 1))


def dequantize_lstms(onnx, model, views=None, names=None):
    """Rewrite ``model.graph`` in place; returns the number of LSTMs made.
    ``views``: initializer name -> data read in place (onnx_data);
    ``names``: a set the new initializers' names are added to."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    views = views or {}

    def value(name):
        return views[name] if name in views else onnx.numpy_helper.to_array(inits[name])

    made = 0
    for n in g.node:
        if n.op_type != _OP or n.domain != _DOMAIN:
            continue
        ins = list(n.input) + [""] * (12 - len(n.input))
        if not all(i in inits for i in [ins[1], ins[2]] + ins[8:12]):
            continue
        new = []
        for k, (q, s, z) in ((1, (1, 8, 9)), (2, (2, 10, 11))):
            w = _float_weight(value(ins[q]), value(ins[s]), value(ins[z]))
            name = f"{ins[q]}::dequantized"
            g.initializer.append(onnx.numpy_helper.from_array(w, name))
            if names is not None:
                names.add(name)
            new.append(name)
        lstm_ins = [ins[0], *new, *ins[3:8]]
        while lstm_ins[-1] == "":
            lstm_ins.pop()
        lstm = onnx.helper.make_node("LSTM", lstm_ins, list(n.output), name=n.name)
        lstm.attribute.extend(n.attribute)
        n.CopyFrom(lstm)
        made += 1
    return made
