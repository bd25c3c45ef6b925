"""The binding's tensor readers and checks (python/src/tensors.cpp) and the Python layer's stream handles
(ovl/context.py), which need the CUDA build but no GPU: DLPack is read from NumPy arrays and torch from host tensors
(host memory, which the checks refuse after reading shape, strides and device), __cuda_array_interface__ and CuPy
from stand-in objects."""

import sys

import pytest

import ovl

pytestmark = pytest.mark.skipif(not ovl.CUDA, reason="ovl was built without CUDA (no ovl.context)")


def test_dlpack_tensors():
    """NumPy arrays speak DLPack: read (shape, strides in elements, device), then refused for their host memory."""
    np = pytest.importorskip("numpy")
    from ovl import _ovl

    a = np.zeros((4, 8), dtype=np.float16)
    assert _ovl._tensor_kind(a) == "dlpack"
    with pytest.raises(ovl.Error, match=r"A is on device cpu \(a CUDA tensor on device 0 is needed\)"):
        _ovl._tensor_ref(a)
    with pytest.raises(ovl.Error, match=r"B has strides \(8, 2\) for shape \(4, 4\): it must be contiguous"):
        _ovl._tensor_ref(a[:, ::2], "B")
    with pytest.raises(ovl.Error, match=r"C has 3 dimensions \(shape \(2, 3, 4\)\)"):
        _ovl._tensor_ref(np.zeros((2, 3, 4), dtype=np.float16), "C")


class FakeCai:
    """What Numba and others hand over: a pointer, a shape, byte strides (None: contiguous) and a type string."""

    def __init__(self, shape, typestr="<f2", strides=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"data": (0x1000, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


def test_cuda_array_interface_tensors():
    """The interface names no device: the Context's pointer check decides, so the binding's checks pass it."""
    from ovl import _ovl, context

    assert _ovl._tensor_kind(FakeCai((4, 8))) == "cuda-array-interface"
    assert _ovl._tensor_ref(FakeCai((4, 8))) == (0x1000, 4, 8, "fp16")
    assert _ovl._tensor_ref(FakeCai((4, 8), strides=(16, 2))) == (0x1000, 4, 8, "fp16")  # bytes: (8, 1) elements
    with pytest.raises(ovl.Error, match=r"A has strides \(16, 2\) for shape \(4, 8\)"):
        _ovl._tensor_ref(FakeCai((4, 8), strides=(32, 4)))
    with pytest.raises(ovl.Error, match=r"B has dtype fp32; ovl takes bfloat16 or float16"):
        _ovl._tensor_ref(FakeCai((4, 8), typestr="<f4"), "B")
    with pytest.raises(ovl.Error, match=r"C has 1 dimensions \(shape \(8,\)\)"):
        _ovl._tensor_ref(FakeCai((8,)), "C")
    with pytest.raises(ovl.Error, match=r"A has 3 strides \(16, 2, 2\) for its 2 dimensions"):
        _ovl._tensor_ref(FakeCai((4, 8), strides=(16, 2, 2)))
    bad = FakeCai((4, 8))
    del bad.__cuda_array_interface__["typestr"]
    with pytest.raises(ovl.Error, match=r"A's __cuda_array_interface__ has no \"typestr\""):
        _ovl._tensor_ref(bad)
    assert _ovl._current_stream("cuda-array-interface", 0) == 0  # its framework's current stream is unknown: the default
    with pytest.raises(ovl.Error, match=r"unknown tensor kind \"jax\" \(expected torch, cupy"):
        _ovl._current_stream("jax", 0)
    with pytest.raises(ovl.Error, match="pass c="):
        context._empty(FakeCai((4, 8)), 4, 8)


class _Dtype:
    def __init__(self, typestr):
        self.str = typestr


class _Memory:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class FakeCupyArray:
    """The cupy.ndarray attributes the library reads: data.ptr, data.device_id, shape, strides (bytes), dtype.str."""

    __module__ = "cupy"

    def __init__(self, shape, typestr="<f2", strides=None, device_id=0):
        self.data = _Memory(0x2000, device_id)
        self.shape = shape
        self.dtype = _Dtype(typestr)
        self.strides = strides or tuple(2 * s for s in (shape[1], 1))

    @property
    def __cuda_array_interface__(self):
        raise AssertionError("read the attributes, not the interface")


def test_cupy_arrays(monkeypatch):
    """CuPy arrays are read through their attributes (the interface dict costs more); a loaded module named cupy
    whose ndarray this is stands in for CuPy."""
    import types

    from ovl import _ovl

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=FakeCupyArray))
    assert _ovl._tensor_kind(FakeCupyArray((4, 8))) == "cupy"
    assert _ovl._tensor_ref(FakeCupyArray((4, 8))) == (0x2000, 4, 8, "fp16")
    with pytest.raises(ovl.Error, match=r"B is on cuda:1, the context's device is cuda:0"):
        _ovl._tensor_ref(FakeCupyArray((4, 8), device_id=1), "B")
    with pytest.raises(ovl.Error, match=r"A has strides \(16, 2\) for shape \(4, 8\)"):
        _ovl._tensor_ref(FakeCupyArray((4, 8), strides=(32, 4)))
    with pytest.raises(ovl.Error, match=r"C has dtype fp64"):
        _ovl._tensor_ref(FakeCupyArray((4, 8), typestr="<f8", strides=(64, 8)), "C")


def test_torch_tensors():
    """torch tensors are read through their attributes; host ones are refused by their device, strided ones by their
    strides (read for the message only)."""
    torch = pytest.importorskip("torch")
    from ovl import _ovl

    a = torch.zeros(4, 8, dtype=torch.bfloat16)
    assert _ovl._tensor_kind(a) == "torch"
    with pytest.raises(ovl.Error, match=r"A is on device cpu"):
        _ovl._tensor_ref(a)
    with pytest.raises(ovl.Error, match=r"B has strides \(1, 4\) for shape \(4, 8\)"):
        _ovl._tensor_ref(torch.zeros(8, 4, dtype=torch.bfloat16).T, "B")
    with pytest.raises(ovl.Error, match=r"C has 3 dimensions \(shape \(1, 4, 8\)\)"):
        _ovl._tensor_ref(a.view(1, 4, 8), "C")


def test_not_a_tensor():
    from ovl import context

    with pytest.raises(TypeError, match="a builtins.list is no tensor"):
        context._empty([1.0, 2.0], 1, 1)
    with pytest.raises(TypeError, match="no tensor"):
        context._ovl._tensor_ref(3.0, "B")


def test_stream_handles():
    from ovl import _ovl

    class TorchLike:
        cuda_stream = 123

    class CupyLike:
        ptr = 456

    class Protocol:
        def __cuda_stream__(self):
            return (0, 789)

    assert _ovl._stream_handle(7) == 7
    assert _ovl._stream_handle(TorchLike()) == 123
    assert _ovl._stream_handle(CupyLike()) == 456
    assert _ovl._stream_handle(Protocol()) == 789
    with pytest.raises(TypeError, match="stream="):
        _ovl._stream_handle("default")


def test_profile_argument(tmp_path):
    from ovl import context

    assert context._profile(None) is None
    assert context._profile("h100").name == ovl.Hardware.builtin("h100").name
    path = tmp_path / "p.json"
    ovl.Hardware.builtin("h200").save(str(path))
    assert context._profile(path).spec.sm_count == ovl.Hardware.builtin("h200").spec.sm_count
