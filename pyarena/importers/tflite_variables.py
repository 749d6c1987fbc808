"""TFLite resource variables -- ``VAR_HANDLE``, ``READ_VARIABLE``,
``ASSIGN_VARIABLE`` and the ``CALL_ONCE`` that gives them their first
values -- as explicit graph inputs and outputs.

A streaming model keeps state from one invocation to the next this way
(a keyword spotter's ring buffers of past frames: each invocation reads
a variable, concatenates the new frame, and assigns the tail back).
Each variable (named by its ``VarHandleOptions`` shared name) becomes

* a graph input named for the variable, read where the model reads it
  (an ``Identity`` to the ``READ_VARIABLE``'s output);
* where the model assigns it, a graph output ``<name>:assigned``: an
  ``Identity`` of the last value assigned in the invocation.

A read after an assignment in the same invocation reads the value
assigned, as the interpreter does.  The ``CALL_ONCE`` init subgraph must
assign constants to variables; anything else there is refused by name.
Its values are the variables' first values.  ``Graph.variables`` maps
each variable to ``(input name or None, output name or None, first
value or None)``.  A session (:mod:`.session_state`) feeds each
variable's current value and keeps what the run assigned; its callers
see neither the inputs nor the outputs.

Refused: a variable read before anything gives it a value, a first value
whose shape or type is not the one the model reads, a variable op in an
IF / WHILE subgraph (by name, as an unsupported operator there).
"""
import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from .tflite_options import builtin_options

__all__ = ["VARIABLE_OPS", "RESOURCE_TYPE", "Variables"]

#: the builtins this module takes out of an operator list
VARIABLE_OPS = frozenset(("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"))
#: TensorType RESOURCE: a VAR_HANDLE's output (no values of its own)
RESOURCE_TYPE = 13


def _handle_name(tflite, op, t, out):
    """The variable a VAR_HANDLE names: its shared name, else its tensor's."""
    o = builtin_options(tflite, op, "VarHandleOptions")
    shared = o.SharedName() if o is not None else None
    return shared.decode("utf-8", "replace") if shared else t.names[out]


