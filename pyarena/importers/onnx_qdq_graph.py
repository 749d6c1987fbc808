"""The lookups over an ONNX graph that the QDQ rewrites share
(importers/onnx_qdq.py, importers/onnx_qdq_weights.py): producers,
readers, constant values (read in place or from the protobuf), the 8-bit
types onnxruntime's fusions see, and new initializers added beside the
file's weights."""
import functools

import numpy as np

__all__ = ["QdqGraph"]


class QdqGraph:
    """Lookups over the ONNX graph the rules share."""

    def __init__(self, onnx, g, views=None):
        self.onnx = onnx
        self.inits = {i.name: i for i in g.initializer}
        # initializers read in place (onnx_data); the lookup tables the
        # rewrite adds join them (the cached parsed models then hold no copy)
        self.views = views if views is not None else {}
        self.in_place = views is not None
        self.producer = {o: n for n in g.node for o in n.output if o}
        self.readers = {}
        for n in g.node:
            for i in n.input:
                if i:
                    self.readers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in g.output}
        self.new_inits = []          # initializers a rewrite adds (lookup tables ...)
        self._g = g

    @functools.cached_property
    def u8(self):
        return self._s8_to_u8()

    @functools.cached_property
    def shapes(self):
        """name -> dims from the file's value_info, inputs and outputs."""
        return {v.name: [d.dim_value if d.HasField("dim_value") else 0
                         for d in v.type.tensor_type.shape.dim]
                for v in list(self._g.value_info) + list(self._g.input) + list(self._g.output)
                if v.type.tensor_type.HasField("shape")}

    def _s8_to_u8(self):
        """The Q outputs onnxruntime's QDQS8ToU8Transformer turns to uint8
        on x86, where its QDQ fusions take no int8 activations into
        QLinearConv / QLinearMatMul (qdq_s8_to_u8.cc): a Q whose only
        reader is a DQ that has one reader itself (a DQ read twice is
        copied per reader first, ensure_unique_dq_for_node_unit.cc), both
        with the same int8 scalar zero point.  The values do not change
        (zero point + 128), but which groups fuse does."""
        u8 = set()
        for n in self.producer.values():
            if n.op_type != "QuantizeLinear" or n.output[0] in self.outputs:
                continue
            rs = self.readers.get(n.output[0], [])
            if len(rs) != 1 or rs[0].op_type != "DequantizeLinear" or \
                    len(self.readers.get(rs[0].output[0], [])) + \
                    (rs[0].output[0] in self.outputs) != 1:
                continue
            zq, zd = [x.input[2] if len(x.input) > 2 else "" for x in (n, rs[0])]
            if zq in self.inits and zd in self.inits and self.int_dtype(zq) == np.int8 and \
                    self.value(zq).size == 1 and np.array_equal(self.value(zq), self.value(zd)):
                u8.add(n.output[0])
        return u8

    def qtype(self, node):
        """The 8-bit type of a DQ's input or a Q's output as onnxruntime's
        fusions see it (after the int8 -> uint8 pairs)."""
        t = node.input[0] if node.op_type == "DequantizeLinear" else node.output[0]
        if t in self.u8:
            return np.dtype(np.uint8)
        zp = node.input[2] if len(node.input) > 2 else ""
        return self.int_dtype(zp) if zp in self.inits else self.int_dtype(node.input[0])

    def add_constant(self, value, name):
        """A new initializer (into ``new_inits``, which the caller adds to
        the graph): its data a view like the file's weights' (the
        TensorProto without data, marked EXTERNAL) when the model's weights
        are read in place, else in the protobuf."""
        value = np.asarray(value)
        if not self.in_place:
            self.new_inits.append(self.onnx.numpy_helper.from_array(value, name))
            return
        t = self.onnx.TensorProto(name=name, dims=value.shape,
                                  data_type=self.onnx.helper.np_dtype_to_tensor_dtype(value.dtype))
        t.data_location = self.onnx.TensorProto.EXTERNAL
        self.views[name] = value
        self.new_inits.append(t)

    def value(self, name):
        if name in self.views:
            return self.views[name]
        return self.onnx.numpy_helper.to_array(self.inits[name])

    def dq(self, name, const):
        """The DQ node producing ``name`` (its input a constant iff ``const``)
        with constant scale and zero point, or None."""
        d = self.producer.get(name)
        if d is None or d.op_type != "DequantizeLinear" or d.domain not in ("", "ai.onnx"):
            return None
        if (d.input[0] in self.inits) != const or len(d.input) < 3 or not d.input[2]:
            return None
        if any(i not in self.inits for i in d.input[1:3]):
            return None
        return d

    def per_tensor(self, node):
        """A DQ / Q node's scale and zero point are single values."""
        return self.value(node.input[1]).size == 1 and self.value(node.input[2]).size == 1

    def only_q(self, name):
        """The Q node that is the only reader of ``name``, or None."""
        rs = self.readers.get(name, [])
        if name in self.outputs or len(rs) != 1 or rs[0].op_type != "QuantizeLinear":
            return None
        q = rs[0]
        if len(q.input) < 3 or not q.input[2] or any(i not in self.inits for i in q.input[1:3]):
            return None
        return q if self.per_tensor(q) else None

    def int_dtype(self, name):
        t = self.inits.get(name)
        return None if t is None else np.dtype(
            self.onnx.helper.tensor_dtype_to_np_dtype(t.data_type))

    def attrs(self, node):
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

    def same_quant(self, a, b):
        return (np.array_equal(self.value(a.input[1]), self.value(b.input[1])) and
                np.array_equal(self.value(a.input[2]), self.value(b.input[2])) and
                self.value(a.input[2]).dtype == self.value(b.input[2]).dtype)
