"""onnxruntime's ``OrtValue`` and ``IOBinding`` on the CPU, for
``pyarena.onnxruntime``.

An ``OrtValue`` here is a NumPy array (made from one, it is backed by
that array's memory, as onnxruntime's CPU values are); an ``IOBinding``
names the arrays a run reads and the arrays (or new values) it writes.
Only the device ``"cpu"`` exists: any other is refused with
``InvalidArgument``.
"""
import ctypes

import numpy as np

from .ort_capi import Fail, InvalidArgument, RuntimeException

__all__ = ["OrtValue", "IOBinding", "OrtDevice", "onnx_type_of", "ONNX_ELEMENT_TYPES"]

#: ONNX TensorProto element type -> NumPy dtype (the types pyarena runs)
ONNX_ELEMENT_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16,
                      6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64,
                      12: np.uint32, 13: np.uint64}
_TYPE_NAMES = {"float32": "float", "float64": "double", "bool": "bool", "float16": "float16"}


def onnx_type_of(dtype):
    """onnxruntime's type string of a NumPy dtype: ``tensor(float)``."""
    name = np.dtype(dtype).name
    return f"tensor({_TYPE_NAMES.get(name, name)})"


def _dtype(element_type):
    """A NumPy dtype from a NumPy type or an ONNX element type number."""
    if isinstance(element_type, int) and not isinstance(element_type, bool):
        if element_type not in ONNX_ELEMENT_TYPES:
            raise InvalidArgument.make(f"unsupported ONNX element type {element_type}")
        return np.dtype(ONNX_ELEMENT_TYPES[element_type])
    return np.dtype(element_type)


def _cpu(device_type, device_id=0):
    if str(device_type).lower() != "cpu" or int(device_id) != 0:
        raise InvalidArgument.make(f"pyarena runs on the CPU only: device "
                                   f"{device_type!r}:{device_id} is not available")


class OrtDevice:
    """The one device: ``OrtDevice.make("cpu", 0)``."""

    def __init__(self, device_type="cpu", device_id=0):
        _cpu(device_type, device_id)

    @staticmethod
    def make(ort_device_name, device_id=0, vendor_id=-1):
        return OrtDevice(ort_device_name, device_id)

    @staticmethod
    def cpu():
        return 0

    def device_id(self):
        return 0

    def device_type(self):
        return OrtDevice.cpu()

    def device_vendor_id(self):
        return 0

    def device_mem_type(self):
        return 0


class OrtValue:
    """A tensor on the CPU: a NumPy array (``numpy()`` returns it, not a copy)."""

    def __init__(self, array, numpy_obj=None, session=None):
        if not isinstance(array, np.ndarray):
            raise ValueError("an OrtValue holds a NumPy array")
        self._array = array

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0, vendor_id=-1):
        _cpu(device_type, device_id)
        arr = np.asarray(numpy_obj)
        return cls(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, /, onnx_element_type):
        return cls(np.asarray(data).view(_dtype(onnx_element_type)))

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu",
                                     device_id=0, vendor_id=-1, memory_info=None):
        _cpu(device_type, device_id)
        return cls(np.empty(tuple(int(d) for d in shape), _dtype(element_type)))

    def _get_c_value(self):
        return self

    def numpy(self):
        return self._array

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            return self._array.astype(dtype)
        return self._array.copy() if copy else self._array

    def update_inplace(self, data):
        data = np.asarray(data)
        if data.shape != self._array.shape or data.dtype != self._array.dtype:
            raise Fail.make(f"update_inplace: shape {list(data.shape)} {data.dtype} given, "
                            f"the value holds {list(self._array.shape)} "
                            f"{self._array.dtype}")
        np.copyto(self._array, data)

    def data_ptr(self):
        return self._array.ctypes.data

    def device_name(self):
        return "cpu"

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return onnx_type_of(self._array.dtype)

    def element_type(self):
        for k, v in ONNX_ELEMENT_TYPES.items():
            if np.dtype(v) == self._array.dtype:
                return k
        raise InvalidArgument.make(f"no ONNX element type for {self._array.dtype}")

    def tensor_size_in_bytes(self):
        return int(self._array.nbytes)

    def has_value(self):
        return True

    def is_tensor(self):
        return True

    def is_sparse_tensor(self):
        return False

    def is_tensor_sequence(self):
        return False

    def __repr__(self):
        return f"OrtValue(shape={self.shape()}, type={self.data_type()!r}, device='cpu')"


def _from_pointer(buffer_ptr, element_type, shape):
    """A NumPy view of ``shape`` elements of ``element_type`` at a raw address."""
    dtype, shape = _dtype(element_type), tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = (ctypes.c_char * nbytes).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


class IOBinding:
    """onnxruntime's ``IOBinding`` for CPU memory: inputs bound to arrays,
    values or raw addresses; outputs to values or addresses (written in
    place) or left to the session (new values after each run)."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}       # name -> ndarray
        self._outputs = {}      # name -> ndarray to write into, or None
        self._results = []      # OrtValues of the last run, in binding order

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _cpu(device_type, device_id)
        self._inputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue.numpy()

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None,
                    shape=None, buffer_ptr=None):
        _cpu(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise ValueError("`element_type` and `shape` are to be provided if pre-allocated "
                             "memory is provided")
        self._outputs[name] = _from_pointer(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name, ortvalue):
        self._outputs[name] = ortvalue.numpy()

    def synchronize_inputs(self):
        """Nothing to wait for on the CPU."""

    def synchronize_outputs(self):
        """Nothing to wait for on the CPU."""

    def clear_binding_inputs(self):
        self._inputs.clear()

    def clear_binding_outputs(self):
        self._outputs.clear()
        self._results = []

    def get_outputs(self):
        return list(self._results)

    def get_outputs_as_ortvaluevector(self):
        return list(self._results)

    def copy_outputs_to_cpu(self):
        return [v.numpy().copy() for v in self._results]

    def _run(self, session, run_options):
        """The session's run of this binding (``run_with_iobinding``)."""
        if not self._outputs:
            raise RuntimeException("Error in execution: At least one output should be "
                                   "requested.")
        names = list(self._outputs)
        try:
            arrays = session._run_arrays(names, self._inputs, run_options)
        except InvalidArgument as exc:
            raise RuntimeException(f"Error in execution: {exc}") from exc
        results = []
        for name, got in zip(names, arrays):
            target = self._outputs[name]
            if target is None:
                results.append(OrtValue(np.array(got)))
                continue
            if target.shape != got.shape:
                bad = [f" index: {i} Got: {t} Expected: {g}\n" for i, (t, g)
                       in enumerate(zip(target.shape, got.shape)) if t != g] \
                    if target.ndim == got.ndim else [f" rank Got: {target.ndim} Expected: "
                                                     f"{got.ndim}\n"]
                raise RuntimeException(f"Error in execution: Got invalid dimensions for "
                                       f"output: {name} for the following indices\n"
                                       f"{''.join(bad)} Please fix either the inputs/outputs "
                                       f"or the model.")
            if target.dtype != got.dtype:
                raise RuntimeException(f"Error in execution: output {name}: the bound value "
                                       f"is {onnx_type_of(target.dtype)}, the model gives "
                                       f"{onnx_type_of(got.dtype)}")
            np.copyto(target, got)
            results.append(OrtValue(target))
        self._results = results
