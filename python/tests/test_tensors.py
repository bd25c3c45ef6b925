"""The Python layer's tensor descriptions and stream handles (ovl/context.py), which need the CUDA build but no
GPU: DLPack is read from NumPy arrays (host memory, so the Context would refuse them; the description is what is
tested), __cuda_array_interface__ from a stand-in object."""

import pytest

import ovl

pytestmark = pytest.mark.skipif(not ovl.CUDA, reason="ovl was built without CUDA (no ovl.context)")


def test_dlpack_description():
    np = pytest.importorskip("numpy")
    from ovl import _ovl

    a = np.zeros((4, 8), dtype=np.float16)
    ptr, shape, strides, dtype, device, index = _ovl._dlpack_desc(a)
    assert (list(shape), list(strides), dtype, device) == ([4, 8], [8, 1], "fp16", "cpu")
    assert ptr == a.ctypes.data
    assert _ovl._dlpack_desc(a[:, ::2])[2] == [8, 2]  # strides in elements: not contiguous, refused by the Context
    assert _ovl._dlpack_desc(np.zeros((2, 2), dtype=np.float32))[3] == "fp32"


class FakeCai:
    """What CuPy and Numba hand over: a pointer, a shape, byte strides (None: contiguous) and a type string."""

    def __init__(self, shape, typestr="<f2", strides=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"data": (0x1000, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


def test_cuda_array_interface_description():
    from ovl import context

    f = context._framework(FakeCai((4, 8)))
    assert f.describe(FakeCai((4, 8)))[:5] == (0x1000, (4, 8), None, "fp16", "cuda")
    assert f.describe(FakeCai((4, 8), strides=(32, 4)))[2] == (16, 2)
    assert f.describe(FakeCai((4, 8), typestr="<f4"))[3] == "fp32"
    with pytest.raises(ovl.Error, match="pass c="):
        f.empty(FakeCai((4, 8)), 4, 8)


def test_not_a_tensor():
    from ovl import context

    with pytest.raises(TypeError, match="no tensor"):
        context._framework([1.0, 2.0])


def test_stream_handles():
    from ovl import context

    class TorchLike:
        cuda_stream = 123

    class CupyLike:
        ptr = 456

    class Protocol:
        def __cuda_stream__(self):
            return (0, 789)

    assert context._stream_handle(7) == 7
    assert context._stream_handle(TorchLike()) == 123
    assert context._stream_handle(CupyLike()) == 456
    assert context._stream_handle(Protocol()) == 789
    with pytest.raises(TypeError, match="stream="):
        context._stream_handle("default")


def test_profile_argument(tmp_path):
    from ovl import context

    assert context._profile(None) is None
    assert context._profile("h100").name == ovl.Hardware.builtin("h100").name
    path = tmp_path / "p.json"
    ovl.Hardware.builtin("h200").save(str(path))
    assert context._profile(path).sm_count == ovl.Hardware.builtin("h200").sm_count
