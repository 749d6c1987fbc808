"""OrtValue and OrtDevice of the onnxruntime facade
(pyarena/importers/ort_values.py) on the one device they know: onnxruntime's
CPU, device 0, taken as onnxruntime takes it; any other device refused."""
import numpy as np
import onnxruntime as ort
import pytest

import pyarena.onnxruntime as port


def test_the_cpu_device_0_is_accepted_as_onnxruntime_accepts_it():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for mod in (ort, port):
        v = mod.OrtValue.ortvalue_from_numpy(x, "cpu", 0)
        assert (v.device_name(), v.shape()) == ("cpu", [2, 3])
        e = mod.OrtValue.ortvalue_from_shape_and_type([4], np.int64, "cpu", 0)
        assert e.shape() == [4]
    port.OrtDevice.make("cpu", 0)
    port.OrtDevice("CPU", 0)


@pytest.mark.parametrize("device", [("cuda", 0), ("cpu", 1), ("dml", 0)])
def test_another_device_is_refused(device):
    x = np.zeros(3, np.float32)
    with pytest.raises(port.InvalidArgument, match="CPU only"):
        port.OrtValue.ortvalue_from_numpy(x, *device)
    with pytest.raises(port.InvalidArgument, match="CPU only"):
        port.OrtDevice.make(*device)