class Variables:
    """The variables of subgraph ``t`` (a :class:`.tflite._Tensors`) while
    its operators are read: :meth:`rewrite` gives the operator list with
    the variable ops taken out (each READ_VARIABLE as an Identity's
    input), :attr:`inputs` the tensor indices to declare as graph inputs,
    :meth:`finish` adds the assignments' outputs to the graph."""

    def __init__(self, tflite, model, t, read_subgraph):
        self.tflite, self.model, self.t = tflite, model, t
        self._read_subgraph = read_subgraph     # index -> (tensors, ops)
        self.handles = {}       # resource tensor index -> variable name
        self.first = {}         # variable -> its first value (CALL_ONCE)
        self.state_in = {}      # variable -> the input tensor index
        self.current = {}       # variable -> tensor index of its value now
        self.inputs = []

    def rewrite(self, ops):
        out = []
        for k, code, op, ins, outs in ops:
            if code not in VARIABLE_OPS:
                out.append((k, code, op, ins, outs))
                continue
            where = f"operator {code.lower()}_{k} ({code})"
            if code == "CALL_ONCE":
                self._call_once(op, where)
            elif code == "VAR_HANDLE":
                if len(outs) != 1:
                    raise ModelImportError(f"{where}: {len(outs)} outputs, not 1")
                self.handles[outs[0]] = _handle_name(self.tflite, op, self.t, outs[0])
            elif code == "ASSIGN_VARIABLE":
                if len(ins) != 2:
                    raise ModelImportError(f"{where}: {len(ins)} inputs, not 2")
                self.current[self._variable(ins[0], where)] = ins[1]
            else:
                if len(ins) != 1 or len(outs) != 1:
                    raise ModelImportError(f"{where}: {len(ins)} inputs and {len(outs)} "
                                           f"outputs, not 1 and 1")
                out.append((k, code, op, [self._read(ins[0], outs[0], where)], outs))
        return out

    def check_shapes(self, given):
        """``given`` (input name -> shape) must name variables' inputs, each
        with its variable's own shape (a session feeds the values it keeps)."""
        t = self.t
        mine = {t.names[i]: t.shapes[i] for i in self.inputs}
        for name, shape in given.items():
            if name not in mine:
                raise ModelImportError(f"unknown graph input {name!r}; the graph inputs are "
                                       f"{sorted(mine)} and the subgraph's own")
            if [int(d) for d in shape] != list(mine[name]):
                raise ModelImportError(f"variable input {name!r} is {mine[name]}, not "
                                       f"{list(shape)}")

    def _variable(self, res, where):
        name = self.handles.get(res)
        if name is None:
            raise ModelImportError(f"{where}: tensor {res} is not a VAR_HANDLE's output")
        return name

    def _read(self, res, out, where):
        """The tensor a read of ``res`` gives: the value assigned before it
        in this invocation, else the variable's input (made on first read)."""
        name = self._variable(res, where)
        if name in self.current:
            return self.current[name]
        if name not in self.state_in:
            first = self.first.get(name)
            t = self.t
            if first is None:
                raise UnsupportedOpError(
                    f"{where}: variable {name!r} is read before anything gives it a value "
                    f"(no CALL_ONCE assigns it)")
            if list(first.shape) != list(t.shapes[out]) or first.dtype != t.dtypes[out]:
                raise ModelImportError(
                    f"{where}: variable {name!r} starts as {first.dtype} {list(first.shape)} "
                    f"but is read as {t.dtypes[out]} {t.shapes[out]}; the file contradicts "
                    f"itself, refusing it")
            i = t.add_tensor(_free_name(_graph_names(t), name), t.shapes[out], t.dtypes[out],
                             t.quant[out])
            self.state_in[name] = i
            self.inputs.append(i)
        return self.state_in[name]

    def _call_once(self, op, where):
        o = builtin_options(self.tflite, op, "CallOnceOptions")
        k = -1 if o is None else int(o.InitSubgraphIndex())
        if not 0 < k < self.model.SubgraphsLength():
            raise ModelImportError(f"{where}: init subgraph index {k} is out of range")
        it, ops = self._read_subgraph(k)
        handles = {}
        for j, code, sop, ins, outs in ops:
            if code == "VAR_HANDLE" and len(outs) == 1:
                handles[outs[0]] = _handle_name(self.tflite, sop, it, outs[0])
            elif code == "ASSIGN_VARIABLE" and len(ins) == 2 and ins[0] in handles \
                    and it.data[ins[1]] is not None:
                self.first[handles[ins[0]]] = np.array(it.data[ins[1]])
            else:
                raise UnsupportedOpError(
                    f"{where}: its init subgraph {k} runs {code} (operator {j}); only "
                    f"constants assigned to variables are supported there")

    def finish(self, g, declare):
        """Each assigned variable's last value as the graph output
        ``<name>:assigned``; ``g.variables`` set.  ``declare(i, role)``
        declares tensor ``i`` in ``g``, returning its name."""
        t = self.t
        outs = {}
        for name, cur in self.current.items():
            read = self.state_in.get(name)
            if read is not None and (list(t.shapes[cur]) != list(t.shapes[read])
                                     or t.dtypes[cur] != t.dtypes[read]):
                raise ModelImportError(
                    f"variable {name!r} is read as {t.dtypes[read]} {t.shapes[read]} but "
                    f"assigned {t.dtypes[cur]} {t.shapes[cur]}; the file contradicts itself, "
                    f"refusing it")
            src = declare(cur, "constant" if t.data[cur] is not None else "activation")
            i = t.add_tensor(_free_name(_graph_names(t), f"{name}:assigned"), t.shapes[cur],
                             t.dtypes[cur], t.quant[cur])
            dst = declare(i, "output")
            g.add_op("Identity", [src], [dst], name=f"assign_variable_{len(outs)}")
            outs[name] = dst
        names = sorted(set(self.state_in) | set(outs))
        g.variables = {n: (t.names[self.state_in[n]] if n in self.state_in else None,
                           outs.get(n), self.first.get(n)) for n in names}


def _graph_names(t):
    """The names tensors of ``t`` may have in the graph (not the handles')."""
    return [n for i, n in enumerate(t.names) if i not in t.resources]


def _free_name(names, want):
    """``want``, or ``want#k`` for the first k that no tensor has."""
    taken = set(names)
    if want not in taken:
        return want
    k = 1
    while f"{want}#{k}" in taken:
        k += 1
    return f"{want}#{k}"
